"""Both backends migrate to the same schema, but for the differences listed here on purpose.

A fresh SQLite file and a fresh PostgreSQL database are migrated by their stores, read back
from the databases' own catalogues, and compared:

- tables, by name (SQLite's internal ``sqlite_*`` tables aside);
- columns, by name and order, NOT NULL, and type through ``same_type``: TEXT is text, BLOB
  is bytea, INTEGER is integer or bigint; a column a record map holds as JSON text is TEXT
  and jsonb, one it holds as a flag is INTEGER and boolean; a few are TEXT and timestamptz
  on purpose (DATABASE_CLOCK);
- primary keys, by their columns in order;
- indexes other than the primary keys', by name, table, columns in order, uniqueness and
  whether they are partial;
- CHECK constraints, by name.

What cannot be compared between the dialects: the text of an index's predicate or of a
CHECK (PostgreSQL rewrites ``NOT IN (...)`` as ``<> ALL (ARRAY[...])``; the statuses in
them are checked by test_sql_statuses.py), defaults and identity columns (SQLite's
AUTOINCREMENT and the ``MAX(registered) + 1`` of upsert_push_config against BIGINT
IDENTITY), WITHOUT ROWID, the names of the indexes behind primary keys, and comments.
"""

from __future__ import annotations

import asyncio
import copy
import re
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path

import asyncpg
import pytest
from pg import fresh_database

from tether.store._records import RECORD_MAPS
from tether.store.postgres import PostgresStore
from tether.store.sqlite import SqliteStore

#: (table, column) → why PostgreSQL keeps it as timestamptz where SQLite keeps ISO-8601 TEXT
DATABASE_CLOCK = {
    ("run_leases", "expires_at"): "leases lapse by the database's clock, which every host shares; SQLite has one host",
    ("outbox", "claimed_until"): "delivery claims lapse by the database's clock, for the same reason",
    ("schema_migrations", "applied_at"): "each writes its own clock's time (DEFAULT now() on PostgreSQL)",
}
#: indexes only PostgreSQL has, and why
POSTGRES_ONLY_INDEXES = {
    "run_leases_by_owner": "renew_leases touches one host's leases among many hosts'; SQLite's one host holds them all",
    "outbox_claimed": "next_delivery_at finds when other hosts' claims lapse; SQLite keeps claims in its host's memory",
}
#: indexes on other columns, and why: name → (SQLite's columns, PostgreSQL's columns, why)
OTHER_INDEX_COLUMNS = {
    "outbox_stream": (
        ("stream_key", "sequence"),
        ("stream_key", "sequence", "delivery_id"),
        "PostgreSQL compares a stream's rows by the row value (sequence, delivery_id), which the index serves whole",
    ),
}
#: CHECK constraints only PostgreSQL has, and why (SQLite cannot add one to an existing table)
POSTGRES_ONLY_CHECKS = {
    "run_leases_epoch_positive": "SQLite's one host takes every epoch from the same claim statement",
    "outbox_claim_whole": "the SQLite store never claims a delivery: its one host sends them all",
}
#: flags no record map holds (the stores keep them in SQL), and what they say
FLAGS_OUTSIDE_RECORDS = {("outbox", "head"): "the delivery heads its stream: due_deliveries reads these only"}
#: type pairs (SQLite's declared type, PostgreSQL's data_type) that hold the same values
SAME_TYPES = {("TEXT", "text"), ("BLOB", "bytea"), ("INTEGER", "integer"), ("INTEGER", "bigint")}
#: how a record map's kinds sit in each backend (the map says which columns)
TYPES_OF_KIND = {"json_text": ("TEXT", "jsonb"), "json_bytes": ("BLOB", "bytea"), "flag": ("INTEGER", "boolean")}


@dataclass(frozen=True)
class Column:
    name: str
    type: str
    not_null: bool


@dataclass(frozen=True)
class Index:
    table: str
    columns: tuple[str, ...]
    unique: bool
    partial: bool


@dataclass
class Schema:
    tables: dict[str, list[Column]] = field(default_factory=dict)
    primary_keys: dict[str, tuple[str, ...]] = field(default_factory=dict)
    indexes: dict[str, Index] = field(default_factory=dict)
    checks: set[str] = field(default_factory=set)


def sqlite_schema(path: Path) -> Schema:
    """The schema of a SQLite file, from its catalogue and PRAGMAs."""
    schema = Schema()
    conn = sqlite3.connect(path)
    try:
        tables = conn.execute("SELECT name, sql FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")
        for table, sql in tables.fetchall():
            info = conn.execute(f"PRAGMA table_info({table})").fetchall()  # cid, name, type, notnull, default, pk
            # A PRIMARY KEY column of a rowid table may hold NULL in SQLite (a legacy quirk); the
            # stores never write one, so a key column counts as NOT NULL, as on PostgreSQL.
            schema.tables[table] = [Column(name, type_, bool(notnull or pk)) for _, name, type_, notnull, _, pk in info]
            schema.primary_keys[table] = tuple(name for _, name, *_, pk in sorted(info, key=lambda c: c[5]) if pk)
            schema.checks.update(re.findall(r"CONSTRAINT\s+(\w+)\s+CHECK", sql, re.IGNORECASE))
            assert len(re.findall(r"\bCHECK\b", sql, re.IGNORECASE)) == len(
                re.findall(r"CONSTRAINT\s+\w+\s+CHECK", sql, re.IGNORECASE)
            ), f"name every CHECK of {table}, so that it can be compared"
            for _, index, unique, origin, partial in conn.execute(f"PRAGMA index_list({table})").fetchall():
                if origin == "pk":
                    continue
                columns = tuple(row[2] for row in conn.execute(f"PRAGMA index_info({index})"))
                schema.indexes[index] = Index(table, columns, bool(unique), bool(partial))
    finally:
        conn.close()
    return schema


