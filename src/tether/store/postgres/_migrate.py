"""Numbered schema migrations, applied once each, safely from several hosts at once."""

from __future__ import annotations

from pathlib import Path

from tether.store.postgres._driver import Q, asyncpg

MIGRATIONS_DIR = Path(__file__).parent / "migrations"


def migration_files() -> list[tuple[int, Path]]:
    """(version, file) of every migration, in order; versions match the SQLite store's."""
    files = [(int(path.name.split("_", 1)[0]), path) for path in MIGRATIONS_DIR.glob("*.sql")]
    return sorted(files)


async def apply_migrations(conn: asyncpg.Connection) -> list[int]:
    """Apply the migrations not yet applied; returns the versions applied now.

    Each migration runs in its own transaction that first takes a transaction-scoped
    advisory lock, so hosts starting together apply each version exactly once: the
    others wait for the lock, then find the version recorded and skip it.
    """
    applied: list[int] = []
    for version, path in migration_files():
        script = path.read_text(encoding="utf-8")
        async with conn.transaction():
            await conn.execute(Q["lock_migrations"])
            await conn.execute(Q["create_migrations_table"])
            if await conn.fetchval(Q["migration_applied"], version) is not None:
                continue
            await conn.execute(script)
            await conn.execute(Q["record_migration"], version)
        applied.append(version)
    return applied
