"""Several hosts on one store: execution leases, heartbeats, take-overs and hints.

A run is driven only by the host holding its lease (owner, epoch). The holder renews
its leases every third of the lease time; every write it makes as a driver is fenced
by the epoch, so a host that stalled past its lease cannot write over the host that
took the run over. Every host scans for runs that need a host and have none (the
holder died, or a gate's deadline passed while nobody was timing it) and takes them.
Commits are announced to the other hosts after they are durable, as hints only.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from tether import clock
from tether.caches import holds_copies
from tether.failpoints import hit
from tether.store.base import Store

log = logging.getLogger("tether.cluster")


@dataclass(frozen=True, slots=True)
class LeaseSettings:
    lease_seconds: float = 15.0

    @property
    def heartbeat_seconds(self) -> float:
        return self.lease_seconds / 3


@holds_copies("_held")
class Cluster:
    """This host's side of sharing a store with other hosts."""

    def __init__(
        self,
        store: Store,
        owner: str,
        settings: LeaseSettings,
        *,
        on_lost: Callable[[set[str]], None],
        on_orphan: Callable[[str], Awaitable[None]],
        on_hint: Callable[[str], None],
    ) -> None:
        self.store = store
        self.owner = owner
        self.settings = settings
        self._on_lost = on_lost
        self._on_orphan = on_orphan
        self._held: set[str] = set()
        self._tasks: list[asyncio.Task[None]] = []
        store.on_announce(on_hint)

    async def claim(self, run_id: str) -> tuple[str, int] | None:
        """The fence to drive ``run_id`` under, or None when another host holds it."""
        epoch = await self.store.claim_run(run_id, self.owner, self.settings.lease_seconds)
        if epoch is None:
            return None
        hit("lease.claimed")
        self._held.add(run_id)
        return self.owner, epoch

    async def release(self, run_id: str) -> None:
        self._held.discard(run_id)
        await self.store.release_run(run_id, self.owner)
        hit("lease.released")

    def forget(self, run_id: str) -> None:
        """Stop renewing a lease without a write: it expires, and any host may adopt the run."""
        self._held.discard(run_id)

    def announce(self, run_id: str) -> None:
        task = asyncio.create_task(self.store.announce(run_id), name=f"tether-announce-{run_id}")
        task.add_done_callback(_log_failure)

    @property
    def running(self) -> bool:
        """Both loops (lease heartbeat, orphan scan) are alive: what readiness asks on several hosts."""
        return bool(self._tasks) and not any(task.done() for task in self._tasks)

    def start(self) -> None:
        self._tasks = [
            asyncio.create_task(self._heartbeat(), name="tether-lease-heartbeat"),
            asyncio.create_task(self._scan(), name="tether-orphan-scan"),
        ]

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks = []

    async def _heartbeat(self) -> None:
        while True:
            await asyncio.sleep(self.settings.heartbeat_seconds)
            renewing = set(self._held)  # a lease claimed during the renewal is not lost
            try:
                still = set(await self.store.renew_leases(self.owner, self.settings.lease_seconds))
            except Exception:
                log.exception("lease renewal failed; retrying at the next beat")
                continue
            lost = (renewing - still) & self._held
            if lost:
                self._held -= lost
                log.warning("lost the lease of %d run(s) to another host", len(lost))
                self._on_lost(lost)

    async def _scan(self) -> None:
        while True:
            await asyncio.sleep(self.settings.heartbeat_seconds)
            try:
                orphans = await self.store.orphaned_runs(clock.now_iso(), 100)
            except Exception:
                log.exception("scan for orphaned runs failed; retrying at the next beat")
                continue
            for run_id in orphans:
                if run_id not in self._held:
                    await self._on_orphan(run_id)


def _log_failure(task: asyncio.Task[None]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.warning("could not announce a commit to other hosts: %s", task.exception())
