"""A replay of a run that handed a task to another Tether host re-uses the peer's recorded answer and sends it nothing.

RFC 0100 §5's replay rule with two real hosts (A hands off, B is the peer; see
``handoff_hosts``), on each store for A: a replay fork of A's finished run, from 0 and from
inside the hand-off (its peer task recorded, its outcome not yet), completes with the
source's result while B's runs and B's task stay exactly as they were; a replay of a run
whose hand-off never finished (it was cancelled) fails that node closed with
``replay_source_missing`` instead of reaching B.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx
import pytest
from handoff_hosts import Doc, Pair, b_runs, events, run, start, until_status
from harness import wait_until
from pg import fresh_database
from workflow_docs import node, workflow_doc

V2 = {"OpenWOP-Version": "2.0"}


def _workflows(b_url: str) -> list[Doc]:
    prompt = {"prompt": {"type": "variable", "variableName": "prompt"}}
    variables = [{"name": "prompt", "type": "string", "required": False}]
    handoff = "vendor.tether.a2a-handoff"
    return [
        workflow_doc(
            f"hand-{skill}",
            [node("peer", handoff, config={"agent": b_url, "skill": skill}, inputs=prompt), node("after")],
            [{"id": "e1", "sourceNodeId": "peer", "targetNodeId": "after"}],
            variables,
        )
        for skill in ("echo", "approval-gated")
    ]


@pytest.fixture(params=["sqlite", "postgres"])
def pair(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Pair]:
    with ExitStack() as stack:
        database = stack.enter_context(fresh_database()) if request.param == "postgres" else None
        hosts = Pair(tmp_path, _workflows, a_database=database)
        stack.callback(hosts.close)
        yield hosts


def _fork(http: httpx.Client, run_id: str, **body: Any) -> str:
    answer = http.post(f"/runs/default~2F{run_id}:fork", json=body, headers=V2)
    assert answer.status_code == 201, answer.text
    bound: str = answer.json()["runId"]
    return bound.partition("/")[2]


def _b_state(pair: Pair) -> list[tuple[str, str, int]]:
    """Each of B's runs: id, status and how many events it has (a message or a read adds none; a send does)."""
    with pair.b_http() as http:
        return sorted((r["runId"], r["status"], len(events(http, r["runId"]))) for r in b_runs(pair))


def test_a_replay_fork_completes_with_the_peers_recorded_answer_and_sends_the_peer_nothing(pair: Pair) -> None:
    with pair.a_http() as a:
        source = start(a, "hand-echo", {"prompt": "hello from A"})
        done = until_status(a, source, "completed")
        b_before = _b_state(pair)
        assert len(b_before) == 1 and b_before[0][1] == "completed", b_before
        recorded = done["nodeStates"]["peer"]

        accepted = next(
            e["sequence"]
            for e in events(a, source)
            if e["type"] == "log.appended" and e["payload"].get("kind") == "a2a.handoff.accepted"
        )
        forks = [_fork(a, source, mode="replay"), _fork(a, source, mode="replay", fromSeq=accepted + 1)]
        for fork in forks:
            replayed = until_status(a, fork, "completed", "failed")
            assert replayed["status"] == "completed", replayed
            peer = replayed["nodeStates"]["peer"]
            assert peer["outputs"] == recorded["outputs"], "the peer's cached answer, as the source recorded it"
            assert peer["handoff"]["taskId"] == recorded["handoff"]["taskId"], "the same peer task, not a new one"
            assert replayed["outputs"] == done["outputs"]
        assert _b_state(pair) == b_before, "B received nothing: no new task, no new message on its task"


def test_a_replay_of_a_hand_off_the_source_never_finished_fails_closed_without_reaching_the_peer(pair: Pair) -> None:
    with pair.a_http() as a:
        source = start(a, "hand-approval-gated", {"prompt": "park it"})
        wait_until(lambda: len(b_runs(pair)) == 1 and b_runs(pair)[0]["status"] == "waiting-approval", what="B waits")
        cancelled = a.post(f"/v1/runs/{source}/cancel", json={})
        assert cancelled.status_code == 200, cancelled.text
        until_status(a, source, "cancelled")
        wait_until(lambda: b_runs(pair)[0]["status"] == "cancelled", what="B's task cancelled by A")
        b_before = _b_state(pair)
        fork = _fork(a, source, mode="replay")
        failed = until_status(a, fork, "failed")
        assert failed["nodeStates"]["peer"]["error"]["code"] == "replay_source_missing", failed
        assert "taskId" not in failed["nodeStates"]["peer"].get("handoff", {}), "nothing was sent"
        assert run(a, source)["status"] == "cancelled"
        assert _b_state(pair) == b_before, "B received nothing"
