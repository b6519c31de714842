"""Pause across a SIGKILL: a paused run stays paused after its host is killed and started again, on
SQLite and on PostgreSQL, and no other host sharing the database takes it over; after a resume it
completes, with no node run twice.

Real ``tether serve`` processes (``HostProcess``), killed with SIGKILL. That nothing ran while the
run was paused is read from its log, which is ordered: between ``run.paused`` and ``run.resumed``
only the completion of the node that was executing (``drain-current-node``) may appear.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from backends import Hosts
from harness import HostProcess, create_key, wait_until
from v2_wire import project
from workflow_docs import node, workflow_doc

V2 = {"OpenWOP-Version": "2.0"}
LEASE = "2"
PAUSABLE = workflow_doc(
    "pausable",
    [
        node("first", "core.delay", inputs={"delayMs": {"type": "variable", "variableName": "delayMs"}}),
        node("second", "core.delay", config={"delayMs": 200}),
        node("done"),
    ],
    [
        {"id": "e1", "sourceNodeId": "first", "targetNodeId": "second"},
        {"id": "e2", "sourceNodeId": "second", "targetNodeId": "done"},
    ],
    [{"name": "delayMs", "type": "number", "defaultValue": 1000}],
)


@pytest.fixture
def workflows(tmp_path: Path) -> Path:
    folder = tmp_path / "workflows"
    folder.mkdir()
    (folder / "pausable.json").write_text(json.dumps(PAUSABLE))
    return folder


class Runs:
    """A host's runs as a v2 client controls them, and as v1 reads their log."""

    def __init__(self, host: HostProcess, key: str) -> None:
        self.host = host
        self.key = key

    def _client(self) -> httpx.Client:
        return self.host.http(self.key)  # follows the host across restarts

    def start(self, delay_ms: int) -> str:
        """A pausable run with its first delay sleeping; its bound id."""
        answer = self._client().post(
            "/runs", json={"workflowId": "pausable", "inputs": {"delayMs": delay_ms}}, headers=V2
        )
        assert answer.status_code == 201, answer.text
        run_id: str = answer.json()["runId"]
        wait_until(lambda: self.node(run_id, "first") == "running", what="the first delay")
        return run_id

    def control(self, run_id: str, verb: str, status: int, **body: Any) -> dict[str, Any]:
        answer = self._client().post(f"/runs/{project(run_id)}{verb}", json=body, headers=V2)
        assert answer.status_code == status, answer.text
        result: dict[str, Any] = answer.json()
        return result

    def run(self, run_id: str) -> dict[str, Any]:
        run: dict[str, Any] = self._client().get(f"/v1/runs/{run_id.partition('/')[2]}").json()
        return run

    def node(self, run_id: str, node_id: str) -> str | None:
        status: str | None = self.run(run_id)["nodeStates"].get(node_id, {}).get("status")
        return status

    def log(self, run_id: str) -> list[dict[str, Any]]:
        answer = self._client().get(f"/v1/runs/{run_id.partition('/')[2]}/events/poll", params={"timeout": 0})
        events: list[dict[str, Any]] = answer.json()["events"]
        return events

    def ended(self, run_id: str, timeout: float = 20.0) -> dict[str, Any]:
        return wait_until(
            lambda: (run := self.run(run_id))["status"] in ("completed", "failed", "cancelled") and run,
            timeout=timeout,
            what=f"{run_id} to end",
        )


def _paused_quietly(events: list[dict[str, Any]], drained: str | None) -> None:
    """Between the pause and the resume: at most the drained node's completion, nothing else."""
    types = [e["type"] for e in events]
    assert types.count("run.paused") == types.count("run.resumed") == 1
    between = events[types.index("run.paused") + 1 : types.index("run.resumed")]
    expected = [] if drained is None else [("node.completed", drained)]
    assert [(e["type"], e.get("nodeId")) for e in between] == expected, between


