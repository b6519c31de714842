"""Following a run's log live: the one read-and-wait loop behind every stream.

The store is the payload and the notifier only a hint: a follower clears its wake-up,
reads the events after the last sequence it gave out, and waits. It ends once the run is
terminal and everything has been read, and says when a keep-alive is due (no byte
written for ``keepalive`` seconds), which the caller reports back through ``wrote``.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator

from tether.engine.notifier import Notifier
from tether.store.base import EventRow, Store

_PAGE = 500


class Follower:
    def __init__(self, store: Store, notifier: Notifier, run_id: str, after: int, keepalive: float) -> None:
        self.store = store
        self.notifier = notifier
        self.run_id = run_id
        self.last = after
        self.keepalive = keepalive
        self._written = 0.0

    def wrote(self) -> None:
        """The caller sent bytes: the keep-alive clock starts again."""
        self._written = asyncio.get_running_loop().time()

    async def events(self) -> AsyncGenerator[EventRow | None, None]:
        """Each event after ``after`` in order, live; None when a keep-alive is due."""
        loop = asyncio.get_running_loop()
        self._written = loop.time()
        with self.notifier.subscribe(self.run_id) as wake:
            while True:
                wake.clear()
                events = await self.store.read_events(self.run_id, self.last, _PAGE)
                for event in events:
                    self.last = event.sequence
                    yield event
                if len(events) == _PAGE:
                    continue
                if not events:
                    row = await self.store.get_run(self.run_id)
                    if row is None or (row.is_terminal and self.last >= row.last_sequence):
                        return
                if not await self.notifier.wait(wake, self.keepalive - (loop.time() - self._written)):
                    yield None
                    self._written = loop.time()
