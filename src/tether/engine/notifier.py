"""Wake-ups for observers of a run: a hint that the log grew, never the events themselves.

An observer clears its wake-up, reads the store after its last sequence, and waits;
publishing after every commit makes that loop miss nothing and poll nothing. When hints
come from other hosts (a shared store), ``fallback`` bounds every wait, so that a lost
hint delays an event by at most that long and never drops it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager


class Notifier:
    def __init__(self, fallback: float | None = None) -> None:
        self._waiters: dict[str, set[asyncio.Event]] = {}
        self.fallback = fallback
        #: wake-ups published so far: a read begun at this count sees every commit published before it
        self.published = 0

    async def wait(self, wake: asyncio.Event, timeout: float) -> bool:
        """Wait for a wake-up for at most ``timeout`` seconds (and at most ``fallback``).

        Returns False only when ``timeout`` itself passed with no wake-up; a fallback
        expiry returns True, so the caller re-reads the store as if woken.
        """
        if timeout <= 0:
            return wake.is_set()
        bound = timeout if self.fallback is None else min(timeout, self.fallback)
        try:
            await asyncio.wait_for(wake.wait(), bound)
        except TimeoutError:
            return bound < timeout
        return True

    def publish(self, run_id: str) -> None:
        self.published += 1
        for event in self._waiters.get(run_id, ()):
            event.set()

    @contextmanager
    def subscribe(self, run_id: str) -> Iterator[asyncio.Event]:
        event = asyncio.Event()
        event.set()  # the first read happens at once
        self._waiters.setdefault(run_id, set()).add(event)
        try:
            yield event
        finally:
            waiters = self._waiters.get(run_id)
            if waiters is not None:
                waiters.discard(event)
                if not waiters:
                    del self._waiters[run_id]

    @property
    def subscriber_count(self) -> int:
        return sum(len(w) for w in self._waiters.values())