async def postgres_schema(dsn: str) -> Schema:
    """The schema of a PostgreSQL database (its public schema), from the catalogues."""
    schema = Schema()
    conn = await asyncpg.connect(dsn)
    try:
        columns = await conn.fetch(
            "SELECT table_name, column_name, data_type, is_nullable FROM information_schema.columns "
            "WHERE table_schema = 'public' ORDER BY table_name, ordinal_position"
        )
        for row in columns:
            column = Column(row["column_name"], row["data_type"], row["is_nullable"] == "NO")
            schema.tables.setdefault(row["table_name"], []).append(column)
        indexes = await conn.fetch(
            """
            SELECT ic.relname AS index, t.relname AS table, i.indisprimary AS primary, i.indisunique AS unique,
                   i.indpred IS NOT NULL AS partial,
                   array_agg(a.attname ORDER BY k.position) AS columns
            FROM pg_index i
            JOIN pg_class ic ON ic.oid = i.indexrelid
            JOIN pg_class t ON t.oid = i.indrelid
            JOIN pg_namespace n ON n.oid = t.relnamespace AND n.nspname = 'public'
            JOIN LATERAL unnest(i.indkey::int2[]) WITH ORDINALITY AS k(attnum, position) ON true
            JOIN pg_attribute a ON a.attrelid = t.oid AND a.attnum = k.attnum
            GROUP BY ic.relname, t.relname, i.indisprimary, i.indisunique, i.indpred IS NOT NULL
            """
        )
        for row in indexes:
            if row["primary"]:
                schema.primary_keys[row["table"]] = tuple(row["columns"])
            else:
                schema.indexes[row["index"]] = Index(row["table"], tuple(row["columns"]), row["unique"], row["partial"])
        checks = await conn.fetch(
            "SELECT c.conname FROM pg_constraint c JOIN pg_namespace n ON n.oid = c.connamespace "
            "WHERE n.nspname = 'public' AND c.contype = 'c'"
        )
        schema.checks = {row["conname"] for row in checks}
    finally:
        await conn.close()
    return schema


def _kinds() -> dict[tuple[str, str], str]:
    """(table, column) → the kind a record map gives it, for the columns held in another form."""
    return {
        (records.table, column): kind
        for records in RECORD_MAPS
        for column, kind in zip(records.columns, records.kinds)
        if kind != "value"
    }


def same_type(table: str, column: str, sqlite_type: str, postgres_type: str) -> bool:
    """Whether the two declared types hold the same values, for this column."""
    kind = _kinds().get((table, column))
    if kind is not None and kind in TYPES_OF_KIND:
        return (sqlite_type, postgres_type) == TYPES_OF_KIND[kind]
    if (table, column) in FLAGS_OUTSIDE_RECORDS:
        return (sqlite_type, postgres_type) == TYPES_OF_KIND["flag"]
    if (table, column) in DATABASE_CLOCK:
        return (sqlite_type, postgres_type) == ("TEXT", "timestamp with time zone")
    return (sqlite_type, postgres_type) in SAME_TYPES


def differences(sqlite: Schema, postgres: Schema) -> list[str]:
    """Every way the two schemas differ that is not listed above as meant."""
    found = _table_differences(sqlite, postgres)
    found += _index_differences(sqlite, postgres)
    found += _check_differences(sqlite, postgres)
    return found


def _table_differences(sqlite: Schema, postgres: Schema) -> list[str]:
    found: list[str] = []
    only_sqlite, only_postgres = set(sqlite.tables) - set(postgres.tables), set(postgres.tables) - set(sqlite.tables)
    if only_sqlite or only_postgres:
        found.append(f"tables only in SQLite {sorted(only_sqlite)}, only in PostgreSQL {sorted(only_postgres)}")
    for table in sorted(set(sqlite.tables) & set(postgres.tables)):
        ours, theirs = sqlite.tables[table], postgres.tables[table]
        ours_names, theirs_names = [c.name for c in ours], [c.name for c in theirs]
        if ours_names != theirs_names:
            only = f"only in SQLite {sorted(set(ours_names) - set(theirs_names))}, "
            only += f"only in PostgreSQL {sorted(set(theirs_names) - set(ours_names))}"
            found.append(f"{table}: columns {only} (SQLite {ours_names}, PostgreSQL {theirs_names})")
            continue
        for a, b in zip(ours, theirs):
            if not same_type(table, a.name, a.type, b.type):
                found.append(f"{table}.{a.name}: {a.type} in SQLite is not {b.type} in PostgreSQL")
            if a.not_null != b.not_null:
                found.append(f"{table}.{a.name}: NOT NULL is {a.not_null} in SQLite, {b.not_null} in PostgreSQL")
        ours_key, theirs_key = sqlite.primary_keys.get(table), postgres.primary_keys.get(table)
        if ours_key != theirs_key:
            found.append(f"{table}: primary key {ours_key} in SQLite, {theirs_key} in PostgreSQL")
    return found


