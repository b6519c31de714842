"""Task retention: finished runs are purged on schedule or on demand; no live run ever is.

On each backend, a real ``tether serve`` process where one is killed, in-process hosts and the
CLI in-process (``inproc.run_cli``) elsewhere. A purged run must read afterwards exactly as
an id that never existed, on every surface (A2A 0.3 and 1.0, REST run, events), and the
message that started it, sent again, must start a new task.
"""

from __future__ import annotations

import base64
import hashlib
import uuid
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import httpx
from backends import Hosts
from harness import HostProcess, cli, wait_until
from inproc import InProcessHost, create_key, run_cli
from prometheus_client.parser import text_string_to_metric_families
from store_rows import row_counts

UNKNOWN = "00000000-0000-4000-8000-000000000000"


def _message(message_id: str, skill: str = "echo") -> dict[str, Any]:
    return {
        "kind": "message",
        "role": "user",
        "messageId": message_id,
        "parts": [{"kind": "text", "text": "keep me a while"}],
        "metadata": {"skillId": skill},
    }


def _send(http: httpx.Client, message_id: str, skill: str = "echo") -> dict[str, Any]:
    body = {"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {"message": _message(message_id, skill)}}
    answer = http.post("/v1/a2a", json=body).json()
    assert "result" in answer, answer
    result: dict[str, Any] = answer["result"]
    return result


def _reads(http: httpx.Client, run_id: str) -> list[tuple[int, Any]]:
    """What every surface answers for ``run_id``, with the id itself written as UNKNOWN."""
    answers = [
        http.post("/v1/a2a", json={"jsonrpc": "2.0", "id": 7, "method": "tasks/get", "params": {"id": run_id}}),
        http.post(
            "/v1/a2a",
            json={"jsonrpc": "2.0", "id": 7, "method": "GetTask", "params": {"id": run_id}},
            headers={"A2A-Version": "1.0"},
        ),
        http.get(f"/v1/runs/{run_id}"),
        http.get(f"/v1/runs/{run_id}/events/poll", params={"timeout": 0}),
    ]
    return [(a.status_code, a.text.replace(run_id, UNKNOWN)) for a in answers]


def _gone(http: httpx.Client, run_id: str) -> bool:
    return _reads(http, run_id) == _reads(http, UNKNOWN)


def _purged_total(http: httpx.Client) -> float:
    for family in text_string_to_metric_families(http.get("/metrics").text):
        for sample in family.samples:
            if sample.name == "tether_runs_purged_total":
                return sample.value
    raise AssertionError("no tether_runs_purged_total in /metrics")


def test_finished_runs_go_after_the_window_and_live_ones_stay_across_a_restart(
    start_process: Hosts[HostProcess],
) -> None:
    host = start_process("--task-retention", "2s")
    key = host.dev_key
    assert key
    http = host.http(key)
    assert http.get("/.well-known/openwop").json()["retention"]["runs"]["windowSeconds"] == 2
    message_id = f"m-{uuid.uuid4()}"
    finished = _send(http, message_id)
    assert finished["status"]["state"] == "completed"
    rest_run = http.post("/v1/runs", json={"workflowId": "echo", "inputs": {"prompt": "x"}}).json()["runId"]
    waiting = _send(http, f"m-{uuid.uuid4()}", skill="approval-gated")
    assert waiting["status"]["state"] == "input-required"
    assert not _gone(http, finished["id"])

    wait_until(lambda: _gone(http, finished["id"]) and _gone(http, rest_run), timeout=30, what="the purge")
    again = _send(http, message_id)  # the same message, sent again after its task was purged
    assert again["id"] != finished["id"] and again["status"]["state"] == "completed"
    assert _purged_total(http) >= 2

    host.restart()  # SIGKILL: the waiting run, older than the window, is still there and resumes
    http = host.http(key)
    assert http.get(f"/v1/runs/{waiting['id']}").json()["status"] == "waiting-approval"
    reply = {
        **_message(f"m-{uuid.uuid4()}"),
        "taskId": waiting["id"],
        "parts": [{"kind": "data", "data": {"action": "accept"}}],
    }
    answer = http.post(
        "/v1/a2a", json={"jsonrpc": "2.0", "id": 2, "method": "message/send", "params": {"message": reply}}
    )
    assert answer.json()["result"]["status"]["state"] == "completed"
    wait_until(lambda: _gone(http, waiting["id"]), timeout=30, what="the purge of the run that ended after the restart")


def test_purge_on_demand_lists_first_keeps_live_runs_and_other_tenants_and_refuses_bad_input(
    start_host: Hosts[InProcessHost], tmp_path: Path
) -> None:
    host = start_host("--task-retention", "0")
    key = host.dev_key
    assert key
    http = host.http(key)
    assert http.get("/.well-known/openwop").json()["retention"]["runs"]["windowSeconds"] is None
    ended = [_send(http, f"m-{uuid.uuid4()}")["id"] for _ in range(3)]
    waiting = _send(http, f"m-{uuid.uuid4()}", skill="approval-gated")["id"]
    other_key = create_key(host.data_dir, "other", "--tenant", "other")
    other = _send(host.http(other_key), f"m-{uuid.uuid4()}")["id"]
    before = (datetime.now(UTC) + timedelta(seconds=1)).isoformat()
    env = {"url": host.url, "key": key}

    refused = http.post("/v1/runs:purge", json={"before": "yesterday"})
    assert refused.status_code == 400 and "before" in refused.text
    naive = http.post("/v1/runs:purge", json={"before": "2026-01-01T00:00:00"})
    assert naive.status_code == 400
    reader = create_key(host.data_dir, "reader", "--scopes", "runs:read")
    assert host.http(reader).post("/v1/runs:purge", json={"before": before}).status_code == 403
    bad = run_cli(
        "runs", "purge", "--before", "soon", "--url", env["url"], "--key", key, data_dir=host.data_dir, check=False
    )
    assert bad.returncode != 0 and "before" in (bad.stderr + bad.stdout)

    listed = run_cli(
        "runs",
        "purge",
        "--before",
        before,
        "--dry-run",
        "--json",
        "--url",
        env["url"],
        "--key",
        key,
        data_dir=host.data_dir,
    )
    assert sorted(_json(listed.stdout)) == sorted(ended)
    assert not any(_gone(http, run_id) for run_id in [*ended, waiting])  # a dry run, and refusals, change nothing

    done = run_cli("runs", "purge", "--before", before, "--url", env["url"], "--key", key, data_dir=host.data_dir)
    assert "purged 3 run(s)" in done.stdout
    assert all(_gone(http, run_id) for run_id in ended)
    assert http.get(f"/v1/runs/{waiting}").json()["status"] == "waiting-approval"
    assert host.http(other_key).get(f"/v1/runs/{other}").status_code == 200  # another tenant's run stays
    assert _purged_total(http) == 0  # on-demand purges are not the retention loop's


def _json(text: str) -> Any:
    import json

    return json.loads(text)


def test_a_retention_that_is_not_a_span_is_refused_before_anything_starts(tmp_path: Path) -> None:
    data = tmp_path / "data"
    refused = cli("serve", "--port", "0", "--task-retention", "a month", data_dir=data, check=False)
    assert refused.returncode == 2
    assert "--task-retention" in refused.stderr and "30d" in refused.stderr and "Traceback" not in refused.stderr
    assert not data.exists()  # nothing written


def test_purge_compares_before_as_an_instant_in_any_offset_and_precision(start_host: Hosts[InProcessHost]) -> None:
    """``before`` is the instant it names: the same one with an offset, or a microsecond past a run's end in any
    precision, selects the same runs; a run that ended exactly at ``before`` did not end before it."""
    host = start_host("--task-retention", "0")
    assert host.dev_key
    http = host.http(host.dev_key)
    run_id = _send(http, f"m-{uuid.uuid4()}")["id"]
    ended = datetime.fromisoformat(http.get(f"/v1/runs/{run_id}").json()["updatedAt"])

    def listed(before: str) -> bool:
        answer = http.post("/v1/runs:purge", json={"before": before, "dryRun": True})
        assert answer.status_code == 200, answer.text
        return run_id in answer.json()["runIds"]

    east = timezone(timedelta(hours=5, minutes=30))
    assert not listed(ended.isoformat(timespec="milliseconds"))
    assert not listed(ended.astimezone(east).isoformat(timespec="microseconds"))
    assert listed((ended + timedelta(microseconds=1)).astimezone(east).isoformat(timespec="microseconds"))
    assert listed((ended + timedelta(microseconds=1)).isoformat(timespec="microseconds").replace("+00:00", "Z"))
    assert listed(ended.isoformat(timespec="microseconds").replace("+00:00", "000001Z"))  # one nanosecond after
    for bad in ("1700000000", "-1", "2026-02-30T00:00:00Z", "2026-01-01 00:00:00Z"):
        refused = http.post("/v1/runs:purge", json={"before": bad, "dryRun": True})
        assert refused.status_code == 400 and "before" in refused.text, refused.text
    assert http.get(f"/v1/runs/{run_id}").status_code == 200, "dry runs and refusals purge nothing"


def _file_message(message_id: str, skill: str, *files: bytes) -> dict[str, Any]:
    parts: list[dict[str, Any]] = [{"kind": "text", "text": "keep these a while"}]
    parts += [{"kind": "file", "file": {"bytes": base64.b64encode(f).decode(), "name": "f.bin"}} for f in files]
    return {**_message(message_id, skill), "parts": parts}


def test_a_purge_takes_a_finished_runs_files_and_leaves_those_a_live_run_refers_to(
    start_host: Hosts[InProcessHost],
) -> None:
    host = start_host("--task-retention", "0")
    key = host.dev_key
    assert key
    http = host.http(key)
    own, shared, live_only = b"only the finished run's", b"both runs'", b"only the live run's"

    def sent(skill: str, *files: bytes) -> dict[str, Any]:
        body = {"message": _file_message(f"m-{uuid.uuid4()}", skill, *files)}
        answer = http.post("/v1/a2a", json={"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": body})
        result: dict[str, Any] = answer.json()["result"]
        return result

    finished = sent("echo", own, shared)
    assert finished["status"]["state"] == "completed"
    waiting = sent("approval-gated", shared, live_only)
    assert waiting["status"]["state"] == "input-required"
    assert row_counts(host, ("blobs", "run_blobs")) == {"blobs": 3, "run_blobs": 4}

    def file(run_id: str, data: bytes) -> int:
        return http.get(f"/v1/runs/{run_id}/files/sha256:{hashlib.sha256(data).hexdigest()}").status_code

    before = (datetime.now(UTC) + timedelta(seconds=1)).isoformat()
    env = {"url": host.url, "key": key}
    done = run_cli("runs", "purge", "--before", before, "--url", env["url"], "--key", key, data_dir=host.data_dir)
    assert "purged 1 run(s)" in done.stdout
    assert _gone(http, finished["id"])
    assert row_counts(host, ("blobs", "run_blobs")) == {"blobs": 2, "run_blobs": 2}, "the finished run's own file went"
    assert file(waiting["id"], shared) == file(waiting["id"], live_only) == 200, "the live run's files stay"

    reply = {
        **_message(f"m-{uuid.uuid4()}"),
        "taskId": waiting["id"],
        "parts": [{"kind": "data", "data": {"action": "accept"}}],
    }
    answer = http.post(
        "/v1/a2a", json={"jsonrpc": "2.0", "id": 2, "method": "message/send", "params": {"message": reply}}
    )
    assert answer.json()["result"]["status"]["state"] == "completed"
    later = (datetime.now(UTC) + timedelta(seconds=1)).isoformat()
    run_cli("runs", "purge", "--before", later, "--url", env["url"], "--key", key, data_dir=host.data_dir)
    assert row_counts(host, ("blobs", "run_blobs")) == {"blobs": 0, "run_blobs": 0}
