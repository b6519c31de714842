"""Tether's benchmark harness: one command, every server side by side on this machine.

    .venv/bin/python bench/run.py                       # the full run (about 6 minutes)
    .venv/bin/python bench/run.py --quick               # tiny durations: proves the harness works
    .venv/bin/python bench/run.py --only send,get --servers tether-sqlite,sdk-memory
    .venv/bin/python bench/run.py --profile             # + py-spy on Tether during send and get, c=32
    .venv/bin/python bench/run.py --only send,get,send10,get10 --servers tether-sqlite   # A2A 1.0 beside 0.3
    .venv/bin/python bench/run.py --servers tether-sqlite,tether-sqlite-granian,bare,bare-granian   # + granian

Each server is its own process on 127.0.0.1 (port 0): Tether on SQLite, Tether on
PostgreSQL (when this build and a server allow), the a2a-sdk 0.3.26 reference with
InMemoryTaskStore and with DatabaseTaskStore on SQLite, and a bare ASGI endpoint as the
ceiling; when named, Tether and the ceiling on granian instead of uvicorn. Request/response
load comes from wrk (``bench/wrk/rpc.lua``); the streaming scenarios use the lean asyncio
client in ``bench/streams.py``. The report is printed as markdown and written as JSON
(``--out``, default ``bench/results/<timestamp>.json``) with the markdown beside it. See
docs/benchmarks.md for what every number means.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import re
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

BENCH = Path(__file__).resolve().parent
if str(BENCH) not in sys.path:
    sys.path.insert(0, str(BENCH))

import crash  # noqa: E402
import loadgen  # noqa: E402
import outbox  # noqa: E402
import report  # noqa: E402
import servers as srv  # noqa: E402
import streams  # noqa: E402

SCENARIOS = (
    "send",
    "get",
    "send10",
    "get10",
    "openwop",
    "stream",
    "resubscribe",
    "restart",
    "rest",
    "outbox",
    "crash",
)
DEFAULT_SERVERS = ("tether-sqlite", "tether-postgres", "sdk-memory", "sdk-sqlite", "bare")
GATED = "approval-gated"
#: what every good answer holds, per rpc.lua method (tab-separated substrings): 0.3's task state, or
#: 1.0's ``result.task.status.state`` (SendMessage) and ``result.status.state`` (GetTask)
_STATE_10 = '"status":{"state":"TASK_STATE_COMPLETED"'
EXPECT = {
    "send": "completed",
    "get": "completed",
    # OpenWOP REST (rpc.lua replaces the path): a run read, a run made, at each major
    "v1-get": '"runId"',
    "v2-get": '"runId":"default/',
    "v1-create": '"runId"',
    "v2-create": '"runId":"default/',
    "send10": '"result":{"task":{"id":\t' + _STATE_10,
    "get10": '"result":{"id":\t' + _STATE_10,
}


@dataclass(frozen=True)
class Profile:
    """How long and how much: ``full`` is the documented run, ``quick`` the CI smoke."""

    name: str
    warmup_s: int  # one wrk warm-up per server and scenario before its measured runs (0: none)
    measure_s: int  # each measured wrk run
    send_concurrency: tuple[int, ...]
    get_concurrency: int
    get_tasks: int
    stream_count: int
    stream_warmup: int
    attach_count: int
    fanout: tuple[int, ...]
    fanout_rounds: int
    restart_runs: tuple[int, ...]
    rest_settle_s: float
    rest_window_s: float
    idle_window_s: float
    quiet_s: float  # before each wrk run, wait up to this long for the machine to be quiet
    turns: int = 3  # openwop: measured runs of each major, taking turns (v1, v2, v1, v2, ...)
    max_answers: int = 0  # a wrk run stops loading after this many answers (0: it loads for all of measure_s)


FULL = Profile("full", 2, 6, (1, 32, 256), 32, 500, 200, 20, 200, (100, 1000), 3, (1000, 10000), 3.0, 10.0, 3.0, 30.0)
#: the smoke's: every path once, little load (each wrk run stops after 300 answers, in a second that stays a second)
QUICK = Profile("quick", 0, 1, (1, 32, 256), 32, 20, 10, 2, 10, (10, 50), 1, (20, 100), 0.3, 1.0, 0.5, 0.0, 1, 300)


def log(message: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


# --- the machine ------------------------------------------------------------------------------


def _git(cwd: Path, *args: str) -> str:
    try:
        return subprocess.run(["git", *args], capture_output=True, text=True, cwd=cwd, timeout=30).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def tether_source() -> str:
    """Which Tether was measured: a commit, and whether its src/ had uncommitted changes."""
    root = srv.TETHER_SRC or BENCH.parent / "src"
    commit = _git(root, "rev-parse", "--short", "HEAD")
    if not commit:
        return str(root)
    dirty = _git(root, "status", "--porcelain", "--", ".")
    where = "" if srv.TETHER_SRC is None else f" ({root})"
    return f"{commit}{' + uncommitted changes in src/' if dirty else ''}{where}"


def machine() -> dict[str, Any]:
    cpu_model = "unknown"
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                cpu_model = line.split(":", 1)[1].strip()
                break
    mem_kb = 0
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemTotal:"):
                mem_kb = int(line.split()[1])
    versions: dict[str, str] = {}
    from importlib import metadata

    for dist in ("tether", "a2a-sdk", "uvicorn", "granian", "starlette", "fastapi", "sqlalchemy", "aiosqlite"):
        try:
            versions[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            versions[dist] = "not installed"
    return {
        "nproc": os.cpu_count(),
        "memory_gib": round(mem_kb / 1024 / 1024, 1),
        "cpu_model": cpu_model,
        "kernel": platform.release(),
        "python": platform.python_version(),
        "wrk": loadgen.wrk_version(),
        "versions": versions,
        "git": tether_source(),
    }


# --- setup helpers (not measured) -------------------------------------------------------------


async def _post_many(url: str, headers: dict[str, str], bodies: list[Any], concurrency: int) -> list[dict[str, Any]]:
    """POST every body (JSON) with ``concurrency`` requests in flight; answers in order."""
    results: list[dict[str, Any]] = [{}] * len(bodies)
    queue = iter(enumerate(bodies))
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(headers=headers, timeout=60.0, limits=limits) as client:

        async def worker() -> None:
            for index, body in queue:
                response = await client.post(url, json=body)
                if response.status_code >= 300:
                    raise RuntimeError(f"POST {url}: HTTP {response.status_code}: {response.text[:300]}")
                results[index] = response.json()

        await asyncio.gather(*(worker() for _ in range(concurrency)))
    return results


def create_tasks(
    server: srv.ServerProcess, count: int, *, skill: str | None = None, concurrency: int = 16
) -> list[str]:
    """``count`` tasks made by blocking ``message/send``; their ids."""
    bodies = [
        {
            "jsonrpc": "2.0",
            "id": i,
            "method": "message/send",
            "params": {"message": streams.user_message("hello bench", skill=skill)},
        }
        for i in range(count)
    ]
    answers = streams.run(_post_many(server.rpc_url, server.headers(), bodies, concurrency))
    ids = []
    for answer in answers:
        if "result" not in answer:
            raise RuntimeError(f"{server.slot.name}: message/send failed during setup: {answer}")
        ids.append(answer["result"]["id"])
    return ids


def fill_waiting_runs(server: srv.ServerProcess, count: int, settle_s: float) -> tuple[list[str], int]:
    """``count`` runs of approval-gated created over REST; returns their ids once all wait at
    the gate, and how many had still not reached it after ``settle_s`` (reported, not fatal:
    those runs are non-terminal too, and the restart resumes them all the same)."""
    if count <= 0:
        return [], 0
    bodies = [{"workflowId": GATED, "inputs": {"prompt": f"bench {i}"}} for i in range(count)]
    answers = streams.run(_post_many(server.url + "/v1/runs", server.headers(), bodies, 32))
    stragglers = 0
    with httpx.Client(headers=server.headers(), timeout=30.0) as client:
        deadline = time.monotonic() + settle_s
        while True:
            stragglers = sum(
                len(client.get(server.url + "/v1/runs", params={"status": s, "limit": 500}).json()["runs"])
                for s in ("pending", "running")
            )
            if not stragglers or time.monotonic() > deadline:
                break
            time.sleep(0.2)
    if stragglers:
        log(
            f"warning: {server.slot.name}: {stragglers} run(s) still pending or running {settle_s:.0f} s after "
            "they were created"
        )
    return [a["runId"] for a in answers], stragglers


# --- scenarios ----------------------------------------------------------------------------------


class Bench:
    def __init__(
        self, args: argparse.Namespace, profile: Profile, workdir: Path, results_dir: Path, stamp: str
    ) -> None:
        self.args = args
        self.profile = profile
        self.workdir = workdir
        self.results_dir = results_dir
        self.stamp = stamp
        self.running: dict[str, srv.ServerProcess] = {}
        self.launcher = srv.Launcher(workdir, args.pg_url)
        self.result: dict[str, Any] = {"servers": {}, "scenarios": {}}
        self.task_ids: dict[str, Path] = {}  # per server: the completed tasks get and get10 read

    # servers -----------------------------------------------------------------------------

    def start_servers(self, names: list[str]) -> None:
        for name in names:
            entry: dict[str, Any] = {"label": srv.SERVERS[name].label}
            self.result["servers"][name] = entry
            log(f"starting {name}")
            try:
                server = self.launcher.start(name)
            except srv.Skipped as skipped:
                entry.update(status="skipped", reason=str(skipped))
                log(f"  skipped: {skipped}")
                continue
            self.running[name] = server
            entry.update(status="ok", pid=server.pid, url=server.url, ready_s=round(server.ready_s, 3))
        # at rest: every server idle at once, one window
        time.sleep(min(1.0, self.profile.idle_window_s))
        before = {n: srv.proc_cpu_seconds(s.pid) for n, s in self.running.items()}
        t0 = time.monotonic()
        time.sleep(self.profile.idle_window_s)
        elapsed = time.monotonic() - t0
        for name, server in self.running.items():
            end = srv.proc_cpu_seconds(server.pid)
            start = before[name]
            entry = self.result["servers"][name]
            entry["rss_rest_mb"] = srv.proc_rss_mb(server.pid)
            entry["cpu_rest_pct"] = (
                round(100 * (end - start) / elapsed, 3) if end is not None and start is not None else None
            )
            entry["rss_load_peak_mb"] = entry["rss_rest_mb"]

    def stop_servers(self) -> None:
        for name, server in self.running.items():
            entry = self.result["servers"][name]
            entry["rss_end_mb"] = srv.proc_rss_mb(server.pid)
            server.stop()
        self.running.clear()

    @contextmanager
    def under_load(self, name: str) -> Iterator[None]:
        """Track the server's peak RSS while the block runs."""
        server = self.running[name]
        with srv.RssSampler(server.pid, 0.1) as sampler:
            yield
        entry = self.result["servers"][name]
        entry["rss_load_peak_mb"] = max(entry.get("rss_load_peak_mb") or 0.0, sampler.peak)

    def wrk(
        self, name: str, method: str, connections: int, duration: int, ids_file: Path | None = None
    ) -> dict[str, Any]:
        server = self.running[name]
        waited = srv.quiet(timeout=self.profile.quiet_s) if self.profile.quiet_s else 0.0
        with srv.Background(server.pid) as background:
            result = loadgen.run_wrk(
                server.rpc_url,
                method=method,
                connections=connections,
                duration=duration,
                key=server.key,
                nonce=uuid.uuid4().hex[:10],
                expect=EXPECT[method],
                ids_file=ids_file,
                max_answers=self.profile.max_answers,
            )
        result["server_cpu_pct"] = background.server_pct
        result["others_cpu_pct"] = background.others_pct
        result["quiet_wait_s"] = round(waited, 1)
        return result

    # message/send ------------------------------------------------------------------------

    def _servers_for(self, scenario: str) -> list[str]:
        """The running servers a scenario measures: the 1.0 ones only those that speak A2A 1.0."""
        return [n for n in self.running if not scenario.endswith("10") or self.running[n].slot.a2a_1_0]

    def scenario_send(self, scenario: str = "send") -> None:
        """``send`` (0.3 ``message/send``) or ``send10`` (1.0 ``SendMessage``), at each concurrency."""
        out: dict[str, Any] = {}
        for name in self._servers_for(scenario):
            log(f"{scenario}: {name} warm-up {self.profile.warmup_s}s")
            with self.under_load(name):
                if self.profile.warmup_s:
                    self.wrk(name, scenario, 32, self.profile.warmup_s)
                runs = {}
                for c in self.profile.send_concurrency:
                    runs[f"c{c}"] = result = self.wrk(name, scenario, c, self.profile.measure_s)
                    log(
                        f"{scenario}: {name} c={c}: {result['rps']:.0f} req/s, p50 {result['p50_ms']} ms, p99 "
                        f"{result['p99_ms']} ms, failed {result['failed']}"
                    )
            out[name] = runs
            if self.args.profile and name.startswith("tether") and 32 in self.profile.send_concurrency:
                self.result.setdefault("profiles", {})[f"{name} {scenario}"] = self.profile_run(name, scenario)
        self.result["scenarios"][scenario] = out

    def profile_run(self, name: str, method: str, ids_file: Path | None = None) -> dict[str, Any]:
        """py-spy on the host during one extra c=32 run (not the measured one)."""
        pyspy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
        if not Path(pyspy).exists():
            return {"skipped": "py-spy is not installed: pip install py-spy"}
        raw = self.results_dir / f"{self.stamp}-{name}-{method}-c32.pyspy.txt"
        # the process that runs the app: the server's own, or granian's worker (its only child)
        pid = srv.process_tree(self.running[name].pid)[-1]
        duration = max(3, self.profile.measure_s)
        spy = subprocess.Popen(
            [
                pyspy,
                "record",
                "-p",
                str(pid),
                "-d",
                str(duration + 1),
                "-r",
                "200",
                "-f",
                "raw",
                "-o",
                str(raw),
                "--nonblocking",
                "-t",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        time.sleep(0.5)
        under = self.wrk(name, method, 32, duration, ids_file)
        _, err = spy.communicate(timeout=duration + 30)
        if not raw.exists():
            return {"skipped": f"py-spy failed: {err.strip()[-300:]}"}
        log(f"profile: {raw}")
        summary = report.top_functions(raw.read_text(), seconds=under["duration_s"], rate=200)
        return {
            "server": name,
            "method": method,
            "file": str(raw),
            "rate": 200,
            "seconds": under["duration_s"],
            "rps_while_profiled": under["rps"],
            **summary,
        }

    # tasks/get ---------------------------------------------------------------------------

    def scenario_get(self, scenario: str = "get") -> None:
        """``get`` (0.3 ``tasks/get``) or ``get10`` (1.0 ``GetTask``): both read the same completed tasks."""
        out: dict[str, Any] = {}
        c = self.profile.get_concurrency
        for name in self._servers_for(scenario):
            ids_file = self.task_ids.get(name)
            if ids_file is None:
                ids = create_tasks(self.running[name], self.profile.get_tasks)
                self.task_ids[name] = ids_file = self.workdir / f"{name}-task-ids.txt"
                ids_file.write_text("\n".join(ids) + "\n")
            count = len(ids_file.read_text().split())
            log(f"{scenario}: {name} ({count} tasks)")
            with self.under_load(name):
                if self.profile.warmup_s:
                    self.wrk(name, scenario, c, self.profile.warmup_s, ids_file)
                result = self.wrk(name, scenario, c, self.profile.measure_s, ids_file)
            log(
                f"{scenario}: {name} c={c}: {result['rps']:.0f} req/s, p50 {result['p50_ms']} ms, p99 "
                f"{result['p99_ms']} ms, failed {result['failed']}"
            )
            if self.args.profile and name.startswith("tether"):
                self.result.setdefault("profiles", {})[f"{name} {scenario}"] = self.profile_run(
                    name, scenario, ids_file
                )
            out[name] = {f"c{c}": result, "tasks": count}
        self.result["scenarios"][scenario] = out

    # OpenWOP REST at both majors -----------------------------------------------------------

    def scenario_openwop(self) -> None:
        """``GET`` a run and ``POST`` a run through OpenWOP v1 (``/v1/runs``) and v2 (``/runs``), the same runs read
        at both majors, the two majors taking turns so that a slower machine slows both alike."""
        out: dict[str, Any] = {}
        c = self.profile.get_concurrency
        for name in [n for n in self.running if self.running[n].slot.durable]:
            server = self.running[name]
            bodies = [
                {"workflowId": "echo", "inputs": {"prompt": f"openwop {i}"}} for i in range(self.profile.get_tasks)
            ]
            answers = streams.run(_post_many(server.url + "/v1/runs", server.headers(), bodies, 32))
            ids_file = self.workdir / f"{name}-run-ids.txt"
            ids_file.write_text("\n".join(a["runId"] for a in answers) + "\n")
            entry: dict[str, Any] = {"runs": len(answers)}
            log(f"openwop: {name} ({len(answers)} runs)")
            with self.under_load(name):
                for op in ("get", "create"):
                    for major in ("v1", "v2"):  # warm both before either is measured
                        if self.profile.warmup_s:
                            self.wrk(name, f"{major}-{op}", c, self.profile.warmup_s, ids_file)
                    for _ in range(self.profile.turns):
                        for major in ("v1", "v2"):
                            result = self.wrk(name, f"{major}-{op}", c, self.profile.measure_s, ids_file)
                            entry.setdefault(f"{major}-{op}", []).append(result)
                            log(
                                f"openwop: {name} {major} {op} c={c}: {result['rps']:.0f} req/s, "
                                f"p99 {result['p99_ms']} ms, failed {result['failed']}"
                            )
            out[name] = entry
        self.result["scenarios"]["openwop"] = out

    # message/stream ----------------------------------------------------------------------

    def scenario_stream(self) -> None:
        out: dict[str, Any] = {}
        for name, server in self.running.items():
            if name.startswith("bare"):
                continue
            target = streams.Target(server.rpc_url, server.headers())
            out[name] = result = streams.run(
                streams.stream_latency(target, self.profile.stream_count, self.profile.stream_warmup)
            )
            log(
                f"stream: {name}: first event p50 {result['first_event_ms'].get('p50')} ms, complete p50 "
                f"{result['complete_ms'].get('p50')} ms"
            )
        self.result["scenarios"]["stream"] = out

    # tasks/resubscribe -------------------------------------------------------------------

    def scenario_resubscribe(self) -> None:
        out: dict[str, Any] = {}
        for name, server in self.running.items():
            if not server.slot.durable:
                continue  # the echo reference has no task that waits; nothing comparable to attach to
            target = streams.Target(server.rpc_url, server.headers())
            entry: dict[str, Any] = {}
            (waiting,) = create_tasks(server, 1, skill=GATED)
            entry["attach"] = streams.run(
                streams.attach_latency(
                    target, waiting, self.profile.attach_count, max(2, self.profile.attach_count // 10)
                )
            )
            log(f"resubscribe: {name}: attach p50 {entry['attach']['attach_ms'].get('p50')} ms")
            for count in self.profile.fanout:
                entry[f"fanout_{count}"] = result = self.fanout_rounds(server, target, count)
                log(
                    f"resubscribe: {name}: fan-out {count} x {result['rounds']}: delivered "
                    f"{result['delivered']}/{result['streams'] * result['rounds']}, "
                    f"p50 {result['delivery_ms'].get('p50')} ms, p99 {result['delivery_ms'].get('p99')} ms "
                    f"(rounds {result['round_p99_ms']}), RSS peak {result['rss_peak_mb']} MB"
                )
            out[name] = entry
        self.result["scenarios"]["resubscribe"] = out

    def fanout_rounds(self, server: srv.ServerProcess, target: streams.Target, count: int) -> dict[str, Any]:
        """``fanout_rounds`` fresh waiting tasks, ``count`` resubscribers each; latencies pooled."""
        pooled: list[float] = []
        rounds = []
        rss_before = srv.proc_rss_mb(server.pid)
        peak = 0.0
        attached: list[float | None] = []
        for _ in range(self.profile.fanout_rounds):
            srv.settle(server.pid)  # the last round's streams are torn down before the next opens
            (task_id,) = create_tasks(server, 1, skill=GATED)
            reply = {"message": streams.user_message("", task_id=task_id, data={"action": "accept"})}
            with srv.RssSampler(server.pid, 0.02) as sampler:
                result = streams.run(
                    streams.fanout(
                        target,
                        task_id,
                        count,
                        reply,
                        on_attached=lambda: attached.append(srv.proc_rss_mb(server.pid)),
                        host_cpu=lambda: srv.proc_cpu_seconds(server.pid),
                    )
                )
            peak = max(peak, sampler.peak)
            pooled += result.pop("latencies_s")
            rounds.append(result)
        return {
            "streams": count,
            "rounds": len(rounds),
            "delivered": sum(r["delivered"] for r in rounds),
            "every_stream": all(r["delivered"] == r["streams"] for r in rounds),
            "delivery_ms": streams.summary_ms(pooled),
            "round_p99_ms": [r["delivery_ms"].get("p99") for r in rounds],
            "round_window_ms": [r["window_ms"] for r in rounds],
            "round_client_cpu_pct": [r["client_cpu_pct"] for r in rounds],
            "round_host_cpu_pct": [r["host_cpu_pct"] for r in rounds],
            "next_event_kinds": sorted({k for r in rounds for k in r["next_event_kinds"]}),
            "reply_status": sorted({r["reply_status"] for r in rounds}),
            "rss_before_mb": rss_before,
            "rss_attached_mb": max((a for a in attached if a is not None), default=None),
            "rss_peak_mb": peak,
        }

    # the outbox (own processes, own stores, loopback TLS receivers) ---------------------------

    def scenario_outbox(self) -> None:
        # the outbox measures the egress worker and the receivers, not the server stack: uvicorn only
        names = [n for n in self.args.server_list if srv.SERVERS[n].durable and srv.SERVERS[n].stack == "uvicorn"]
        skipped = {
            n: self.result["servers"][n]["reason"]
            for n in names
            if self.result["servers"].get(n, {}).get("status") == "skipped"
        }
        scenario = outbox.OutboxScenario(
            self.launcher,
            self.workdir,
            outbox.QUICK if self.args.quick else outbox.FULL,
            compare_src=self.args.outbox_compare,
            receiver_workers=self.args.receiver_workers,
            spy=self.results_dir if self.args.profile else None,
            legs=self.args.outbox_leg_list,
        )
        result = scenario.run(names, skipped)
        for name in names:
            entry = self.result["servers"].setdefault(name, {"label": srv.SERVERS[name].label})
            if "skipped" in result[name]:
                entry.setdefault("status", "skipped")
                entry.setdefault("reason", result[name]["skipped"])
            else:
                entry.setdefault("status", "ok")
        self.result["scenarios"]["outbox"] = result

    def scenario_crash(self) -> None:
        # SIGKILLs under load: what each costs a receiver in deliveries sent twice (own processes and stores)
        names = [n for n in self.args.server_list if srv.SERVERS[n].durable and srv.SERVERS[n].stack == "uvicorn"]
        skipped = {
            n: self.result["servers"][n]["reason"]
            for n in names
            if self.result["servers"].get(n, {}).get("status") == "skipped"
        }
        scenario = crash.CrashScenario(self.launcher, self.workdir, crash.QUICK if self.args.quick else crash.FULL)
        result = scenario.run(names, skipped)
        for name in names:
            entry = self.result["servers"].setdefault(name, {"label": srv.SERVERS[name].label})
            if "skipped" in result[name]:
                entry.setdefault("status", "skipped")
                entry.setdefault("reason", result[name]["skipped"])
            else:
                entry.setdefault("status", "ok")
        self.result["scenarios"]["crash"] = result

    # restart and rest (own processes, own stores) ------------------------------------------

    def scenario_restart_and_rest(self, restart: bool, rest: bool) -> None:
        restart_out: dict[str, Any] = {}
        rest_out: dict[str, Any] = {}
        names = [n for n in self.args.server_list if srv.SERVERS[n].durable]
        for name in names:
            status = self.result["servers"].setdefault(name, {"label": srv.SERVERS[name].label})
            try:
                if status.get("status") == "skipped":
                    raise srv.Skipped(status["reason"])
                log(f"restart: starting {name} on a fresh store")
                server = self.launcher.start_tether(name, "restart")
            except srv.Skipped as skipped:
                status.setdefault("status", "skipped")
                status.setdefault("reason", str(skipped))
                if restart:
                    restart_out[name] = {"skipped": str(skipped)}
                if rest:
                    rest_out[name] = {"skipped": str(skipped)}
                continue
            status.setdefault("status", "ok")
            sizes = self.profile.restart_runs if restart else self.profile.restart_runs[-1:]
            runs: list[str] = []
            results = []
            try:
                for size in sizes:
                    log(f"restart: {name}: filling {size - len(runs)} more waiting runs (to {size})")
                    t_fill = time.monotonic()
                    made, stragglers = fill_waiting_runs(server, size - len(runs), 15 + size / 1000)
                    runs += made
                    fill_s = time.monotonic() - t_fill
                    server.stop()
                    measured = self.restart_once(server, runs)
                    measured["fill_s"] = round(fill_s, 2)
                    measured["not_at_gate"] = stragglers  # runs that never reached their gate before the stop
                    results.append(measured)
                    log(
                        f"restart: {name}: {size} waiting runs: serving after {measured['serving_s']} s (announced "
                        f"{measured['announced_s']} s, resumed {measured['resumed']})"
                    )
                if rest:
                    time.sleep(self.profile.rest_settle_s)
                    cpu = srv.cpu_percent(server.pid, self.profile.rest_window_s)
                    rest_out[name] = {
                        "waiting_runs": len(runs),
                        "window_s": self.profile.rest_window_s,
                        "cpu_pct": cpu,
                        "rss_mb": srv.proc_rss_mb(server.pid),
                    }
                    log(
                        f"rest: {name}: {len(runs)} waiting runs: CPU {cpu} % over {self.profile.rest_window_s} s, "
                        f"RSS {rest_out[name]['rss_mb']} MB"
                    )
                if restart and results:
                    results[-1]["resume_verified"] = self.verify_resume(server, [runs[0], runs[-1]])
            finally:
                server.stop()
            if restart:
                restart_out[name] = {"runs": results}
        if restart:
            self.result["scenarios"]["restart"] = restart_out
        if rest:
            self.result["scenarios"]["rest"] = rest_out

    def restart_once(self, server: srv.ServerProcess, runs: list[str]) -> dict[str, Any]:
        """Process start → the "serving on" line → the first answered authenticated read."""
        t0 = server.spawn()
        server.wait_announced(t0, 300)
        serving = server.wait_answering(t0, 300, probe=("GET", f"/v1/runs/{runs[-1]}", None))
        match = re.search(r"resumed (\d+) unfinished", server.announcement)
        resumed = int(match.group(1)) if match else None
        return {
            "waiting_runs": len(runs),
            "announced_s": round(server.announced_s, 3),
            "serving_s": round(serving, 3),
            "resumed": resumed,
            # Tether re-arms every waiting run's gate before it announces; runs that were
            # mid-step would be kicked afterwards. The store held only gate-waiting runs.
            "resumed_s": round(server.announced_s, 3) if resumed == len(runs) else None,
            "rss_mb": srv.proc_rss_mb(server.pid),
        }

    def verify_resume(self, server: srv.ServerProcess, run_ids: list[str]) -> bool:
        """Accept the oldest and newest waiting runs after the restart; both must complete."""
        with httpx.Client(headers=server.headers(), timeout=30.0) as client:
            for run_id in run_ids:
                answer = client.post(
                    f"{server.url}/v1/runs/{run_id}/interrupts/gate", json={"resumeValue": {"action": "accept"}}
                )
                if answer.status_code >= 300:
                    log(f"warning: accepting {run_id} after the restart: HTTP {answer.status_code} {answer.text[:200]}")
                    return False
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                if all(client.get(f"{server.url}/v1/runs/{r}").json().get("status") == "completed" for r in run_ids):
                    return True
                time.sleep(0.05)
        return False


# --- main ---------------------------------------------------------------------------------------


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="bench/run.py", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--quick", action="store_true", help="tiny durations and counts (the CI smoke); numbers are not meaningful"
    )
    parser.add_argument("--only", help=f"comma-separated scenarios, from: {', '.join(SCENARIOS)} (default: all)")
    parser.add_argument(
        "--servers",
        help=f"comma-separated servers, from: {', '.join(srv.SERVERS)} (default: {', '.join(DEFAULT_SERVERS)})",
    )
    parser.add_argument(
        "--out", type=Path, help="the JSON report (default bench/results/<timestamp>.json; the .md goes beside it)"
    )
    parser.add_argument(
        "--pg-url",
        help="PostgreSQL server for the tether-postgres slot, an admin DSN: each Tether gets a fresh database "
        "there, dropped afterwards "
        f"(default: TETHER_BENCH_PG_URL, else TETHER_TEST_POSTGRES_URL, else {srv.DEFAULT_PG_URL})",
    )
    parser.add_argument(
        "--profile",
        action="store_true",
        help="run py-spy on Tether during an extra run (c=32) of each request/response scenario (message/send, "
        "tasks/get, and SendMessage, GetTask for send10, get10) and report the hottest functions",
    )
    parser.add_argument(
        "--tether-src",
        type=Path,
        help="run Tether from this source directory (the src/ of another checkout, e.g. `git worktree add`) "
        "instead of the installed package",
    )
    parser.add_argument(
        "--outbox-compare",
        type=Path,
        help="outbox scenario: also run the webhook burst to one receiver with Tether from this source directory "
        "(e.g. the src/ of a checkout of the pre-pipeline commit), taking turns with this build",
    )
    parser.add_argument(
        "--outbox-legs",
        help=f"outbox scenario: comma-separated legs, from: {', '.join(outbox.LEGS)} (default: all); "
        "e.g. backlog alone measures the drain rate",
    )
    parser.add_argument(
        "--receiver-workers",
        type=int,
        default=1,
        help="outbox scenario: processes serving each loopback receiver (they share its port)",
    )
    parser.add_argument(
        "--workdir",
        type=Path,
        help="where stores and logs go (default: a fresh temporary directory, removed after a clean run)",
    )
    parser.add_argument("--keep", action="store_true", help="keep the work directory (stores, server logs)")
    parser.add_argument(
        "--quiet-wait",
        type=float,
        help="before each wrk run, wait at most this many seconds for the machine to be quiet (default: the "
        "profile's, 30 s for the full run); on a machine that other work keeps busy, the wait only adds time",
    )
    args = parser.parse_args(argv)
    args.scenario_list = [s for s in (args.only or ",".join(SCENARIOS)).split(",") if s]
    args.server_list = [s for s in (args.servers or ",".join(DEFAULT_SERVERS)).split(",") if s]
    for s in args.scenario_list:
        if s not in SCENARIOS:
            parser.error(f"unknown scenario {s!r}; choose from {', '.join(SCENARIOS)}")
    args.outbox_leg_list = tuple(s for s in (args.outbox_legs or "").split(",") if s)
    for s in args.outbox_leg_list:
        if s not in outbox.LEGS:
            parser.error(f"unknown outbox leg {s!r}; choose from {', '.join(outbox.LEGS)}")
    for s in args.server_list:
        if s not in srv.SERVERS:
            parser.error(f"unknown server {s!r}; choose from {', '.join(srv.SERVERS)}")
    return args


def _raise_fd_limit() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = 65536 if hard == resource.RLIM_INFINITY else hard
    if soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))


