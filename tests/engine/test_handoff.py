"""The hand-off follower and the reverse projection, against a scripted peer (``tests/fake_peer.py``).

Two real hosts cover the wire (``tests/a2a/test_a2a_handoff.py``); here every peer state
and failure is steered directly: drift #3 (auth-required → waiting-input, subkind auth),
drift #4 (rejected → rejected_by_remote), a peer moving past a mirrored question, transport
errors retried then ``external_call_failed``, a final refusal (``egress_denied``), and a
restart that follows the recorded task without sending again; the version negotiation
under the floor, each outcome recorded once as both majors read it (``negotiation.decided`` at v2).
"""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from fake_peer import FakePeer
from schemas import openwop_validator
from workflow_docs import node, workflow_doc

from tether.auth.keys import ALL_SCOPES
from tether.engine.engine import Engine
from tether.engine.handoff.follower import HandoffSettings
from tether.engine.handoff.negotiation import decide, peer_digest
from tether.engine.notifier import Notifier
from tether.engine.registry import WorkflowRegistry
from tether.engine.validation import load_workflow
from tether.openwop.v2.eventlog import v2_events
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


# version negotiation -----------------------------------------------------------------------

_ORIGIN_DIGEST = hashlib.sha256(b"https://peer.example").hexdigest()


