"""Every event the engine can emit holds to the official OpenWOP payload schema.

Two angles: each constructor of ``tether.engine.events``, called with its optional fields
too, and every doc that real runs commit (each bundled workflow path: approval
accept/reject/refine/edit-accept/ask, clarification, an external event, timeouts, cancel
while waiting and while running, a delay, failures). The runs must between them use every
constructor, so a new constructor without a run that emits it fails here.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from fake_peer import FakePeer
from schemas import openwop_validator
from workflow_docs import node as _node
from workflow_docs import workflow_doc

from tether.auth.keys import ALL_SCOPES
from tether.engine import events
from tether.engine.engine import Engine
from tether.engine.events import EVENT_TYPES, NewEvent
from tether.engine.handoff.follower import HandoffSettings
from tether.engine.handoff.negotiation import decide
from tether.engine.notifier import Notifier
from tether.engine.registry import WorkflowRegistry, bundled_workflows
from tether.engine.state import CANCEL_REQUESTED
from tether.engine.validation import load_workflow
from tether.run_state import DrainPolicy
from tether.store.base import RunRow
from tether.store.sqlite import SqliteStore
from tether.types import TERMINAL, Principal

ALICE = Principal("default", "key:alice", frozenset(ALL_SCOPES))
WAIT = 10.0
Doc = dict[str, Any]

#: every function of the events module that makes a NewEvent
CONSTRUCTORS = frozenset(
    name
    for name, value in vars(events).items()
    if inspect.isfunction(value)
    and value.__module__ == events.__name__
    and value.__annotations__.get("return") == "NewEvent"
)


def _payload_validator(event_type: str) -> Any:
    return openwop_validator(f"run-event-payloads#/$defs/_typeIndex/properties/{event_type}")


def _constructor_of(doc: Doc) -> str:
    """Which constructor wrote ``doc``: the type's name, except where one type has several."""
    payload = doc["payload"]
    if doc["type"] == "node.cancelled":
        return "node_cancel_requested" if payload.get("reason") == CANCEL_REQUESTED else "node_cancelled"
    if doc["type"] == "log.appended" and payload.get("kind") == "approval.ask":
        return "approval_ask"
    if doc["type"] == "log.appended" and str(payload.get("kind")).startswith("a2a.handoff."):
        return "handoff_" + payload["kind"].removeprefix("a2a.handoff.")
    return doc["type"].replace(".", "_")


# --- each constructor, optional fields included --------------------------------------------------

_ERROR = {"code": "node_execution_failed", "message": "it broke", "details": {"why": "because"}}
_APPROVAL_DATA: Doc = {
    "artifactId": "run_1:gate",
    "artifactType": "json",
    "title": "Ship it?",
    "actions": ["accept", "reject", "refine", "edit-accept", "ask"],
    "artifactData": {"draft": "x"},
    "approversList": ["key:alice"],
    "requiredApprovals": 2,
}
_QUESTIONS = [{"id": "q1", "question": "Colour?", "schema": {"type": "string"}}]
_NOW = "2026-01-02T03:04:05.678Z"

