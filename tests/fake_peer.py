"""A scripted peer for engine tests: the ``PeerPort`` a hand-off node calls, kept in memory.

End-to-end tests use real Tether hosts and real SDK servers; this one lets the engine's
tests steer a peer task through every state (and fail its transport) without a network.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from dataclasses import dataclass, field, replace
from typing import Any

from tether.engine.handoff.negotiation import Negotiation, decide
from tether.engine.handoff.peer import PeerCall, PeerRef, PeerRefused, PeerTask, PeerUnavailable


@dataclass
class FakePeer:
    """Each send makes (or, for a messageId seen before, finds) a task starting in ``next_state``."""

    next_state: str = "working"
    next_interrupt: dict[str, Any] | None = None
    #: states a reply moves the task to (a single state repeats)
    after_reply: str = "working"
    down: bool = False
    refuse: str | None = None
    #: the versions its card offers, and the host's floor (``--a2a-minimum-version``)
    offers: tuple[str, ...] = ("1.0",)
    floor: str = "1.0"
    negotiations: list[Negotiation] = field(default_factory=list)
    sends: list[tuple[PeerCall, str, dict[str, Any]]] = field(default_factory=list)
    replies: list[tuple[str, str, dict[str, Any], dict[str, Any]]] = field(default_factory=list)
    cancels: list[str] = field(default_factory=list)
    tasks: dict[str, PeerTask] = field(default_factory=dict)
    by_message: dict[str, str] = field(default_factory=dict)

    def _check(self) -> None:
        if self.refuse is not None:
            raise PeerRefused(self.refuse, f"refused: {self.refuse}")
        if self.down:
            raise PeerUnavailable("peer_down", "the peer is down")

    def set(self, task_id: str, state: str, **changes: Any) -> None:
        self.tasks[task_id] = replace(self.tasks[task_id], state=state, **changes)

    async def negotiate(self, call: PeerCall) -> Negotiation:
        """The card read: refused as any call is, not ``down`` (a transport failure is the send's, in the ledger)."""
        if self.refuse is not None:
            raise PeerRefused(self.refuse, f"refused: {self.refuse}")
        decision = decide(call.agent, call.version, self.offers, self.floor)
        self.negotiations.append(decision)
        return decision

    async def send(self, call: PeerCall, *, message_id: str, metadata: dict[str, Any]) -> tuple[PeerRef, PeerTask]:
        self._check()
        self.sends.append((call, message_id, metadata))
        task_id = self.by_message.get(message_id)
        if task_id is None:
            task_id = self.by_message[message_id] = f"task-{len(self.tasks) + 1}"
            self.tasks[task_id] = PeerTask(task_id, f"ctx-{task_id}", self.next_state, interrupt=self.next_interrupt)
        return PeerRef(call.agent, call.agent + "/rpc", "1.0", task_id, f"ctx-{task_id}"), self.tasks[task_id]

    async def get(self, ref: PeerRef) -> PeerTask:
        self._check()
        return self.tasks[ref.task_id]

    async def reply(self, ref: PeerRef, *, message_id: str, value: dict[str, Any], metadata: dict[str, Any]) -> None:
        self._check()
        self.replies.append((ref.task_id, message_id, value, metadata))
        self.set(ref.task_id, self.after_reply, interrupt=None)

    async def cancel(self, ref: PeerRef) -> None:
        self._check()
        self.cancels.append(ref.task_id)
        self.set(ref.task_id, "canceled")

    async def pushes(self, ref: PeerRef) -> bool:
        return False

    async def subscribe(self, ref: PeerRef, handoff_id: str) -> bool:
        return False

    async def watch(self, ref: PeerRef) -> AsyncGenerator[str, None]:
        raise PeerRefused("a2a_peer_cannot_stream", "the scripted peer does not stream")
        yield ""  # an async generator, as the port's is
