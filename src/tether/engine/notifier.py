"""Wake-ups for observers of a run: a hint that the log grew, never the events themselves.

An observer clears its wake-up, reads the store after its last sequence, and waits;
publishing after every commit makes that loop miss nothing and poll nothing.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager


class Notifier:
    def __init__(self) -> None:
        self._waiters: dict[str, set[asyncio.Event]] = {}

    def publish(self, run_id: str) -> None:
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
