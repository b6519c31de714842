"""Seeding the conformance fixtures, honest advertisement, expiring tokens, SIGTERM."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import httpx
import pytest
from backends import Hosts
from harness import Host, HostProcess, wait_until
from inproc import InProcessHost
from schemas import fixtures_dir

RUNNABLE = {
    "conformance-approval-timeout",
    "conformance-approval-timeout-approve",
    "conformance-approval-reject-routed",
    "conformance-subworkflow-input-mapping",
    "conformance-dispatch-input-mapping",
    "conformance-dispatch-output-mapping",
    "conformance-dispatch-cross-worker-handoff",
}


def test_seeded_fixtures_are_stored_once_and_listed_honestly(start_process: Hosts[HostProcess]) -> None:
    host = start_process("--seed-fixtures", str(fixtures_dir()))
    key = host.dev_key
    advertised = set(host.http().get("/.well-known/openwop").json()["fixtures"])
    assert advertised == RUNNABLE, "cycles (loopback) and agent-pinned fixtures cannot really run here"
    verbatim = json.loads((fixtures_dir() / "conformance-approval-reject-routed.json").read_text())
    assert host.http(key).get("/v1/workflows/conformance-approval-reject-routed").json() == verbatim
    loopback = host.http(key).post("/v1/runs", json={"workflowId": "conformance-approval-reject-loopback"})
    assert loopback.status_code == 400 and loopback.json()["error"] == "capability_not_provided"
    assert "cycle" in loopback.json()["message"]

    host.kill()
    host.args = []  # no --seed-fixtures: what was seeded is still there
    host.start()
    assert set(host.http().get("/.well-known/openwop").json()["fixtures"]) == RUNNABLE
    run_id = host.http(key).post("/v1/runs", json={"workflowId": "conformance-approval-reject-routed"}).json()["runId"]
    wait_until(lambda: host.http(key).get(f"/v1/runs/{run_id}").json()["status"] == "waiting-approval", what="the gate")
    host.http(key).post(f"/v1/runs/{run_id}/interrupts/gate", json={"resumeValue": {"action": "reject"}})
    wait_until(
        lambda: host.http(key).get(f"/v1/runs/{run_id}").json()["status"] == "completed",
        what="reject routed to on-reject",
    )
    states = host.http(key).get(f"/v1/runs/{run_id}").json()["nodeStates"]
    assert states["on-reject"]["status"] == "completed" and states["on-accept"]["status"] == "skipped"


def test_interrupt_token_expires_with_its_gate(start_host: Hosts[InProcessHost]) -> None:
    host = start_host("--seed-fixtures", str(fixtures_dir()))
    key = host.dev_key
    run_id = host.http(key).post("/v1/runs", json={"workflowId": "conformance-approval-timeout"}).json()["runId"]
    token = wait_until(
        lambda: host.http(key).get(f"/v1/runs/{run_id}").json().get("interrupt", {}).get("interruptToken"),
        what="a token",
    )
    wait_until(
        lambda: host.http(key).get(f"/v1/runs/{run_id}").json()["status"] == "failed", what="the gate to time out"
    )
    late = host.http().post(f"/v1/interrupts/{token}", json={"resumeValue": {"action": "accept"}})
    assert late.status_code == 410 and late.json()["error"] == "interrupt_expired"
    forged = host.http().get(f"/v1/interrupts/{token[:-4]}AAAA")
    assert forged.status_code == 400 and forged.json()["error"] == "approval_token_invalid"


@pytest.mark.process  # SIGTERM and the exit code
def test_sigterm_is_graceful_and_nothing_is_lost(host: HostProcess, key: str) -> None:
    run_id = (
        host.http(key).post("/v1/runs", json={"workflowId": "multi-step", "inputs": {"prompt": "p"}}).json()["runId"]
    )
    gated = (
        host.http(key)
        .post("/v1/runs", json={"workflowId": "approval-gated", "inputs": {"prompt": "p"}})
        .json()["runId"]
    )
    wait_until(lambda: host.http(key).get(f"/v1/runs/{gated}").json()["status"] == "waiting-approval", what="the gate")
    assert host.stop() == 0
    host.start()
    wait_until(lambda: host.http(key).get(f"/v1/runs/{run_id}").json()["status"] == "completed", what="the delayed run")
    assert host.http(key).get(f"/v1/runs/{gated}").json()["status"] == "waiting-approval"


def test_workflows_dir_adds_workflows(start_host: Hosts[InProcessHost], tmp_path: Path) -> None:
    folder = tmp_path / "mine"
    folder.mkdir()
    definition = json.loads((Path(__file__).parents[2] / "src/tether/workflows/echo.json").read_text())
    definition["id"] = "my-echo"
    (folder / "my-echo.json").write_text(json.dumps(definition))
    host: Host = start_host("--workflows", str(folder))
    listed = {w["id"]: w for w in host.http(host.dev_key).get("/v1/workflows").json()["workflows"]}
    assert listed["my-echo"]["source"] == "dir" and listed["my-echo"]["executable"]
    assert {"echo", "multi-step", "approval-gated", "clarification-gated"} <= set(listed)


def test_host_key_is_private_and_can_live_elsewhere(start_host: Hosts[InProcessHost], tmp_path: Path) -> None:
    host: Host = start_host()
    default_key = host.data_dir / "host.key"
    assert default_key.stat().st_mode & 0o777 == 0o600 and len(default_key.read_bytes()) == 32
    shared = tmp_path / "keys" / "shared.key"
    other: Host = start_host("--secret-key-file", str(shared), name="other")
    assert shared.stat().st_mode & 0o777 == 0o600
    assert not (other.data_dir / "host.key").exists()


def test_a_different_host_key_is_refused_at_start(start_process: Hosts[HostProcess], tmp_path: Path) -> None:
    host = start_process()
    host.kill()
    host.args = ["--secret-key-file", str(tmp_path / "another.key")]
    try:
        host.start()
    except AssertionError:
        pass
    else:
        raise AssertionError("a host started with a key other than the store's first one")
    assert "the same --secret-key-file" in host.log()
    host.args = []
    host.start()  # the original key still works
    assert host.http(host.dev_key).get("/v1/runs").status_code == 200


def test_a_second_host_on_one_sqlite_file_is_refused(tmp_path: Path) -> None:
    """The host answers task reads from memory because every commit passes through it."""
    first = HostProcess(tmp_path / "data").start()
    second = HostProcess(tmp_path / "data")
    try:
        try:
            second.start()
        except AssertionError:
            pass
        else:
            raise AssertionError("two hosts served one SQLite file")
        assert "another Tether host is serving" in second.log()
        assert first.http(first.dev_key).get("/v1/runs").status_code == 200
        first.kill()  # a crashed host leaves no lock behind
        second.start()
        assert second.http(first.dev_key).get("/v1/runs").status_code == 200
    finally:
        first.kill()
        second.kill()
        first.close_clients()
        second.close_clients()


def test_a_first_start_makes_its_data_directory(tmp_path: Path) -> None:
    fresh = tmp_path / "not" / "yet"
    host = HostProcess(tmp_path / "h", "--data-dir", str(fresh))  # the later --data-dir wins
    try:
        host.start()
        assert (fresh / "tether.db").exists() and host.http(host.dev_key).get("/v1/runs").status_code == 200
    finally:
        host.kill()
        host.close_clients()


@pytest.mark.process  # SIGTERM and the exit code
def test_sigterm_ends_open_streams_cleanly_and_at_once(host: HostProcess, key: str) -> None:
    """A stream never ends by itself; on shutdown its response completes (no cut connection,
    no task cancelled after the graceful timeout), and its client re-attaches elsewhere."""
    message = {
        "kind": "message",
        "role": "user",
        "messageId": "m-stop",
        "parts": [{"kind": "text", "text": "x"}],
        "metadata": {"skillId": "approval-gated"},
    }
    sent = host.http(key).post(
        "/v1/a2a", json={"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {"message": message}}
    )
    task_id = sent.json()["result"]["id"]
    outcome: list[object] = []
    attached = threading.Semaphore(0)

    def follow() -> None:
        frames: list[str] = []
        try:
            with httpx.Client(base_url=host.url, headers={"Authorization": f"Bearer {key}"}, timeout=30) as client:
                body = {"jsonrpc": "2.0", "id": 2, "method": "tasks/resubscribe", "params": {"id": task_id}}
                with client.stream("POST", "/v1/a2a", json=body) as response:
                    for line in response.iter_lines():
                        if line.startswith("data:"):
                            frames.append(line)
                            if len(frames) == 1:
                                attached.release()
            outcome.append(frames)
        except httpx.HTTPError as exc:
            outcome.append(exc)
            attached.release()

    streams = [threading.Thread(target=follow) for _ in range(3)]
    for stream in streams:
        stream.start()
    for _ in streams:
        assert attached.acquire(timeout=30), "a stream never got the task's first event"
    assert host.stop() == 0
    for stream in streams:
        stream.join(15)
    assert len(outcome) == 3 and all(isinstance(frames, list) and len(frames) == 1 for frames in outcome), outcome
    log = host.log()
    assert "Traceback" not in log and "timeout graceful shutdown exceeded" not in log, log[-2000:]
