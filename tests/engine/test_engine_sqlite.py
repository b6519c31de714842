"""The engine driving runs on the real SQLite store, in-process.

Every run's stored snapshot must be exactly what folding its event log gives, the log
must be numbered 0..n with no gap, and every race (resolves, cancel, gate timeouts,
restarts) must leave one consistent history.
"""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from schemas import openwop_validator
from workflow_docs import node as _node
from workflow_docs import workflow_doc as _workflow

from tether.auth.keys import ALL_SCOPES
from tether.engine.engine import Engine
from tether.engine.notifier import Notifier
from tether.engine.registry import WorkflowRegistry, bundled_workflows
from tether.engine.state import fold
from tether.engine.validation import load_workflow
from tether.errors import Conflict, Unprocessable
from tether.files import Blob
from tether.store.base import RunRow
from tether.store.sqlite import SqliteStore
from tether.types import TERMINAL, Principal

ALICE = Principal("default", "key:alice", frozenset(ALL_SCOPES))
WAIT = 10.0
Doc = dict[str, Any]


def _timed_gate(workflow_id: str, **config: Any) -> Doc:
    """A gate that times out after 200 ms, followed by a node that needs it accepted."""
    return _workflow(
        workflow_id,
        [_node("gate", "core.approvalGate", config={"title": "Quick", "timeoutMs": 200, **config}), _node("after")],
        [{"id": "e1", "sourceNodeId": "gate", "targetNodeId": "after"}],
    )


TEST_WORKFLOWS = [
    _timed_gate("timed-gate"),
    _timed_gate("timed-gate-approve", onTimeout="approve"),
    _workflow(
        "timed-gate-routed",
        [_node("gate", "core.approvalGate", config={"timeoutMs": 200}), _node("publish"), _node("on-timeout")],
        [
            {"id": "e1", "sourceNodeId": "gate", "targetNodeId": "publish"},
            {"id": "e2", "sourceNodeId": "gate", "targetNodeId": "on-timeout", "triggerRule": "any_failed"},
        ],
    ),
    _workflow(
        "bad-condition",
        [_node("a"), _node("b")],
        [
            {
                "id": "e1",
                "sourceNodeId": "a",
                "targetNodeId": "b",
                "condition": {"type": "expression", "expression": "length(variables.n)"},
            }
        ],
        [{"name": "n", "type": "number", "defaultValue": 5}],
    ),
]


@dataclass
class Env:
    store: SqliteStore
    registry: WorkflowRegistry
    engine: Engine

    async def create(self, workflow_id: str, inputs: Doc | None = None) -> str:
        created = await self.engine.create_run(ALICE, workflow_id, inputs or {})
        return created.run.run_id

    async def until(self, run_id: str, predicate: Callable[[RunRow], bool], what: str, timeout: float = WAIT) -> RunRow:
        row = await self.engine.wait_for(run_id, predicate, timeout)
        assert row is not None and predicate(row), f"timed out waiting for {what}; run is {row and row.status}"
        return row

    async def status(self, run_id: str, status: str) -> RunRow:
        return await self.until(run_id, lambda r: r.status == status, status)

    async def docs(self, run_id: str) -> list[Doc]:
        return [e.doc for e in await self.store.read_events(run_id, -1, 100_000)]


async def _open_env(path: Path) -> Env:
    store = SqliteStore(path)
    await store.open()
    return await _engine_on(store)


async def _engine_on(store: SqliteStore) -> Env:
    registry = WorkflowRegistry()
    registry.add(bundled_workflows(), "bundled")
    registry.add([load_workflow(doc) for doc in TEST_WORKFLOWS], "test")
    engine = Engine(store, registry, Notifier())
    await engine.start()
    return Env(store, registry, engine)


@pytest.fixture
async def env(tmp_path: Path) -> AsyncIterator[Env]:
    environment = await _open_env(tmp_path / "tether.db")
    try:
        yield environment
    finally:
        await environment.engine.stop()
        await environment.store.close()