def _negotiated(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [d for d in docs if d["type"] == "log.appended" and d["payload"].get("kind") == "a2a.handoff.negotiated"]


async def _events(host: Host, run_id: str) -> list[dict[str, Any]]:
    assert host.store is not None
    return [e.doc for e in await host.store.read_events(run_id)]


def _v2_decided(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in v2_events(docs, ALICE.tenant) if e["type"] == "negotiation.decided"]


@pytest.fixture
async def stopped(tmp_path: Path) -> AsyncIterator[Any]:
    """Makes the test's host (one data directory), stopped at the end."""
    made: list[Host] = []

    def make(peer: FakePeer, config: dict[str, Any] | None = None) -> Host:
        made.append(Host(tmp_path, peer, config))
        return made[-1]

    yield make
    for host in made:
        await host.stop()


async def test_a_1_0_peer_is_accepted_and_the_decision_is_recorded_once_before_the_send(stopped: Any) -> None:
    host = stopped(FakePeer(next_state="completed"))
    engine = await host.start()
    run_id = (await engine.create_run(ALICE, "hand", {})).run.run_id
    row = await _until(engine, run_id, lambda r: r.status in TERMINAL)
    assert row.status == "completed" and len(host.peer.sends) == 1
    docs = await _events(host, run_id)
    [line] = _negotiated(docs)
    send_at = next(d["sequence"] for d in docs if d["payload"].get("kind") == "a2a.handoff.accepted")
    assert line["sequence"] < send_at, "decided before the peer took the task"
    openwop_validator("run-event-payloads#/$defs/logAppended").validate(line["payload"])
    [decided] = _v2_decided(docs)
    openwop_validator("v2/run-event-payloads#/$defs/negotiationDecided").validate(decided["payload"])
    assert decided["nodeId"] == "peer"
    assert {k: v for k, v in decided["payload"].items() if k != "at"} == {
        "protocol": "a2a",
        "outcome": "accepted",
        "version": "1.0",
        "floor": "1.0",
        "peerDigest": _ORIGIN_DIGEST,
        "reason": "ok",
    }
    assert "peer.example" not in str(decided["payload"]), "content-free: the peer only as a digest"


async def test_a_0_3_only_peer_under_the_default_floor_fails_the_node_and_is_sent_nothing(stopped: Any) -> None:
    host = stopped(FakePeer(offers=("0.3",)))
    engine = await host.start()
    run_id = (await engine.create_run(ALICE, "hand", {})).run.run_id
    row = await _until(engine, run_id, lambda r: r.status in TERMINAL)
    assert row.status == "failed" and host.peer.sends == []
    error = row.state["nodeStates"]["peer"]["error"]
    assert error["code"] == "interop_version_unsupported"
    assert "--a2a-minimum-version 0.3" in error["message"] and "nothing was sent" in error["message"]
    [decided] = _v2_decided(await _events(host, run_id))
    openwop_validator("v2/run-event-payloads#/$defs/negotiationDecided").validate(decided["payload"])
    assert decided["payload"]["outcome"] == "refused" and decided["payload"]["reason"] == "below-floor"
    assert decided["payload"]["floor"] == "1.0" and "version" not in decided["payload"]


async def test_a_node_pinned_to_0_3_under_the_default_floor_is_refused_without_reading_the_card(stopped: Any) -> None:
    host = stopped(FakePeer(offers=("0.3", "1.0")), {"version": "0.3"})
    engine = await host.start()
    run_id = (await engine.create_run(ALICE, "hand", {})).run.run_id
    row = await _until(engine, run_id, lambda r: r.status in TERMINAL)
    assert row.state["nodeStates"]["peer"]["error"]["code"] == "interop_version_unsupported"
    assert host.peer.sends == []
    [decided] = _v2_decided(await _events(host, run_id))
    assert decided["payload"]["reason"] == "below-floor"


async def test_under_a_0_3_floor_auto_downgrades_to_a_0_3_only_peer_and_says_so(stopped: Any) -> None:
    host = stopped(FakePeer(offers=("0.3",), floor="0.3", next_state="completed"))
    engine = await host.start()
    run_id = (await engine.create_run(ALICE, "hand", {})).run.run_id
    row = await _until(engine, run_id, lambda r: r.status in TERMINAL)
    assert row.status == "completed" and len(host.peer.sends) == 1
    docs = await _events(host, run_id)
    [line] = _negotiated(docs)
    assert line["payload"]["downgraded"] is True and line["payload"]["offered"] == ["0.3"]
    [decided] = _v2_decided(docs)
    assert decided["payload"]["outcome"] == "accepted" and decided["payload"]["version"] == "0.3"
    assert decided["payload"]["floor"] == "0.3"


async def test_a_restart_after_the_decision_does_not_decide_again(stopped: Any) -> None:
    peer = FakePeer(down=True)  # the card was read; the send keeps failing until the host restarts
    host = stopped(peer, {"timeout": 60_000})  # within the node's deadline: retried, never given up
    engine = await host.start()
    run_id = (await engine.create_run(ALICE, "hand", {})).run.run_id
    await _until(engine, run_id, lambda r: "negotiated" in r.state["nodeStates"].get("peer", {}).get("handoff", {}))
    await host.stop()
    peer.down, peer.next_state = False, "completed"
    engine = await host.start()
    row = await _until(engine, run_id, lambda r: r.status in TERMINAL)
    assert row.status == "completed" and len(peer.sends) == 1
    assert len(peer.negotiations) == 1, "the recorded decision is not made again"
    assert len(_negotiated(await _events(host, run_id))) == 1


def test_the_peer_digest_is_of_the_origin_only() -> None:
    assert peer_digest("https://Peer.Example:443/a/b?x=1") == _ORIGIN_DIGEST
    assert peer_digest("http://127.0.0.1:8123/x") == hashlib.sha256(b"http://127.0.0.1:8123").hexdigest()


@pytest.mark.parametrize(
    ("wanted", "offered", "floor", "outcome", "version", "reason"),
    [
        ("auto", ("1.0", "0.3"), "1.0", "accepted", "1.0", "ok"),
        ("auto", ("1.0", "0.3"), "0.3", "accepted", "1.0", "ok"),
        ("auto", ("0.3",), "0.3", "accepted", "0.3", "ok"),
        ("auto", ("0.3",), "1.0", "refused", None, "below-floor"),
        ("auto", (), "1.0", "refused", None, "unsupported"),
        ("1.0", ("0.3",), "0.3", "refused", None, "unsupported"),
        ("0.3", ("0.3",), "0.3", "accepted", "0.3", "ok"),
        ("0.3", ("0.3",), "1.0", "refused", None, "below-floor"),
    ],
)
def test_decide(
    wanted: str, offered: tuple[str, ...], floor: str, outcome: str, version: str | None, reason: str
) -> None:
    decision = decide("https://peer.example", wanted, offered, floor)
    assert (decision.outcome, decision.version, decision.reason) == (outcome, version, reason)
    assert decision.downgraded == (wanted == "auto" and version == "0.3")


@pytest.mark.parametrize("from_seq", [0, 3])
async def test_a_replay_fork_copies_the_decision_and_negotiates_nothing(stopped: Any, from_seq: int) -> None:
    host = stopped(FakePeer(next_state="completed"))
    engine = await host.start()
    source = (await engine.create_run(ALICE, "hand", {})).run.run_id
    await _until(engine, source, lambda r: r.status == "completed")
    fork = (await engine.fork(ALICE, source, "replay", from_seq, run_id=f"run_fork{from_seq}")).run.run_id
    row = await _until(engine, fork, lambda r: r.status in TERMINAL)
    assert row.status == "completed"
    assert len(host.peer.negotiations) == 1 and len(host.peer.sends) == 1, "the fork asked the peer nothing"
    [copied] = _negotiated(await _events(host, fork))
    [original] = _negotiated(await _events(host, source))
    assert copied["payload"] == original["payload"]
