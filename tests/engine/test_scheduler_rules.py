"""The scheduler's trigger rules, pinned on snapshots folded from synthetic events.

No engine, no store: each test builds a small workflow with ``load_workflow``, folds a
handful of events into a snapshot with ``fold`` and asks ``plan`` what happens next.
"""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from tether.engine.scheduler import Execute, Fail, Finish, Skip, Wait, plan, run_outputs
from tether.engine.state import fold
from tether.engine.validation import load_workflow
from tether.engine.workflow import WorkflowDefinition

RUN = "run_test"
T0 = "2026-01-01T00:00:00.000Z"
Doc = dict[str, Any]


# --- builders ----------------------------------------------------------------------------------


def node(node_id: str, type_id: str = "core.noop", **extra: Any) -> Doc:
    return {
        "id": node_id,
        "typeId": type_id,
        "name": node_id.upper(),
        "position": {"x": 0, "y": 0},
        "config": {},
        "inputs": {},
        **extra,
    }


_edge_ids = itertools.count()


def edge(source: str, target: str, rule: str | None = None, condition: Doc | None = None) -> Doc:
    doc: Doc = {"id": f"e{next(_edge_ids)}", "sourceNodeId": source, "targetNodeId": target}
    if rule is not None:
        doc["triggerRule"] = rule
    if condition is not None:
        doc["condition"] = condition
    return doc


def workflow(nodes: list[Doc], edges: list[Doc], variables: list[Doc] | None = None) -> WorkflowDefinition:
    return load_workflow(
        {
            "id": "rules",
            "name": "Rules",
            "version": "1.0.0",
            "nodes": nodes,
            "edges": edges,
            "triggers": [{"id": "manual", "type": "manual"}],
            "variables": variables or [],
            "metadata": {},
            "settings": {},
        }
    )


def _event(type_: str, node_id: str | None = None, **payload: Any) -> Doc:
    doc: Doc = {
        "eventId": f"evt_{type_}_{node_id}",
        "runId": RUN,
        "type": type_,
        "payload": payload,
        "timestamp": T0,
        "sequence": 0,
    }
    if node_id is not None:
        doc["nodeId"] = node_id
        doc["payload"] = {"nodeId": node_id, **payload}
    return doc


def started(node_id: str, type_id: str = "core.noop") -> Doc:
    return _event("node.started", node_id, typeId=type_id, attempt=0)


def completed(node_id: str, **outputs: Any) -> list[Doc]:
    return [started(node_id), _event("node.completed", node_id, outputs=outputs, durationMs=0)]


def failed(node_id: str, code: str = "boom") -> list[Doc]:
    return [
        started(node_id),
        _event("node.failed", node_id, error={"code": code, "message": f"{node_id} failed"}, attempts=1),
    ]


def skipped(node_id: str) -> list[Doc]:
    return [_event("node.skipped", node_id, reason="trigger rule not met")]


def snapshot(*steps: Doc | list[Doc], inputs: Doc | None = None) -> Doc:
    events: list[Doc] = [_event("run.started", workflowId="rules", inputs=inputs or {})]
    for step in steps:
        events.extend(step if isinstance(step, list) else [step])
    return fold(RUN, "rules", T0, events)


def drive(
    wf: WorkflowDefinition, outcomes: dict[str, str], inputs: Doc | None = None, outputs: dict[str, Doc] | None = None
) -> tuple[list[tuple[str, str]], Any]:
    """Follow ``plan`` to the end: each executed node ends as ``outcomes`` says (default completed).

    Returns the steps taken, as (kind, nodeId), and the final decision (Finish or Fail).
    """
    steps: list[Doc | list[Doc]] = []
    taken: list[tuple[str, str]] = []
    for _ in range(100):
        decision = plan(wf, snapshot(*steps, inputs=inputs))
        if isinstance(decision, (Finish, Fail, Wait)):
            return taken, decision
        if isinstance(decision, Skip):
            taken.append(("skip", decision.node_id))
            steps.append(skipped(decision.node_id))
            continue
        assert isinstance(decision, Execute) and not decision.resume
        taken.append(("run", decision.node_id))
        if outcomes.get(decision.node_id) == "failed":
            steps.append(failed(decision.node_id))
        else:
            steps.append(completed(decision.node_id, **(outputs or {}).get(decision.node_id, {})))
    raise AssertionError("plan never finished")


def ran(taken: list[tuple[str, str]]) -> list[str]:
    return [n for kind, n in taken if kind == "run"]


