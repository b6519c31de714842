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


class Wake:
    """One observer's wake-up flag: set by a publication, cleared by the observer before it reads."""

    __slots__ = ("_set", "_waiter")

    def __init__(self) -> None:
        self._set = True  # the first read happens at once
        self._waiter: asyncio.Future[bool] | None = None

    def set(self) -> None:
        self._set = True
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(True)

    def clear(self) -> None:
        self._set = False

    def is_set(self) -> bool:
        return self._set

    async def wait(self, seconds: float) -> bool:
        """Until set (True) or ``seconds`` pass (False): one future and one timer, no task."""
        if self._set:
            return True
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[bool] = loop.create_future()  # the loop's futures are untyped (Any)
        self._waiter = waiter
        timer = loop.call_later(seconds, _expire, waiter)
        try:
            return await waiter
        finally:
            timer.cancel()
            self._waiter = None


def _expire(waiter: asyncio.Future[bool]) -> None:
    if not waiter.done():
        waiter.set_result(False)


class Notifier:
    def __init__(self, fallback: float | None = None) -> None:
        self._waiters: dict[str, set[Wake]] = {}
        self.fallback = fallback
        #: wake-ups published so far: a read begun at this count sees every commit published before it
        self.published = 0

    async def wait(self, wake: Wake, timeout: float) -> bool:
        """Wait for a wake-up for at most ``timeout`` seconds (and at most ``fallback``).

        Returns False only when ``timeout`` itself passed with no wake-up; a fallback
        expiry returns True, so the caller re-reads the store as if woken.
        """
        if wake.is_set():
            return True
        if timeout <= 0:
            return False
        bound = timeout if self.fallback is None else min(timeout, self.fallback)
        return await wake.wait(bound) or bound < timeout

    def publish(self, run_id: str) -> None:
        self.published += 1
        for wake in self._waiters.get(run_id, ()):
            wake.set()

    @contextmanager
    def subscribe(self, run_id: str) -> Iterator[Wake]:
        wake = Wake()
        self._waiters.setdefault(run_id, set()).add(wake)
        try:
            yield wake
        finally:
            waiters = self._waiters.get(run_id)
            if waiters is not None:
                waiters.discard(wake)
                if not waiters:
                    del self._waiters[run_id]

    def publish_all(self) -> None:
        """Wake every observer of every run (the host is shutting down)."""
        for waiters in self._waiters.values():
            for wake in waiters:
                wake.set()

    def observed(self, run_id: str) -> bool:
        """Whether anyone waits for news of ``run_id``."""
        return run_id in self._waiters

    @property
    def subscriber_count(self) -> int:
        return sum(len(w) for w in self._waiters.values())