def _clean(events: list[dict[str, Any]], attempts: dict[str, int] | None = None) -> None:
    """Numbered 0..n, one run.completed at the end, each node completed once and started once per attempt."""
    assert [e["sequence"] for e in events] == list(range(len(events)))
    assert events[-1]["type"] == "run.completed"
    assert Counter(e["nodeId"] for e in events if e["type"] == "node.completed") == {"first": 1, "second": 1, "done": 1}
    started = Counter(e["nodeId"] for e in events if e["type"] == "node.started")
    assert started == {"first": 1, "second": 1, "done": 1, **(attempts or {})}, f"a node ran twice: {started}"
    assert not [e for e in events if e["type"] in ("node.failed", "node.cancelled")]


def test_a_paused_run_stays_paused_across_a_sigkill_and_completes_after_resume(
    start_process: Hosts[HostProcess], workflows: Path
) -> None:
    host = start_process("--workflows", str(workflows))
    assert host.dev_key
    runs = Runs(host, host.dev_key)
    drained = runs.start(delay_ms=2500)
    cut = runs.start(delay_ms=3000)
    runs.control(drained, ":pause", 202)  # drain-current-node: the delay sleeping finishes first
    runs.control(cut, ":pause", 202, drainPolicy="immediate")
    host.restart()  # SIGKILL, mid-drain
    assert runs.run(cut)["status"] == "paused"
    wait_until(lambda: runs.node(drained, "first") == "completed", what="the drain to finish after the restart")
    for run_id in (drained, cut):
        assert runs.run(run_id)["status"] == "paused"
    assert "first" not in runs.run(cut)["nodeStates"]
    host.restart()  # and again, paused at rest
    assert runs.run(drained)["status"] == runs.run(cut)["status"] == "paused"
    assert runs.control(drained, ":resume", 202)["status"] == "running"
    assert runs.control(cut, ":resume", 202)["status"] == "running"
    for run_id in (drained, cut):
        assert runs.ended(run_id)["status"] == "completed"
    drained_log, cut_log = runs.log(drained), runs.log(cut)
    _paused_quietly(drained_log, "first")
    _clean(drained_log)
    _paused_quietly(cut_log, None)
    _clean(cut_log, {"first": 2})  # the cut attempt, then a fresh one
    firsts = [e["payload"]["attempt"] for e in cut_log if e["type"] == "node.started" and e["nodeId"] == "first"]
    assert firsts == [0, 1]


@pytest.fixture
def pair(
    start_process: Hosts[HostProcess], shared_database: str, workflows: Path, tmp_path: Path
) -> Iterator[tuple[HostProcess, HostProcess, str]]:
    """Two hosts on one database with short leases, sharing their keys and host key."""
    args = (
        "--workflows",
        str(workflows),
        "--lease-seconds",
        LEASE,
        "--secret-key-file",
        str(tmp_path / "shared-host.key"),
    )
    one = start_process(*args, name="one", database_url=shared_database)
    two = start_process(*args, name="two", database_url=shared_database)
    key = one.dev_key or create_key(one.data_dir, "both")
    yield one, two, key


@pytest.mark.parametrize("backend", ["postgres"])  # only PostgreSQL: SQLite is one host's store by design
def test_another_host_does_not_take_a_paused_run_over(pair: tuple[HostProcess, HostProcess, str]) -> None:
    one, two, key = pair
    on_one, on_two = Runs(one, key), Runs(two, key)
    paused = on_one.start(delay_ms=1500)
    witness = on_one.start(delay_ms=1500)  # not paused: the other host takes it over, proving it looked
    on_one.control(paused, ":pause", 202)  # drain-current-node, the delay still sleeping on one
    one.kill()
    assert on_two.ended(witness)["status"] == "completed", "the other host adopted the run one left running"
    run = on_two.run(paused)
    assert run["status"] == "paused"
    assert run["nodeStates"]["first"]["status"] == "running", "nobody drove it: its drain waits for its host"
    assert [e["type"] for e in on_two.log(paused)][-1] == "run.paused"
    one.start()  # one's start drains what it left, and drives nothing more
    wait_until(lambda: on_one.node(paused, "first") == "completed", what="one to finish the drain")
    assert on_one.run(paused)["status"] == "paused"
    assert on_two.control(paused, ":resume", 202)["status"] == "running"
    assert on_two.ended(paused)["status"] == "completed"
    log = on_two.log(paused)
    _paused_quietly(log, "first")
    _clean(log)
