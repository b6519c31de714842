"""Numbered schema migrations, applied once each, safely from two processes opening one file."""

from __future__ import annotations

import sqlite3
from pathlib import Path

MIGRATIONS_DIR = Path(__file__).parent / "migrations"


def migration_files() -> list[tuple[int, Path]]:
    """(version, file) of every migration, in order; PostgreSQL's keep the same versions."""
    files = [(int(path.name.split("_", 1)[0]), path) for path in MIGRATIONS_DIR.glob("*.sql")]
    return sorted(files)


def _statements(script: str) -> list[str]:
    """A migration's statements: comment lines dropped, split at semicolons."""
    text = "\n".join(line for line in script.splitlines() if not line.lstrip().startswith("--"))
    return [statement.strip() for statement in text.split(";") if statement.strip()]


def apply_migrations(conn: sqlite3.Connection) -> list[int]:
    """Apply numbered migrations not yet applied; returns the versions applied now.

    The whole check-and-apply runs under one write lock, so two processes opening a
    new file at once (``tether serve`` and ``tether keys create``) apply each once.
    """
    conn.execute("CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, applied_at TEXT NOT NULL)")
    applied = []
    conn.execute("BEGIN IMMEDIATE")
    try:
        done = {row[0] for row in conn.execute("SELECT version FROM schema_migrations")}
        for version, file in migration_files():
            if version in done:
                continue
            for statement in _statements(file.read_text(encoding="utf-8")):
                conn.execute(statement)
            conn.execute("INSERT INTO schema_migrations (version, applied_at) VALUES (?, datetime('now'))", (version,))
            applied.append(version)
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    return applied
