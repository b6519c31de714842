"""Task retention: runs that ended longer ago than the window are purged, a batch at a time.

A terminal run (its events, task record, history, push configs, deliveries, idempotency
claims and lease) is kept for ``window`` seconds after it ended, then deleted (its effect
ledger rows for 14 days at least, ``effects.RETENTION_DAYS``); a run that
has not ended is never touched, however old, and neither is one with a delivery still
pending or a dead letter younger than the window. The purge runs in the background in small
batches, each one short transaction, so requests never wait behind it; with several hosts on
one database each purges, and the store guarantees no run is taken by two
(``Store.purge_runs``). After a purge the task reads exactly as an unknown id would, and a
re-sent message starts a new task.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from datetime import timedelta
from typing import Final

from tether import clock
from tether.engine.effects import RETENTION_DAYS
from tether.errors import StoreUnavailable
from tether.failpoints import hit
from tether.store.base import Store

__all__ = ["BATCH", "Retention", "cutoff"]

log = logging.getLogger("tether.retention")

#: runs per purge transaction: small enough that a commit never waits long behind one
BATCH: Final = 200
#: the longest between two passes; a short window (tests, demos) is looked at more often
_MAX_INTERVAL: Final = 60.0
_MIN_INTERVAL: Final = 0.5
#: between full batches: the purge yields to requests instead of running flat out
_BETWEEN_BATCHES: Final = 0.05


def cutoff(window: float) -> str:
    """The end time (ISO UTC) before which a run is past a window of ``window`` seconds."""
    return clock.iso(clock.now() - timedelta(seconds=window))


class Retention:
    """Purges this host's store of runs that ended more than ``window`` seconds ago."""

    def __init__(self, store: Store, window: float, *, on_purged: Callable[[int], None] | None = None) -> None:
        if window <= 0:
            raise ValueError("a retention window must be positive (0 keeps runs forever: do not start one)")
        self.store = store
        self.window = window
        self.interval = min(_MAX_INTERVAL, max(_MIN_INTERVAL, window / 4))
        self._on_purged = on_purged
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="tether-retention")

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def purge_once(self) -> int:
        """One batch of the runs past the window, and one of ledger rows past theirs; how many runs went.

        The effect ledger keeps its rows for ``effects.RETENTION_DAYS`` at least, even when runs
        are kept less long: what a provider was sent, and under which key, outlives the run.
        """
        purged = await self.store.purge_runs(cutoff(self.window), BATCH)
        if purged:
            hit("retention.purged")
            log.info("purged %d run(s) that ended over %s ago", len(purged), _span(self.window))
            if self._on_purged is not None:
                self._on_purged(len(purged))
        await self.store.purge_effects(cutoff(max(self.window, RETENTION_DAYS * 86400.0)), BATCH)
        return len(purged)

    async def _run(self) -> None:
        while True:
            try:
                full = await self.purge_once() == BATCH
            except StoreUnavailable as exc:  # the store is down or closing: try again next pass
                log.warning("retention: could not purge: %s", exc)
                full = False
            except Exception:  # a bug must not stop retention for good, nor take the host down
                log.exception("retention: purge failed")
                full = False
            await asyncio.sleep(_BETWEEN_BATCHES if full else self.interval)


def _span(seconds: float) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{int(seconds // size)}{unit}"
    return f"{seconds:g}s"
