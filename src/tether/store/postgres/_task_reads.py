"""``tasks/get`` on a database several hosts write: from memory when this host's copy is provably current.

A host keeps the tasks it wrote or read lately (``TaskCache``), each versioned by its run's
``last_sequence``: every change of a task record or its history commits with a run event.
But another host may have committed since, and a client that wrote through that host and
then reads through this one must see its write. The hint that host sends after its commit
(``_listen``) cannot tell: it is sent after the client has its answer, so the client's next
request can arrive here first. So currency is decided by the database, never by a hint or a
timer, in two ways:

- A terminal task is final: no commit follows a terminal one (``update_run`` and
  ``commit_group`` refuse it), so a copy of a terminal task is current forever and is
  answered with no round trip.
- Any other copy is checked against the run's sequence in one indexed read, begun after the
  request arrived, so it sees every commit acknowledged before: same sequence, the copy is
  answered; another, the same read brought the task back whole. Reads that arrive together
  share that read (``current_tasks`` takes many ids), as commits share an fsync: one round
  trip per batch, not per request; a request never joins a read already under way.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import orjson

from tether.caches import holds_copies
from tether.store._task_cache import TaskCache, TaskEntry
from tether.store.base import RunRow, TaskRecord

__all__ = ["TaskReads"]

#: reads a batch: (task ids, the sequence held of each, -1 for none) -> ``current_tasks`` rows
Fetch = Callable[[list[str], list[int]], Awaitable[Sequence[Any]]]


@holds_copies("cache")
class TaskReads:
    """This host's copies of tasks, and the batched read that proves them current."""

    def __init__(self, fetch: Fetch, capacity: int = 1024) -> None:
        self._fetch = fetch
        self.cache = TaskCache(capacity)
        #: requests waiting for the next batch, by task id
        self._waiting: dict[str, asyncio.Future[TaskEntry | None]] = {}
        self._reading: asyncio.Task[None] | None = None

    async def read(self, task_id: str) -> TaskEntry | None:
        """The task as current as the database is now (or newer, committed here), or None."""
        held = self.cache.get(task_id)
        if held is not None and held.run.is_terminal:
            return held
        future = self._waiting.get(task_id)
        if future is None:
            future = self._waiting[task_id] = asyncio.get_running_loop().create_future()
            future.add_done_callback(_retrieved)
        if self._reading is None:
            self._reading = asyncio.create_task(self._read_batches(), name="tether-pg-task-reads")
        return await asyncio.shield(future)

    async def close(self) -> None:
        reading, self._reading = self._reading, None
        if reading is not None:
            reading.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await reading

    async def _read_batches(self) -> None:
        try:
            while self._waiting:
                batch, self._waiting = self._waiting, {}
                await self._read_batch(batch)
        finally:
            self._reading = None
            for future in self._waiting.values():  # closed meanwhile
                future.cancel()
            self._waiting = {}

    async def _read_batch(self, batch: dict[str, asyncio.Future[TaskEntry | None]]) -> None:
        held = {task_id: self.cache.get(task_id) for task_id in batch}
        commits = self.cache.commits
        try:
            rows = await self._fetch(list(held), [-1 if e is None else e.run.last_sequence for e in held.values()])
        except Exception as exc:  # noqa: BLE001 - the read's failure is every waiting request's
            for future in batch.values():
                if not future.done():
                    future.set_exception(exc)
            return
        found: dict[str, TaskEntry] = {}
        for row in rows:
            task_id = row["task_id"]
            entry = held[task_id] if row["workflow_id"] is None else _entry(row)
            if entry is None:  # unchanged, yet not held: cannot be (-1 is never a sequence)
                continue
            if entry is not held[task_id]:
                self.cache.keep(entry, commits)
            found[task_id] = entry
        for task_id, future in batch.items():
            if not future.done():
                future.set_result(found.get(task_id))


def _entry(row: Any) -> TaskEntry:
    """A task, its run and its history from one ``current_tasks`` row that holds them."""
    task_id = row["task_id"]
    record = TaskRecord(
        task_id,
        row["task_tenant"],
        row["principal"],
        row["context_id"],
        orjson.loads(row["record"]),
        row["task_updated_at"],
        row["task_state"],
    )
    run = RunRow(
        task_id,
        row["tenant"],
        row["workflow_id"],
        row["status"],
        row["last_sequence"],
        orjson.loads(row["state"]),
        row["created_at"],
        row["updated_at"],
        row["due_at"],
    )
    return TaskEntry(record, run, tuple(orjson.loads(message) for message in row["history"]))


def _retrieved(future: asyncio.Future[TaskEntry | None]) -> None:
    """Mark a failed read's error seen, for a request that stopped waiting for it."""
    if not future.cancelled():
        future.exception()