SAMPLES: dict[str, list[NewEvent]] = {
    "run_started": [
        events.run_started("echo", {"prompt": "hi"}, transport="a2a", owner={"tenant": "t"}, tags=[], metadata={}),
        events.run_started(
            "echo",
            {"prompt": "hi"},
            transport="rest",
            owner={"tenant": "t", "principal": "key:alice"},
            tags=["a", "b"],
            metadata={"k": "v"},
            callback_url="https://example.com/cb",
        ),
    ],
    "run_completed": [events.run_completed({}, 0), events.run_completed({"payload": "hi"}, 12)],
    "run_failed": [
        events.run_failed(_ERROR, 3),
        events.run_failed({"code": "x", "message": "y"}, 0, failed_node_id="a"),
    ],
    "run_cancelled": [events.run_cancelled("cancelled", "system", 0), events.run_cancelled("stop", "key:alice", 99)],
    "run_paused": [
        events.run_paused(None, "drain-current-node"),
        events.run_paused("look", "immediate", ("b", 1)),
        events.run_paused(None, "immediate"),
    ],
    "run_resumed": [events.run_resumed(None), events.run_resumed("go on")],
    "node_started": [
        events.node_started("a", "core.noop"),
        events.node_started("b", "core.delay", _NOW),
        events.node_started("b", "core.delay", _NOW, 2),
    ],
    "node_completed": [events.node_completed("a", {}), events.node_completed("b", {"x": [1]}, 500)],
    "node_failed": [events.node_failed("a", _ERROR), events.node_failed("a", {"code": "c", "message": "m"})],
    "node_skipped": [events.node_skipped("a", "edge condition false")],
    "node_resumed": [events.node_resumed("gate", "int_1", {"action": "accept"}), events.node_resumed("x", "int_2", {})],
    "node_cancel_requested": [events.node_cancel_requested("b", "stop", "key:alice")],
    "node_cancelled": [events.node_cancelled("gate")],
    "node_suspended": [
        events.node_suspended("gate", "int_1", "approval", "run_1:gate:0"),
        events.node_suspended("ask", "int_2", "clarification", "run_1:ask:0"),
        events.node_suspended("wait", "int_3", "external-event", "run_1:wait:0"),
        events.node_suspended("peer", "int_4", "approval", "run_1:peer:0", "a2a-peer-input"),
    ],
    "interrupt_requested": [
        events.interrupt_requested("gate", "approval", "run_1:gate:0", _APPROVAL_DATA),
        events.interrupt_requested("gate", "approval", "run_1:gate:0", _APPROVAL_DATA, 3_600_000),
        events.interrupt_requested("ask", "clarification", "run_1:ask:0", {"questions": _QUESTIONS}, 200),
        events.interrupt_requested(
            "wait", "external-event", "k", {"eventType": "x.y", "correlation": {"nodeId": "wait"}}
        ),
    ],
    "approval_requested": [
        events.approval_requested("gate", "int_1", _APPROVAL_DATA),
        events.approval_requested("gate", "int_1", {k: v for k, v in _APPROVAL_DATA.items() if "pprov" not in k}),
    ],
    "clarification_requested": [events.clarification_requested("ask", "int_2", _QUESTIONS)],
    "interrupt_resolved": [
        events.interrupt_resolved("gate", "int_1", "approval", {"action": "accept"}, "key:alice", resolved_at=_NOW),
        events.interrupt_resolved("gate", "int_1", "approval", {"action": "timeout"}, "system"),
        events.interrupt_resolved(
            "ask", "int_2", "clarification", {"answers": {"q1": "red"}}, "key:a", resolved_at=_NOW
        ),
        events.interrupt_resolved("wait", "int_3", "external-event", {"any": "thing"}, "key:a", resolved_at=_NOW),
    ],
    "approval_received": [
        events.approval_received("gate", {"action": "accept", "decidedBy": "key:a", "decidedAt": _NOW}),
        events.approval_received("gate", {"action": "reject", "feedback": "no", "comment": "c", "decidedBy": "k"}),
        events.approval_received(
            "gate", {"action": "refine", "refineFeedback": {"scope": "section", "sectionPath": "a.b", "text": "t"}}
        ),
        events.approval_received("gate", {"action": "edit-accept", "editedArtifactData": {"draft": "y"}}),
        events.approval_received("gate", {"action": "timeout", "decidedAt": _NOW, "reason": "timeout"}),
    ],
    "approval_ask": [events.approval_ask("gate", "why?", "key:alice")],
    "clarification_resolved": [events.clarification_resolved("ask", {"q1": "red"}, "key:alice")],
    "handoff_negotiated": [
        events.handoff_negotiated("peer", decide("https://b", "auto", ("1.0",), "1.0").payload(_NOW), ["1.0"], False),
        events.handoff_negotiated("peer", decide("https://b", "auto", ("0.3",), "1.0").payload(_NOW), ["0.3"], False),
    ],
    "handoff_accepted": [
        events.handoff_accepted(
            "peer", {"agent": "https://b", "rpcUrl": "https://b/v1/a2a", "version": "1.0", "taskId": "t1"}, "working"
        )
    ],
    "handoff_observed": [events.handoff_observed("peer", "completed"), events.handoff_observed("peer", "x", "q")],
    "handoff_reply": [events.handoff_reply("peer", {"kind": "approval", "value": {"action": "accept"}}, 1)],
    "handoff_replied": [events.handoff_replied("peer", 1)],
}


