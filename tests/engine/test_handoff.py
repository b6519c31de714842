"""The hand-off follower and the reverse projection, against a scripted peer (``tests/fake_peer.py``).

Two real hosts cover the wire (``tests/a2a/test_a2a_handoff.py``); here every peer state
and failure is steered directly: drift #3 (auth-required → waiting-input, subkind auth),
drift #4 (rejected → rejected_by_remote), a peer moving past a mirrored question, transport
errors retried then ``external_call_failed``, a final refusal (``egress_denied``), and a
restart that follows the recorded task without sending again.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from fake_peer import FakePeer
from workflow_docs import node, workflow_doc

from tether.auth.keys import ALL_SCOPES
from tether.engine.engine import Engine
from tether.engine.handoff.follower import HandoffSettings
from tether.engine.notifier import Notifier
from tether.engine.registry import WorkflowRegistry
from tether.engine.validation import load_workflow
from tether.store.base import RunRow
from tether.store.sqlite import SqliteStore
from tether.types import TERMINAL, Principal

ALICE = Principal("default", "key:alice", frozenset(ALL_SCOPES))
FAST = HandoffSettings(poll_min=0.02, poll_max=0.1, give_up_after=0.3)


def _registry(config: dict[str, Any] | None = None) -> WorkflowRegistry:
    registry = WorkflowRegistry()
    handoff = node(
        "peer",
        "vendor.tether.a2a-handoff",
        config={"agent": "https://peer.example", **(config or {})},
        inputs={"prompt": {"type": "static", "value": "hi"}},
    )
    registry.add([load_workflow(workflow_doc("hand", [handoff], []))], "test")
    return registry


class Host:
    def __init__(self, folder: Path, peer: FakePeer, config: dict[str, Any] | None = None) -> None:
        self.folder, self.peer, self.config = folder, peer, config
        self.store: SqliteStore | None = None
        self.engine: Engine | None = None

    async def start(self) -> Engine:
        self.store = SqliteStore(self.folder / "tether.db")
        await self.store.open()
        self.engine = Engine(self.store, _registry(self.config), Notifier(), peers=self.peer, handoffs=FAST)
        await self.engine.start()
        return self.engine

    async def stop(self) -> None:
        if self.engine is not None:
            await self.engine.stop()
        if self.store is not None:
            await self.store.close()
        self.engine = self.store = None


@pytest.fixture
async def host(tmp_path: Path) -> AsyncIterator[Host]:
    made = Host(tmp_path, FakePeer())
    yield made
    await made.stop()


async def _until(engine: Engine, run_id: str, predicate: Callable[[RunRow], bool]) -> RunRow:
    row = await engine.wait_for(run_id, predicate, 10.0)
    assert row is not None and predicate(row), f"run is {row and row.status}: {row and row.state.get('nodeStates')}"
    return row


async def test_rejected_fails_with_rejected_by_remote(host: Host) -> None:
    host.peer.next_state = "rejected"
    engine = await host.start()
    run_id = (await engine.create_run(ALICE, "hand", {})).run.run_id
    row = await _until(engine, run_id, lambda r: r.status in TERMINAL)
    assert row.status == "failed"
    assert row.state["nodeStates"]["peer"]["error"]["code"] == "rejected_by_remote"


@pytest.mark.parametrize("state", ["failed", "canceled"])
async def test_failed_and_canceled_fail_with_peer_terminal(host: Host, state: str) -> None:
    host.peer.next_state = state
    engine = await host.start()
    run_id = (await engine.create_run(ALICE, "hand", {})).run.run_id
    row = await _until(engine, run_id, lambda r: r.status in TERMINAL)
    assert row.state["nodeStates"]["peer"]["error"]["code"] == "a2a_peer_terminal"


async def test_auth_required_waits_for_input_with_subkind_auth_and_the_answer_goes_to_the_peer(host: Host) -> None:
    host.peer.next_state, host.peer.after_reply = "auth-required", "completed"
    engine = await host.start()
    run_id = (await engine.create_run(ALICE, "hand", {})).run.run_id
    row = await _until(engine, run_id, lambda r: r.status == "waiting-input")
    interrupt = row.state["interrupt"]
    assert interrupt is not None and interrupt["kind"] == "clarification"
    assert interrupt["data"]["contextType"] == "auth"
    await engine.resolve(ALICE, run_id, "peer", {"answers": {"auth": "token-ref"}})
    row = await _until(engine, run_id, lambda r: r.status in TERMINAL)
    assert row.status == "completed"
    [(_, message_id, value, metadata)] = host.peer.replies
    assert value == {"answers": {"auth": "token-ref"}} and metadata["openwop"]["decidedBy"] == "key:alice"
    assert message_id.endswith("-reply-1")
    # the send and the answer are two effects of the node in the ledger, each keyed on its message id
    assert host.store is not None
    ledger = [(e.seam, e.attempt, e.state, e.provider_key) for e in await host.store.list_effects(run_id)]
    [(send_key,)] = {(message_id,) for _, message_id, _ in host.peer.sends}
    assert ledger == [("a2a.handoff.send", 1, "completed", send_key), ("a2a.handoff.reply", 1, "completed", message_id)]


async def test_a_question_the_peer_moves_past_is_withdrawn(host: Host) -> None:
    host.peer.next_state = "input-required"
    engine = await host.start()
    run_id = (await engine.create_run(ALICE, "hand", {})).run.run_id
    await _until(engine, run_id, lambda r: r.status == "waiting-input")
    host.peer.set("task-1", "working")
    row = await _until(engine, run_id, lambda r: r.status == "running" and not r.state.get("interrupt"))
    assert row.state["nodeStates"]["peer"]["status"] == "running"
    host.peer.set("task-1", "completed")
    row = await _until(engine, run_id, lambda r: r.status in TERMINAL)
    assert row.status == "completed" and not host.peer.replies


async def test_transport_errors_are_retried_then_fail_external_call_failed(host: Host) -> None:
    host.peer.down = True
    engine = await host.start()
    run_id = (await engine.create_run(ALICE, "hand", {})).run.run_id
    row = await _until(engine, run_id, lambda r: r.status in TERMINAL)
    assert row.state["nodeStates"]["peer"]["error"]["code"] == "external_call_failed"
    assert host.store is not None
    attempts = await host.store.list_effects(run_id)
    assert len(attempts) >= 2 and {(a.effect_id, a.state) for a in attempts} == {(attempts[0].effect_id, "released")}


async def test_a_peer_that_comes_back_in_time_is_followed(host: Host) -> None:
    host.peer.down = True
    engine = await host.start()
    run_id = (await engine.create_run(ALICE, "hand", {})).run.run_id
    host.peer.down = False
    row = await _until(engine, run_id, lambda r: "taskId" in r.state["nodeStates"].get("peer", {}).get("handoff", {}))
    assert row.status == "running"
    host.peer.set("task-1", "completed")
    assert (await _until(engine, run_id, lambda r: r.status in TERMINAL)).status == "completed"


async def test_a_refused_address_fails_at_once_with_egress_denied(host: Host) -> None:
    host.peer.refuse = "egress_denied"
    engine = await host.start()
    run_id = (await engine.create_run(ALICE, "hand", {})).run.run_id
    row = await _until(engine, run_id, lambda r: r.status in TERMINAL)
    assert row.state["nodeStates"]["peer"]["error"]["code"] == "egress_denied"
    assert not host.peer.sends


async def test_a_restart_follows_the_recorded_task_and_never_sends_again(host: Host) -> None:
    engine = await host.start()
    run_id = (await engine.create_run(ALICE, "hand", {})).run.run_id
    await _until(engine, run_id, lambda r: "taskId" in r.state["nodeStates"].get("peer", {}).get("handoff", {}))
    await host.stop()
    host.peer.set("task-1", "completed", artifacts=[{"artifactId": "a", "parts": [{"kind": "text", "text": "ok"}]}])
    engine = await host.start()
    row = await _until(engine, run_id, lambda r: r.status in TERMINAL)
    assert row.status == "completed" and len(host.peer.sends) == 1
    [artifact] = row.state["nodeStates"]["peer"]["outputs"]["artifacts"]
    assert artifact["contentTrust"] == "untrusted" and artifact["source"]["taskId"] == "task-1"


async def test_cancelling_the_run_cancels_the_peer_task(host: Host) -> None:
    engine = await host.start()
    run_id = (await engine.create_run(ALICE, "hand", {})).run.run_id
    await _until(engine, run_id, lambda r: "taskId" in r.state["nodeStates"].get("peer", {}).get("handoff", {}))
    await engine.cancel(ALICE, run_id, "stop")
    await _until(engine, run_id, lambda r: r.status == "cancelled")
    for _ in range(200):
        if host.peer.cancels:
            break
        await engine.wait_for(run_id, lambda r: False, 0.02)
    assert host.peer.cancels == ["task-1"]


async def test_a_follower_that_fails_unexpectedly_is_started_again_without_a_restart(host: Host) -> None:
    engine = await host.start()
    run_id = (await engine.create_run(ALICE, "hand", {})).run.run_id
    await _until(engine, run_id, lambda r: "taskId" in r.state["nodeStates"].get("peer", {}).get("handoff", {}))
    reads = host.peer.get

    async def broken_once(ref: Any) -> Any:
        host.peer.get = reads  # the next read works again
        raise RuntimeError("a bug, or a store connection dropped mid-read")

    host.peer.get = broken_once  # type: ignore[method-assign]
    host.peer.set("task-1", "completed")
    row = await _until(engine, run_id, lambda r: r.status in TERMINAL)
    assert row.status == "completed" and len(host.peer.sends) == 1
