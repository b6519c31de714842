"""The embedded SQLite store."""

from tether.store.sqlite.store import SqliteStore

__all__ = ["SqliteStore"]