def test_every_constructor_has_samples() -> None:
    assert set(SAMPLES) == CONSTRUCTORS


def test_event_types_are_the_constructors_types() -> None:
    made = {event.type for samples in SAMPLES.values() for event in samples}
    assert made == set(EVENT_TYPES)


@pytest.mark.parametrize(("constructor", "event"), [(name, e) for name, samples in SAMPLES.items() for e in samples])
def test_constructed_payload_matches_the_schema(constructor: str, event: NewEvent) -> None:
    _payload_validator(event.type).validate(event.payload)
    assert event.type in EVENT_TYPES
    if event.type.startswith("run."):
        assert event.node_id is None, "run events carry no nodeId"
    else:
        assert event.node_id is not None and event.node_id == event.payload.get("nodeId", event.node_id)


# --- every doc that real runs commit ----------------------------------------------------------------


def _workflow(workflow_id: str, nodes: list[Doc], edges: list[Doc]) -> Doc:
    return workflow_doc(workflow_id, nodes, edges, [{"name": "n", "type": "number", "defaultValue": 5}])


TEST_WORKFLOWS = [
    _workflow("ev-timed-gate", [_node("gate", "core.approvalGate", config={"timeoutMs": 200})], []),
    _workflow(
        "ev-timed-question",
        [
            _node(
                "ask", "core.clarificationGate", config={"questions": [{"id": "q", "question": "?"}], "timeoutMs": 200}
            )
        ],
        [],
    ),
    _workflow(
        "ev-external",
        [_node("wait", "core.interrupt", config={"eventType": "thing.happened"}), _node("after")],
        [{"id": "e1", "sourceNodeId": "wait", "targetNodeId": "after"}],
    ),
    _workflow("ev-fail", [_node("boom", "core.fail", config={"code": "kaput", "message": "it broke"})], []),
    _workflow(
        "ev-handoff",
        [
            _node(
                "peer",
                "vendor.tether.a2a-handoff",
                config={"agent": "https://peer.example"},
                inputs={"prompt": {"type": "static", "value": "hello"}},
            )
        ],
        [],
    ),
    _workflow(
        "ev-bad-condition",
        [_node("a"), _node("b")],
        [
            {
                "id": "e1",
                "sourceNodeId": "a",
                "targetNodeId": "b",
                "condition": {"type": "expression", "expression": "length(variables.n)"},
            }
        ],
    ),
]


class Runs:
    """An in-process engine over a real SQLite store, and the runs it was asked to make."""

    def __init__(self, store: SqliteStore, engine: Engine, peer: FakePeer) -> None:
        self.store = store
        self.engine = engine
        self.peer = peer
        self.run_ids: list[str] = []

    async def create(self, workflow_id: str, inputs: Doc | None = None, **options: Any) -> str:
        created = await self.engine.create_run(ALICE, workflow_id, inputs or {}, **options)
        self.run_ids.append(created.run.run_id)
        return created.run.run_id

    async def until(self, run_id: str, predicate: Callable[[RunRow], bool], what: str) -> RunRow:
        row = await self.engine.wait_for(run_id, predicate, WAIT)
        assert row is not None and predicate(row), f"timed out waiting for {what}; run is {row and row.status}"
        return row

    async def ended(self, run_id: str) -> RunRow:
        return await self.until(run_id, lambda r: r.status in TERMINAL, "a terminal status")

    async def waiting(self, run_id: str) -> RunRow:
        return await self.until(run_id, lambda r: r.status.startswith("waiting-"), "a gate")

    async def docs(self) -> list[Doc]:
        return [e.doc for run_id in self.run_ids for e in await self.store.read_events(run_id, -1, 100_000)]


