"""The host's log: one structured line per request and per run transition, and no secret in any line.

A real ``tether serve`` process logs as JSON at debug level (the most it ever says)
while it is handed every kind of secret it knows: API keys (good and bad), an interrupt
token in a URL, a push token and credentials, a webhook secret, and message bodies.
"""

from __future__ import annotations

import io
import json
import logging
import os
import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
from harness import HostProcess, wait_until

from tether.ops.logs import InfoLines, TextFormatter

BODY_SECRET = "BODY-SECRET-6f1c2d"
PUSH_TOKEN = "PUSH-TOKEN-9a8b7c"
PUSH_CREDENTIAL = "PUSH-CREDENTIAL-4d5e6f"
WEBHOOK_SECRET = "WEBHOOK-SECRET-1a2b3c4d5e6f7a8b"
WRONG_KEY = "tk_0123456789abcdef_" + "e" * 64


def lines_of(host: HostProcess) -> list[dict[str, Any]]:
    return [json.loads(line) for line in host.log().splitlines() if line.strip()]


def test_one_json_line_per_request_and_transition_and_no_secret_anywhere(tmp_path: Path) -> None:
    host = HostProcess(tmp_path / "data", "--log-format", "json", "--log-level", "debug").start()
    try:
        key = host.dev_key
        assert key
        http = host.http(key)
        created = http.post("/v1/runs", json={"workflowId": "approval-gated", "inputs": {"prompt": BODY_SECRET}})
        run_id = created.json()["runId"]
        snapshot = wait_until(
            lambda: (s := http.get(f"/v1/runs/{run_id}").json())["status"] == "waiting-approval" and s,
            what="the gate",
        )
        token = snapshot["interrupt"]["interruptToken"]
        assert http.get(f"/v1/interrupts/{token}").status_code == 200
        http.post(
            "/v1/webhooks",
            json={"url": "https://example.com/hook", "events": ["run.completed"], "secret": WEBHOOK_SECRET},
        )
        sent = http.post(
            "/v1/a2a",
            json={
                "jsonrpc": "2.0",
                "id": 1,
                "method": "message/send",
                "params": {
                    "message": {
                        "kind": "message",
                        "role": "user",
                        "messageId": "m-secret",
                        "parts": [{"kind": "text", "text": BODY_SECRET}],
                    },
                    "configuration": {
                        "pushNotificationConfig": {
                            "url": "https://example.com/push",
                            "token": PUSH_TOKEN,
                            "authentication": {"schemes": ["Bearer"], "credentials": PUSH_CREDENTIAL},
                        }
                    },
                },
            },
        )
        assert sent.status_code == 200
        with host.client(WRONG_KEY) as stranger:
            assert stranger.get("/v1/runs").status_code == 401
        assert http.post(f"/v1/interrupts/{token}", json={"resumeValue": {"action": "accept"}}).status_code < 300
        wait_until(lambda: http.get(f"/v1/runs/{run_id}").json()["status"] == "completed", what="the run to end")
        assert host.stop() == 0
    finally:
        host.kill()
        host.close_clients()

    log = host.log()
    for secret in (key, key.split("_")[2], WRONG_KEY, token, BODY_SECRET, PUSH_TOKEN, PUSH_CREDENTIAL, WEBHOOK_SECRET):
        assert secret not in log, f"a secret reached the log: {secret[:12]}..."
    lines = lines_of(host)
    requests = [line for line in lines if line["logger"] == "tether.request"]
    by_path = {(r["method"], r["path"]): r for r in requests}
    assert by_path[("POST", "/v1/runs")]["status"] == 201
    assert by_path[("POST", "/v1/runs")]["principal"] == "default/key:dev"
    assert by_path[("GET", "/v1/interrupts/{token}")]["status"] == 200, "the template, never the token"
    a2a = by_path[("POST", "/v1/a2a")]
    assert (a2a["operation"], a2a["status"], a2a["principal"]) == ("message/send", 200, "default/key:dev")
    refused = [r for r in requests if r["status"] == 401]
    assert len(refused) == 1 and refused[0]["principal"] is None
    assert all(isinstance(r["duration_ms"], float | int) and r["time"].endswith("Z") for r in requests)
    transitions = [
        (line["from"], line["to"]) for line in lines if line["logger"] == "tether.run" and line["run_id"] == run_id
    ]
    assert transitions[0] == (None, "pending") or transitions[0][0] is None
    assert ("running", "waiting-approval") in transitions and transitions[-1][1] == "completed"


def test_text_lines_carry_the_fields_as_key_value_pairs() -> None:
    record = logging.LogRecord("tether.request", logging.INFO, __file__, 1, "request", None, None)
    record.fields = {"method": "GET", "path": "/v1/runs", "status": 200, "principal": None, "note": "two words"}
    line = TextFormatter().format(record)
    assert line.endswith('request method=GET path=/v1/runs status=200 principal=- note="two words"')


