"""A smoke of the benchmark harness: ``bench/run.py --quick`` runs end to end and reports.

Behaviour, not speed: the quick profile's one-second runs measure nothing, so nothing here
asserts a duration or a rate beyond "positive". It starts Tether on SQLite, the bare ASGI
ceiling and, when its extras import, the a2a-sdk reference server with InMemoryTaskStore,
and points the Tether on PostgreSQL slot at a closed port (the full run measures
PostgreSQL; here the slot must report itself skipped, with the reason). It checks that
the JSON report has every scenario, every measured number is positive and every target
was judged. wrk is required: without it the harness cannot measure, so this test fails
under CI (``.ci/run`` installs wrk) and elsewhere skips, saying how to install it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
#: the quick run takes about 55 s here (the outbox scenario about 25 of them); past this it is stuck, not slow
BUDGET_S = 150
#: a PostgreSQL URL nothing listens on: the smoke checks the slot's skip path, not PostgreSQL
NO_POSTGRES = "postgresql://postgres@127.0.0.1:1/postgres"
RUN = ROOT / "bench" / "run.py"
SCENARIOS = {"send", "get", "send10", "get10", "openwop", "stream", "resubscribe", "restart", "rest", "outbox", "crash"}
TARGET_IDS = {
    "send-vs-sdk-memory",
    "send-vs-sdk-sqlite",
    "send-p99",
    "get-vs-sdk-memory",
    "get-vs-bare",
    "send-postgres-vs-sqlite",
    "get-postgres-vs-sqlite",
    "stream-first-event",
    "fanout-p99",
    "fanout-rss",
    "restart-serving",
    "rest-cpu",
    "outbox-one-receiver",
    "outbox-sustained-p99",
    "outbox-backlog-drain",
    "outbox-vs-compared",
    "crash-resent-per-kill",
    "openwop-v2-get",
    "openwop-v2-create",
}
OUTBOX_LEGS = ("burst_webhook_1", "burst_webhook_10", "burst_push_1", "burst_push_10", "sustained", "backlog")


def _imports(code: str) -> bool:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=60).returncode == 0


def scenarios_skip_reason(report: dict[str, Any], server: str) -> str | None:
    """The reason the restart and rest scenarios give for a skipped server (they must agree)."""
    reasons = {report["scenarios"][s][server].get("skipped") for s in ("restart", "rest")}
    assert len(reasons) == 1, reasons
    return reasons.pop()


def _check_wrk_run(run: dict[str, Any], what: str) -> None:
    assert run["requests"] > 0, what
    assert run["failed"] == 0, f"{what}: {run['failed']} failed answers, first: {run['first_failure']}"
    assert run["rps"] > 0 and run["p50_ms"] > 0 and run["p99_ms"] >= run["p50_ms"], what


@pytest.mark.timeout(210)
def test_quick_run_reports_every_scenario(tmp_path: Path) -> None:
    if shutil.which("wrk") is None:
        message = "wrk is not installed, and the harness needs it: apt-get install -y wrk (the Debian package)"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    # tether-storeless: the bench app that swaps the store's commit must still serve (it rots silently otherwise)
    servers = ["tether-sqlite", "tether-postgres", "bare", "tether-storeless"]
    sdk = _imports("import a2a.server.apps, sse_starlette")
    if sdk:
        servers.append("sdk-memory")
    out = tmp_path / "report.json"
    cmd = [
        sys.executable,
        str(RUN),
        "--quick",
        "--servers",
        ",".join(servers),
        "--out",
        str(out),
        "--workdir",
        str(tmp_path / "work"),
    ]
    cmd += ["--pg-url", NO_POSTGRES]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        stdout, stderr = proc.communicate(timeout=BUDGET_S)
    except subprocess.TimeoutExpired:
        proc.terminate()  # the harness stops its servers on SIGTERM
        stdout, stderr = proc.communicate(timeout=30)
        pytest.fail(f"bench/run.py --quick took over {BUDGET_S}s (a hang, not a speed check):\n{stderr[-5000:]}")
    assert proc.returncode == 0, f"bench/run.py --quick failed ({proc.returncode}):\n{stdout[-3000:]}\n{stderr[-5000:]}"

    report = json.loads(out.read_text())
    assert report["meta"]["complete"] is True
    assert report["meta"]["profile"]["name"] == "quick"
    assert set(report["scenarios"]) == SCENARIOS
    assert "## Targets" in out.with_suffix(".md").read_text()

    status = report["servers"]
    # The PostgreSQL slot is pointed at a closed port: it must be skipped, fast, saying why
    # (a SQLite-only build refuses the URL itself; one with the backend cannot connect).
    postgres = status["tether-postgres"]
    assert postgres["status"] == "skipped", postgres
    assert (
        "this build stores in SQLite only" in postgres["reason"]
        or "no PostgreSQL server reachable" in postgres["reason"]
    ), postgres
    assert scenarios_skip_reason(report, "tether-postgres") == postgres["reason"]
    measured = [s for s in servers if s != "tether-postgres"]
    for name in measured:
        assert status[name]["status"] == "ok", status[name]
        assert status[name]["rss_rest_mb"] > 0 and status[name]["rss_load_peak_mb"] > 0
        assert status[name]["cpu_rest_pct"] >= 0

    scenarios = report["scenarios"]
    for name in measured:
        for c in ("c1", "c32", "c256"):
            _check_wrk_run(scenarios["send"][name][c], f"message/send {c} on {name}")
        _check_wrk_run(scenarios["get"][name]["c32"], f"tasks/get c32 on {name}")

    # the durable Tethers; tether-storeless writes nothing and runs only the 0.3 request and stream scenarios
    durable = [s for s in measured if s.startswith("tether-") and s != "tether-storeless"]
    # A2A 1.0 (SendMessage, GetTask): durable Tethers, every answer checked by rpc.lua, and each
    # beside its 0.3 counterpart with the ratio (a number; its size is not asserted here)
    assert set(scenarios["send10"]) == set(scenarios["get10"]) == set(durable)
    for name in durable:
        for c in ("c1", "c32", "c256"):
            _check_wrk_run(scenarios["send10"][name][c], f"SendMessage {c} on {name}")
        _check_wrk_run(scenarios["get10"][name]["c32"], f"GetTask c32 on {name}")
    ratios = report["a2a_1_0_vs_0_3"]
    assert {(r["scenario"], r["server"], r["connections"]) for r in ratios} == {
        *(("send10", s, c) for s in durable for c in (1, 32, 256)),
        *(("get10", s, 32) for s in durable),
    }
    assert all(r["ratio"] > 0 and r["within"] in (True, False) for r in ratios), ratios
    assert "## A2A 1.0 beside 0.3" in out.with_suffix(".md").read_text()

    # OpenWOP REST, GET and POST a run at each major, taking turns: every answer checked by rpc.lua
    assert set(scenarios["openwop"]) == set(durable)
    for name in durable:
        for run in ("v1-get", "v2-get", "v1-create", "v2-create"):
            (turn,) = scenarios["openwop"][name][run]
            _check_wrk_run(turn, f"OpenWOP {run} on {name}")
    majors = report["openwop_v2_vs_v1"]
    assert {(r["server"], r["operation"]) for r in majors} == {
        (s, op) for s in durable for op in ("GET a run", "POST a run")
    }
    assert all(r["ratio"] > 0 and r["within"] in (True, False) for r in majors), majors
    assert "## OpenWOP v2 beside v1" in out.with_suffix(".md").read_text()

    for name in (s for s in measured if s != "bare"):
        stream = scenarios["stream"][name]
        assert stream["failed"] == 0 and stream["first_event_ms"]["n"] == stream["streams"]
        assert 0 < stream["first_event_ms"]["p50"] <= stream["complete_ms"]["p50"]

    for name in durable:
        resubscribe = scenarios["resubscribe"][name]
        assert resubscribe["attach"]["failed"] == 0 and resubscribe["attach"]["attach_ms"]["p50"] > 0
        fanouts = [v for k, v in resubscribe.items() if k.startswith("fanout_")]
        assert len(fanouts) == 2
        for fan in fanouts:
            assert fan["every_stream"] and fan["delivered"] == fan["streams"] * fan["rounds"]
            assert fan["delivery_ms"]["p50"] > 0 and fan["rss_peak_mb"] > 0
            assert fan["next_event_kinds"] == ["status-update"] and fan["reply_status"] == [200]

        restarts = scenarios["restart"][name]["runs"]
        assert [r["waiting_runs"] for r in restarts] == report["meta"]["profile"]["restart_runs"]
        for r in restarts:
            assert r["resumed"] == r["waiting_runs"] and 0 < r["announced_s"] <= r["serving_s"]
        assert restarts[-1]["resume_verified"] is True
        rest = scenarios["rest"][name]
        assert rest["waiting_runs"] == restarts[-1]["waiting_runs"] and rest["cpu_pct"] >= 0 and rest["rss_mb"] > 0

    outbox = scenarios["outbox"]
    assert outbox["ceilings"]["receiver_wrk"]["rps"] > 0
    assert outbox["ceilings"]["egress_client"]["this build"]["failed"] == 0
    assert outbox["tether-postgres"]["skipped"] == postgres["reason"]
    for leg in OUTBOX_LEGS:
        # every delivery arrived, and each carried the commit time it is measured from
        result = outbox["tether-sqlite"][leg]
        assert result["complete"] and result["delivered"] == result["expected"] > 0, (leg, result)
        assert result["latency_ms"]["n"] == result["delivered"] and result["latency_ms"]["p50"] >= 0, leg
    assert outbox["tether-sqlite"]["backlog"]["receipt_rate_per_s"] > 0

    crash = scenarios["crash"]
    assert crash["tether-postgres"]["skipped"] == postgres["reason"]
    for leg in crash["tether-sqlite"].values():
        # every delivery arrived after the kills, and each re-sent one was charged to a kill
        assert leg["complete"] and leg["kills"] == len(leg["per_kill_counts"]) > 0, leg
        assert leg["distinct"] > 0 and leg["without_a_kill"] == 0 and leg["per_kill"] >= 0, leg

    targets = {t["id"]: t for t in report["targets"]}
    assert set(targets) == TARGET_IDS
    for tid in (
        "send-p99",
        "get-vs-bare",
        "stream-first-event",
        "fanout-p99",
        "fanout-rss",
        "restart-serving",
        "rest-cpu",
        "outbox-one-receiver",
        "outbox-sustained-p99",
        "outbox-backlog-drain",
        "crash-resent-per-kill",
        "openwop-v2-get",
        "openwop-v2-create",
    ):
        assert targets[tid]["pass"] in (True, False), f"{tid} was not judged: {targets[tid]}"
    for tid in ("send-postgres-vs-sqlite", "get-postgres-vs-sqlite"):  # PostgreSQL was skipped: not judged
        assert targets[tid]["pass"] is None and targets[tid]["value"] is None, targets[tid]
    if "sdk-memory" in servers:
        assert targets["send-vs-sdk-memory"]["value"] > 0 and targets["get-vs-sdk-memory"]["value"] > 0


@pytest.mark.timeout(240)
@pytest.mark.parametrize("scenario", ["get", "get10", "send", "send10"])
def test_the_in_process_driver_of_the_instruction_counts_answers_every_request(scenario: str) -> None:
    """``bench/instructions.py`` runs this driver under callgrind; here it runs plain, and must
    get a JSON-RPC result for every request (it raises on the first that is not one)."""
    driver = ROOT / "bench" / "apps" / "inproc_load.py"
    done = subprocess.run([sys.executable, str(driver), scenario, "40"], capture_output=True, text=True, timeout=200)
    assert done.returncode == 0, done.stderr[-2000:]
    refused = subprocess.run(
        [sys.executable, str(driver), "tasks/get", "40"], capture_output=True, text=True, timeout=60
    )
    assert refused.returncode != 0 and "usage: inproc_load.py" in refused.stderr
