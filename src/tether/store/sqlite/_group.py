"""Group commit: a batch of write jobs in one transaction, one fsync.

The writer process (``_writer``) runs every job waiting for it as one batch. The jobs run
back to back first, the new rows of all commits inserted together (``_inserts``). Only if a
job refuses (a lost compare-and-swap, a claimed idempotency key) is the transaction undone
and the batch run again, each job alone in its own savepoint, so that one refusal undoes
nothing else and is reported precisely to its own caller.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import Any

from tether.errors import StoreUnavailable
from tether.store.sqlite import _inserts
from tether.store.sqlite._commit import forget_webhooks

#: a job's result, or the exception it ended with
Outcome = tuple[Any, BaseException | None]


class Job:
    """A write: ``fn(conn, *args)`` does it alone; a commit also has ``prepare``, which does
    what cannot wait and leaves its rows to be inserted with the batch's."""

    __slots__ = ("args", "fn", "prepare")

    def __init__(
        self,
        fn: Callable[..., Any],
        args: tuple[Any, ...],
        prepare: Callable[[sqlite3.Connection], _inserts.Rows] | None,
    ) -> None:
        self.fn = fn
        self.args = args
        self.prepare = prepare


def write_batch(conn: sqlite3.Connection, batch: list[Job]) -> list[Outcome]:
    """Write every job of ``batch`` in one transaction; each job's outcome, in order.

    A failure of SQLite itself (a full disk, a broken file) is every job's outcome, as
    StoreUnavailable.
    """
    try:
        outcomes = _grouped(conn, batch) if len(batch) > 1 else None
        if outcomes is None:
            outcomes = _isolated(conn, batch)
    except sqlite3.Error as exc:
        _rollback(conn)
        failure = StoreUnavailable(f"SQLite write failed: {exc}")
        outcomes = [(None, failure) for _ in batch]
    return outcomes


def _grouped(conn: sqlite3.Connection, batch: list[Job]) -> list[Outcome] | None:
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
            outcomes.append((job.fn(conn, *job.args), None))
        if grouped:
            _inserts.insert(conn, grouped)
    except Exception:  # noqa: BLE001 - any refusal: the isolated rerun reports it to its own caller
        _rollback(conn)
        return None
    conn.execute("COMMIT")
    return outcomes


def _isolated(conn: sqlite3.Connection, batch: list[Job]) -> list[Outcome]:
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
            outcomes.append((job.fn(conn, *job.args), None))
        except Exception as exc:  # noqa: BLE001 - a job's refusal is its outcome, raised to its caller
            if savepoints:
                conn.execute("ROLLBACK TO job")
            outcomes.append((None, exc))
        if savepoints:
            conn.execute("RELEASE job")
    if not savepoints and outcomes[0][1] is not None:
        _rollback(conn)  # the lone job refused: nothing of it is kept
        return outcomes
    conn.execute("COMMIT")
    return outcomes


def _rollback(conn: sqlite3.Connection) -> None:
    """Undo the open transaction, and forget the webhooks it may have read of its own writes."""
    forget_webhooks()
    if conn.in_transaction:
        conn.execute("ROLLBACK")