async def _assert_consistent(env: Env, run_id: str) -> tuple[RunRow, list[Doc]]:
    """The stored row is the fold of the stored log, and the log is 0..n without gaps."""
    row = await env.store.get_run(run_id)
    assert row is not None
    docs = await env.docs(run_id)
    assert [d["sequence"] for d in docs] == list(range(len(docs))), "sequences are not gap-free from 0"
    assert row.last_sequence == len(docs) - 1
    assert len({d["eventId"] for d in docs}) == len(docs), "eventIds are not unique"
    validator = openwop_validator("run-event")
    for doc in docs:
        validator.validate(doc)
        assert doc["runId"] == run_id
    assert row.state == fold(run_id, row.workflow_id, row.created_at, docs), (
        "the stored state is not the fold of the log"
    )
    assert row.status == row.state["status"]
    return row, docs


def _types(docs: list[Doc]) -> list[str]:
    return [d["type"] for d in docs]


# --- files a node makes ------------------------------------------------------------------------------

MADE = base64.b64encode(b"made by a node").decode()
TEST_WORKFLOWS += [
    _workflow(
        f"make-file-{name}",
        [
            _node(
                "make",
                "vendor.tether.template",
                config={
                    "outputs": {"message": {"parts": [{"kind": "file", "file": {"bytes": raw, "name": "out.txt"}}]}}
                },
            )
        ],
        [],
    )
    for name, raw in (("ok", MADE), ("bad", "not base64!"))
]


async def test_a_file_a_node_writes_inline_is_a_blob_committed_with_its_event(env: Env) -> None:
    run_id = await env.create("make-file-ok")
    row = await env.status(run_id, "completed")
    _, docs = await _assert_consistent(env, run_id)
    assert MADE not in json.dumps(docs) and MADE not in json.dumps(row.state), (
        "the bytes are in no event, nor the state"
    )
    [part] = row.state["outputs"]["message"]["parts"]
    blob = Blob.of(b"made by a node")
    assert part == {"kind": "file", "file": {"blob": blob.digest, "size": blob.size, "name": "out.txt"}}
    assert await env.store.read_blobs(run_id, [blob.digest]) == {blob.digest: blob.data}


async def test_a_file_a_node_writes_that_is_not_base64_fails_the_node(env: Env) -> None:
    run_id = await env.create("make-file-bad")
    row = await env.status(run_id, "failed")
    error = row.state["nodeStates"]["make"]["error"]
    assert error["code"] == "node_execution_failed" and "not standard base64" in error["message"], error


# --- the state is the fold of the log -------------------------------------------------------------


async def test_echo(env: Env) -> None:
    run_id = await env.create("echo", {"prompt": "hi"})
    await env.status(run_id, "completed")
    row, docs = await _assert_consistent(env, run_id)
    assert _types(docs) == ["run.started", "node.started", "node.completed", "run.completed"]
    assert row.state["outputs"] == {"payload": "hi"}


async def test_multi_step(env: Env) -> None:
    run_id = await env.create("multi-step", {"prompt": "p"})
    await env.until(run_id, lambda r: r.state["nodeStates"].get("b", {}).get("status") == "running", "the delay")
    await _assert_consistent(env, run_id)
    await env.status(run_id, "completed")
    row, docs = await _assert_consistent(env, run_id)
    assert [d["nodeId"] for d in docs if d["type"] == "node.completed"] == ["a", "b", "c"]
    assert [n for n, e in row.state["nodeStates"].items() if e["status"] == "completed"] == ["a", "b", "c"]


