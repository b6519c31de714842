"""The outbox scenario: deliveries from Tether to loopback TLS receivers, timed at the receiver.

Every delivery's latency is its receipt (the receiver's ``time.time()`` when the request's
last byte arrived) less the commit time it carries: the ``timestamp`` of the event it
reports (a webhook's ``event.timestamp``, a push's ``status.timestamp``), which the host
stamps with the same clock, in milliseconds, just before the event's commit. So a latency
includes the commit itself and at most 1 ms of truncation: it is never flattered.

Legs (each on a fresh host and store; see docs/benchmarks.md for what each number means):

* ``burst``: N deliveries, created as fast as a client can, to one receiver and to ten.
  Webhooks: each run is watched by ten webhooks (ten paths on the one receiver, or one on
  each of ten), subscribed to ``run.completed``; pushes: one per ``message/send`` of the
  echo skill with a push config. deliveries/s = N / (last receipt − first commit).
* ``sustained``: tasks offered at a fixed rate, each bringing a push and a webhook, for a
  fixed time; commit → receipt p50/p99 over every delivery.
* ``backlog``: N webhook deliveries enqueued by a host whose outbox worker is held
  (``apps/held_outbox.py``), so that exactly N rows are due; then a normal host on the same
  store drains them. drain/s = N / (last receipt − first receipt).
* ``ceilings``: the receiver alone under wrk (its own limit), and the egress client alone
  (``apps/egress_client.py``: Tether's guarded client posting as fast as it can, no store).

Receivers are ``apps/receiver.py`` processes (raw asyncio on uvloop, 204, keep-alive).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import report
import servers as srv
import streams

APPS = Path(__file__).resolve().parent / "apps"
#: webhooks per run in the webhook legs: to one receiver (ten paths) or one on each of ten
HOOKS_PER_RUN = 10
#: the body the receiver ceiling is measured with: about a webhook's size
_SAMPLE_BODY = json.dumps({"runId": "r" * 26, "event": {"type": "run.completed", "timestamp": "x" * 24, "data": {}}})


@dataclass(frozen=True)
class OutboxProfile:
    burst_webhooks: int  # deliveries per webhook burst
    burst_pushes: int  # deliveries per push burst
    sustained_rate: int  # deliveries offered per second (half pushes, half webhooks)
    sustained_s: float
    backlog: int  # rows enqueued before the drain
    ceiling_s: int  # each wrk run at the receiver
    client_requests: int  # posts of the egress-client ceiling
    compare_webhooks: int  # deliveries per burst of a --outbox-compare build
    compare_rounds: int


#: the legs of the scenario, in the order they run (``--outbox-legs`` picks some)
LEGS = ("burst_webhook_1", "burst_webhook_10", "burst_push_1", "burst_push_10", "sustained", "backlog")

FULL = OutboxProfile(20_000, 5_000, 500, 60.0, 50_000, 5, 10_000, 2_000, 2)
QUICK = OutboxProfile(100, 20, 50, 1.0, 200, 1, 200, 50, 1)


def log(message: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


# --- receivers ------------------------------------------------------------------------------------


class Certs:
    """A throwaway CA (trustme) and a certificate for 127.0.0.1, as files the processes read."""

    def __init__(self, folder: Path) -> None:
        import trustme

        folder.mkdir(parents=True, exist_ok=True)
        ca = trustme.CA()
        cert = ca.issue_cert("127.0.0.1")
        self.ca = folder / "ca.pem"
        self.cert = folder / "receiver-cert.pem"
        self.key = folder / "receiver-key.pem"
        ca.cert_pem.write_to_path(str(self.ca))
        cert.cert_chain_pems[0].write_to_path(str(self.cert))
        for extra in cert.cert_chain_pems[1:]:
            with open(self.cert, "ab") as f:
                f.write(extra.bytes())
        cert.private_key_pem.write_to_path(str(self.key))


class Receiver:
    """One receiver (a host and port), served by ``workers`` processes sharing the port."""

    def __init__(self, certs: Certs, logs: Path, workers: int = 1) -> None:
        self.procs: list[subprocess.Popen[str]] = []
        self.port = 0
        for _ in range(workers):
            proc = subprocess.Popen(
                [sys.executable, str(APPS / "receiver.py"), "--cert", str(certs.cert), "--key", str(certs.key)]
                + ["--port", str(self.port)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=open(logs / "receiver.log", "a"),
                text=True,
                bufsize=1,
                start_new_session=True,
            )
            self.procs.append(proc)
            assert proc.stdout is not None
            line = proc.stdout.readline()
            if not line.startswith("listening "):
                self.stop()
                raise RuntimeError(f"the receiver did not start: {line!r}; see {logs / 'receiver.log'}")
            self.port = int(line.split()[1])

    def url(self, path: str) -> str:
        return f"https://127.0.0.1:{self.port}{path}"

    def _ask(self, command: str) -> int:
        total = 0
        for proc in self.procs:
            assert proc.stdin is not None and proc.stdout is not None
            proc.stdin.write(command + "\n")
            proc.stdin.flush()
            total += int(proc.stdout.readline())
        return total

    def count(self) -> int:
        return self._ask("count")

    def reset(self) -> None:
        self._ask("reset")

    def receipts(self, folder: Path) -> list[tuple[float, str, str, str]]:
        out: list[tuple[float, str, str, str]] = []
        for i, proc in enumerate(self.procs):
            path = folder / f"receipts-{self.port}-{i}.jsonl"
            self._ask_one(proc, f"dump {path}")
            out += [tuple(json.loads(line)) for line in path.read_text().splitlines()]  # type: ignore[misc]
            path.unlink()
        return out

    @staticmethod
    def _ask_one(proc: subprocess.Popen[str], command: str) -> None:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(command + "\n")
        proc.stdin.flush()
        proc.stdout.readline()

    def cpu_seconds(self) -> float:
        return sum(srv.proc_cpu_seconds(p.pid) or 0.0 for p in self.procs)

    def stop(self) -> None:
        for proc in self.procs:
            if proc.stdin is not None:
                proc.stdin.close()
        for proc in self.procs:
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)
            if proc.stdout is not None:
                proc.stdout.close()
        self.procs.clear()


class Receivers:
    """The receivers of one leg; counts and receipts over all of them."""

    def __init__(self, certs: Certs, logs: Path, count: int, workers: int = 1) -> None:
        self.all: list[Receiver] = []
        try:
            for _ in range(count):
                self.all.append(Receiver(certs, logs, workers))
        except BaseException:
            self.stop()
            raise

    def count(self) -> int:
        return sum(r.count() for r in self.all)

    def reset(self) -> None:
        for r in self.all:
            r.reset()

    def receipts(self, folder: Path) -> list[tuple[float, str, str, str]]:
        return [x for r in self.all for x in r.receipts(folder)]

    def cpu_seconds(self) -> float:
        return sum(r.cpu_seconds() for r in self.all)

    def wait_for(self, expected: int, timeout: float, *, progress: Callable[[int], None] | None = None) -> int:
        """Poll until ``expected`` requests arrived (or ``timeout`` seconds); returns the count."""
        deadline = time.monotonic() + timeout
        seen, last_log = 0, time.monotonic()
        while time.monotonic() < deadline:
            seen = self.count()
            if seen >= expected:
                return seen
            if progress is not None and time.monotonic() - last_log > 5:
                progress(seen)
                last_log = time.monotonic()
            time.sleep(0.05)
        return seen

    def stop(self) -> None:
        for r in self.all:
            r.stop()


# --- the numbers ----------------------------------------------------------------------------------


def _commit_time(stamp: str) -> float | None:
    try:
        return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def summarise(receipts: list[tuple[float, str, str, str]], expected: int) -> dict[str, Any]:
    """Distinct deliveries, duplicates, rate from the first commit, commit → receipt latency."""
    first: dict[str, tuple[float, str]] = {}
    for t, delivery, stamp, _ in sorted(receipts):
        first.setdefault(delivery, (t, stamp))
    latencies, commits = [], []
    for t, stamp in first.values():
        committed = _commit_time(stamp)
        if committed is not None:
            commits.append(committed)
            latencies.append(max(t - committed, 0.0))
    times = sorted(t for t, _ in first.values())
    out: dict[str, Any] = {
        "expected": expected,
        "delivered": len(first),
        "duplicates": len(receipts) - len(first),
        "latency_ms": streams.summary_ms(latencies),
    }
    if times and commits:
        span = times[-1] - min(commits)
        out["first_commit_to_last_receipt_s"] = round(span, 3)
        out["deliveries_per_s"] = round(len(first) / span, 1) if span > 0 else None
    if len(times) > 1:
        out["first_to_last_receipt_s"] = round(times[-1] - times[0], 3)
        out["receipt_rate_per_s"] = round((len(times) - 1) / (times[-1] - times[0]), 1)
    return out


# --- load: runs with webhooks, tasks with pushes --------------------------------------------------


async def _register_webhooks(server: srv.ServerProcess, urls: list[str]) -> None:
    async with httpx.AsyncClient(headers=server.headers(), timeout=30.0) as client:
        for url in urls:
            answer = await client.post(f"{server.url}/v1/webhooks", json={"url": url, "events": ["run.completed"]})
            if answer.status_code >= 300:
                raise RuntimeError(f"registering the webhook {url}: HTTP {answer.status_code} {answer.text[:300]}")


def register_webhooks(server: srv.ServerProcess, receivers: Receivers, per_run: int) -> int:
    """``per_run`` webhooks on run.completed, spread over the receivers; returns how many."""
    urls = [receivers.all[i % len(receivers.all)].url(f"/hook/{i}") for i in range(per_run)]
    streams.run(_register_webhooks(server, urls))
    return len(urls)


def _run_body(i: int) -> tuple[str, dict[str, Any]]:
    return "/v1/runs", {"workflowId": "echo", "inputs": {"prompt": f"outbox {i}"}}


def _push_body(push_url: str) -> tuple[str, dict[str, Any]]:
    return "/v1/a2a", {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "message/send",
        "params": {
            "message": streams.user_message("outbox push"),
            "configuration": {"pushNotificationConfig": {"url": push_url, "token": "bench-token"}, "blocking": False},
        },
    }


async def _offer(
    server: srv.ServerProcess,
    bodies: Callable[[int], tuple[str, dict[str, Any]]],
    count: int,
    *,
    rate: float | None,
    concurrency: int = 16,
) -> dict[str, Any]:
    """POST ``count`` requests, as fast as ``concurrency`` allows or paced at ``rate`` per second."""
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    failures: list[str] = []
    started = time.monotonic()
    behind = 0.0
    next_index = iter(range(count))
    async with httpx.AsyncClient(headers=server.headers(), timeout=60.0, limits=limits) as client:

        async def worker() -> None:
            nonlocal behind
            for i in next_index:
                if rate is not None:
                    due = started + i / rate
                    wait = due - time.monotonic()
                    if wait > 0:
                        await asyncio.sleep(wait)
                    else:
                        behind = max(behind, -wait)
                path, body = bodies(i)
                answer = await client.post(server.url + path, json=body)
                if answer.status_code >= 300 or (path == "/v1/a2a" and "error" in answer.json()):
                    failures.append(f"HTTP {answer.status_code}: {answer.text[:200]}")

        await asyncio.gather(*(worker() for _ in range(concurrency)))
    elapsed = time.monotonic() - started
    if failures:
        raise RuntimeError(f"{len(failures)} of {count} requests failed; first: {failures[0]}")
    return {"requests": count, "seconds": round(elapsed, 3), "rate": round(count / elapsed, 1), "behind_s": behind}


# --- the scenario ---------------------------------------------------------------------------------


class OutboxScenario:
    """Runs every leg against each Tether slot; the result goes under ``scenarios.outbox``."""

    def __init__(
        self,
        launcher: srv.Launcher,
        workdir: Path,
        profile: OutboxProfile,
        *,
        compare_src: Path | None = None,
        receiver_workers: int = 1,
        spy: Path | None = None,
        legs: tuple[str, ...] = (),
    ) -> None:
        self.launcher = launcher
        #: the legs to run (``LEGS``), every one when empty
        self.legs = legs or LEGS
        self.workdir = workdir / "outbox"
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.profile = profile
        self.compare_src = compare_src
        self.receiver_workers = receiver_workers
        #: where py-spy's raw profile of each drain goes (``--profile``), else no profile
        self.spy = spy
        self.certs = Certs(self.workdir / "certs")

    def egress_flags(self) -> tuple[str, ...]:
        return ("--egress-allow-cidr", "127.0.0.1/32", "--egress-ca-bundle", str(self.certs.ca))

    def receivers(self, count: int) -> Receivers:
        return Receivers(self.certs, self.launcher.logs, count, self.receiver_workers)

    def host(self, name: str, tag: str, src: Path | None = None, **how: Any) -> srv.ServerProcess:
        """A started Tether that may send to the loopback receivers (raises Skipped)."""
        return self.launcher.start_tether(name, tag, *self.egress_flags(), src=src, **how)

    # ceilings -------------------------------------------------------------------------------------

    def ceilings(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        receivers = self.receivers(1)
        try:
            receiver = receivers.all[0]
            out["receiver_wrk"] = self.receiver_ceiling(receiver)
            receiver.reset()
            out["egress_client"] = {"this build": self.client_ceiling(receiver, None)}
            if self.compare_src is not None:
                receiver.reset()
                out["egress_client"]["compared build"] = self.client_ceiling(receiver, self.compare_src)
        finally:
            receivers.stop()
        return out

    def receiver_ceiling(self, receiver: Receiver) -> dict[str, Any]:
        """wrk (one thread, c=16, TLS, keep-alive) POSTing a webhook-sized body at one receiver."""
        import loadgen

        script = self.workdir / "post.lua"
        script.write_text(
            f"wrk.method = 'POST'\nwrk.body = {json.dumps(_SAMPLE_BODY)}\n"
            "wrk.headers['Content-Type'] = 'application/json'\nwrk.headers['webhook-id'] = 'dlv_bench'\n"
        )
        cpu0, t0 = receiver.cpu_seconds(), time.monotonic()
        proc = subprocess.run(
            [loadgen.wrk_path(), "-t1", "-c16", f"-d{self.profile.ceiling_s}s", "-s", str(script), receiver.url("/")],
            capture_output=True,
            text=True,
            timeout=self.profile.ceiling_s + 30,
        )
        elapsed = time.monotonic() - t0
        match = re.search(r"Requests/sec:\s+([\d.]+)", proc.stdout)
        rps = float(match.group(1)) if match else None
        cpu = round(100 * (receiver.cpu_seconds() - cpu0) / elapsed, 1)
        log(f"outbox: receiver ceiling (wrk c=16, {len(receiver.procs)} process(es)): {rps} req/s at {cpu} % CPU")
        return {"rps": rps, "connections": 16, "processes": len(receiver.procs), "receiver_cpu_pct": cpu}

    def client_ceiling(self, receiver: Receiver, src: Path | None) -> dict[str, Any]:
        """Tether's guarded egress client alone, posting to the receiver (16 at once)."""
        env = {**os.environ}
        # a compared build may open a connection per request (the pre-pipeline one did): fewer of them
        requests = self.profile.client_requests if src is None else self.profile.compare_webhooks
        src = src or srv.TETHER_SRC
        if src is not None:
            env["PYTHONPATH"] = str(src)
        proc = subprocess.run(
            [
                sys.executable,
                str(APPS / "egress_client.py"),
                "--url",
                receiver.url("/client"),
                "--ca",
                str(self.certs.ca),
            ]
            + ["--requests", str(requests), "--concurrency", "16"],
            capture_output=True,
            text=True,
            timeout=600,
            env=env,
        )
        if proc.returncode != 0:  # "error", not "failed": the client reports its failed requests as "failed"
            return {"error": proc.stderr.strip()[-500:]}
        result: dict[str, Any] = json.loads(proc.stdout)
        result["received"] = receiver.count()
        log(
            f"outbox: egress client ceiling ({src or 'this build'}): {result['rps']} req/s at {result['cpu_pct']} % CPU"
        )
        return result

    # legs -----------------------------------------------------------------------------------------

    def measure(
        self,
        name: str,
        tag: str,
        *,
        receivers: int,
        kind: str,
        count: int,
        rate: float | None = None,
        src: Path | None = None,
    ) -> dict[str, Any]:
        """One leg on a fresh host: create the load, wait for every delivery, summarise."""
        group = self.receivers(receivers)
        server: srv.ServerProcess | None = None
        try:
            server = self.host(name, tag, src)
            hooks = register_webhooks(server, group, HOOKS_PER_RUN if kind == "webhook" else 1) if kind != "push" else 0
            if kind == "webhook":
                runs = -(-count // hooks)
                expected = runs * hooks
                bodies: Callable[[int], tuple[str, dict[str, Any]]] = _run_body
            else:  # "push": one push per task; "mixed": and the one webhook of its run
                runs = count if kind == "push" else -(-count // 2)
                expected = runs if kind == "push" else runs * 2
                urls = [r.url("/push") for r in group.all]

                def bodies(i: int) -> tuple[str, dict[str, Any]]:
                    return _push_body(urls[i % len(urls)])

            offer_rate = None if rate is None else rate * runs / expected
            cpu0, rx0, t0 = srv.proc_cpu_seconds(server.pid) or 0.0, group.cpu_seconds(), time.monotonic()
            with srv.Background(server.pid) as background:
                offered = streams.run(_offer(server, bodies, runs, rate=offer_rate))
                seen = group.wait_for(
                    expected,
                    timeout=max(60.0, expected / 50),
                    progress=lambda n: log(f"outbox: {name} {tag}: {n:,}/{expected:,} received"),
                )
            elapsed = time.monotonic() - t0
            result = summarise(group.receipts(self.workdir), expected)
            result.update(
                kind=kind,
                receivers=receivers,
                runs=runs,
                offered=offered,
                received_requests=seen,
                complete=result["delivered"] >= expected,
                host_cpu_pct=round(100 * ((srv.proc_cpu_seconds(server.pid) or 0.0) - cpu0) / elapsed, 1),
                host_cpu_ms_per_delivery=round(
                    1000 * ((srv.proc_cpu_seconds(server.pid) or 0.0) - cpu0) / max(result["delivered"], 1), 3
                ),
                receiver_cpu_pct=round(100 * (group.cpu_seconds() - rx0) / elapsed, 1),
                others_cpu_pct=background.others_pct,
            )
            log(
                f"outbox: {name} {tag}: {result['delivered']:,}/{expected:,} delivered, "
                f"{result.get('deliveries_per_s')}/s, p50 {result['latency_ms'].get('p50')} ms, "
                f"p99 {result['latency_ms'].get('p99')} ms; host {result['host_cpu_pct']} %, "
                f"receivers {result['receiver_cpu_pct']} %, others {result['others_cpu_pct']} %"
            )
            return result
        finally:
            if server is not None:
                server.stop()
            group.stop()

    def backlog(self, name: str) -> dict[str, Any]:
        """N webhook rows enqueued by a host whose outbox is held, then drained by a normal one."""
        group = self.receivers(1)
        server: srv.ServerProcess | None = None
        try:
            server = self.host(name, "outbox-backlog", entry=(str(APPS / "held_outbox.py"),))
            held = server.cmd
            hooks = register_webhooks(server, group, HOOKS_PER_RUN)
            runs = -(-self.profile.backlog // hooks)
            expected = runs * hooks
            t_fill = time.monotonic()
            streams.run(_offer(server, _run_body, runs, rate=None, concurrency=32))
            fill_s = time.monotonic() - t_fill
            srv.settle(server.pid)  # the last runs complete and enqueue
            server.stop()
            if group.count():
                raise RuntimeError("the held host delivered: the backlog leg needs its outbox held")
            server.cmd = [held[0], "-m", "tether", *held[2:]]  # the same host, its outbox running
            t0 = server.spawn()
            server.wait_announced(t0, 60)
            ready = time.monotonic()
            cpu0 = srv.proc_cpu_seconds(server.pid) or 0.0
            rx0 = group.cpu_seconds()
            spy = self.start_spy(server.pid, f"{name}-backlog")
            with srv.Background(server.pid) as background:
                seen = group.wait_for(expected, timeout=max(60.0, expected / 50))
            elapsed = time.monotonic() - ready
            profile = self.stop_spy(spy)
            result = summarise(group.receipts(self.workdir), expected)
            result.update(
                kind="webhook",
                receivers=1,
                runs=runs,
                fill_s=round(fill_s, 2),
                received_requests=seen,
                complete=result["delivered"] >= expected,
                start_to_first_receipt_s=None,
                host_cpu_pct=round(100 * ((srv.proc_cpu_seconds(server.pid) or 0.0) - cpu0) / elapsed, 1),
                host_cpu_ms_per_delivery=round(
                    1000 * ((srv.proc_cpu_seconds(server.pid) or 0.0) - cpu0) / max(result["delivered"], 1), 3
                ),
                receiver_cpu_pct=round(100 * (group.cpu_seconds() - rx0) / elapsed, 1),
                others_cpu_pct=background.others_pct,
            )
            if profile is not None:
                result["profile"] = profile
            log(
                f"outbox: {name} backlog of {expected:,} (filled in {fill_s:.1f} s): drained "
                f"{result['delivered']:,} at {result.get('receipt_rate_per_s')}/s; host {result['host_cpu_pct']} %"
            )
            return result
        finally:
            if server is not None:
                server.stop()
            group.stop()

    def start_spy(self, pid: int, tag: str) -> tuple[subprocess.Popen[str], Path] | None:
        """py-spy on the host from now until :meth:`stop_spy` (``--profile`` only)."""
        if self.spy is None:
            return None
        pyspy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
        if not Path(pyspy).exists():
            log("outbox: py-spy is not installed (pip install py-spy): no profile")
            return None
        raw = self.spy / f"outbox-{tag}.pyspy.txt"
        cmd = [pyspy, "record", "-p", str(pid), "-r", "200", "-f", "raw", "-o", str(raw), "--nonblocking", "-t"]
        return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True), raw

    @staticmethod
    def stop_spy(spy: tuple[subprocess.Popen[str], Path] | None) -> dict[str, Any] | None:
        if spy is None:
            return None
        proc, raw = spy
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
        if not raw.exists():
            return {"skipped": f"py-spy failed: {err.strip()[-300:]}"}
        log(f"outbox: profile {raw}")
        return {"file": str(raw), **report.top_functions(raw.read_text(), count=15)}

    def run(self, names: list[str], skipped: dict[str, str]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        log("outbox: ceilings")
        out["ceilings"] = self.ceilings()
        p = self.profile
        for name in names:
            if name in skipped:
                out[name] = {"skipped": skipped[name]}
                continue
            try:
                entry: dict[str, Any] = {}
                if self.compare_src is not None:
                    entry["compare"] = self.compare(name)
                if "burst_webhook_1" in self.legs:
                    entry["burst_webhook_1"] = self.measure(
                        name, "burst-w1", receivers=1, kind="webhook", count=p.burst_webhooks
                    )
                if "burst_webhook_10" in self.legs:
                    entry["burst_webhook_10"] = self.measure(
                        name, "burst-w10", receivers=10, kind="webhook", count=p.burst_webhooks
                    )
                if "burst_push_1" in self.legs:
                    entry["burst_push_1"] = self.measure(
                        name, "burst-p1", receivers=1, kind="push", count=p.burst_pushes
                    )
                if "burst_push_10" in self.legs:
                    entry["burst_push_10"] = self.measure(
                        name, "burst-p10", receivers=10, kind="push", count=p.burst_pushes
                    )
                if "sustained" in self.legs:
                    entry["sustained"] = self.measure(
                        name,
                        "sustained",
                        receivers=1,
                        kind="mixed",
                        count=int(p.sustained_rate * p.sustained_s),
                        rate=p.sustained_rate,
                    )
                    entry["sustained"]["offered_rate"] = p.sustained_rate
                    entry["sustained"]["offered_s"] = p.sustained_s
                if "backlog" in self.legs:
                    entry["backlog"] = self.backlog(name)
            except srv.Skipped as skip:
                entry = {"skipped": str(skip)}
            out[name] = entry
        return out

    def compare(self, name: str) -> dict[str, Any]:
        """The webhook burst to one receiver, this build and the compared one taking turns."""
        rounds: list[dict[str, Any]] = []
        for i in range(self.profile.compare_rounds):
            for label, src in (("compared build", self.compare_src), ("this build", None)):
                # a store of its own per build and round: a second start on one store prints no key
                tag = f"compare-{i}-{'then' if src is not None else 'now'}"
                result = self.measure(
                    name, tag, receivers=1, kind="webhook", count=self.profile.compare_webhooks, src=src
                )
                result["build"] = label
                rounds.append(result)
        return {"src": str(self.compare_src), "rounds": rounds}
