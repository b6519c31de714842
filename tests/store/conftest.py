"""Stores for the contract suite: each test gets an empty store of each backend.

SQLite lives in the test's tmp_path. PostgreSQL lives in one fresh database per test
session (``pg.fresh_database``), emptied before every test, so the two backends start
every test from the same nothing.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path

import asyncpg
import pytest
from pg import fresh_database

from tether.store.base import Store
from tether.store.postgres import PostgresStore
from tether.store.sqlite import SqliteStore

BACKENDS = ["sqlite", "postgres"]

# the tests here share builders from store_records.py beside this file
_HERE = str(Path(__file__).resolve().parent)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)


@pytest.fixture(scope="session")
def postgres_dsn() -> Iterator[str]:
    """The DSN of a database made for this test session and dropped after it."""
    with fresh_database() as dsn:
        yield dsn


async def empty_database(dsn: str) -> None:
    """Delete every row the store wrote (the schema and its migrations stay)."""
    conn = await asyncpg.connect(dsn)
    try:
        tables = await conn.fetch(
            "SELECT quote_ident(tablename) FROM pg_tables WHERE schemaname = 'public' AND tablename <> "
            "'schema_migrations'"
        )
        if tables:
            await conn.execute(f"TRUNCATE {', '.join(t[0] for t in tables)} RESTART IDENTITY")
    finally:
        await conn.close()


@pytest.fixture
async def postgres_stores(postgres_dsn: str) -> AsyncIterator[Callable[[], Awaitable[PostgresStore]]]:
    """Open as many PostgresStores on the (emptied) test database as a test needs."""
    opened: list[PostgresStore] = []

    async def open_store() -> PostgresStore:
        store = PostgresStore(postgres_dsn)
        await store.open()
        if not opened:
            await empty_database(postgres_dsn)
        opened.append(store)
        return store

    yield open_store
    for store in reversed(opened):
        await store.close()


@pytest.fixture
async def postgres_store(postgres_stores: Callable[[], Awaitable[PostgresStore]]) -> PostgresStore:
    return await postgres_stores()


@pytest.fixture
async def sqlite_store(tmp_path: Path) -> AsyncIterator[SqliteStore]:
    store = SqliteStore(tmp_path / "tether.db")
    await store.open()
    yield store
    await store.close()


@pytest.fixture(params=BACKENDS)
def store(request: pytest.FixtureRequest) -> Store:
    """An empty, open store of each backend in turn."""
    chosen: Store = request.getfixturevalue(f"{request.param}_store")
    return chosen
