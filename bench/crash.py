"""The crash scenario: a host SIGKILLed again and again under a mixed load, and what each kill
costs a receiver that does not de-duplicate.

Delivery is at least once: a delivery the receiver answered 2xx but the host had not yet
recorded as delivered when it died is sent again after the restart, with the same
``webhook-id``. This scenario counts those re-sends.

* Load: runs of the echo workflow offered at a fixed rate, each watched by ``hooks``
  webhooks on ``run.completed``, and ``message/send`` with a push config at another rate,
  from a thread of their own that follows the host across restarts (its port changes) and
  counts what was refused while it was down.
* Kills: each life of the host ends with SIGKILL to its process group (a crash: no shutdown
  code runs) once the receiver has counted ``receipts_per_life`` more requests than when the
  life began, so the host dies with deliveries in flight; it is started again at once on the
  same store. Lives alternate between a short and a long count, so some kills land in the
  drain of what piled up while the host was down and others in the steady load.
* Then the load stops and the outbox drains. The receiver (``apps/receiver.py``) has every
  request's time and ``webhook-id``; the store's outbox says what was enqueued. Every row must
  be delivered and every id received; re-deliveries = requests beyond the first per id, each
  charged to the last kill before it, and divided by the kills.
"""

from __future__ import annotations

import asyncio
import bisect
import itertools
import sqlite3
import threading
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import outbox
import servers as srv
import streams

log = outbox.log


@dataclass(frozen=True)
class CrashProfile:
    #: each a run of the scenario on a fresh host with ``--delivery-concurrency`` at this value
    concurrencies: tuple[int, ...]
    kills: int
    #: the host is killed once the receiver has counted this many more requests (lives alternate)
    receipts_per_life: tuple[int, int]
    run_rate: float  # runs offered per second, each bringing ``hooks`` webhook deliveries
    push_rate: float  # message/send with a push config offered per second
    hooks: int
    drain_timeout_s: float


#: deliveries in flight at once to one receiver when ``tether serve`` is not told otherwise
HOST_DEFAULT = 16

#: the host's default and 2: a kill re-sends about as many as are in flight to the receiver. The
#: full load offers ~1,550 deliveries/s (150 runs/s, ten webhooks each, and 50 pushes/s), more than
#: the host drains under it, so the outbox is busy at every kill, as after a crash in earnest
FULL = CrashProfile(
    (16, 2), kills=30, receipts_per_life=(300, 1500), run_rate=150, push_rate=50, hooks=10, drain_timeout_s=120
)
QUICK = CrashProfile(
    (16, 2), kills=2, receipts_per_life=(20, 60), run_rate=20, push_rate=10, hooks=2, drain_timeout_s=60
)


class Load:
    """Runs and pushes offered at fixed rates, from a thread, to wherever the host serves now."""

    def __init__(self, headers: dict[str, str], push_url: str, profile: CrashProfile) -> None:
        self.headers = headers
        self.push_url = push_url
        self.profile = profile
        self.url = ""  # set by ``follow`` before ``start``
        self.accepted = 0
        self.refused = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=lambda: streams.run(self._main()), name="crash-load", daemon=True)

    def follow(self, url: str) -> None:
        self.url = url

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> dict[str, int]:
        self._stop.set()
        self._thread.join(60)
        return {"accepted": self.accepted, "refused": self.refused}

    async def _main(self) -> None:
        limits = httpx.Limits(max_connections=64, max_keepalive_connections=64)
        async with httpx.AsyncClient(headers=self.headers, timeout=10.0, limits=limits) as client:
            await asyncio.gather(
                self._offer(client, self.profile.run_rate, self._run),
                self._offer(client, self.profile.push_rate, self._push),
            )

    async def _offer(self, client: httpx.AsyncClient, rate: float, body: Any) -> None:
        """One request every 1/rate s (never more than 32 unanswered), until stopped."""
        if rate <= 0:
            return
        started = time.monotonic()
        open_requests: set[asyncio.Task[None]] = set()
        for i in itertools.count():
            if self._stop.is_set():
                break
            wait = started + i / rate - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
            if len(open_requests) >= 32:
                continue  # the host is down or behind: this one is not offered
            task = asyncio.create_task(self._post(client, *body(i)))
            open_requests.add(task)
            task.add_done_callback(open_requests.discard)
        await asyncio.gather(*open_requests, return_exceptions=True)

    async def _post(self, client: httpx.AsyncClient, path: str, body: dict[str, Any]) -> None:
        try:
            answer = await client.post(self.url + path, json=body)
        except Exception:  # noqa: BLE001 - the host died under the request (httpcore may even raise AttributeError)
            self.refused += 1
            return
        if answer.status_code >= 300 or (path == "/v1/a2a" and "error" in answer.json()):
            self.refused += 1
        else:
            self.accepted += 1

    def _run(self, i: int) -> tuple[str, dict[str, Any]]:
        return "/v1/runs", {"workflowId": "echo", "inputs": {"prompt": f"crash {i}"}}

    def _push(self, i: int) -> tuple[str, dict[str, Any]]:
        return outbox._push_body(self.push_url)


