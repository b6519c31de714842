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

Given ``on_fanout``, it also times each commit's fan-out: from the moment a commit made
on this host is durable until every stream that followed its run then has handed the
commit's frames to its writer (or has closed). The time is taken once per commit, when
the last of those streams is done; each stream only counts itself down, so a thousand
streams cost a thousand decrements and one observation.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict, deque
from collections.abc import AsyncGenerator, Callable
from contextlib import aclosing

from tether.caches import holds_copies
from tether.engine.notifier import Notifier
from tether.store.base import Commit, EventRow, Store

__all__ = ["Follower", "RunLogs"]

_PAGE = 500
_RECENT = 64  # events kept per followed run
_RECENT_RUNS = 1024

_ReadKey = tuple[str, int, int]  # run id, after, the notifier's publication count when it began
#: commits per run whose fan-out is timed at once; past it (streams far behind) the oldest goes untimed
_TIMED_COMMITS = 64


class _Batch:
    """One commit being handed to the streams that followed its run when it was made."""

    __slots__ = ("number", "sequence", "started", "waiting")

    def __init__(self, number: int, sequence: int, started: float, waiting: int) -> None:
        self.number = number
        self.sequence = sequence
        self.started = started
        self.waiting = waiting


class _Fanout:
    """A followed run's streams on this host, and its commits they have not all handed on yet."""

    __slots__ = ("streams", "made", "pending")

    def __init__(self) -> None:
        self.streams = 0
        self.made = 0  # batches numbered so far: a stream counts down those numbered from its joining on
        self.pending: deque[_Batch] = deque()


@holds_copies("_recent")
class RunLogs:
    """The store's run logs as this host's followers read them: identical reads are shared."""

    def __init__(self, store: Store, notifier: Notifier, *, on_fanout: Callable[[float], None] | None = None) -> None:
        self.store = store
        self.notifier = notifier
        #: told the seconds of each timed fan-out (metrics); None times nothing
        self.on_fanout = on_fanout
        self._fanouts: dict[str, _Fanout] = {}
        self._reading: dict[_ReadKey, asyncio.Future[list[EventRow]]] = {}
        #: set when the host shuts down: every follower ends at once (its client re-attaches elsewhere)
        self.stopping = False
        #: per followed run, the last events this host committed to it, consecutive
        self._recent: OrderedDict[str, list[EventRow]] = OrderedDict()

    def committed(self, commit: Commit) -> None:
        """Keep what a commit added to a followed run (call it once the commit is durable, before the wake-up)."""
        run_id = commit.run.run_id
        fanout = self._fanouts.get(run_id) if self.on_fanout is not None else None
        if fanout is not None and fanout.streams and commit.events:
            fanout.pending.append(_Batch(fanout.made, commit.events[-1].sequence, time.perf_counter(), fanout.streams))
            fanout.made += 1
            if len(fanout.pending) > _TIMED_COMMITS:
                fanout.pending.popleft()
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

    # fan-out timing (only with on_fanout) ------------------------------------------------

    def _joined(self, follower: Follower) -> None:
        fanout = self._fanouts.get(follower.run_id)
        if fanout is None:
            fanout = self._fanouts[follower.run_id] = _Fanout()
        fanout.streams += 1
        follower.next_batch = fanout.made

    def _handed(self, follower: Follower) -> None:
        """``follower``'s stream wrote everything up to ``follower.last``: it is done with those commits."""
        fanout = self._fanouts.get(follower.run_id)
        if fanout is None or not fanout.pending:
            return
        for batch in fanout.pending:
            if batch.number < follower.next_batch:
                continue
            if batch.sequence > follower.last:
                break
            batch.waiting -= 1
            follower.next_batch = batch.number + 1
        self._settle(fanout)

    def _left(self, follower: Follower) -> None:
        """``follower``'s stream ended: it counts as done with every commit it was still due."""
        fanout = self._fanouts.get(follower.run_id)
        if fanout is None:
            return
        for batch in fanout.pending:
            if batch.number >= follower.next_batch:
                batch.waiting -= 1
        self._settle(fanout)
        fanout.streams -= 1
        if not fanout.streams:
            del self._fanouts[follower.run_id]  # its pending batches were all settled just above

    def _settle(self, fanout: _Fanout) -> None:
        """Time the commits every stream is done with (oldest first: a later one waits on as many, or more)."""
        pending = fanout.pending
        if not pending or pending[0].waiting > 0:
            return
        now = time.perf_counter()
        observe = self.on_fanout
        assert observe is not None
        while pending and pending[0].waiting <= 0:
            observe(now - pending.popleft().started)

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
        #: fan-out timing: the number of the first commit this follower has not handed on yet
        self.next_batch = 0

    def wrote(self) -> None:
        """The caller sent bytes: the keep-alive clock starts again."""
        self._written = asyncio.get_running_loop().time()

    async def pages(self) -> AsyncGenerator[list[EventRow] | None, None]:
        """The events after ``after`` in order, live, as each read returns them; None when a keep-alive is due."""
        loop = asyncio.get_running_loop()
        notifier = self.logs.notifier
        self._written = loop.time()
        timed = self.logs.on_fanout is not None
        with notifier.subscribe(self.run_id) as wake:
            if timed:
                self.logs._joined(self)
            try:
                while not self.logs.stopping:
                    wake.clear()
                    events = await self.logs.after(self.run_id, self.last)
                    if events:
                        self.last = events[-1].sequence
                        yield events
                        if timed:  # the caller asks for more once it has written this page
                            self.logs._handed(self)
                    if len(events) == _PAGE:
                        continue
                    if not events:
                        row = await self.logs.store.get_run(self.run_id)
                        if row is None or (row.is_terminal and self.last >= row.last_sequence):
                            return
                    if not await notifier.wait(wake, self.keepalive - (loop.time() - self._written)):
                        yield None
                        self._written = loop.time()
            finally:
                if timed:
                    self.logs._left(self)

    async def events(self) -> AsyncGenerator[EventRow | None, None]:
        """Each event after ``after`` in order, live; None when a keep-alive is due."""
        async with aclosing(self.pages()) as pages:
            async for page in pages:
                if page is None:
                    yield None
                    continue
                for event in page:
                    yield event