def skips(taken: list[tuple[str, str]]) -> list[str]:
    return [n for kind, n in taken if kind == "skip"]


def fan_in(rule: str) -> WorkflowDefinition:
    """a and b both feed c with ``rule``; b also has a failure route so its failure is not fatal."""
    return workflow(
        [node("a"), node("b"), node("c"), node("catch")],
        [edge("a", "c", rule), edge("b", "c", rule), edge("b", "catch", "any_failed")],
    )


# --- basics -------------------------------------------------------------------------------------


def test_linear_chain_runs_in_order_then_finishes() -> None:
    wf = workflow([node("a"), node("b"), node("c")], [edge("a", "b"), edge("b", "c")])
    assert plan(wf, snapshot()) == Execute("a", resume=False)
    assert plan(wf, snapshot(completed("a"))) == Execute("b", resume=False)
    assert plan(wf, snapshot(completed("a"), completed("b"))) == Execute("c", resume=False)
    assert isinstance(plan(wf, snapshot(completed("a"), completed("b"), completed("c"))), Finish)


def test_ready_nodes_run_in_definition_order_whatever_the_edge_order() -> None:
    wf = workflow([node("z"), node("y"), node("root")], [edge("root", "y"), edge("root", "z")])
    taken, final = drive(wf, {})
    assert ran(taken) == ["root", "z", "y"]
    assert isinstance(final, Finish)


def test_plan_is_deterministic() -> None:
    wf = fan_in("all_success")
    state = snapshot(completed("a"))
    assert plan(wf, state) == plan(wf, state) == Execute("b", resume=False)


def test_a_node_waits_for_every_source_to_finish() -> None:
    wf = workflow([node("c"), node("a"), node("b")], [edge("a", "c", "any_success"), edge("b", "c", "any_success")])
    # a finished, b not yet: c is not decided early even though any_success is already met
    assert plan(wf, snapshot(completed("a"))) == Execute("b", resume=False)


def test_running_or_suspended_node_is_resumed_and_interrupt_waits() -> None:
    wf = workflow([node("a"), node("b", "core.delay", config={"delayMs": 10})], [edge("a", "b")])
    assert plan(wf, snapshot(completed("a"), started("b", "core.delay"))) == Execute("b", resume=True)
    gate = workflow([node("g", "core.approvalGate")], [])
    suspended = [
        started("g", "core.approvalGate"),
        _event("node.suspended", "g", interruptId="int_1", kind="approval", key=f"{RUN}:g:0"),
        _event("interrupt.requested", "g", kind="approval", key=f"{RUN}:g:0", data={}),
    ]
    assert isinstance(plan(gate, snapshot(*suspended)), Wait)
    # resolved (interrupt cleared) but the node has not completed yet: resume it
    resolved = [
        *suspended,
        _event("interrupt.resolved", "g", interruptId="int_1"),
        _event("node.resumed", "g", interruptId="int_1"),
    ]
    assert plan(gate, snapshot(*resolved)) == Execute("g", resume=True)


# --- all_success -------------------------------------------------------------------------------------


def test_all_success_runs_when_every_source_completed() -> None:
    taken, final = drive(fan_in("all_success"), {})
    assert ran(taken) == ["a", "b", "c"] and skips(taken) == ["catch"]
    assert isinstance(final, Finish)


def test_all_success_skips_when_one_source_failed() -> None:
    taken, final = drive(fan_in("all_success"), {"b": "failed"})
    assert skips(taken) == ["c"]
    assert ran(taken) == ["a", "b", "catch"]
    assert isinstance(final, Finish), "b's failure was routed to catch"


def test_all_success_skips_when_one_source_was_skipped() -> None:
    wf = workflow([node("a"), node("b", disabled=True), node("c")], [edge("a", "c"), edge("b", "c")])
    taken, _ = drive(wf, {})
    assert taken == [("run", "a"), ("skip", "b"), ("skip", "c")]


def test_default_rule_is_all_success() -> None:
    wf = workflow([node("a"), node("b", disabled=True), node("c")], [edge("a", "c", None), edge("b", "c", None)])
    assert wf.incoming("c")[0].triggerRule == "all_success"
    assert plan(wf, snapshot(completed("a"), skipped("b"))) == Skip("c", "trigger rule not met")


# --- any_success ----------------------------------------------------------------------------------------


def test_any_success_runs_when_one_source_completed() -> None:
    taken, final = drive(fan_in("any_success"), {"b": "failed"})
    assert ran(taken) == ["a", "b", "c", "catch"]
    assert isinstance(final, Finish)


