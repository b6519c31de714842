"""Files across a hand-off, in the engine: what the follower sends, and what it keeps of the peer's answer.

A scripted peer (``tests/fake_peer.py``) stands for the other agent; two real hosts cover
the wire (``tests/a2a/test_a2a_handoff_files.py``). Sent: a file of the run goes with its
bytes, read from the run's own blobs at the send (a blob the run does not hold is never
sent), a URI as the URI. Kept: a file the peer answers with is a blob of the run, committed
with the event that records it, which holds only the reference, marked untrusted.
"""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from fake_peer import FakePeer
from workflow_docs import node, workflow_doc

from tether.auth.keys import ALL_SCOPES
from tether.engine.engine import Engine
from tether.engine.handoff.follower import HandoffSettings
from tether.engine.handoff.peer import PeerFile
from tether.engine.notifier import Notifier
from tether.engine.registry import WorkflowRegistry
from tether.engine.validation import load_workflow
from tether.files import Blob, stored_part
from tether.store.base import RunRow
from tether.store.sqlite import SqliteStore
from tether.types import TERMINAL, Principal

ALICE = Principal("default", "key:alice", frozenset(ALL_SCOPES))
FAST = HandoffSettings(poll_min=0.02, poll_max=0.1, give_up_after=0.3)
REPORT = Blob.of(bytes(range(256)) * 64)
ANSWER = Blob.of(b"%PDF-1.7 the signed report" * 100)
URI = "https://files.example.com/q3.pdf"


def _registry() -> WorkflowRegistry:
    handoff = node(
        "peer",
        "vendor.tether.a2a-handoff",
        config={"agent": "https://peer.example"},
        inputs={
            "prompt": {"type": "static", "value": "publish it"},
            "files": {"type": "variable", "variableName": "doc"},
        },
    )
    registry = WorkflowRegistry()
    variables = [{"name": "doc", "type": "object", "required": False}]
    registry.add([load_workflow(workflow_doc("hand", [handoff], [], variables))], "test")
    return registry


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SqliteStore]:
    opened = SqliteStore(tmp_path / "tether.db")
    await opened.open()
    yield opened
    await opened.close()


@pytest.fixture
async def peer() -> FakePeer:
    return FakePeer()


@pytest.fixture
async def engine(store: SqliteStore, peer: FakePeer) -> AsyncIterator[Engine]:
    started = Engine(store, _registry(), Notifier(), peers=peer, handoffs=FAST)
    await started.start()
    yield started
    await started.stop()


async def _until(engine: Engine, run_id: str, predicate: Callable[[RunRow], bool]) -> RunRow:
    row = await engine.wait_for(run_id, predicate, 10.0)
    assert row is not None and predicate(row), f"run is {row and row.status}: {row and row.state.get('nodeStates')}"
    return row


def _message(*parts: dict[str, Any]) -> dict[str, Any]:
    """A message as a run holds it (its files by reference), as ``variables.message`` is."""
    return {"messageId": "m-1", "parts": [{"kind": "text", "text": "the Q3 report"}, *parts]}


async def _logged(store: SqliteStore, run_id: str) -> str:
    """The run's events as JSON: what must hold references and no bytes."""
    return json.dumps([row.doc for row in await store.read_events(run_id)])


def _encoded(blob: Blob) -> str:
    return base64.b64encode(blob.data).decode()


async def test_the_runs_file_goes_with_its_bytes_and_a_uri_as_the_uri(engine: Engine, peer: FakePeer) -> None:
    doc = _message(
        stored_part(REPORT, "q3.bin", "application/octet-stream"),
        {"kind": "file", "file": {"uri": URI, "name": "signed.pdf"}},
    )
    run_id = (await engine.create_run(ALICE, "hand", {"doc": doc}, blobs=[REPORT])).run.run_id
    await _until(engine, run_id, lambda r: "taskId" in r.state["nodeStates"].get("peer", {}).get("handoff", {}))
    [(call, _, _)] = peer.sends
    assert call.text == "publish it"  # the message's text part is not sent again as a file
    assert call.files == (
        PeerFile(blob=REPORT.digest, name="q3.bin", media_type="application/octet-stream", data=REPORT.data),
        PeerFile(uri=URI, name="signed.pdf"),
    )


