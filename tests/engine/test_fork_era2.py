"""A fork of a run written before Tether stamped eras (era 2, v1 vocabulary, no owner or subject), on the real store.

``v2-fork-a-v1-run``'s obligation, below the HTTP layer: the era-2 run is stored as an older
build wrote it (through the store's own commit), forked in ``replay`` mode from its terminal
event, and both logs are read at major 2 through the one translator every v2 reader uses.
The fork's prefix must read exactly as its parent's (type, sequence, payload), with the
legacy subject on ``run.started`` of both; then the fork ends again by itself. The stored
parent is never rewritten. And a replay of a run whose workflow changed since reports
where it first differs (``replay.diverged``), once, and goes on.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from workflow_docs import node, workflow_doc

from tether.auth.keys import ALL_SCOPES
from tether.engine.engine import Engine
from tether.engine.notifier import Notifier
from tether.engine.registry import WorkflowRegistry, bundled_workflows
from tether.engine.state import fold
from tether.engine.validation import load_workflow
from tether.ids import new_id
from tether.openwop.v2.eventlog import v2_events
from tether.store.base import Commit, EventRow, RunRow
from tether.store.sqlite import SqliteStore
from tether.types import Principal

ALICE = Principal("default", "key:alice", frozenset(ALL_SCOPES))
AT = "2026-01-02T03:04:05.000Z"
Doc = dict[str, Any]


def _legacy_log(run_id: str) -> list[Doc]:
    """An ``echo`` run as a v1-only build logged it: no owner, no subject, ``engineVersion`` a string."""
    bodies: list[tuple[str, Doc, str | None]] = [
        (
            "run.started",
            {"workflowId": "echo", "inputs": {"prompt": "old"}, "transport": "rest", "engineVersion": "0.1.0"},
            None,
        ),
        ("node.started", {"nodeId": "echo", "typeId": "core.identity", "attempt": 0}, "echo"),
        ("node.completed", {"nodeId": "echo", "outputs": {"payload": "old"}, "durationMs": 1}, "echo"),
        ("run.completed", {"outputs": {"payload": "old"}, "durationMs": 3}, None),
    ]
    docs = []
    for sequence, (kind, payload, node_id) in enumerate(bodies):
        doc: Doc = {
            "eventId": new_id("evt_"),
            "runId": run_id,
            "type": kind,
            "payload": payload,
            "timestamp": AT,
            "sequence": sequence,
            "schemaVersion": 1,
            "engineVersion": "0.1.0",
        }
        if node_id is not None:
            doc["nodeId"] = node_id
        docs.append(doc)
    return docs


@pytest.fixture
async def engine(tmp_path: Path) -> AsyncIterator[Engine]:
    store = SqliteStore(tmp_path / "tether.db")
    await store.open()
    registry = WorkflowRegistry()
    registry.add(bundled_workflows(), "bundled")
    running = Engine(store, registry, Notifier())
    await running.start()
    try:
        yield running
    finally:
        await running.stop()
        await store.close()


def _observable(event: Doc) -> tuple[str, int, bytes]:
    return event["type"], event["sequence"], orjson.dumps(event["payload"], option=orjson.OPT_SORT_KEYS)


async def _docs(engine: Engine, run_id: str) -> list[Doc]:
    return [e.doc for e in await engine.store.read_events(run_id, -1, 1000)]


async def test_a_replay_fork_of_an_era_2_run_inherits_its_translated_prefix(engine: Engine) -> None:
    parent_id = new_id("run_")
    legacy = _legacy_log(parent_id)
    state = fold(parent_id, "echo", AT, legacy)
    row = RunRow(parent_id, "default", "echo", state["status"], len(legacy) - 1, state, AT, AT)
    rows = [EventRow(parent_id, d["sequence"], orjson.dumps(d)) for d in legacy]
    await engine.store.commit(Commit(run=row, events=rows, expected_sequence=None))
    stored = [e.doc_json for e in await engine.store.read_events(parent_id, -1, 1000)]

    last = legacy[-1]["sequence"]
    fork_id = new_id("run_")
    created = await engine.fork(ALICE, parent_id, "replay", last, run_id=fork_id)
    assert created.run.state["eventLogSchemaVersion"] == 3, "a fork is a run this host makes now: era 3"
    done = await engine.wait_for(fork_id, lambda r: r.is_terminal, 10)
    assert done is not None and done.status == "completed", done

    parent = v2_events(await _docs(engine, parent_id), "default")
    fork = v2_events(await _docs(engine, fork_id), "default")
    assert [_observable(e) for e in fork[:last]] == [_observable(e) for e in parent[:last]]
    assert fork[last]["type"] == "run.completed" and len(fork) == last + 1
    for started in (parent[0], fork[0]):
        assert started["payload"]["owner"]["subject"]["issuer"] == "urn:openwop:legacy", started
    again = [e.doc_json for e in await engine.store.read_events(parent_id, -1, 1000)]
    assert again == stored, "the parent is as it was"


async def test_a_replay_that_writes_what_its_source_did_not_says_so_once_and_goes_on(engine: Engine) -> None:
    """The workflow changed since the source ran: the replay reports where it first differs and still completes."""
    steps = [node("a", "core.noop"), node("b", "vendor.tether.template", config={"outputs": {"said": "before"}})]
    edges = [{"id": "e1", "sourceNodeId": "a", "targetNodeId": "b"}]
    engine.registry.add([load_workflow(workflow_doc("changing", steps, edges))], "test")
    source = (await engine.create_run(ALICE, "changing", {})).run.run_id
    assert (
        done := await engine.wait_for(source, lambda r: r.is_terminal, 10)
    ) is not None and done.status == "completed"
    steps[1]["config"] = {"outputs": {"said": "after"}}
    engine.registry.add([load_workflow(workflow_doc("changing", steps, edges))], "test")

    fork_id = new_id("run_")
    await engine.fork(ALICE, source, "replay", 0, run_id=fork_id)
    replayed = await engine.wait_for(fork_id, lambda r: r.is_terminal, 10)
    assert replayed is not None and replayed.status == "completed", replayed
    theirs, ours = await _docs(engine, source), await _docs(engine, fork_id)
    diverged = [d for d in ours if d["type"] == "replay.diverged"]
    assert len(diverged) == 1, ours
    point = diverged[0]["payload"]
    changed = next(d for d in theirs if d["type"] == "node.completed" and d["nodeId"] == "b")
    assert point["atSequence"] == changed["sequence"] and point["originalEventId"] == changed["eventId"], point
    assert point["sourceRunId"] == source and point["divergenceKind"] == "output"
    assert ours[changed["sequence"]] == diverged[0], "reported just before the event that differs"
    assert ours[changed["sequence"] + 1]["payload"]["outputs"] == {"said": "after"}


async def test_an_era_2_run_of_a_workflow_not_loaded_here_still_forks_with_its_translated_prefix(
    engine: Engine,
) -> None:
    """The conformance suite's seed shape: renamed v1 types, a workflow this host does not have. The fork is
    made with its history (the obligation), then fails at its first step as any run of an unknown workflow."""
    parent_id = new_id("run_")
    bodies: list[tuple[str, Doc]] = [
        ("run.started", {"workflowId": "not-here"}),
        ("agent.toolCalled", {"agentId": "agent", "toolName": "echo", "callId": "call-0001"}),
        ("agent.toolReturned", {"agentId": "agent", "toolName": "echo", "callId": "call-0001", "status": "ok"}),
        ("run.completed", {"durationMs": 3000}),
    ]
    legacy = [
        {
            "eventId": new_id("evt_"),
            "runId": parent_id,
            "type": kind,
            "payload": payload,
            "timestamp": AT,
            "sequence": i,
        }
        for i, (kind, payload) in enumerate(bodies)
    ]
    state = fold(parent_id, "not-here", AT, legacy)
    row = RunRow(parent_id, "default", "not-here", "completed", 3, state, AT, AT)
    rows = [EventRow(parent_id, d["sequence"], orjson.dumps(d)) for d in legacy]
    await engine.store.commit(Commit(run=row, events=rows, expected_sequence=None))

    fork_id = new_id("run_")
    await engine.fork(ALICE, parent_id, "replay", 3, run_id=fork_id)
    ended = await engine.wait_for(fork_id, lambda r: r.is_terminal, 10)
    assert ended is not None and ended.status == "failed", ended
    parent = v2_events(await _docs(engine, parent_id), "default")
    fork = v2_events(await _docs(engine, fork_id), "default")
    assert [_observable(e) for e in fork[:3]] == [_observable(e) for e in parent[:3]]
    assert [e["type"] for e in fork[:3]] == ["run.started", "agent.tool-called", "agent.tool-returned"]
    assert fork[0]["payload"]["owner"]["subject"]["issuer"] == "urn:openwop:legacy"