def test_any_success_skips_when_no_source_completed() -> None:
    wf = workflow(
        [node("a"), node("b"), node("c"), node("catch")],
        [
            edge("a", "c", "any_success"),
            edge("b", "c", "any_success"),
            edge("a", "catch", "any_failed"),
            edge("b", "catch", "any_failed"),
        ],
    )
    taken, final = drive(wf, {"a": "failed", "b": "failed"})
    assert skips(taken) == ["c"]
    assert ran(taken) == ["a", "b", "catch"]
    assert isinstance(final, Finish)


# --- all_complete ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("outcomes", [{}, {"b": "failed"}, {"a": "failed", "b": "failed"}])
def test_all_complete_runs_whatever_the_sources_did(outcomes: dict[str, str]) -> None:
    wf = workflow([node("a"), node("b"), node("c")], [edge("a", "c", "all_complete"), edge("b", "c", "all_complete")])
    taken, final = drive(wf, outcomes)
    assert ran(taken) == ["a", "b", "c"]
    assert isinstance(final, Finish), "all_complete consumes the failures"


def test_all_complete_runs_after_skipped_sources() -> None:
    wf = workflow([node("a", disabled=True), node("c")], [edge("a", "c", "all_complete")])
    taken, _ = drive(wf, {})
    assert taken == [("skip", "a"), ("run", "c")]


# --- none_failed ---------------------------------------------------------------------------------------------


def test_none_failed_runs_after_completed_and_skipped_sources() -> None:
    wf = workflow(
        [node("a"), node("b", disabled=True), node("c")], [edge("a", "c", "none_failed"), edge("b", "c", "none_failed")]
    )
    taken, _ = drive(wf, {})
    assert taken == [("run", "a"), ("skip", "b"), ("run", "c")]


def test_none_failed_skips_when_a_routed_source_failed() -> None:
    taken, final = drive(fan_in("none_failed"), {"b": "failed"})
    assert skips(taken) == ["c"]
    assert "catch" in ran(taken)
    assert isinstance(final, Finish)


def test_none_failed_is_not_a_failure_route() -> None:
    wf = workflow([node("a"), node("c")], [edge("a", "c", "none_failed")])
    decision = plan(wf, snapshot(failed("a")))
    assert isinstance(decision, Fail) and decision.node_id == "a"


# --- any_failed: fan-out to a handler, fan-in of failures ------------------------------------------------------


def test_any_failed_fan_out_routes_a_failure() -> None:
    wf = workflow(
        [node("work"), node("publish"), node("on-error")],
        [edge("work", "publish", "all_success"), edge("work", "on-error", "any_failed")],
    )
    taken, final = drive(wf, {"work": "failed"}, outputs={"on-error": {"handled": True}})
    assert taken == [("run", "work"), ("skip", "publish"), ("run", "on-error")]
    assert final == Finish({"handled": True})

    taken, final = drive(wf, {}, outputs={"publish": {"published": True}})
    assert taken == [("run", "work"), ("run", "publish"), ("skip", "on-error")]
    assert final == Finish({"published": True})


def test_any_failed_fan_in_runs_when_one_of_many_failed() -> None:
    wf = workflow(
        [node("a"), node("b"), node("handler")],
        [edge("a", "handler", "any_failed"), edge("b", "handler", "any_failed")],
    )
    taken, final = drive(wf, {"b": "failed"})
    assert ran(taken) == ["a", "b", "handler"]
    assert isinstance(final, Finish)
    taken, final = drive(wf, {})
    assert skips(taken) == ["handler"]
    assert isinstance(final, Finish)


def test_failed_node_with_an_any_failed_edge_is_routed_not_fatal() -> None:
    wf = workflow([node("a"), node("handler")], [edge("a", "handler", "any_failed")])
    decision = plan(wf, snapshot(failed("a")))
    assert decision == Execute("handler", resume=False)


@pytest.mark.parametrize("rule", ["all_success", "any_success", "none_failed", None])
def test_failed_node_without_a_failure_route_is_fatal(rule: str | None) -> None:
    wf = workflow([node("a"), node("b"), node("c")], [edge("a", "b", rule), edge("b", "c")])
    decision = plan(wf, snapshot(failed("a", code="kaput")))
    assert isinstance(decision, Fail)
    assert decision.node_id == "a"
    assert decision.error["code"] == "kaput"


