"""The stores' SQL files: every query a store names exists and is used (and, for
PostgreSQL, prepares), and PostgreSQL's migrations keep the SQLite store's version numbers."""

from __future__ import annotations

import re
from pathlib import Path

import asyncpg

import tether.store.postgres as postgres_package
import tether.store.sqlite as sqlite_package
from tether.store.postgres import PostgresStore
from tether.store.postgres._driver import Q
from tether.store.postgres._migrate import migration_files
from tether.store.sqlite._driver import Q as SQLITE_Q
from tether.store.sqlite._migrate import MIGRATIONS_DIR as SQLITE_MIGRATIONS

PACKAGE_DIR = Path(postgres_package.__file__).parent
SQLITE_PACKAGE_DIR = Path(sqlite_package.__file__).parent
# Q["name"] in any module, and the store's helpers that take a query name (after a record map)
_USES = re.compile(
    r"""(?:Q\[|_fetch\(|_fetchrow\(|_execute\(|(?:_fetch_all|_fetch_one|as_records?)\(\w+,)\s*"(\w+)\""""
)


def used_query_names() -> set[str]:
    names: set[str] = set()
    for module in PACKAGE_DIR.glob("*.py"):
        names.update(_USES.findall(module.read_text(encoding="utf-8")))
    return names


def test_the_package_exports_only_the_store() -> None:
    assert postgres_package.__all__ == ["PostgresStore"]


def test_every_query_the_code_names_exists_and_every_query_is_used() -> None:
    used = used_query_names()
    assert used, "the pattern found no query names: update _USES"
    assert sorted(used - set(Q)) == []
    assert sorted(set(Q) - used) == []


def test_every_sqlite_query_the_store_names_exists_and_every_one_is_used() -> None:
    used: set[str] = set()
    for module in SQLITE_PACKAGE_DIR.glob("*.py"):
        used.update(re.findall(r"""Q\["(\w+)"\]""", module.read_text(encoding="utf-8")))
    assert used, "the pattern found no query names: update it"
    assert sorted(used - set(SQLITE_Q)) == []
    assert sorted(set(SQLITE_Q) - used) == []


def test_migrations_keep_the_sqlite_version_numbers() -> None:
    versions = [version for version, _ in migration_files()]
    assert versions == sorted(set(versions))
    assert versions == list(range(1, versions[-1] + 1)), "no version is skipped"
    sqlite_versions = sorted(int(p.name.split("_", 1)[0]) for p in SQLITE_MIGRATIONS.glob("*.sql"))
    assert set(sqlite_versions) <= set(versions)
    assert dict(migration_files())[4].name == "0004_leases.sql"


async def test_every_query_prepares_against_the_migrated_schema(
    postgres_store: PostgresStore, postgres_dsn: str
) -> None:
    conn = await asyncpg.connect(postgres_dsn)
    try:
        for name, sql in Q.items():
            try:
                await conn.prepare(sql)
            except asyncpg.PostgresError as exc:
                raise AssertionError(f"query {name!r} does not prepare: {exc}") from exc
    finally:
        await conn.close()
