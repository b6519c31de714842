"""Storage: one interface (``Store``) and two backends, SQLite (``sqlite``, one host) and PostgreSQL
(``postgres``, several hosts on one database); ``open_store`` builds the one a setting names."""

from tether.store.base import (
    Commit,
    EventRow,
    IdempotencyRecord,
    KeyRow,
    RunRow,
    Store,
    TaskMessage,
    TaskRecord,
    WorkflowRow,
)

__all__ = [
    "Commit",
    "EventRow",
    "IdempotencyRecord",
    "KeyRow",
    "RunRow",
    "Store",
    "TaskMessage",
    "TaskRecord",
    "WorkflowRow",
    "open_store",
]


def open_store(*, data_dir: str | None = None, database_url: str | None = None) -> Store:
    """Build the store a setting names: a ``postgresql://`` URL, else SQLite in ``data_dir``."""
    if database_url and database_url.startswith(("postgresql://", "postgres://")):
        from tether.store.postgres import PostgresStore

        return PostgresStore(database_url)
    if database_url and not database_url.startswith("sqlite:"):
        raise ValueError(f"unsupported --database-url {database_url!r}: use postgresql://… or sqlite:PATH")
    from pathlib import Path

    from tether.store.sqlite import SqliteStore

    if database_url:
        return SqliteStore(Path(database_url.removeprefix("sqlite:").removeprefix("//")))
    assert data_dir is not None
    return SqliteStore(Path(data_dir) / "tether.db")
