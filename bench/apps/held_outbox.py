"""``tether serve`` with its outbox worker held: deliveries are enqueued and never sent.

    python bench/apps/held_outbox.py serve --data-dir DIR ...   (the arguments of `tether`)

The backlog leg of the outbox scenario fills a store through this host, so that exactly
the rows it made are due when a normal host starts on the same store, and the drain is
measured from its first delivery. (A receiver that is down would do it too, but the host
would try, fail and back off meanwhile, and the drain would wait out that backoff.) Only
the worker's start is replaced; everything that enqueues is the shipped code.
"""

from __future__ import annotations

from tether.cli.main import main
from tether.egress import service


def _held(self: service.Egress) -> None:
    """The worker is not started; ``close`` has nothing to stop."""


service.Egress.start = _held  # type: ignore[method-assign]

if __name__ == "__main__":
    main()
