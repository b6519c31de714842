"""Named failpoints: places where state becomes durable or leaves the process, where a test may crash the host.

Each place calls ``hit("name")``. Disarmed (always, in production) that is one read of a
module-level bool and a return: nothing measurable (docs/crash-windows.md has the numbers).
The fault harness (``tests/faults/``) arms one point by starting ``tether serve
--enable-test-seams`` with ``TETHER_FAILPOINT=NAME`` (or ``NAME:N``, the Nth time it is
reached); the host then dies there with ``os._exit(137)``, flushing nothing, as a SIGKILL
would leave it. Without ``--enable-test-seams`` the variable is refused at start-up, loudly,
so a host in production can never be made to crash on purpose. ``TETHER_FAILPOINT_TRACE=FILE``
(also a test seam) appends each point's name to FILE as it is reached, so the harness learns
which points a scenario reaches and crashes only those.

``REGISTRY`` names every point with what its window is; ``tests/test_failpoints.py`` checks
it against the ``hit`` calls in the code, both ways.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from types import MappingProxyType
from typing import Final

__all__ = ["ENV", "PLANT_ENV", "REGISTRY", "TRACE_ENV", "arm_from_environment", "hit", "planted"]

ENV: Final = "TETHER_FAILPOINT"
TRACE_ENV: Final = "TETHER_FAILPOINT_TRACE"
#: a deliberately broken build for the harness's own test (``planted``): test seams only
PLANT_ENV: Final = "TETHER_FAULTS_PLANT"
#: the bugs ``PLANT_ENV`` may plant
PLANTS: Final = frozenset({"ack-before-commit"})

REGISTRY: Final[Mapping[str, str]] = MappingProxyType(
    {
        # the store: every transition of a run goes through one commit
        "store.commit.before": "a commit is about to be written: nothing of it is durable yet",
        "store.commit.after": "a commit is durable, its caller not told yet (no answer, no wake-up sent)",
        # the outbox
        "outbox.claimed": "due deliveries were claimed (the claim is durable), nothing sent yet",
        "outbox.send.before": "a delivery is about to be sent to its receiver",
        "outbox.push.answered": "an A2A push was answered 2xx by its receiver, its receipt not written",
        "outbox.webhook.answered": "a webhook delivery was answered 2xx by its receiver, its receipt not written",
        "outbox.receipt.before": "receipts are about to be written",
        "outbox.receipt.after": "receipts are durable, their deliveries not let go in memory",
        # the hand-off to a peer agent
        "handoff.send.before": "the send to the peer is claimed in the effect ledger, not sent",
        "handoff.send.after": "the peer answered the send, its task id not recorded in the run's log",
        "handoff.hint": "a push from the peer woke a hand-off's follower",
        "handoff.read": "the peer task was read, the reverse projection not committed",
        # the effect ledger
        "effects.claimed": "an effect's attempt is claimed, the block that makes it not run",
        "effects.settled": "an effect's attempt is settled completed",
        # leases (several hosts on one database)
        "lease.claimed": "a run's lease is claimed, its driver not started",
        "lease.released": "a run's lease is released",
        # decisions
        "interrupt.resolved": "an interrupt's resolution is committed, the caller not answered",
        "run.cancelled": "a cancel is committed, the caller not answered",
        # retention and forks
        "retention.purged": "a batch of ended runs is purged, ledger rows not yet",
        "fork.committed": "a fork's new run is committed, the caller not answered",
    }
)

_armed = False  # checked first by ``hit``: the whole cost of a disarmed failpoint
_target: str | None = None
_countdown = 0
_trace: str | None = None
_plant: str | None = None


def hit(name: str) -> None:
    """The process reached failpoint ``name``: die here if it is the armed one (its Nth time)."""
    if not _armed:
        return
    _reached(name)


def planted(bug: str) -> bool:
    """Whether the harness planted ``bug`` (test seams only): the code then misbehaves on purpose."""
    return _plant == bug


def _reached(name: str) -> None:
    global _countdown
    if _trace is not None:
        fd = os.open(_trace, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, f"{name}\n".encode())
        finally:
            os.close(fd)
    if name == _target:
        _countdown -= 1
        if _countdown == 0:
            os._exit(137)


def arm_from_environment(test_seams: bool, environ: Mapping[str, str] = os.environ) -> None:
    """Arm what the environment asks for; ValueError (a sentence to show) when it may not or cannot be.

    Called once, at the start of ``tether serve``.
    """
    global _armed, _target, _countdown, _trace, _plant
    asked = {key: environ[key] for key in (ENV, TRACE_ENV, PLANT_ENV) if environ.get(key)}
    if not asked:
        return
    if not test_seams:
        raise ValueError(
            f"{', '.join(sorted(asked))} is set: failpoints are a test seam and need --enable-test-seams; "
            "unset it in production"
        )
    if ENV in asked:
        name, _, nth = asked[ENV].partition(":")
        if name not in REGISTRY:
            raise ValueError(f"{ENV}={asked[ENV]!r}: no failpoint {name!r} (see tether.failpoints.REGISTRY)")
        if nth and not (nth.isdigit() and int(nth) >= 1):
            raise ValueError(f"{ENV}={asked[ENV]!r}: the count after ':' must be a whole number from 1")
        _target, _countdown = name, int(nth or 1)
    if PLANT_ENV in asked:
        if asked[PLANT_ENV] not in PLANTS:
            raise ValueError(f"{PLANT_ENV}={asked[PLANT_ENV]!r}: no such planted bug ({', '.join(sorted(PLANTS))})")
        _plant = asked[PLANT_ENV]
    _trace = asked.get(TRACE_ENV)
    _armed = _target is not None or _trace is not None