@pytest.mark.parametrize(
    ("action", "ran", "skipped"), [("accept", "publish", "on-reject"), ("reject", "on-reject", "publish")]
)
async def test_approval(env: Env, action: str, ran: str, skipped: str) -> None:
    run_id = await env.create("approval-gated", {"prompt": "draft"})
    await env.status(run_id, "waiting-approval")
    waiting, _ = await _assert_consistent(env, run_id)
    assert waiting.state["interrupt"]["nodeId"] == "gate"
    await env.engine.resolve(ALICE, run_id, "gate", {"action": action, "feedback": "f"})
    await env.status(run_id, "completed")
    row, docs = await _assert_consistent(env, run_id)
    received = [d for d in docs if d["type"] == "approval.received"]
    assert len(received) == 1 and received[0]["payload"]["action"] == action
    assert received[0]["payload"]["decidedBy"] == "key:alice"
    assert row.state["nodeStates"][ran]["status"] == "completed"
    assert row.state["nodeStates"][skipped]["status"] == "skipped"
    assert row.state["nodeStates"]["gate"]["status"] == ("completed" if action == "accept" else "failed")


async def test_clarification(env: Env) -> None:
    run_id = await env.create("clarification-gated")
    await env.status(run_id, "waiting-input")
    await _assert_consistent(env, run_id)
    await env.engine.resolve(ALICE, run_id, "ask", {"answers": [{"id": "q1", "answer": "green"}]})
    await env.status(run_id, "completed")
    row, docs = await _assert_consistent(env, run_id)
    assert row.state["outputs"] == {"color": "green"}
    assert [d["payload"]["answers"] for d in docs if d["type"] == "clarification.resolved"] == [{"q1": "green"}]


async def test_cancel_waiting_run(env: Env) -> None:
    run_id = await env.create("approval-gated", {"prompt": "x"})
    await env.status(run_id, "waiting-approval")
    row = await env.engine.cancel(ALICE, run_id, "not needed")
    assert row.status == "cancelled", "a waiting run is cancelled directly"
    row, docs = await _assert_consistent(env, run_id)
    assert _types(docs)[-2:] == ["node.cancelled", "run.cancelled"]
    assert docs[-1]["payload"]["reason"] == "not needed"
    assert docs[-1]["payload"]["cancelledBy"] == "key:alice"
    assert row.state["interrupt"] is None
    with pytest.raises(Unprocessable) as late:
        await env.engine.resolve(ALICE, run_id, "gate", {"action": "accept"})
    assert late.value.code == "interrupt_cancelled"
    assert await env.docs(run_id) == docs, "the refused resolve wrote nothing"
    again = await env.engine.cancel(ALICE, run_id)
    assert again.status == "cancelled" and await env.docs(run_id) == docs, "cancel is idempotent"


async def test_cancel_running_run(env: Env) -> None:
    run_id = await env.create("multi-step", {"prompt": "x"})
    await env.until(run_id, lambda r: r.state["nodeStates"].get("b", {}).get("status") == "running", "the delay")
    row = await env.engine.cancel(ALICE, run_id, "stop")
    assert row.status in ("cancelling", "cancelled")
    await env.status(run_id, "cancelled")
    row, docs = await _assert_consistent(env, run_id)
    assert _types(docs)[-1] == "run.cancelled"
    assert "c" not in row.state["nodeStates"]
    assert row.state["nodeStates"]["b"]["status"] == "cancelled"


# --- races -----------------------------------------------------------------------------------------


async def test_twenty_concurrent_resolves_one_wins(env: Env) -> None:
    run_id = await env.create("approval-gated", {"prompt": "x"})
    await env.status(run_id, "waiting-approval")
    results = await asyncio.gather(
        *(
            env.engine.resolve(
                Principal("default", f"key:p{i}", frozenset(ALL_SCOPES)), run_id, "gate", {"action": "accept"}
            )
            for i in range(20)
        ),
        return_exceptions=True,
    )
    wins = [r for r in results if isinstance(r, RunRow)]
    losses = [r for r in results if isinstance(r, BaseException)]
    assert len(wins) == 1, results
    assert len(losses) == 19
    for loss in losses:
        assert isinstance(loss, Conflict), repr(loss)
        assert loss.code == "interrupt_already_resolved"
    await env.status(run_id, "completed")
    _, docs = await _assert_consistent(env, run_id)
    received = [d for d in docs if d["type"] == "approval.received"]
    assert len(received) == 1
    assert _types(docs).count("interrupt.resolved") == 1
    assert _types(docs).count("run.completed") == 1


