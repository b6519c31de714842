"""How many rows a host's store holds, per table, read straight from its database (SQLite or PostgreSQL).

For the tests that a refusal writes nothing, and that a purge takes what it should: they
count what is at rest, not what the API says. The host may be running: SQLite is read
through a read-only connection (WAL lets it beside the writer), PostgreSQL through a
connection of its own.
"""

from __future__ import annotations

import asyncio
import sqlite3
from concurrent.futures import ThreadPoolExecutor

import asyncpg
from harness import Host

__all__ = ["ROW_TABLES", "row_counts"]

#: the tables a request's writes land in
ROW_TABLES = ("runs", "run_events", "a2a_tasks", "a2a_messages", "blobs", "run_blobs")


def row_counts(host: Host, tables: tuple[str, ...] = ROW_TABLES) -> dict[str, int]:
    """The number of rows in each of ``tables`` (names from this module, never from input)."""
    queries = {table: f"SELECT count(*) FROM {table}" for table in tables}
    if host.database_url is None:
        conn = sqlite3.connect(f"file:{host.data_dir / 'tether.db'}?mode=ro", uri=True, timeout=10)
        try:
            return {table: int(conn.execute(query).fetchone()[0]) for table, query in queries.items()}
        finally:
            conn.close()
    url = host.database_url

    async def count() -> dict[str, int]:
        conn = await asyncpg.connect(url, timeout=10)
        try:
            return {table: int(await conn.fetchval(query)) for table, query in queries.items()}
        finally:
            await conn.close()

    with ThreadPoolExecutor(max_workers=1) as pool:  # a test may run inside an event loop of its own
        return pool.submit(lambda: asyncio.run(count())).result()