def _background_load(seconds: float = 2.0) -> float:
    """CPU the machine's other processes use right now (100 = one core)."""
    busy0, own0, t0 = srv.system_busy_seconds(), sum(os.times()[:4]), time.monotonic()
    time.sleep(seconds)
    busy, own, elapsed = srv.system_busy_seconds() - busy0, sum(os.times()[:4]) - own0, time.monotonic() - t0
    return round(max(0.0, 100 * (busy - own) / elapsed), 1)


def _terminate(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt(f"signal {signum}")  # unwind, so every server process is stopped


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    signal.signal(signal.SIGTERM, _terminate)
    try:
        loadgen.wrk_path()
    except loadgen.WrkMissing as missing:
        print(f"bench: {missing}", file=sys.stderr)
        return 2
    _raise_fd_limit()
    if args.tether_src is not None:
        if not (args.tether_src / "tether" / "__init__.py").exists():
            print(f"bench: --tether-src {args.tether_src} has no tether/ package", file=sys.stderr)
            return 2
        srv.TETHER_SRC = args.tether_src.resolve()
    profile = QUICK if args.quick else FULL
    if args.quiet_wait is not None:
        profile = replace(profile, quiet_s=args.quiet_wait)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    out = args.out or BENCH / "results" / f"{stamp}{'-quick' if args.quick else ''}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="tether-bench-"))
    workdir.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    bench = Bench(args, profile, workdir, out.parent, stamp)
    bench.result["meta"] = {
        "started": datetime.now(UTC).isoformat(timespec="seconds"),
        "command": " ".join(["python", "bench/run.py", *(argv if argv is not None else sys.argv[1:])]),
        "profile": asdict(profile),
        "scenarios": args.scenario_list,
        "machine": machine(),
        "workdir": str(workdir),
    }
    quiet = _background_load()
    bench.result["meta"]["background_cpu_pct_at_start"] = quiet
    if quiet > 10:
        log(
            f"warning: other processes are using {quiet} % of a core: numbers will be lower and noisier than on a "
            "quiet machine"
        )
    ok = False
    try:
        live = ("send", "get", "send10", "get10", "openwop", "stream", "resubscribe")
        live_scenarios = [s for s in args.scenario_list if s in live]
        if live_scenarios:
            bench.start_servers(args.server_list)
            steps: dict[str, Callable[[], None]] = {
                "send": bench.scenario_send,
                "get": bench.scenario_get,
                "send10": lambda: bench.scenario_send("send10"),
                "get10": lambda: bench.scenario_get("get10"),
                "openwop": bench.scenario_openwop,
                "stream": bench.scenario_stream,
                "resubscribe": bench.scenario_resubscribe,
            }
            try:
                for name in live_scenarios:
                    steps[name]()
            finally:
                bench.stop_servers()
        restart, rest = "restart" in args.scenario_list, "rest" in args.scenario_list
        if restart or rest:
            bench.scenario_restart_and_rest(restart, rest)
        if "outbox" in args.scenario_list:
            bench.scenario_outbox()
        if "crash" in args.scenario_list:
            bench.scenario_crash()
        ok = True
    finally:
        bench.launcher.close()
        bench.result["meta"]["duration_s"] = round(time.monotonic() - started, 1)
        bench.result["meta"]["complete"] = ok
        bench.result["targets"] = report.targets(bench.result)
        bench.result["a2a_1_0_vs_0_3"] = report.version_ratios(bench.result)
        bench.result["openwop_v2_vs_v1"] = report.major_ratios(bench.result)
        bench.result["uvicorn_vs_granian"] = report.stack_ratios(bench.result)
        out.write_text(json.dumps(bench.result, indent=2) + "\n")
        markdown = report.markdown(bench.result)
        out.with_suffix(".md").write_text(markdown)
        print(markdown)
        log(f"report: {out} (and {out.with_suffix('.md').name}); {bench.result['meta']['duration_s']} s")
        if ok and not args.keep and args.workdir is None:
            shutil.rmtree(workdir, ignore_errors=True)
        else:
            log(f"work directory kept: {workdir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
