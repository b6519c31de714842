"""Pause and resume in the engine, on the real SQLite store: a paused run runs no node until resumed.

The state machine: which statuses a pause and a resume are taken in (and the 409 each
refusal is), what each drain policy does to the node executing (a delay sleeping), that
racing pauses or resumes have exactly one winner, that a cancel ends a paused run, and
that a new engine on the same store leaves a paused run paused. Every stored snapshot
must be the fold of its log, numbered 0..n.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from fake_peer import FakePeer
from schemas import openwop_validator
from workflow_docs import node as _node
from workflow_docs import workflow_doc

from tether import clock
from tether.auth.keys import ALL_SCOPES
from tether.engine.engine import Engine
from tether.engine.handoff.follower import HandoffSettings
from tether.engine.notifier import Notifier
from tether.engine.registry import WorkflowRegistry, bundled_workflows
from tether.engine.state import fold
from tether.engine.validation import load_workflow
from tether.errors import Conflict
from tether.store.base import RunRow
from tether.store.sqlite import SqliteStore
from tether.types import TERMINAL, Principal

ALICE = Principal("default", "key:alice", frozenset(ALL_SCOPES))
WAIT = 10.0
Doc = dict[str, Any]

#: a delay as long as ``inputs.delayMs``, a short one, then a no-op: three nodes, two of them sleeping
STEPS = workflow_doc(
    "pause-steps",
    [
        _node("first", "core.delay", inputs={"delayMs": {"type": "variable", "variableName": "delayMs"}}),
        _node("second", "core.delay", config={"delayMs": 400}),
        _node("done"),
    ],
    [
        {"id": "e1", "sourceNodeId": "first", "targetNodeId": "second"},
        {"id": "e2", "sourceNodeId": "second", "targetNodeId": "done"},
    ],
    [{"name": "delayMs", "type": "number", "defaultValue": 5000}],
)
HANDOFF = workflow_doc(
    "pause-handoff",
    [
        _node(
            "peer",
            "vendor.tether.a2a-handoff",
            config={"agent": "https://peer.example"},
            inputs={"prompt": {"type": "static", "value": "hello"}},
        )
    ],
    [],
)


@dataclass
class Env:
    store: SqliteStore
    engine: Engine
    peer: FakePeer

    async def create(self, delay_ms: int = 5000, workflow_id: str = "pause-steps") -> str:
        inputs = {"delayMs": delay_ms} if workflow_id == "pause-steps" else {"prompt": "p"}
        created = await self.engine.create_run(ALICE, workflow_id, inputs)
        return created.run.run_id

    async def until(self, run_id: str, predicate: Callable[[RunRow], bool], what: str, timeout: float = WAIT) -> RunRow:
        row = await self.engine.wait_for(run_id, predicate, timeout)
        assert row is not None and predicate(row), f"timed out waiting for {what}; run is {row and row.status}"
        return row

    async def executing(self, run_id: str, node_id: str) -> RunRow:
        return await self.until(
            run_id, lambda r: r.state["nodeStates"].get(node_id, {}).get("status") == "running", f"{node_id} to run"
        )

    async def settled(self, run_id: str) -> None:
        """Until no driver of the run is left on this engine: it has done all it will do."""
        deadline = time.monotonic() + WAIT
        while run_id in self.engine._drivers:
            assert time.monotonic() < deadline, "the run's driver never stopped"
            await asyncio.sleep(0.01)

    async def docs(self, run_id: str) -> list[Doc]:
        return [e.doc for e in await self.store.read_events(run_id, -1, 100_000)]


def _engine(store: SqliteStore, peer: FakePeer) -> Engine:
    registry = WorkflowRegistry()
    registry.add(bundled_workflows(), "bundled")
    registry.add([load_workflow(STEPS), load_workflow(HANDOFF)], "test")
    return Engine(store, registry, Notifier(), peers=peer, handoffs=HandoffSettings(poll_min=0.05, poll_max=0.2))


@pytest.fixture
async def env(tmp_path: Path) -> AsyncIterator[Env]:
    store = SqliteStore(tmp_path / "tether.db")
    await store.open()
    peer = FakePeer()
    engine = _engine(store, peer)
    await engine.start()
    try:
        yield Env(store, engine, peer)
    finally:
        await engine.stop()
        await store.close()


async def _consistent(env: Env, run_id: str) -> tuple[RunRow, list[Doc]]:
    """The stored row is the fold of the stored log, the log is 0..n, and each payload holds to the v1 schema."""
    row = await env.store.get_run(run_id)
    assert row is not None
    docs = await env.docs(run_id)
    assert [d["sequence"] for d in docs] == list(range(len(docs)))
    assert row.state == fold(run_id, row.workflow_id, row.created_at, docs)
    for doc in docs:
        openwop_validator("run-event").validate(doc)
        openwop_validator(f"run-event-payloads#/$defs/_typeIndex/properties/{doc['type']}").validate(doc["payload"])
    return row, docs


def _count(docs: list[Doc], kind: str) -> Counter[str]:
    return Counter(d["nodeId"] for d in docs if d["type"] == kind)


# --- drain policies ---------------------------------------------------------------------------------


async def test_drain_lets_the_executing_node_finish_then_starts_nothing(env: Env) -> None:
    run_id = await env.create(delay_ms=300)
    await env.executing(run_id, "first")
    paused = await env.engine.pause(ALICE, run_id, "look first")
    assert paused.status == "paused" and paused.state["pausedAt"]
    await env.until(run_id, lambda r: r.state["nodeStates"]["first"]["status"] == "completed", "the drain")
    await env.settled(run_id)
    row, docs = await _consistent(env, run_id)
    assert row.status == "paused"
    assert "second" not in row.state["nodeStates"], "no node starts while paused"
    assert [d["type"] for d in docs][-2:] == ["run.paused", "node.completed"], "the drained completion is committed"
    assert docs[-2]["payload"] == {"reason": "look first", "drainPolicy": "drain-current-node"}
    resumed = await env.engine.resume(ALICE, run_id, "go on")
    assert resumed.status == "running"
    row = await env.until(run_id, lambda r: r.status in TERMINAL, "the end")
    row, docs = await _consistent(env, run_id)
    assert row.status == "completed"
    assert _count(docs, "node.started") == _count(docs, "node.completed") == {"first": 1, "second": 1, "done": 1}
    kinds = [d["type"] for d in docs]
    assert kinds.index("run.paused") < kinds.index("run.resumed")
    assert docs[kinds.index("run.resumed")]["payload"] == {"reason": "go on"}


async def test_immediate_cuts_the_attempt_and_resume_starts_a_fresh_one(env: Env) -> None:
    run_id = await env.create(delay_ms=1500)
    row = await env.executing(run_id, "first")
    wake_at = row.state["nodeStates"]["first"]["wakeAt"]
    paused = await env.engine.pause(ALICE, run_id, drain_policy="immediate")
    assert paused.status == "paused"
    assert "first" not in paused.state["nodeStates"], "the cut attempt is gone from the snapshot"
    await env.settled(run_id)
    assert clock.now_iso() < wake_at, "the sleep was cut, not slept out"
    row, docs = await _consistent(env, run_id)
    assert row.status == "paused"
    assert docs[-1]["type"] == "run.paused", "no terminal event for the cut attempt, nothing after the pause"
    assert docs[-1]["payload"] == {"drainPolicy": "immediate", "interruptedNodeId": "first", "interruptedAttempt": 1}
    await env.engine.resume(ALICE, run_id)
    await env.until(run_id, lambda r: r.status in TERMINAL, "the end")
    row, docs = await _consistent(env, run_id)
    assert row.status == "completed"
    started = [d for d in docs if d["type"] == "node.started" and d["nodeId"] == "first"]
    assert [d["payload"]["attempt"] for d in started] == [0, 1], "a fresh attempt, counted on"
    assert _count(docs, "node.completed") == {"first": 1, "second": 1, "done": 1}
    assert not [d for d in docs if d["type"] in ("node.failed", "node.cancelled")]


async def test_a_resumed_run_pauses_again_and_cuts_the_next_node(env: Env) -> None:
    run_id = await env.create(delay_ms=300)
    await env.executing(run_id, "first")
    await env.engine.pause(ALICE, run_id)
    await env.until(run_id, lambda r: r.state["nodeStates"]["first"]["status"] == "completed", "the drain")
    await env.settled(run_id)
    await env.engine.resume(ALICE, run_id)
    await env.executing(run_id, "second")
    again = await env.engine.pause(ALICE, run_id, drain_policy="immediate")
    assert again.state["cutAttempts"] == {"second": 1}
    await env.settled(run_id)
    await env.engine.resume(ALICE, run_id)
    await env.until(run_id, lambda r: r.status in TERMINAL, "the end")
    _, docs = await _consistent(env, run_id)
    assert [d["payload"] for d in docs if d["type"] == "run.paused"] == [
        {"drainPolicy": "drain-current-node"},
        {"drainPolicy": "immediate", "interruptedNodeId": "second", "interruptedAttempt": 1},
    ]


# --- refusals: 409, and nothing written ------------------------------------------------------------


async def _refused(env: Env, run_id: str, call: Any, code: str, status: str) -> None:
    before = await env.docs(run_id)
    with pytest.raises(Conflict) as refused:
        await call
    assert (refused.value.code, refused.value.details) == (code, {"runStatus": status})
    assert await env.docs(run_id) == before, "a refused request writes nothing"


async def test_refusals_name_the_status(env: Env) -> None:
    ended = await env.create(delay_ms=0)
    await env.until(ended, lambda r: r.status == "completed", "the end")
    await _refused(env, ended, env.engine.pause(ALICE, ended), "run_terminal", "completed")
    await _refused(env, ended, env.engine.resume(ALICE, ended), "run_terminal", "completed")

    running = await env.create()
    await env.executing(running, "first")
    await _refused(env, running, env.engine.resume(ALICE, running), "run_state_conflict", "running")
    await env.engine.pause(ALICE, running, drain_policy="immediate")
    await _refused(env, running, env.engine.pause(ALICE, running), "run_state_conflict", "paused")
    await env.engine.cancel(ALICE, running)
    await _refused(env, running, env.engine.resume(ALICE, running), "run_terminal", "cancelled")

    gated = await env.create(workflow_id="approval-gated")
    await env.until(gated, lambda r: r.status == "waiting-approval", "the gate")
    await _refused(env, gated, env.engine.pause(ALICE, gated), "run_state_conflict", "waiting-approval")


async def test_a_hand_off_in_flight_is_not_paused(env: Env) -> None:
    run_id = await env.create(workflow_id="pause-handoff")
    await env.until(
        run_id, lambda r: "taskId" in r.state["nodeStates"].get("peer", {}).get("handoff", {}), "the peer task"
    )
    await _refused(env, run_id, env.engine.pause(ALICE, run_id), "run_state_conflict", "running")
    assert len(env.peer.sends) == 1
    await env.engine.cancel(ALICE, run_id)


async def test_a_second_cancel_is_refused_only_when_asked(env: Env) -> None:
    run_id = await env.create()
    await env.executing(run_id, "first")
    await env.engine.pause(ALICE, run_id, drain_policy="immediate")
    cancelled = await env.engine.cancel(ALICE, run_id, "done with it")
    assert cancelled.status == "cancelled", "a paused run with nothing executing ends at once"
    assert (await env.engine.cancel(ALICE, run_id)).status == "cancelled"  # v1: answered as it is
    await _refused(env, run_id, env.engine.cancel(ALICE, run_id, again_refused=True), "run_terminal", "cancelled")


# --- races --------------------------------------------------------------------------------------------


async def test_racing_pauses_and_resumes_have_one_winner_each(env: Env) -> None:
    run_id = await env.create()
    await env.executing(run_id, "first")
    acts = (
        (lambda: env.engine.pause(ALICE, run_id, drain_policy="immediate"), "run.paused"),
        (lambda: env.engine.resume(ALICE, run_id), "run.resumed"),
    )
    for act, kind in acts:
        results = await asyncio.gather(*(act() for _ in range(10)), return_exceptions=True)
        won = [r for r in results if isinstance(r, RunRow)]
        lost = [r for r in results if isinstance(r, Conflict)]
        assert len(won) == 1 and len(lost) == 9, results
        assert {r.code for r in lost} == {"run_state_conflict"}
        assert Counter(d["type"] for d in await env.docs(run_id))[kind] == 1
    await env.engine.cancel(ALICE, run_id)
    await _consistent(env, run_id)


# --- cancel -----------------------------------------------------------------------------------------------


async def test_cancel_ends_a_paused_run_that_is_draining(env: Env) -> None:
    run_id = await env.create(delay_ms=5000)
    await env.executing(run_id, "first")
    await env.engine.pause(ALICE, run_id)  # drains: the delay would sleep on
    row = await env.engine.cancel(ALICE, run_id, "no")
    assert row.status in ("cancelling", "cancelled")
    row = await env.until(run_id, lambda r: r.status == "cancelled", "the cancel", timeout=3.0)
    row, docs = await _consistent(env, run_id)
    assert [d["type"] for d in docs][-3:] == ["run.paused", "node.cancelled", "run.cancelled"]
    assert "pausedAt" not in row.state


# --- restarts -----------------------------------------------------------------------------------------------


async def test_a_new_engine_leaves_a_paused_run_paused(env: Env) -> None:
    run_id = await env.create()
    await env.executing(run_id, "first")
    await env.engine.pause(ALICE, run_id, drain_policy="immediate")
    await env.settled(run_id)
    await env.engine.stop()
    before = await env.docs(run_id)
    second = _engine(env.store, env.peer)
    assert await second.start() == 1, "the paused run is unfinished, and looked at"
    try:
        env.engine = second
        await env.settled(run_id)
        row = await env.store.get_run(run_id)
        assert row is not None and row.status == "paused"
        assert await env.docs(run_id) == before, "the restart drove nothing"
        await second.resume(ALICE, run_id)
        await env.until(run_id, lambda r: r.status in TERMINAL, "the end", timeout=15)
        row, docs = await _consistent(env, run_id)
        assert row.status == "completed"
        assert _count(docs, "node.completed") == {"first": 1, "second": 1, "done": 1}
    finally:
        await second.stop()


async def test_a_new_engine_finishes_the_drain_then_stays_paused(env: Env) -> None:
    run_id = await env.create(delay_ms=600)
    await env.executing(run_id, "first")
    await env.engine.pause(ALICE, run_id)
    await env.engine.stop()  # mid-drain: the delay was still sleeping
    second = _engine(env.store, env.peer)
    await second.start()
    try:
        env.engine = second
        await env.until(run_id, lambda r: r.state["nodeStates"]["first"]["status"] == "completed", "the drain")
        await env.settled(run_id)
        row, docs = await _consistent(env, run_id)
        assert row.status == "paused" and "second" not in row.state["nodeStates"]
        assert _count(docs, "node.started") == {"first": 1}, "the drained node ran once"
    finally:
        await second.stop()