def _flag(cmd: list[str], name: str) -> str | None:
    return cmd[cmd.index(name) + 1] if name in cmd else None


async def _pg_counts(url: str) -> tuple[dict[str, int], int]:
    import asyncpg

    conn = await asyncpg.connect(url)
    try:
        rows = await conn.fetch("SELECT status, count(*) FROM outbox GROUP BY status")
        active = await conn.fetchval(
            "SELECT count(*) FROM runs WHERE status NOT IN ('completed', 'failed', 'cancelled')"
        )
    finally:
        await conn.close()
    return {r[0]: int(r[1]) for r in rows}, int(active)


def store_counts(server: srv.ServerProcess) -> tuple[dict[str, int], int]:
    """The outbox's rows by status, and the runs not finished, read from the host's store itself."""
    url = _flag(server.cmd, "--database-url")
    if url is not None:
        return streams.run(_pg_counts(url))
    data_dir = _flag(server.cmd, "--data-dir")
    assert data_dir is not None
    conn = sqlite3.connect(f"file:{Path(data_dir) / 'tether.db'}?mode=ro", uri=True, timeout=30)
    try:
        by_status = {s: int(n) for s, n in conn.execute("SELECT status, count(*) FROM outbox GROUP BY status")}
        active = conn.execute(
            "SELECT count(*) FROM runs WHERE status NOT IN ('completed', 'failed', 'cancelled')"
        ).fetchone()[0]
    finally:
        conn.close()
    return by_status, int(active)


def redeliveries(receipts: list[tuple[float, str, str, str]], kills: list[float]) -> dict[str, Any]:
    """Requests beyond the first per ``webhook-id``, each charged to the first kill after the
    request it repeats (the kill that left it unrecorded), or to none if no kill came between."""
    last: dict[str, float] = {}
    per_kill: Counter[int] = Counter()
    without = 0
    #: how long before its kill each re-sent delivery had been received: the host had its 2xx
    #: (or was about to) for about that long without having recorded it
    unrecorded: list[float] = []
    for t, delivery, _, _ in sorted(receipts):
        before = last.get(delivery)
        last[delivery] = t
        if before is None:
            continue
        kill = bisect.bisect_left(kills, before)
        if kill < len(kills) and kills[kill] <= t:
            per_kill[kill] += 1
            unrecorded.append(kills[kill] - before)
        else:
            without += 1
    counts = [per_kill[i] for i in range(len(kills))]
    total = sum(counts) + without
    return {
        "distinct": len(last),
        "requests": len(receipts),
        "redelivered": total,
        "without_a_kill": without,
        "per_kill": round(total / len(kills), 2) if kills else None,
        "per_kill_max": max(counts, default=0),
        "per_kill_counts": counts,
        "received_before_the_kill_ms": streams.summary_ms(unrecorded),
    }