def _index_differences(sqlite: Schema, postgres: Schema) -> list[str]:
    found: list[str] = []
    postgres_only = set(POSTGRES_ONLY_INDEXES)
    only_sqlite = set(sqlite.indexes) - set(postgres.indexes)
    only_postgres = set(postgres.indexes) - set(sqlite.indexes) - postgres_only
    gone = postgres_only - set(postgres.indexes)
    if only_sqlite or only_postgres or gone:
        found.append(
            f"indexes only in SQLite {sorted(only_sqlite)}, only in PostgreSQL {sorted(only_postgres)}; "
            f"listed as PostgreSQL's only but missing: {sorted(gone)}"
        )
    for name in sorted(set(sqlite.indexes) & set(postgres.indexes)):
        ours, theirs = sqlite.indexes[name], postgres.indexes[name]
        if name in OTHER_INDEX_COLUMNS:
            sqlite_columns, postgres_columns, _ = OTHER_INDEX_COLUMNS[name]
            if (ours.columns, theirs.columns) != (sqlite_columns, postgres_columns):
                found.append(
                    f"index {name}: columns {ours.columns} and {theirs.columns}, "
                    f"listed as {sqlite_columns} and {postgres_columns}"
                )
            theirs = Index(theirs.table, ours.columns, theirs.unique, theirs.partial)
        if ours != theirs:
            found.append(f"index {name}: {ours} in SQLite, {theirs} in PostgreSQL")
    return found


def _check_differences(sqlite: Schema, postgres: Schema) -> list[str]:
    postgres_only = set(POSTGRES_ONLY_CHECKS)
    if sqlite.checks == postgres.checks - postgres_only and postgres_only <= postgres.checks:
        return []
    listed = f"listed as PostgreSQL's only: {sorted(postgres_only)}"
    return [f"CHECK constraints {sorted(sqlite.checks)} in SQLite, {sorted(postgres.checks)} in PostgreSQL ({listed})"]


async def _migrate_both(path: Path, dsn: str) -> Schema:
    async with SqliteStore(path):
        pass
    async with PostgresStore(dsn):
        pass
    return await postgres_schema(dsn)


@pytest.fixture(scope="module")
def schemas(tmp_path_factory: pytest.TempPathFactory) -> tuple[Schema, Schema]:
    """A fresh SQLite file and a fresh PostgreSQL database, each migrated by its store."""
    path = tmp_path_factory.mktemp("parity") / "tether.db"
    with fresh_database() as dsn:
        postgres = asyncio.run(_migrate_both(path, dsn))
    return sqlite_schema(path), postgres


def test_both_backends_migrate_to_the_same_schema(schemas: tuple[Schema, Schema]) -> None:
    sqlite, postgres = schemas
    assert len(sqlite.tables) >= 11 and len(sqlite.indexes) >= 8, "the catalogue queries found the schema"
    assert differences(sqlite, postgres) == []


def test_a_column_index_or_check_on_one_backend_only_is_a_difference(schemas: tuple[Schema, Schema]) -> None:
    sqlite, postgres = schemas
    changed = copy.deepcopy(sqlite)
    changed.tables["runs"].append(Column("priority", "INTEGER", False))
    assert any("runs: columns" in d for d in differences(changed, postgres))
    changed = copy.deepcopy(sqlite)
    changed.tables["outbox"][8] = Column("body", "TEXT", True)
    assert any("outbox.body: TEXT" in d for d in differences(changed, postgres))
    changed = copy.deepcopy(postgres)
    changed.indexes["runs_by_status"] = Index("runs", ("status",), False, False)
    assert any("runs_by_status" in d for d in differences(sqlite, changed))
    changed = copy.deepcopy(postgres)
    changed.indexes["a2a_messages_once"] = Index("a2a_messages", ("task_id", "message_id"), False, False)
    assert any("a2a_messages_once" in d for d in differences(sqlite, changed))
    changed = copy.deepcopy(postgres)
    changed.checks.add("runs_status_known")
    assert any("CHECK" in d for d in differences(sqlite, changed))


def test_every_record_map_names_columns_both_tables_have(schemas: tuple[Schema, Schema]) -> None:
    sqlite, postgres = schemas
    for records in RECORD_MAPS:
        for schema in (sqlite, postgres):
            names = [column.name for column in schema.tables[records.table]]
            assert set(records.columns) <= set(names), f"{records}: {sorted(set(records.columns) - set(names))}"
