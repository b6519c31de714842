"""Delivery claims of a store that one host serves: kept in memory, lapsing by the clock.

On PostgreSQL a claim is a column, because several hosts share the outbox. A SQLite file
serves one host process, so its claims live in that process: writing them would cost a
write per batch of sends for nothing, and a SIGKILL, which loses them, also ends every
attempt they stood for. A claim keeps ``due_deliveries`` from handing the worker a
delivery it is sending already; recording the attempt ends it.
"""

from __future__ import annotations

import time
from collections.abc import Iterable

import orjson


class Claims:
    """Delivery id → the monotonic time its claim lapses."""

    __slots__ = ("_until",)

    def __init__(self) -> None:
        self._until: dict[str, float] = {}

    def held(self) -> str:
        """The ids under a live claim, as the JSON array the queries read with json_each."""
        now = time.monotonic()
        lapsed = [delivery_id for delivery_id, until in self._until.items() if until <= now]
        for delivery_id in lapsed:
            del self._until[delivery_id]
        return orjson.dumps(list(self._until)).decode()

    def take(self, delivery_ids: Iterable[str], seconds: float) -> None:
        until = time.monotonic() + seconds
        for delivery_id in delivery_ids:
            self._until[delivery_id] = until

    def release(self, delivery_ids: Iterable[str]) -> None:
        for delivery_id in delivery_ids:
            self._until.pop(delivery_id, None)