async def test_a_file_the_run_does_not_hold_is_never_sent(engine: Engine, peer: FakePeer) -> None:
    """A reference typed into the run's data names someone else's blob: the node fails and nothing goes out."""
    run_id = (await engine.create_run(ALICE, "hand", {"doc": _message(stored_part(REPORT))})).run.run_id
    row = await _until(engine, run_id, lambda r: r.status in TERMINAL)
    error = row.state["nodeStates"]["peer"]["error"]
    assert error["code"] == "file_not_found" and REPORT.digest in error["message"], error
    assert not peer.sends


async def test_a_file_with_its_bytes_inline_fails_the_node_with_what_to_give_instead(
    engine: Engine, peer: FakePeer
) -> None:
    inline = {"kind": "file", "file": {"bytes": "aGVsbG8=", "name": "hello.txt"}}
    run_id = (await engine.create_run(ALICE, "hand", {"doc": {"parts": [inline]}})).run.run_id
    row = await _until(engine, run_id, lambda r: r.status in TERMINAL)
    error = row.state["nodeStates"]["peer"]["error"]
    assert error["code"] == "node_execution_failed" and "files.0 carries its bytes inline" in error["message"]
    assert not peer.sends


async def test_the_peers_file_is_a_blob_of_the_run_and_its_answer_marked_untrusted(
    engine: Engine, peer: FakePeer, store: SqliteStore
) -> None:
    run_id = (await engine.create_run(ALICE, "hand", {"doc": _message()})).run.run_id
    await _until(engine, run_id, lambda r: "taskId" in r.state["nodeStates"].get("peer", {}).get("handoff", {}))
    assert await store.read_blobs(run_id, [ANSWER.digest]) == {}
    parts = [{"kind": "text", "text": "signed"}, stored_part(ANSWER, "signed.pdf", "application/pdf")]
    peer.set("task-1", "completed", artifacts=[{"artifactId": "a", "parts": parts}], blobs=[ANSWER])
    row = await _until(engine, run_id, lambda r: r.status in TERMINAL)
    assert row.status == "completed"
    outputs = row.state["nodeStates"]["peer"]["outputs"]
    source = {"agent": "https://peer.example", "taskId": "task-1"}
    marked = {"contentTrust": "untrusted", "source": source}
    assert outputs["message"] == {"parts": [{**part, "metadata": marked} for part in parts]}
    assert outputs["artifacts"][0]["parts"] == parts and outputs["artifacts"][0]["contentTrust"] == "untrusted"
    assert await store.read_blobs(run_id, [ANSWER.digest]) == {ANSWER.digest: ANSWER.data}
    logged = await _logged(store, run_id)
    assert ANSWER.digest in logged and _encoded(ANSWER) not in logged


async def test_a_file_the_peer_asks_with_is_kept_with_the_mirrored_question(
    engine: Engine, peer: FakePeer, store: SqliteStore
) -> None:
    run_id = (await engine.create_run(ALICE, "hand", {"doc": _message()})).run.run_id
    await _until(engine, run_id, lambda r: "taskId" in r.state["nodeStates"].get("peer", {}).get("handoff", {}))
    draft = stored_part(ANSWER, "draft.pdf", "application/pdf")
    peer.set("task-1", "input-required", message="Is this draft right?", files=[draft], blobs=[ANSWER])
    row = await _until(engine, run_id, lambda r: r.status == "waiting-input")
    interrupt = row.state["interrupt"]
    assert interrupt is not None
    [kept] = interrupt["data"]["files"]
    assert kept["file"] == draft["file"] and kept["metadata"]["contentTrust"] == "untrusted"
    assert await store.read_blobs(run_id, [ANSWER.digest]) == {ANSWER.digest: ANSWER.data}
    assert _encoded(ANSWER) not in await _logged(store, run_id)