async def test_resolve_and_cancel_race_leaves_one_history(env: Env) -> None:
    run_id = await env.create("approval-gated", {"prompt": "x"})
    await env.status(run_id, "waiting-approval")
    results = await asyncio.gather(
        env.engine.resolve(ALICE, run_id, "gate", {"action": "accept"}),
        env.engine.cancel(ALICE, run_id, "race"),
        return_exceptions=True,
    )
    row = await env.until(run_id, lambda r: r.status in TERMINAL, "a terminal status")
    _, docs = await _assert_consistent(env, run_id)
    terminal = [t for t in _types(docs) if t in ("run.completed", "run.cancelled", "run.failed")]
    assert len(terminal) == 1
    if row.status == "cancelled" and isinstance(results[0], BaseException):
        assert getattr(results[0], "code", None) == "interrupt_cancelled"
    if row.status == "completed":
        assert isinstance(results[1], Conflict) or (isinstance(results[1], RunRow) and results[1].status != "cancelled")


# --- gate timeouts --------------------------------------------------------------------------------------


@pytest.mark.parametrize("workflow_id", ["timed-gate", "timed-gate-approve"])
async def test_gate_timeout_rejects(env: Env, workflow_id: str) -> None:
    run_id = await env.create(workflow_id)
    await env.status(run_id, "waiting-approval")
    row = await env.until(run_id, lambda r: r.status in TERMINAL, "the gate to time out")
    assert row.status == "failed", "a timed-out gate with no failure route fails the run"
    assert row.state["error"]["code"] == "approval_rejected"
    _, docs = await _assert_consistent(env, run_id)
    received = [d for d in docs if d["type"] == "approval.received"]
    assert len(received) == 1
    assert received[0]["payload"]["action"] == "timeout"
    openwop_validator("run-event-payloads#/$defs/approvalReceived").validate(received[0]["payload"])
    gate_failed = [d for d in docs if d["type"] == "node.failed" and d["nodeId"] == "gate"]
    assert gate_failed and gate_failed[0]["payload"]["error"]["code"] == "approval_rejected"
    assert not any(d["type"] == "node.completed" and d.get("nodeId") == "gate" for d in docs), "a timeout never grants"
    assert "approval.granted" not in _types(docs)
    assert "after" not in row.state["nodeStates"] or row.state["nodeStates"]["after"]["status"] != "completed"
    assert _types(docs)[-1] == "run.failed"
    with pytest.raises(Conflict) as late:
        await env.engine.resolve(ALICE, run_id, "gate", {"action": "accept"})
    assert late.value.code == "interrupt_already_resolved"


async def test_gate_timeout_follows_a_failure_route(env: Env) -> None:
    run_id = await env.create("timed-gate-routed")
    row = await env.until(run_id, lambda r: r.status in TERMINAL, "the gate to time out")
    assert row.status == "completed"
    assert row.state["nodeStates"]["on-timeout"]["status"] == "completed"
    assert row.state["nodeStates"]["publish"]["status"] == "skipped"
    await _assert_consistent(env, run_id)


async def test_resolve_before_the_timeout_disarms_it(env: Env) -> None:
    run_id = await env.create("timed-gate")
    await env.status(run_id, "waiting-approval")
    await env.engine.resolve(ALICE, run_id, "gate", {"action": "accept"})
    await env.status(run_id, "completed")
    # wait past the gate's 200 ms deadline: nothing more may be written
    _, before = await _assert_consistent(env, run_id)
    await env.engine.wait_for(run_id, lambda r: r.last_sequence != before[-1]["sequence"], 0.5)
    _, after = await _assert_consistent(env, run_id)
    assert after == before
    assert [d["payload"]["action"] for d in after if d["type"] == "approval.received"] == ["accept"]


