"""The one connection that writes, and its thread: group commit.

Every write is a job handed to the writer thread. The thread takes all jobs waiting in
its queue, runs them in one transaction and commits once, so many concurrent requests
share one fsync; the new rows of all its commits go in with one INSERT per table
(``_inserts``). A job that fails (a lost compare-and-swap, a claimed idempotency key)
writes nothing and costs the others nothing: the batch runs again, each job in its own
savepoint.
"""

from __future__ import annotations

import asyncio
import queue
import sqlite3
import threading
from collections.abc import Callable
from typing import Any, TypeVar

from tether.errors import StoreUnavailable
from tether.store.sqlite import _inserts

T = TypeVar("T")
_STOP = object()
_MAX_BATCH = 512

#: a job's result, or the exception it ended with
Outcome = tuple[Any, BaseException | None]


class Job:
    """A write for the writer thread: ``fn`` does it alone; a commit also has ``prepare``,
    which does what cannot wait and leaves its rows to be inserted with the batch's."""

    __slots__ = ("fn", "future", "loop", "prepare")

    def __init__(
        self,
        fn: Callable[[sqlite3.Connection], Any],
        prepare: Callable[[sqlite3.Connection], _inserts.Rows] | None,
        future: asyncio.Future[Any],
        loop: asyncio.AbstractEventLoop,
    ):
        self.fn = fn
        self.prepare = prepare
        self.future = future
        self.loop = loop


def _settle(outcomes: list[tuple[asyncio.Future[Any], Any, BaseException | None]]) -> None:
    """Resolve a batch's futures of one event loop (called in that loop, once per batch)."""
    for future, result, error in outcomes:
        if future.done():
            continue
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(result)


class Writer:
    """The writer thread and the queue that feeds it.

    ``on_rollback`` is called whenever a transaction is undone, so that what the store
    keeps from the writer's reads (the tenants' webhooks) forgets what the transaction may
    have read of its own writes; ``on_batch`` is told each batch's size once written.
    """

    def __init__(self, on_rollback: Callable[[], None], on_batch: Callable[[int], None] | None = None) -> None:
        self._on_rollback = on_rollback
        #: told the size of each batch once it is written (one transaction, one fsync)
        self._on_batch = on_batch
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None

    def start(self, conn: sqlite3.Connection) -> None:
        """Start the thread on ``conn``, which it owns (and closes) from now on."""
        ready = threading.Event()
        self._thread = threading.Thread(target=self._loop, args=(conn, ready), name="tether-sqlite-writer", daemon=True)
        self._thread.start()
        ready.wait()

    async def stop(self) -> None:
        """Let the thread finish the jobs queued so far, then wait for it to end."""
        self._queue.put(_STOP)
        if self._thread is not None:
            await asyncio.to_thread(self._thread.join)

    async def write(
        self, fn: Callable[[sqlite3.Connection], T], prepare: Callable[[sqlite3.Connection], _inserts.Rows] | None
    ) -> T:
        """Queue a job and wait for its outcome: ``fn``'s result, or what it raised."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        self._queue.put(Job(fn, prepare, future, loop))
        return await future

    def _loop(self, conn: sqlite3.Connection, ready: threading.Event) -> None:
        ready.set()
        try:
            while True:
                first = self._queue.get()
                if first is _STOP:
                    return
                batch: list[Job] = [first]
                stop = False
                while len(batch) < _MAX_BATCH:
                    try:
                        job = self._queue.get_nowait()
                    except queue.Empty:
                        break
                    if job is _STOP:
                        stop = True
                        break
                    batch.append(job)
                self._write_batch(conn, batch)
                if stop:
                    return
        finally:
            conn.close()

    def _write_batch(self, conn: sqlite3.Connection, batch: list[Job]) -> None:
        """One transaction, one fsync, for every job of the batch.

        The jobs run back to back first, the new rows of all commits inserted together
        (see ``_inserts``). Only if a job refuses (a conflict, a duplicate) is the transaction
        undone and the batch run again, each job alone in its own savepoint, so that one
        refusal undoes nothing else and is reported precisely. Savepoints cost two
        statements per job, and each statement hands the GIL to the event loop and waits
        to get it back: that wait, not SQLite, had bounded the writer.
        """
        try:
            outcomes = self._grouped(conn, batch) if len(batch) > 1 else None
            if outcomes is None:
                outcomes = self._isolated(conn, batch)
        except sqlite3.Error as exc:
            self._rollback(conn)
            failure = StoreUnavailable(f"SQLite write failed: {exc}")
            failure.__cause__ = exc
            outcomes = [(None, failure) for _ in batch]
        if self._on_batch is not None:  # told before anyone waiting learns the outcome
            self._on_batch(len(batch))
        settled: dict[asyncio.AbstractEventLoop, list[tuple[asyncio.Future[Any], Any, BaseException | None]]] = {}
        for job, (result, error) in zip(batch, outcomes):
            settled.setdefault(job.loop, []).append((job.future, result, error))
        for loop, results in settled.items():  # one wake-up of each loop per batch, not one per job
            loop.call_soon_threadsafe(_settle, results)

    def _grouped(self, conn: sqlite3.Connection, batch: list[Job]) -> list[Outcome] | None:
        """Run the jobs in one transaction, the commits' rows inserted together, and commit it.

        A refusal of any job undoes everything and answers None: the batch must run again,
        isolated.
        """
        conn.execute("BEGIN IMMEDIATE")
        outcomes: list[Outcome] = []
        grouped: list[_inserts.Rows] = []
        try:
            for job in batch:
                if job.prepare is not None:
                    prepared = job.prepare(conn)
                    grouped.append(prepared)
                    outcomes.append((prepared.enqueued, None))
                    continue
                if grouped:  # a write that is not a commit sees the commits before it
                    _inserts.insert(conn, grouped)
                    grouped = []
                outcomes.append((job.fn(conn), None))
            if grouped:
                _inserts.insert(conn, grouped)
        except Exception:  # noqa: BLE001 - any refusal: the isolated rerun reports it to its own caller
            self._rollback(conn)
            return None
        conn.execute("COMMIT")
        return outcomes

    def _isolated(self, conn: sqlite3.Connection, batch: list[Job]) -> list[Outcome]:
        """Run each job alone (``fn``) in one transaction and commit it.

        Each job has its own savepoint (a lone job needs none), so a refusal is that job's
        outcome and undoes nothing else; a lone job that refuses leaves nothing behind.
        """
        conn.execute("BEGIN IMMEDIATE")
        outcomes: list[Outcome] = []
        savepoints = len(batch) > 1
        for job in batch:
            if savepoints:
                conn.execute("SAVEPOINT job")
            try:
                outcomes.append((job.fn(conn), None))
            except Exception as exc:  # noqa: BLE001 - a job's refusal is its outcome, raised to its caller
                if savepoints:
                    conn.execute("ROLLBACK TO job")
                outcomes.append((None, exc))
            if savepoints:
                conn.execute("RELEASE job")
        if not savepoints and outcomes[0][1] is not None:
            self._rollback(conn)  # the lone job refused: nothing of it is kept
            return outcomes
        conn.execute("COMMIT")
        return outcomes

    def _rollback(self, conn: sqlite3.Connection) -> None:
        """Undo the open transaction, and forget what it may have read of its own writes."""
        self._on_rollback()
        if conn.in_transaction:
            conn.execute("ROLLBACK")
