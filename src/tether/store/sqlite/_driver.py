"""Connections to the SQLite file, how each is tuned, the named queries, and rows read as records.

Every connection, the writer's and each reader's, is opened here: WAL so that readers
run beside the writer, ``synchronous=FULL`` so that an acknowledged commit is on disk.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any, TypeVar

from tether.clock import iso, now
from tether.store._queries import load_queries
from tether.store._records import RecordMap

__all__ = ["Params", "Q", "connect", "fetch_all", "fetch_one", "later_iso", "now_iso"]

Q = load_queries(Path(__file__).parent / "queries.sql")
R = TypeVar("R")
#: what sqlite3 binds: values by position, or by name
Params = Sequence[Any] | Mapping[str, Any]


def connect(path: Path) -> sqlite3.Connection:
    """A connection in autocommit mode (transactions are explicit), usable from any thread."""
    # cached_statements: the writer's multi-row INSERTs come in many row counts (see _inserts)
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=10.0, cached_statements=256)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")
    conn.execute("PRAGMA busy_timeout=10000")
    conn.execute("PRAGMA foreign_keys=ON")
    return conn


def _names(cursor: sqlite3.Cursor) -> list[str]:
    return [column[0] for column in cursor.description]


def fetch_all(conn: sqlite3.Connection, records: RecordMap[R], sql: str, params: Params = ()) -> list[R]:
    """The rows of ``sql`` as records, read by column name."""
    cursor = conn.execute(sql, params)
    read = records.reader(sql, lambda: _names(cursor))
    return [read(row) for row in cursor]


def fetch_one(conn: sqlite3.Connection, records: RecordMap[R], sql: str, params: Params = ()) -> R | None:
    """The first row of ``sql`` (or None) as a record."""
    cursor = conn.execute(sql, params)
    row = cursor.fetchone()
    return None if row is None else records.reader(sql, lambda: _names(cursor))(row)


def now_iso() -> str:
    """Now, as lease times are written and compared here (ISO-8601 text, the host's clock)."""
    return iso(now())


def later_iso(seconds: float) -> str:
    """``seconds`` from now, as a lease's expiry."""
    return iso(now() + timedelta(seconds=seconds))