async def test_a_resolve_that_advances_commits_the_rest_of_the_run_with_it(env: Env) -> None:
    run_id = await env.create("approval-gated", {"prompt": "x"})
    await env.status(run_id, "waiting-approval")
    row = await env.engine.resolve(ALICE, run_id, "gate", {"action": "accept"}, advance=True)
    assert row.status == "completed", "the steps after the gate were committed with the resolution"
    _, docs = await _assert_consistent(env, run_id)
    assert _types(docs).count("run.completed") == 1 and _types(docs).count("interrupt.resolved") == 1
    await env.engine.wait_for(run_id, lambda r: r.last_sequence != row.last_sequence, 0.3)
    _, again = await _assert_consistent(env, run_id)
    assert again == docs, "the driver kicked after it found nothing left to do"


# --- restarts ---------------------------------------------------------------------------------------------


async def test_new_engine_continues_a_sleeping_run(tmp_path: Path) -> None:
    first = await _open_env(tmp_path / "tether.db")
    try:
        run_id = await first.create("multi-step", {"prompt": "p"})
        await first.until(run_id, lambda r: r.state["nodeStates"].get("b", {}).get("status") == "running", "the delay")
        await first.engine.stop()
        second = await _engine_on(first.store)
        try:
            row = await second.until(run_id, lambda r: r.status in TERMINAL, "the run to finish after the restart")
            assert row.status == "completed"
            _, docs = await _assert_consistent(second, run_id)
            started_b = [d for d in docs if d["type"] == "node.started" and d["nodeId"] == "b"]
            assert len(started_b) == 1, "the delay was not started a second time"
            assert [d["nodeId"] for d in docs if d["type"] == "node.completed"] == ["a", "b", "c"]
        finally:
            await second.engine.stop()
    finally:
        await first.store.close()


async def test_new_engine_rearms_a_gate_timeout(tmp_path: Path) -> None:
    first = await _open_env(tmp_path / "tether.db")
    try:
        run_id = await first.create("timed-gate")
        await first.status(run_id, "waiting-approval")
        await first.engine.stop()
        second = await _engine_on(first.store)
        try:
            row = await second.until(run_id, lambda r: r.status in TERMINAL, "the re-armed timeout")
            assert row.status == "failed" and row.state["error"]["code"] == "approval_rejected"
            _, docs = await _assert_consistent(second, run_id)
            assert [d["payload"]["action"] for d in docs if d["type"] == "approval.received"] == ["timeout"]
        finally:
            await second.engine.stop()
    finally:
        await first.store.close()


# --- failures inside the driver ------------------------------------------------------------------------------


async def test_edge_condition_error_at_run_time_ends_the_run(env: Env) -> None:
    """``length(variables.n)`` compiles, but fails on a number: the run must end, not hang."""
    run_id = await env.create("bad-condition")
    # a run of two no-op nodes ends in milliseconds; three seconds is ample
    row = await env.until(run_id, lambda r: r.status in TERMINAL, "the run to end", timeout=3.0)
    assert row.status == "failed"
    await _assert_consistent(env, run_id)


# --- a store that fails mid-step does not strand a run ----------------------------------------------


class _FlakyStore(SqliteStore):
    """Refuses the first ``failures`` commits after the run is created, like a dropped connection."""

    failures = 2

    async def commit(self, commit: Any) -> int:
        if commit.expected_sequence is not None and self.failures > 0:
            self.failures -= 1
            from tether.errors import StoreUnavailable

            raise StoreUnavailable("the connection dropped")
        return await super().commit(commit)


async def test_a_failed_step_is_retried_until_the_run_completes(tmp_path: Path) -> None:
    store = _FlakyStore(tmp_path / "flaky.db")
    await store.open()
    env = await _engine_on(store)
    try:
        created = await env.engine.create_run(Principal("default", "t", frozenset(ALL_SCOPES)), "echo", {"prompt": "x"})
        row = await env.engine.wait_for(created.run.run_id, lambda r: r.status in TERMINAL, 10)
        assert row is not None and row.status == "completed"
        assert store.failures == 0, "both refused commits were retried"
        await _assert_consistent(env, created.run.run_id)
    finally:
        await env.engine.stop()
        await store.close()
