"""The embedded SQLite store."""

from tether.store.sqlite.store import SqliteStore, StoreInUse

__all__ = ["SqliteStore", "StoreInUse"]
