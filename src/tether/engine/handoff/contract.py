"""The engine and the hand-off: what a hand-off node asks for, and the one interface the hand-off reaches the engine by.

A hand-off node does not run inside its run's driver. Its handler returns ``CallPeer``; the
driver records ``node.started`` and parks the run (it stays ``running``, its node in
flight), and the node's follower (``follower.Handoffs``) takes it from there. All the
follower needs of the engine is ``EnginePort``: four calls, implemented by the engine's
``Driver``. The other way, the engine tells ``Handoffs`` what concerns it: a run to follow,
a commit, a push, a run another host took over, the host stopping.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from tether.engine.batch import Batch
from tether.engine.handoff.peer import PeerCall
from tether.store.base import RunRow

__all__ = ["CallPeer", "Decide", "EnginePort"]

#: adds to the batch the events a transition writes, decided on the run as read (raises to refuse)
Decide = Callable[[RunRow, Batch], None]


@dataclass(frozen=True, slots=True)
class CallPeer:
    """What a hand-off node asks for: the call to make, and the node's overall deadline (ms)."""

    call: PeerCall
    timeout_ms: int | None = None


class EnginePort(Protocol):
    """The engine, as a hand-off sees it: everything the follower asks of the engine driving its run."""

    async def transition(self, run_id: str, decide: Decide) -> RunRow:
        """Read the run, let ``decide`` add events on that snapshot, commit them compare-and-swap
        (a lost race reads and decides again), and return the run as it then is."""
        ...

    def peer_call(self, row: RunRow, node_id: str) -> CallPeer | None:
        """What hand-off node ``node_id`` asks for, computed again from the run as it is (the same
        every time); None when the run's workflow no longer hands off there."""
        ...

    def kick(self, run_id: str) -> None:
        """Drive the run on: its hand-off changed it (the node finished, a question came or went)."""
        ...

    def unfollowed(self, run_id: str) -> None:
        """The last hand-off of the run followed on this host ended: the run's lease may go."""
        ...
