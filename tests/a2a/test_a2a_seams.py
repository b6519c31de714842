"""The conformance suite's seams: mounted only on request, a real paused run, the push URL guard first."""

from __future__ import annotations

import asyncio
from pathlib import Path

import click
import httpx
import pytest
from a2a_wire import task_record
from harness import Host
from schemas import openwop_validator

from tether.a2a.routes import handoff_pause
from tether.cli.serve import serve_settings
from tether.settings import Settings

SEAMS = "/v1/host/sample/a2a/tasks"


def test_seams_are_absent_unless_enabled(start_host) -> None:  # type: ignore[no-untyped-def]
    host: Host = start_host()
    assert host.dev_key
    http = host.http(host.dev_key)
    absent = http.post(f"{SEAMS}/start", json={"scenario": "paused-at-approval"})
    assert absent.status_code == 404 and "--enable-test-seams" in absent.json()["message"]
    assert (
        http.post(f"{SEAMS}/push-config", json={"taskId": "run_x", "url": "https://10.0.0.5/push"}).status_code == 404
    )
    assert http.get(f"{SEAMS}/run_x").status_code == 404, "the read is always served (and this task is unknown)"


def test_start_parks_a_real_run_at_an_approval_gate(http: httpx.Client) -> None:
    started = http.post(f"{SEAMS}/start", json={"scenario": "paused-at-approval"})
    assert started.status_code == 201
    task_id = started.json()["taskId"]
    record = task_record(http, task_id, path=SEAMS)
    assert record["state"] == "input-required" and record["interruptKind"] == "approval"
    assert record["runId"] == task_id
    assert http.get(f"/v1/runs/{task_id}").json()["status"] == "waiting-approval"
    assert http.post(f"{SEAMS}/start", json={}).status_code == 201, "the scenario defaults to paused-at-approval"
    refused = http.post(f"{SEAMS}/start", json={"scenario": "on-fire"})
    assert refused.status_code == 400 and refused.json()["error"] == "validation_error"


def test_push_config_checks_the_body(http: httpx.Client) -> None:
    for body in (
        {"url": "https://example.com/push"},
        {"taskId": "run_x"},
        {"taskId": 5, "url": "https://example.com/push"},
        {"taskId": "run_x", "url": "https://example.com", "tokenFingerprint": "a" * 33},
    ):
        response = http.post(f"{SEAMS}/push-config", json=body)
        assert response.status_code == 400 and response.json()["error"] == "validation_error", body


@pytest.mark.parametrize(
    ("url", "arm"),
    [
        ("https://10.0.0.5/push", "address"),
        ("http://push.example.com/push", "scheme"),
        ("https://[::ffff:a00:5]/push", "address"),
    ],
)
def test_push_config_refuses_before_it_looks_the_task_up(http: httpx.Client, url: str, arm: str) -> None:
    pytest.importorskip("tether.egress.guard")
    response = http.post(f"{SEAMS}/push-config", json={"taskId": "run_x", "url": url})
    assert response.status_code == 400, response.text
    body = response.json()
    assert body["error"] == "a2a_push_egress_denied" and body["details"]["arm"] == arm


def test_push_config_with_an_allowed_url_then_looks_the_task_up(http: httpx.Client) -> None:
    pytest.importorskip("tether.egress.guard")
    unknown = http.post(f"{SEAMS}/push-config", json={"taskId": "run_x", "url": "https://93.184.215.14/push"})
    assert unknown.status_code == 404
    task_id = http.post(f"{SEAMS}/start", json={}).json()["taskId"]
    known = http.post(f"{SEAMS}/push-config", json={"taskId": task_id, "url": "https://93.184.215.14/push"})
    assert known.status_code == 200, known.text
    record = known.json()
    openwop_validator("a2a-task-state").validate(record)
    assert record["taskId"] == task_id and record["pushConfig"] == {"url": "https://93.184.215.14/push"}


def test_the_hand_off_pause_is_a_test_seam(tmp_path: Path) -> None:
    """``--test-handoff-pause-file`` needs the seams on; with them, a hand-off touches the file and waits there."""
    marker = tmp_path / "sent"
    with pytest.raises(click.UsageError, match="--enable-test-seams"):
        serve_settings(["--test-handoff-pause-file", str(marker)])
    assert handoff_pause(Settings(test_handoff_pause_file=marker)) is None, "seams off: no pause"
    assert handoff_pause(Settings(enable_test_seams=True)) is None, "no file: no pause"
    pause = handoff_pause(serve_settings(["--enable-test-seams", "--test-handoff-pause-file", str(marker)]))
    assert pause is not None

    async def paused() -> None:
        waiting = asyncio.create_task(pause())
        deadline = asyncio.get_running_loop().time() + 5
        while not marker.exists() and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.01)
        assert marker.exists() and not waiting.done(), "touched the file, and waits"
        waiting.cancel()

    asyncio.run(paused())
