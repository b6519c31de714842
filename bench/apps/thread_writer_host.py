"""``tether serve`` with SQLite's writer on a thread instead of in a process of its own.

    python bench/apps/thread_writer_host.py serve --data-dir DIR ...   (the arguments of `tether`)

The ``tether-sqlite-thread`` slot: what the writer process is measured against. Only the
store's ``Writer`` is replaced, by one with the same three calls (``start``, ``write``,
``stop``) that runs the same group commit (``_group.write_batch``) on a thread: it takes
every job waiting when it comes back for more, writes them as one batch and hands each
outcome to the event loop that waits for it. Everything else is the shipped code (jobs are
still plain data, though a thread would not need them to be). A host killed outright loses
the jobs still queued on the thread, where the writer process would have written them.
"""

from __future__ import annotations

import asyncio
import queue
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tether.cli.main import main
from tether.errors import StoreUnavailable
from tether.store.sqlite import store
from tether.store.sqlite._driver import connect
from tether.store.sqlite._group import Job, write_batch
from tether.store.sqlite._writer import _settle  # the same hand-back as the writer process's

_MAX_BATCH = 512  # as the writer process's

Queued = tuple[Job, "asyncio.Future[Any]", asyncio.AbstractEventLoop]
Outcome = tuple["asyncio.Future[Any]", Any, BaseException | None]


class ThreadWriter:
    """The writer on a thread: ``on_batch`` is told each batch's size, in the loop that started it."""

    def __init__(self, on_batch: Callable[[int], None] | None = None) -> None:
        self._on_batch = on_batch
        self._queue: queue.SimpleQueue[Queued | None] = queue.SimpleQueue()
        self._lock = threading.Lock()  # no job is queued behind the end
        self._ended: str | None = None
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def start(self, path: Path) -> None:
        self._loop = asyncio.get_running_loop()
        conn = connect(path)
        self._thread = threading.Thread(target=self._serve, args=(conn,), name="tether-sqlite-writer", daemon=True)
        self._thread.start()

    async def stop(self) -> None:
        """Write the jobs queued so far, then end the thread."""
        if self._thread is None:
            return
        with self._lock:
            self._ended = self._ended or "the store is closed"
            self._queue.put(None)
        await asyncio.to_thread(self._thread.join)

    async def write(self, fn: Callable[..., Any], args: tuple[Any, ...] = (), prepare: Any = None) -> Any:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        with self._lock:
            if self._ended is not None:
                raise StoreUnavailable(self._ended)
            self._queue.put((Job(fn, args, prepare), future, loop))
        return await future

    def _serve(self, conn: sqlite3.Connection) -> None:
        try:
            more = True
            while more:
                first = self._queue.get()
                if first is None:
                    return
                batch = [first]
                while len(batch) < _MAX_BATCH:
                    try:
                        queued = self._queue.get_nowait()
                    except queue.Empty:
                        break
                    if queued is None:
                        more = False
                        break
                    batch.append(queued)
                outcomes = write_batch(conn, [job for job, _, _ in batch])
                by_loop: dict[asyncio.AbstractEventLoop, list[Outcome]] = {}
                for (_, future, loop), (result, error) in zip(batch, outcomes):
                    by_loop.setdefault(loop, []).append((future, result, error))
                if self._on_batch is not None and self._loop is not None:
                    self._loop.call_soon_threadsafe(self._on_batch, len(batch))
                for loop, settled in by_loop.items():
                    loop.call_soon_threadsafe(_settle, settled)
        finally:
            conn.close()


store.Writer = ThreadWriter  # type: ignore[misc,assignment]

if __name__ == "__main__":
    main()
