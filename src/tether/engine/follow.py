"""Following a run's log live: the one read-and-wait loop behind every stream.

The store is the payload and the notifier only a hint: a follower clears its wake-up,
reads the events after the last sequence it gave out, and waits. It ends once the run is
terminal and everything has been read, or when the host shuts down, and says when a
keep-alive is due (no byte written for ``keepalive`` seconds), which the caller reports
back through ``wrote``.

Followers read through one :class:`RunLogs` per host, so a thousand streams on one
task woken by one commit make one read of the store, not a thousand; and none at all
when this host made the commit: the events it committed to a followed run are kept,
and a follower whose next events are all there takes them from memory. A follower only
joins a store read that began after the latest wake-up was published, so it can never
be handed a read from before the commit that woke it.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import AsyncGenerator
from contextlib import aclosing

from tether.engine.notifier import Notifier
from tether.store.base import Commit, EventRow, Store

__all__ = ["Follower", "RunLogs"]

_PAGE = 500
_RECENT = 64  # events kept per followed run
_RECENT_RUNS = 1024

_ReadKey = tuple[str, int, int]  # run id, after, the notifier's publication count when it began


class RunLogs:
    """The store's run logs as this host's followers read them: identical reads are shared."""

    def __init__(self, store: Store, notifier: Notifier) -> None:
        self.store = store
        self.notifier = notifier
        self._reading: dict[_ReadKey, asyncio.Future[list[EventRow]]] = {}
        #: set when the host shuts down: every follower ends at once (its client re-attaches elsewhere)
        self.stopping = False
        #: per followed run, the last events this host committed to it, consecutive
        self._recent: OrderedDict[str, list[EventRow]] = OrderedDict()

    def committed(self, commit: Commit) -> None:
        """Keep what a commit added to a followed run (call it once the commit is durable, before the wake-up)."""
        run_id = commit.run.run_id
        if not commit.events or not self.notifier.observed(run_id):
            self._recent.pop(run_id, None)
            return
        recent = self._recent.get(run_id)
        if recent is None or recent[-1].sequence + 1 != commit.events[0].sequence:
            recent = self._recent[run_id] = []
        recent.extend(commit.events)
        del recent[:-_RECENT]
        if len(self._recent) > _RECENT_RUNS:
            self._recent.popitem(last=False)

    def stop(self) -> None:
        """End every follower now, before the server waits for its connections to close."""
        self.stopping = True
        self.notifier.publish_all()

    def follow(self, run_id: str, after: int, keepalive: float) -> Follower:
        return Follower(self, run_id, after, keepalive)

    async def after(self, run_id: str, after: int) -> list[EventRow]:
        """Up to a page of the events after ``after``, as the store holds them now (do not mutate)."""
        recent = self._recent.get(run_id)
        if recent and recent[0].sequence <= after + 1 <= recent[-1].sequence:
            return recent[after + 1 - recent[0].sequence :]
        key = (run_id, after, self.notifier.published)
        reading = self._reading.get(key)
        if reading is None:
            reading = asyncio.ensure_future(self.store.read_events(run_id, after, _PAGE))
            self._reading[key] = reading
            reading.add_done_callback(lambda done: self._done(key, done))
        return await asyncio.shield(reading)  # one follower leaving does not cancel the others' read

    def _done(self, key: _ReadKey, reading: asyncio.Future[list[EventRow]]) -> None:
        if self._reading.get(key) is reading:
            del self._reading[key]
        if not reading.cancelled():
            reading.exception()  # retrieved here, raised to every follower that awaits it


class Follower:
    def __init__(self, logs: RunLogs, run_id: str, after: int, keepalive: float) -> None:
        self.logs = logs
        self.run_id = run_id
        self.last = after
        self.keepalive = keepalive
        self._written = 0.0

    def wrote(self) -> None:
        """The caller sent bytes: the keep-alive clock starts again."""
        self._written = asyncio.get_running_loop().time()

    async def pages(self) -> AsyncGenerator[list[EventRow] | None, None]:
        """The events after ``after`` in order, live, as each read returns them; None when a keep-alive is due."""
        loop = asyncio.get_running_loop()
        notifier = self.logs.notifier
        self._written = loop.time()
        with notifier.subscribe(self.run_id) as wake:
            while not self.logs.stopping:
                wake.clear()
                events = await self.logs.after(self.run_id, self.last)
                if events:
                    self.last = events[-1].sequence
                    yield events
                if len(events) == _PAGE:
                    continue
                if not events:
                    row = await self.logs.store.get_run(self.run_id)
                    if row is None or (row.is_terminal and self.last >= row.last_sequence):
                        return
                if not await notifier.wait(wake, self.keepalive - (loop.time() - self._written)):
                    yield None
                    self._written = loop.time()

    async def events(self) -> AsyncGenerator[EventRow | None, None]:
        """Each event after ``after`` in order, live; None when a keep-alive is due."""
        async with aclosing(self.pages()) as pages:
            async for page in pages:
                if page is None:
                    yield None
                    continue
                for event in page:
                    yield event
