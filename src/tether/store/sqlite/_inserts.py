"""Rows of many commits, written with one INSERT per table.

Each statement costs the writer a round through SQLite's statement machinery (and, when
it was a thread, a wait for the interpreter lock). So a commit hands the writer its new
rows by table, and the writer inserts the rows of every commit in its batch with one
multi-row statement per table.
"""

from __future__ import annotations

import functools
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from tether.store import _records
from tether.store.sqlite._driver import Q

#: rows per statement. Each row count is its own prepared statement, kept in the
#: connection's cache; at c=256, with 500 rows per statement, those took 37 MB more
#: than one statement per row had (RSS 107 -> 144 MB); 128 rows cost 15-20 MB and
#: still make a batch of 128 commits' events four statements.
_MAX_ROWS = 128

Row = Sequence[Any]


@dataclass(frozen=True, slots=True)
class Table:
    """A table rows are inserted into, with the columns its record map names."""

    name: str
    columns: tuple[str, ...]
    #: what follows VALUES, e.g. an ON CONFLICT clause
    tail: str = ""
    #: a row this table skips (ON CONFLICT DO NOTHING) is a refusal of its commit
    every_row: bool = False

    @classmethod
    def of(cls, records: _records.RecordMap[Any], tail: str = "", *, every_row: bool = False) -> Table:
        """The table a record map stores its records in, with the map's columns."""
        return cls(records.table, records.columns, tail, every_row)

    def sql(self, rows: int) -> str:
        return _statement(self, rows)

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled by name (jobs cross to the writer process): one of ``ORDER`` on the other side."""
        return table_named, (self.name,)


@functools.lru_cache(maxsize=1024)
def _statement(table: Table, rows: int) -> str:
    one = "(" + ", ".join("?" * len(table.columns)) + ")"
    return f"INSERT INTO {table.name} ({', '.join(table.columns)}) VALUES {', '.join([one] * rows)} {table.tail}"


IDEMPOTENCY = Table.of(_records.IDEMPOTENCY, "ON CONFLICT DO NOTHING", every_row=True)
RUNS = Table.of(_records.RUN, "ON CONFLICT (run_id) DO NOTHING", every_row=True)
EVENTS = Table.of(_records.EVENT)
TASKS = Table.of(
    _records.TASK,
    "ON CONFLICT (task_id) DO UPDATE SET record = excluded.record, updated_at = excluded.updated_at, "
    + "state = excluded.state",
)
MESSAGES = Table.of(_records.MESSAGE)
OUTBOX = Table.of(_records.DELIVERY)
#: a blob is stored once per content, whichever commit brings it first; a run links it once
BLOBS = Table.of(_records.BLOB, "ON CONFLICT (digest) DO NOTHING")
RUN_BLOBS = Table.of(_records.RUN_BLOB, "ON CONFLICT DO NOTHING")
#: the order tables are written in (the schema has no foreign keys; this is the order a
#: single commit always used)
ORDER = (IDEMPOTENCY, RUNS, EVENTS, TASKS, MESSAGES, OUTBOX, BLOBS, RUN_BLOBS)
_BY_NAME = {table.name: table for table in ORDER}


def table_named(name: str) -> Table:
    return _BY_NAME[name]


class Refused(Exception):
    """A table refused a row: a skipped conflict or a broken constraint."""

    def __init__(self, table: Table) -> None:
        super().__init__(f"{table.name} refused a row")
        self.table = table


class Rows:
    """One commit's new rows by table, and how many deliveries they enqueue."""

    __slots__ = ("by_table", "enqueued")

    def __init__(self, by_table: dict[Table, list[Row]] | None = None) -> None:
        self.by_table: dict[Table, list[Row]] = by_table if by_table is not None else {}
        self.enqueued = 0

    def add(self, table: Table, row: Row) -> None:
        self.by_table.setdefault(table, []).append(row)

    def copy(self) -> Rows:
        return Rows({table: list(rows) for table, rows in self.by_table.items()})


def insert(conn: sqlite3.Connection, commits: list[Rows]) -> None:
    """Insert the rows of ``commits``, one statement per table (per 128 rows).

    Raises Refused when a table refuses a row; which commit's row it was, the caller
    finds out by writing the commits one by one.
    """
    for table in ORDER:
        rows = [row for commit in commits for row in commit.by_table.get(table, ())]
        for start in range(0, len(rows), _MAX_ROWS):
            chunk = rows[start : start + _MAX_ROWS]
            try:
                cursor = conn.execute(table.sql(len(chunk)), [value for row in chunk for value in row])
            except sqlite3.IntegrityError as exc:
                raise Refused(table) from exc
            if table.every_row and cursor.rowcount != len(chunk):
                raise Refused(table)
        if table is OUTBOX and rows:
            _queue_behind_heads(conn, [row[0] for row in rows])


def _queue_behind_heads(conn: sqlite3.Connection, delivery_ids: list[str]) -> None:
    """New deliveries head their stream (the column's default) unless an older pending row of
    the stream is there, maybe from this very batch: then they wait behind it."""
    conn.execute(Q["enqueued_behind"], (orjson.dumps(delivery_ids).decode(),))
