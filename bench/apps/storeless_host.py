"""``tether serve`` on SQLite with its commits written nowhere: what the host answers before its store costs anything.

    python bench/apps/storeless_host.py serve --data-dir DIR ...   (the arguments of `tether`)

The ``tether-storeless`` slot. Every commit is taken as written the moment it is made: the
task cache still learns it (so ``tasks/get`` answers from memory as it does on the real
host), and nothing reaches SQLite's writer. What it measures is the request path alone
(HTTP, JSON-RPC, the A2A work, the engine, the encoded answer), the bound issue 12's
``message/send`` ratios against the SDK are held to. Only ``SqliteStore.commit`` is
replaced; it is never a host to keep anything with.
"""

from __future__ import annotations

from tether.cli.main import main
from tether.store.base import Commit
from tether.store.sqlite.store import SqliteStore


async def _written_nowhere(self: SqliteStore, commit: Commit) -> int:
    """What the real commit does once its transaction is durable, without the transaction."""
    self._tasks.committed(commit)
    return 0  # deliveries enqueued: none (nothing subscribes in the request scenarios)


SqliteStore.commit = _written_nowhere  # type: ignore[method-assign]

if __name__ == "__main__":
    main()
