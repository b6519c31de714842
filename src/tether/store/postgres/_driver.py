"""The one place asyncpg is imported, and where its errors become Tether's.

Connection trouble of any kind (refused, reset, timed out, a server going away) and any
statement PostgreSQL refuses become ``StoreUnavailable``, chained from the driver's
error. Outcomes the store expects (a lost compare-and-swap, a claimed key) are decided
from the rows statements return, never by catching driver errors.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import asyncpg  # type: ignore[import-untyped]

from tether.errors import StoreUnavailable
from tether.store._queries import load_queries
from tether.store._records import RecordMap

__all__ = ["CONNECTION_ERRORS", "Q", "as_record", "as_records", "asyncpg", "connect", "rows_affected", "store_errors"]

Q = load_queries(Path(__file__).parent / "queries.sql")
R = TypeVar("R")

#: the driver's ways of saying the server cannot be talked to right now
CONNECTION_ERRORS: tuple[type[BaseException], ...] = (
    OSError,  # refused, reset, unreachable; TimeoutError is one too
    asyncpg.PostgresConnectionError,  # includes ConnectionDoesNotExistError
    asyncpg.InterfaceError,  # the connection is closed, or in the wrong state for the call
    asyncpg.InternalClientError,  # the protocol fell out of step with a server that hung up
    asyncpg.exceptions.CannotConnectNowError,
    asyncpg.exceptions.TooManyConnectionsError,
)


@contextmanager
def store_errors(action: str) -> Iterator[None]:
    """Translate driver errors raised while doing ``action`` into ``StoreUnavailable``."""
    try:
        yield
    except CONNECTION_ERRORS as exc:
        raise StoreUnavailable(f"PostgreSQL is unreachable while {action}: {exc}") from exc
    except asyncpg.PostgresError as exc:
        raise StoreUnavailable(f"PostgreSQL refused {action}: {exc}") from exc


async def connect(dsn: str, application_name: str) -> asyncpg.Connection:
    """A connection of its own, outside the pool (the listener's, the notifier's)."""
    return await asyncpg.connect(dsn, server_settings={"application_name": application_name})


def rows_affected(status: str) -> int:
    """The row count of a command tag such as ``UPDATE 1`` or ``DELETE 0``."""
    tail = status.rsplit(" ", 1)[-1]
    return int(tail) if tail.isdigit() else 0


def as_records(records: RecordMap[R], query: str, rows: Sequence[Any]) -> list[R]:
    """The rows of named query ``query`` as records, read by column name (asyncpg's Record keys)."""
    if not rows:
        return []
    read = records.reader(Q[query], rows[0].keys)
    return [read(row) for row in rows]


def as_record(records: RecordMap[R], query: str, row: Any) -> R | None:
    """One row of named query ``query`` (or None) as a record."""
    return None if row is None else records.reader(Q[query], row.keys)(row)