def test_the_hot_path_writer_writes_what_the_formatters_write() -> None:
    fields = {"method": "GET", "path": "/v1/runs", "status": 200, "principal": None}
    text, as_json = io.StringIO(), io.StringIO()
    InfoLines(text, "text").emit("tether.request", "request", fields)
    InfoLines(as_json, "json").emit("tether.request", "request", fields)
    assert re.fullmatch(
        r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} INFO tether.request: request "
        r"method=GET path=/v1/runs status=200 principal=-\n",
        text.getvalue(),
    )
    line = json.loads(as_json.getvalue())
    assert {k: line[k] for k in ("level", "logger", "message", "status", "principal")} == {
        "level": "info",
        "logger": "tether.request",
        "message": "request",
        "status": 200,
        "principal": None,
    }
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", line["time"])


def test_a_shaped_line_reads_as_the_same_line_written_whole() -> None:
    """Request lines are formatted once per shape and only their duration filled in after."""
    fields = {"method": "POST", "path": "/v1/a2a", "operation": "tasks/get", "status": 200, "principal": "t/a b"}
    for fmt in ("text", "json"):
        whole, shaped = io.StringIO(), io.StringIO()
        InfoLines(whole, fmt).emit("tether.request", "request", {**fields, "duration_ms": 0.42})
        writer = InfoLines(shaped, fmt)
        shape = writer.shape("tether.request", "request", fields, "duration_ms")
        writer.emit_shaped(shape, 0.42)
        writer.emit_shaped(shape, 12.5)
        first, second = shaped.getvalue().splitlines()
        # The two writers may straddle a millisecond, so the lines are compared without their times.
        if fmt == "json":
            assert json.loads(first) | {"time": None} == json.loads(whole.getvalue()) | {"time": None}
            assert json.loads(second)["duration_ms"] == 12.5 and json.loads(second)["principal"] == "t/a b"
        else:
            assert first.split(" INFO ")[-1] == whole.getvalue().rstrip("\n").split(" INFO ")[-1]
            assert second.endswith('principal="t/a b" duration_ms=12.5')


def _serve_json(data_dir: Path, *args: str) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TETHER_")}
    command = [sys.executable, "-m", "tether", "serve", "--port", "0", "--data-dir", str(data_dir)]
    return subprocess.Popen(
        [*command, "--log-format", "json", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )


def _until_serving(host: subprocess.Popen[str]) -> list[dict[str, Any]]:
    """Its stdout up to and including the ``serving`` line, each line read as JSON (a plain line fails here)."""
    assert host.stdout is not None
    lines = []
    for line in host.stdout:
        lines.append(json.loads(line))
        if lines[-1].get("event") == "serving":
            return lines
    raise AssertionError(f"the host never served: {lines}\n{host.stderr.read() if host.stderr else ''}")


def _stopped(host: subprocess.Popen[str]) -> list[dict[str, Any]]:
    """SIGTERM, then every line the process wrote since (stdout and stderr) as JSON objects."""
    host.send_signal(signal.SIGTERM)
    out, err = host.communicate(timeout=30)
    assert host.returncode == 0, err
    return [json.loads(line) for line in [*out.splitlines(), *err.splitlines()] if line.strip()]


def test_in_json_mode_every_line_of_the_process_is_a_json_object(tmp_path: Path) -> None:
    """Started, serving, stopped, restarted with a run to resume, refused a taken port: no plain line anywhere."""
    data = tmp_path / "data"
    first = _serve_json(data, "--metrics-port", "0")
    try:
        started = _until_serving(first)
        by_event = {line["event"]: line for line in started}
        key = by_event["dev-key-created"]["api_key"]
        url = by_event["serving"]["url"]
        assert key.startswith("tk_") and by_event["serving"]["resumed"] == 0
        assert by_event["metrics"]["url"].endswith("/metrics")
        with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {key}"}) as http:
            created = http.post("/v1/runs", json={"workflowId": "approval-gated", "inputs": {"prompt": "p"}})
            run_id = created.json()["runId"]
            wait_until(lambda: http.get(f"/v1/runs/{run_id}").json()["status"] == "waiting-approval", what="the gate")
        lines = started + _stopped(first)
    finally:
        first.kill()
        first.communicate()
    assert all(line["logger"] and line["time"].endswith("Z") and line["level"] for line in lines)
    stopped = [line for line in lines if line.get("event") == "stopped"]
    assert [(s["logger"], s["message"]) for s in stopped] == [
        ("tether.host", "stopped; every acknowledged run is on disk")
    ]

    again = _serve_json(data)
    try:
        serving = _until_serving(again)[-1]
        assert (serving["event"], serving["resumed"], serving["logger"]) == ("serving", 1, "tether.host")
        assert serving["message"] == f"resumed 1 unfinished run(s); serving on {serving['url']}"
        port = serving["url"].rsplit(":", 1)[1]
        taken = _serve_json(tmp_path / "other", "--port", port)
        out, err = taken.communicate(timeout=60)
        assert taken.returncode == 3 and out == ""
        [refusal] = [json.loads(line) for line in err.splitlines() if line.strip()]
        assert (refusal["level"], refusal["logger"], refusal["event"]) == ("error", "tether.host", "start-up-failed")
        assert f"port {port} on 127.0.0.1 is already in use" in refusal["message"]
        _stopped(again)
    finally:
        again.kill()
        again.communicate()
