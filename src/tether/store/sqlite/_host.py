"""One host per file: the lock a serving host holds on its SQLite file.

The host answers reads from memory because every commit passes through it; a second
host on the same file would break that, so it is refused. The lock is an ``flock`` on a
file beside the database, so it ends with the process however the process ends.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path


class StoreInUse(Exception):
    """Another host process serves this SQLite file."""


def lock_host(path: Path) -> int:
    """Take the host lock of the database at ``path``; returns the descriptor that holds it."""
    path.parent.mkdir(parents=True, exist_ok=True)  # a first start makes its data directory
    fd = os.open(path.with_name(path.name + ".host-lock"), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise StoreInUse(
            f"another Tether host is serving {path}: a SQLite store serves one host; "
            "stop that one, give this one another --data-dir, or share a PostgreSQL database (--database-url)"
        ) from None
    return fd


def unlock_host(fd: int) -> None:
    """Give the host lock up (closing its descriptor releases it)."""
    os.close(fd)