def test_failed_sink_is_fatal() -> None:
    wf = workflow([node("a"), node("b")], [edge("a", "b")])
    decision = plan(wf, snapshot(completed("a"), failed("b", code="sink_broke")))
    assert decision == Fail("b", {"code": "sink_broke", "message": "b failed"})


def test_failure_is_fatal_before_other_ready_work_runs() -> None:
    wf = workflow([node("a"), node("b"), node("c")], [edge("a", "c")])
    # b is independent and still ready, but a's unrouted failure ends the run first
    decision = plan(wf, snapshot(failed("a")))
    assert isinstance(decision, Fail) and decision.node_id == "a"


def test_unrouted_failure_without_error_gets_a_default_code() -> None:
    wf = workflow([node("a")], [])
    decision = plan(wf, snapshot(started("a"), _event("node.failed", "a")))
    assert isinstance(decision, Fail)
    assert decision.error["code"] == "node_execution_failed"


# --- skipped cascades ----------------------------------------------------------------------------------------------


def test_skip_cascades_down_an_all_success_chain() -> None:
    wf = workflow(
        [node("a", disabled=True), node("b"), node("c"), node("d")], [edge("a", "b"), edge("b", "c"), edge("c", "d")]
    )
    taken, final = drive(wf, {})
    assert taken == [("skip", "a"), ("skip", "b"), ("skip", "c"), ("skip", "d")]
    assert final == Finish({})


def test_skip_cascade_stops_at_none_failed_and_all_complete() -> None:
    wf = workflow(
        [node("a", disabled=True), node("b"), node("c"), node("d")],
        [edge("a", "b"), edge("b", "c", "none_failed"), edge("b", "d", "all_complete")],
    )
    taken, _ = drive(wf, {})
    assert taken == [("skip", "a"), ("skip", "b"), ("run", "c"), ("run", "d")]


def test_skip_of_a_rejected_branch_cascades_past_its_children() -> None:
    wf = workflow(
        [node("gate"), node("publish"), node("notify"), node("on-reject")],
        [edge("gate", "publish"), edge("publish", "notify"), edge("gate", "on-reject", "any_failed")],
    )
    taken, final = drive(wf, {"gate": "failed"})
    assert taken == [("run", "gate"), ("skip", "publish"), ("skip", "notify"), ("run", "on-reject")]
    assert isinstance(final, Finish)


# --- edge conditions --------------------------------------------------------------------------------------------------


def _branching(left_rule: str = "all_success") -> WorkflowDefinition:
    return workflow(
        [node("route", "core.identity"), node("yes"), node("no")],
        [
            edge("route", "yes", left_rule, {"type": "equals", "left": "nodes.route.kind", "right": "yes"}),
            edge("route", "no", left_rule, {"type": "notEquals", "left": "nodes.route.kind", "right": "yes"}),
        ],
    )


@pytest.mark.parametrize(("kind", "taken_branch", "skipped_branch"), [("yes", "yes", "no"), ("other", "no", "yes")])
def test_edge_condition_picks_a_branch(kind: str, taken_branch: str, skipped_branch: str) -> None:
    taken, _ = drive(_branching(), {}, outputs={"route": {"kind": kind}})
    assert ("run", taken_branch) in taken
    assert ("skip", skipped_branch) in taken


def test_false_condition_counts_as_not_succeeded_for_any_success() -> None:
    wf = workflow(
        [node("a", "core.identity"), node("b"), node("c")],
        [
            edge("a", "c", "any_success", {"type": "truthy", "left": "nodes.a.go"}),
            edge("b", "c", "any_success", {"type": "expression", "expression": "variables.flag"}),
        ],
        variables=[{"name": "flag", "type": "boolean"}],
    )
    assert plan(wf, snapshot(completed("a", go=False), completed("b"), inputs={"flag": False})) == Skip(
        "c", "trigger rule not met"
    )
    assert plan(wf, snapshot(completed("a", go=False), completed("b"), inputs={"flag": True})) == Execute(
        "c", resume=False
    )
    assert plan(wf, snapshot(completed("a", go=1), completed("b"), inputs={"flag": False})) == Execute(
        "c", resume=False
    )


def test_condition_does_not_matter_under_all_complete() -> None:
    wf = workflow([node("a"), node("b")], [edge("a", "b", "all_complete", {"type": "falsy", "left": "`true`"})])
    assert plan(wf, snapshot(completed("a"))) == Execute("b", resume=False)