class CrashScenario:
    """SIGKILLs under a mixed load on each Tether slot; the result goes under ``scenarios.crash``."""

    def __init__(self, launcher: srv.Launcher, workdir: Path, profile: CrashProfile) -> None:
        self.launcher = launcher
        self.workdir = workdir / "crash"
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.profile = profile
        self.certs = outbox.Certs(self.workdir / "certs")

    def run(self, names: list[str], skipped: dict[str, str]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name in names:
            if name in skipped:
                out[name] = {"skipped": skipped[name]}
                continue
            try:
                out[name] = {f"concurrency_{c}": self.leg(name, c) for c in self.profile.concurrencies}
            except srv.Skipped as skip:
                out[name] = {"skipped": str(skip)}
        return out

    def leg(self, name: str, concurrency: int) -> dict[str, Any]:
        """One leg, or what stopped it (the others still run)."""
        try:
            return self.measure(name, concurrency)
        except RuntimeError as failed:
            log(f"crash: {name} (--delivery-concurrency {concurrency}): {failed}")
            return {"concurrency": concurrency, "error": str(failed), "complete": False}

    def measure(self, name: str, concurrency: int) -> dict[str, Any]:
        p = self.profile
        group = outbox.Receivers(self.certs, self.launcher.logs, 1)
        flags = ("--egress-allow-cidr", "127.0.0.1/32", "--egress-ca-bundle", str(self.certs.ca))
        if concurrency != HOST_DEFAULT:  # so that a build without the option measures its default
            flags += ("--delivery-concurrency", str(concurrency))
        server: srv.ServerProcess | None = None
        load: Load | None = None
        try:
            server = self.launcher.start_tether(name, f"crash-c{concurrency}", *flags)
            outbox.register_webhooks(server, group, p.hooks)
            receiver = group.all[0]
            load = Load(server.headers(), receiver.url("/push"), p)
            load.follow(server.url)
            load.start()
            kills: list[float] = []
            restart_s: list[float] = []
            t0 = time.monotonic()
            for i in range(p.kills):
                target = receiver.count() + p.receipts_per_life[i % 2]
                deadline = time.monotonic() + 60
                while receiver.count() < target:
                    if time.monotonic() > deadline:
                        raise RuntimeError(f"crash: {name}: the receiver stalled at {receiver.count()} of {target}")
                    time.sleep(0.005)
                server.kill()  # and waits for it to end: every receipt stamped after this is a later life's
                kills.append(time.time())
                started = server.spawn()
                server.wait_announced(started, 60)
                restart_s.append(time.monotonic() - started)
                load.follow(server.url)
            loaded_s = time.monotonic() - t0
            offered = load.stop()
            load = None
            counts, active = self.drained(server)
            result = redeliveries(receiver.receipts(self.workdir), kills)
            rows = sum(counts.values())
            result.update(
                kills=len(kills),
                loaded_s=round(loaded_s, 1),
                offered=offered,
                outbox=counts,
                unfinished_runs=active,
                # every row delivered, and every one of them received: nothing lost, nothing invented
                complete=counts.get("delivered", 0) == rows == result["distinct"] and active == 0,
                restart_s=streams.summary_ms(restart_s),
            )
            result["concurrency"] = concurrency
            log(
                f"crash: {name} (--delivery-concurrency {concurrency}): {len(kills)} kills, {rows:,} deliveries, "
                f"{result['redelivered']:,} re-sent ({result['per_kill']} per kill, at most {result['per_kill_max']}); "
                f"complete: {result['complete']}"
            )
            return result
        finally:
            if load is not None:
                load.stop()
            if server is not None:
                server.stop()
            group.stop()

    def drained(self, server: srv.ServerProcess) -> tuple[dict[str, int], int]:
        """Wait until no run is unfinished and nothing is pending (a delivered row was received before
        the receiver answered, so it is counted there already)."""
        started = time.monotonic()
        deadline, shown = started + self.profile.drain_timeout_s, started
        while True:
            counts, active = store_counts(server)
            if active == 0 and not counts.get("pending"):
                return counts, active
            if time.monotonic() > deadline:
                log(f"crash: not drained after {self.profile.drain_timeout_s} s: {counts}, {active} runs unfinished")
                return counts, active
            if time.monotonic() - shown > 10:
                shown = time.monotonic()
                log(f"crash: draining for {shown - started:.0f} s: {counts}, {active} runs unfinished")
            time.sleep(0.1)