@pytest.fixture
async def runs(tmp_path: Path) -> AsyncIterator[Runs]:
    store = SqliteStore(tmp_path / "tether.db")
    await store.open()
    registry = WorkflowRegistry()
    registry.add(bundled_workflows(), "bundled")
    registry.add([load_workflow(doc) for doc in TEST_WORKFLOWS], "test")
    peer = FakePeer()
    engine = Engine(store, registry, Notifier(), peers=peer, handoffs=HandoffSettings(poll_min=0.05, poll_max=0.2))
    await engine.start()
    try:
        yield Runs(store, engine, peer)
    finally:
        await engine.stop()
        await store.close()


async def _approve(runs: Runs, *answers: Doc) -> RunRow:
    run_id = await runs.create("approval-gated", {"prompt": "draft"})
    await runs.waiting(run_id)
    for answer in answers:
        await runs.engine.resolve(ALICE, run_id, "gate", answer)
    return await runs.ended(run_id)


async def drive_every_path(runs: Runs) -> None:
    """One run down each path the bundled (and a few test) workflows can take."""
    for workflow_id in ("echo", "shape"):
        await runs.ended(await runs.create(workflow_id, {"prompt": "hi"}, tags=["t"], metadata={"m": 1}))
    await runs.ended(
        await runs.create("echo", {"prompt": "cb"}, callback_url="https://example.com/cb", transport="a2a")
    )
    await runs.ended(await runs.create("multi-step", {"prompt": "delay"}))
    await _approve(runs, {"action": "accept", "comment": "fine"})
    await _approve(runs, {"action": "reject", "feedback": "no"})
    await _approve(runs, {"action": "refine", "refineFeedback": {"scope": "whole", "text": "more"}})
    await _approve(runs, {"action": "edit-accept", "editedArtifactData": {"draft": "better"}})
    await _approve(runs, {"action": "ask", "question": "why?"}, {"approve": True})
    question = await runs.create("clarification-gated")
    await runs.waiting(question)
    await runs.engine.resolve(ALICE, question, "ask", {"answers": [{"id": "q1", "answer": "green"}]})
    await runs.ended(question)
    external = await runs.create("ev-external")
    await runs.waiting(external)
    await runs.engine.resolve(ALICE, external, "wait", {"happened": True})
    await runs.ended(external)
    for timed in ("ev-timed-gate", "ev-timed-question"):
        await runs.ended(await runs.create(timed))
    waiting = await runs.create("approval-gated", {"prompt": "x"})
    await runs.waiting(waiting)
    await runs.engine.cancel(ALICE, waiting, "not needed")
    running = await runs.create("multi-step", {"prompt": "x"})
    await runs.until(running, lambda r: r.state["nodeStates"].get("b", {}).get("status") == "running", "the delay")
    await runs.engine.cancel(ALICE, running, "stop")
    await runs.ended(running)
    policies: tuple[DrainPolicy, ...] = ("drain-current-node", "immediate")
    for policy in policies:
        paused = await runs.create("multi-step", {"prompt": policy})
        await runs.until(paused, lambda r: r.state["nodeStates"].get("b", {}).get("status") == "running", "the delay")
        await runs.engine.pause(ALICE, paused, "look", policy)
        await runs.engine.resume(ALICE, paused, "go on")
        await runs.ended(paused)
    for failing in ("ev-fail", "ev-bad-condition"):
        await runs.ended(await runs.create(failing))
    runs.peer.next_state, runs.peer.after_reply = "input-required", "completed"
    runs.peer.next_interrupt = {"kind": "approval", "title": "Ship it?", "actions": ["accept", "reject"]}
    handed = await runs.create("ev-handoff")
    await runs.waiting(handed)
    await runs.engine.resolve(ALICE, handed, "peer", {"action": "accept"})
    await runs.ended(handed)


async def test_every_committed_payload_matches_the_schema(runs: Runs) -> None:
    await drive_every_path(runs)
    docs = await runs.docs()
    envelope = openwop_validator("run-event")
    for doc in docs:
        envelope.validate(doc)
        _payload_validator(doc["type"]).validate(doc["payload"])
    seen = {_constructor_of(doc) for doc in docs}
    assert CONSTRUCTORS <= seen, f"no run emitted {sorted(CONSTRUCTORS - seen)}: drive a path that does"
    assert seen <= CONSTRUCTORS, f"events not made by a constructor: {sorted(seen - CONSTRUCTORS)}"