@pytest.mark.parametrize(
    ("condition", "holds"),
    [
        ({"type": "contains", "left": "nodes.a.tags", "right": "urgent"}, True),
        ({"type": "contains", "left": "nodes.a.tags", "right": "later"}, False),
        ({"type": "regex", "left": "nodes.a.title", "right": "^Re: "}, True),
        ({"type": "regex", "left": "nodes.a.missing", "right": ".*"}, False),
        ({"type": "equals", "left": "nodes.a.count", "right": 1}, False),  # true is not 1
        ({"type": "expression", "expression": "length(nodes.a.tags) > `1`"}, True),
        ({"type": "falsy", "left": "nodes.a.empty"}, True),
    ],
)
def test_condition_operators(condition: Doc, holds: bool) -> None:
    wf = workflow([node("a", "core.identity"), node("b")], [edge("a", "b", "all_success", condition)])
    state = snapshot(completed("a", tags=["urgent", "mail"], title="Re: hello", count=True, empty=[]))
    expected = Execute("b", resume=False) if holds else Skip("b", "trigger rule not met")
    assert plan(wf, state) == expected


# --- disabled nodes -----------------------------------------------------------------------------------------------


def test_disabled_root_is_skipped_as_disabled() -> None:
    wf = workflow([node("a", disabled=True), node("b")], [])
    assert plan(wf, snapshot()) == Skip("a", "disabled")
    assert plan(wf, snapshot(skipped("a"))) == Execute("b", resume=False)


def test_disabled_node_waits_for_its_sources_then_is_skipped() -> None:
    wf = workflow([node("b", disabled=True), node("a")], [edge("a", "b")])
    assert plan(wf, snapshot()) == Execute("a", resume=False)
    assert plan(wf, snapshot(completed("a"))) == Skip("b", "disabled")


def test_disabled_node_is_skipped_even_when_its_rule_is_met() -> None:
    wf = workflow(
        [node("a"), node("b", disabled=True), node("c")],
        [edge("a", "b", "all_complete"), edge("b", "c", "all_complete")],
    )
    taken, _ = drive(wf, {})
    assert taken == [("run", "a"), ("skip", "b"), ("run", "c")]


def test_disabled_node_with_unsupported_type_is_still_just_skipped() -> None:
    wf = workflow([node("a", "vendor.nobody.knows", disabled=True), node("b")], [edge("a", "b", "none_failed")])
    taken, final = drive(wf, {})
    assert taken == [("skip", "a"), ("run", "b")]
    assert isinstance(final, Finish)


# --- run outputs --------------------------------------------------------------------------------------------------


def test_run_outputs_prefer_primary_nodes() -> None:
    wf = workflow(
        [node("a", "core.identity", outputRole="primary"), node("b", "core.identity"), node("c", "core.identity")],
        [edge("a", "b")],
    )
    state = snapshot(completed("a", answer=1), completed("b", sink=2), completed("c", other=3))
    assert run_outputs(wf, state) == {"answer": 1}
    assert plan(wf, state) == Finish({"answer": 1})


def test_run_outputs_merge_several_primaries_in_definition_order() -> None:
    wf = workflow(
        [node("a", "core.identity", outputRole="primary"), node("b", "core.identity", outputRole="primary")], []
    )
    assert run_outputs(wf, snapshot(completed("b", x=2, y=2), completed("a", x=1))) == {"x": 2, "y": 2}


def test_run_outputs_fall_back_to_completed_sinks() -> None:
    wf = workflow(
        [
            node("a", "core.identity"),
            node("b", "core.identity"),
            node("c", "core.identity", outputRole="secondary"),
            node("d", disabled=True),
        ],
        [edge("a", "b")],
    )
    state = snapshot(completed("a", inner=0), completed("b", left=1), completed("c", right=2), skipped("d"))
    assert run_outputs(wf, state) == {"left": 1, "right": 2}


def test_run_outputs_fall_back_when_the_primary_was_skipped() -> None:
    wf = workflow(
        [node("a", "core.identity"), node("p", "core.identity", outputRole="primary"), node("s", "core.identity")],
        [edge("a", "p", "any_failed"), edge("a", "s")],
    )
    state = snapshot(completed("a", a=1), skipped("p"), completed("s", s=1))
    assert run_outputs(wf, state) == {"s": 1}


def test_run_outputs_empty_when_nothing_completed() -> None:
    wf = workflow([node("a", disabled=True)], [])
    assert run_outputs(wf, snapshot(skipped("a"))) == {}
