"""The PostgreSQL store: several hosts sharing one database."""

from tether.store.postgres.store import PostgresStore

__all__ = ["PostgresStore"]
