"""Every run change of this host's view, in one bounded ring: what ``GET /v1/runs:watch`` streams.

A change is a run whose status or pending interrupt moved, or a new run. This host learns
of them from its own commits (the engine's ``on_commit``; every one is looked at, watched
or not, and one that changes neither is left out) and from the hints of the other hosts
sharing its store (the engine's ``on_hint``: the same LISTEN/NOTIFY hints that wake per-run
streams). While anyone watches (and for ``RESUME_WINDOW`` seconds after the last one
left), a hinted run is read once for all watchers and always passed on (a hint may stand
for several commits); otherwise hints are not read at all and the ring only notes that it
missed them. Nothing polls. A change may
repeat a state a watcher has already seen.

Each change gets the next *position* of this feed; a cursor is ``<epoch>-<position>``, the
epoch being this feed's own (random per host start). A watcher that comes back with a
cursor of this epoch still in the ring gets exactly what it missed. Otherwise a gap cannot
be ruled out (another host, a restart, a cursor the ring has moved past, hints that were
not read or may have been lost): the watcher is told ``sync``, re-reads the list, and
applies the changes after that point. A new watcher starts with a ``sync`` as well.
Changes carry the run's ``lastSequence``, so one older than what a list read showed is
recognised and ignored.

Memory is bounded by the ring (``capacity`` rendered summaries, all tenants), not by the
watchers: a watcher holds only a position. One that falls more than ``capacity`` changes
behind (its client reads too slowly) is ended with ``lagging``; its client reconnects and
syncs.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections import OrderedDict
from collections.abc import AsyncGenerator, Callable
from dataclasses import dataclass
from typing import Final, Literal

from tether.caches import holds_copies
from tether.engine.notifier import Wake
from tether.store.base import Commit, RunRow, Store

__all__ = ["CAPACITY", "RESUME_WINDOW", "FeedItem", "RunFeed"]

log = logging.getLogger("tether.engine.run_feed")

#: changes the ring holds (all tenants): how far behind a watcher may fall before it is ended
CAPACITY: Final = 1024
#: seconds hints are still read after the last watcher left, so that it can resume exactly
RESUME_WINDOW: Final = 30.0
#: runs whose last shown state is remembered, so that a commit changing nothing the list shows is not a change
_REMEMBERED: Final = 4096

FeedKind = Literal["run", "sync", "end"]


@dataclass(frozen=True, slots=True)
class FeedItem:
    """One thing a watcher is told: a run that changed, a ``sync`` (re-list now), or the ``end``.

    ``cursor`` is what the watcher resumes after (None on ``end``); ``summary`` the changed
    run as the feed's ``render`` wrote it; ``reason`` says why a ``sync`` or an ``end`` came
    (``start``, ``gap``; ``lagging``, ``shutdown``).
    """

    kind: FeedKind
    cursor: str | None
    summary: bytes | None = None
    reason: str | None = None


@dataclass(frozen=True, slots=True)
class _Entry:
    position: int
    tenant: str | None  # None: a gap (changes may have been missed), which every watcher is told
    summary: bytes | None


def _shown(row: RunRow) -> tuple[str, str | None]:
    """What the list shows of a run that a commit may change: its status and its pending interrupt."""
    interrupt = row.state.get("interrupt")
    return row.status, interrupt["interruptId"] if interrupt else None


@holds_copies("_ring", "_last")
class RunFeed:
    """This host's ring of run changes; ``watch`` follows it for one tenant.

    ``render`` turns a run into the summary a watcher is sent (rendered once per change,
    and kept small: it is what the ring holds).
    """

    def __init__(self, store: Store, render: Callable[[RunRow], bytes], *, capacity: int = CAPACITY) -> None:
        self.store = store
        self.render = render
        self.capacity = capacity
        self.epoch = secrets.token_hex(8)
        self._ring: list[_Entry | None] = [None] * capacity
        self._head = 0  # the last position given out (positions start at 1)
        self._wakes: set[Wake] = set()
        #: per run, the last sequence and shown state put in the ring
        self._last: OrderedDict[str, tuple[int, tuple[str, str | None]]] = OrderedDict()
        self._hinted: set[str] = set()
        self._reading: asyncio.Task[None] | None = None
        self._stopping = False
        self._watched_until = 0.0  # loop time until which hints are read with nobody watching

    # what the engine and the store tell it ----------------------------------------------

    def committed(self, commit: Commit, enqueued: int = 0) -> None:
        """A commit of this host is durable (an ``on_commit`` hook)."""
        if not self._wanted():
            self.missed()  # nobody could be told or resume: not kept, and a cursor from before syncs
            return
        self._add(commit.run, commit.events[0].sequence if commit.events else None)

    def hinted(self, run_id: str) -> None:
        """Another host changed ``run_id`` (an ``on_hint`` hook): read it once for every watcher, if any."""
        if self._stopping:
            return
        if not self._wanted():
            self.missed()  # nobody to read it for: a watcher resuming past here must sync
            return
        self._hinted.add(run_id)
        if self._reading is None:
            self._reading = asyncio.create_task(self._read_hinted(), name="tether-run-feed-hints")

    def missed(self) -> None:
        """Changes may have gone unseen here (not kept, hints unread or lost): resuming past here syncs."""
        if self._last:
            self._last.clear()
        last = self._ring[self._head % self.capacity] if self._head else None
        if last is None or last.tenant is not None:  # one gap stands for any number in a row
            self._push(_Entry(self._head + 1, None, None))

    def stop(self) -> None:
        """End every watcher now (the host is shutting down)."""
        self._stopping = True
        for wake in self._wakes:
            wake.set()
        if self._reading is not None:
            self._reading.cancel()

    def _wanted(self) -> bool:
        """Someone watches, or watched a moment ago and may come back."""
        return bool(self._wakes) or asyncio.get_running_loop().time() < self._watched_until

    @property
    def watchers(self) -> int:
        return len(self._wakes)

    # the ring ---------------------------------------------------------------------------

    def cursor(self, position: int) -> str:
        return f"{self.epoch}-{position}"

    def _add(self, row: RunRow, first: int | None) -> None:
        """Put ``row`` in the ring unless it is old news; ``first`` is the first sequence its commit
        wrote (None when unknown: a row read after a hint may stand for several commits)."""
        shown = _shown(row)
        last = self._last.get(row.run_id)
        if last is not None and row.last_sequence <= last[0]:
            return  # older than what the ring has (a hint's read that lost a race with a commit)
        self._last[row.run_id] = (row.last_sequence, shown)
        self._last.move_to_end(row.run_id)
        if len(self._last) > _REMEMBERED:
            self._last.popitem(last=False)
        # the very next commit after the one in the ring, and the list would show the same: no change
        if last is not None and first == last[0] + 1 and last[1] == shown:
            return
        self._push(_Entry(self._head + 1, row.tenant, self.render(row)))

    def _push(self, entry: _Entry) -> None:
        self._head = entry.position
        self._ring[entry.position % self.capacity] = entry
        for wake in self._wakes:
            wake.set()

    def _oldest(self) -> int:
        """The oldest position still in the ring."""
        return max(1, self._head - self.capacity + 1)

    def _resume_at(self, cursor: str | None) -> int | None:
        """The position a watcher with ``cursor`` has seen up to, or None when it must sync."""
        if cursor is None:
            return None
        epoch, _, raw = cursor.rpartition("-")
        if epoch != self.epoch or not raw.isdigit():
            return None
        position = int(raw)
        if position > self._head or position + 1 < self._oldest():
            return None
        return position

    async def _read_hinted(self) -> None:
        try:
            while self._hinted and not self._stopping:
                batch, self._hinted = self._hinted, set()
                if not self._wanted():
                    self.missed()
                    break
                rows = await asyncio.gather(*(self.store.get_run(run_id) for run_id in batch), return_exceptions=True)
                for run_id, row in zip(batch, rows):
                    if isinstance(row, BaseException):
                        log.warning("could not read run %s after a hint; its watchers sync: %s", run_id, row)
                        self.missed()
                    elif row is not None:
                        self._add(row, None)
        finally:
            self._reading = None
            if self._hinted:
                self._hinted.clear()
                self.missed()

    # watching ---------------------------------------------------------------------------

    async def watch(self, tenant: str, after: str | None, keepalive: float) -> AsyncGenerator[FeedItem | None, None]:
        """The changes of ``tenant``'s runs after ``after`` (a cursor), live; None when a keep-alive is due.

        Ends with an ``end`` item when the watcher lags or the host stops.
        """
        loop = asyncio.get_running_loop()
        wake = Wake()
        self._wakes.add(wake)  # with the position below, in one step: nothing falls between them
        try:
            seen = self._resume_at(after)
            if seen is None:
                seen = self._head
                yield FeedItem("sync", self.cursor(seen), reason="start" if after is None else "gap")
            written = loop.time()
            while not self._stopping:
                wake.clear()
                while seen < self._head and not self._stopping:
                    if seen + 1 < self._oldest():
                        yield FeedItem("end", None, reason="lagging")
                        return
                    seen += 1
                    entry = self._ring[seen % self.capacity]
                    assert entry is not None and entry.position == seen
                    if entry.tenant is None:
                        yield FeedItem("sync", self.cursor(seen), reason="gap")
                    elif entry.tenant == tenant:
                        yield FeedItem("run", self.cursor(seen), entry.summary)
                    else:
                        continue
                    written = loop.time()
                if self._stopping:
                    break
                if not await wake.wait(keepalive - (loop.time() - written)):
                    yield None
                    written = loop.time()
            yield FeedItem("end", None, reason="shutdown")
        finally:
            self._wakes.discard(wake)
            self._watched_until = loop.time() + RESUME_WINDOW
