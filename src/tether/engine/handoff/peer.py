"""The port a hand-off node talks to another agent through: what the engine needs, not how it is spoken.

The engine speaks no HTTP, so a hand-off (``vendor.tether.a2a-handoff``) sees the remote
agent only as this small interface: send a message once, read the task, answer its
question, cancel it, ask it to push. The A2A package implements it over the guarded
egress client (both wire versions); the composition root hands it to the engine. Every
value here is plain data, so the engine can record it in the run's log as it is.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from dataclasses import dataclass, field
from typing import Any, Protocol

from tether.engine.handoff.negotiation import Negotiation
from tether.files import Blob
from tether.run_state import HandoffRecord, PeerTaskRecord

__all__ = [
    "PEER_TERMINAL",
    "PeerCall",
    "PeerError",
    "PeerFile",
    "PeerPort",
    "PeerRef",
    "PeerRefused",
    "PeerTask",
    "PeerUnavailable",
]

#: peer task states (the canonical, 0.3 spelling) after which the peer will not change the task
PEER_TERMINAL = frozenset({"completed", "failed", "canceled", "rejected"})


@dataclass(frozen=True, slots=True)
class PeerFile:
    """A file a hand-off sends: one of the run's blobs (``blob``, its sha256) or a URI (``uri``).

    ``data`` is the blob's bytes, read from the store by the follower just before the send:
    they go to the peer and nowhere else (never into an event).
    """

    blob: str | None = None
    uri: str | None = None
    name: str | None = None
    media_type: str | None = None
    data: bytes | None = None


@dataclass(frozen=True, slots=True)
class PeerCall:
    """What a hand-off node asks for: whom to call, in which version, with what message."""

    agent: str
    skill: str | None = None
    credential: str | None = None
    version: str = "auto"
    text: str | None = None
    data: dict[str, Any] | None = None
    #: the ``traceparent`` the hand-off's requests continue (the run's trace); None sends none
    trace: str | None = None
    #: files sent after the text and data, in order
    files: tuple[PeerFile, ...] = ()


@dataclass(frozen=True, slots=True)
class PeerRef:
    """Where a handed-off task lives: recorded in the run's log as soon as the peer answers.

    ``rpc_url`` and ``version`` are what the peer's card said when the task was sent, so a
    restart follows the task where it is without reading the card again. ``trace`` is not
    recorded: the follower takes it from the run again (``PeerCall.trace``).
    """

    agent: str
    rpc_url: str
    version: str
    task_id: str
    context_id: str | None = None
    credential: str | None = None
    trace: str | None = None

    def as_record(self) -> PeerTaskRecord:
        record: PeerTaskRecord = {
            "agent": self.agent,
            "rpcUrl": self.rpc_url,
            "version": self.version,
            "taskId": self.task_id,
        }
        if self.context_id:
            record["contextId"] = self.context_id
        if self.credential:
            record["credential"] = self.credential
        return record

    @classmethod
    def from_record(cls, record: HandoffRecord, trace: str | None = None) -> PeerRef:
        return cls(
            agent=str(record["agent"]),
            rpc_url=str(record["rpcUrl"]),
            version=str(record["version"]),
            task_id=str(record["taskId"]),
            context_id=record.get("contextId"),
            credential=record.get("credential"),
            trace=trace,
        )


@dataclass(frozen=True, slots=True)
class PeerTask:
    """A peer's task as read: its state (canonical spelling) and what it said, all of it untrusted.

    ``interrupt`` is the peer's ``metadata.openwop.interrupt`` when it is an OpenWOP host
    that waits on a person (kind, title, actions or questions); None for any other peer.
    ``files`` are the file parts of its status message (a question may come with a file).
    A file the peer sent with its bytes is, in ``artifacts`` and ``files``, a canonical
    reference (``tether.files``) to one of ``blobs``, which hold the bytes until the
    event that records the reference is committed with them.
    """

    task_id: str
    context_id: str | None
    state: str
    message: str | None = None
    artifacts: list[dict[str, Any]] = field(default_factory=list)
    interrupt: dict[str, Any] | None = None
    files: list[dict[str, Any]] = field(default_factory=list)
    blobs: list[Blob] = field(default_factory=list)


class PeerError(Exception):
    """A call to the peer did not give an answer; ``code`` is the node's failure code if it is final."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class PeerUnavailable(PeerError):
    """Unreachable, timed out, 5xx or busy: worth trying again later, within the node's deadline."""


class PeerRefused(PeerError):
    """A final no: the egress guard refused the address, the peer refused the call or speaks no common version."""


class PeerPort(Protocol):
    """The remote agent, as a hand-off node sees it."""

    async def negotiate(self, call: PeerCall) -> Negotiation:
        """Decide the version ``call`` speaks to its peer (reading its card, never sending a message).

        A refusal is an answer, not an error; an unreadable card raises as any call does.
        ``send`` speaks the version decided here (the same card, the same floor).
        """
        ...

    async def send(self, call: PeerCall, *, message_id: str, metadata: dict[str, Any]) -> tuple[PeerRef, PeerTask]:
        """Send the first message, never waiting for the task to finish.

        ``message_id`` is derived from the node's invocation, so sending again after a crash
        finds the task the first send made at an idempotent peer instead of making another.
        It is also the request's ``Idempotency-Key``, the same on every attempt.
        """
        ...

    async def get(self, ref: PeerRef) -> PeerTask:
        """Read the task as the peer has it now."""
        ...

    async def reply(self, ref: PeerRef, *, message_id: str, value: dict[str, Any], metadata: dict[str, Any]) -> None:
        """Answer the task's question with ``value`` (an approval decision or clarification answers)."""
        ...

    async def cancel(self, ref: PeerRef) -> None:
        """Ask the peer to cancel the task (a task already finished is not an error)."""
        ...

    async def pushes(self, ref: PeerRef) -> bool:
        """Whether the peer says it pushes (``subscribe`` would send a request), read without asking it to."""
        ...

    async def subscribe(self, ref: PeerRef, handoff_id: str) -> bool:
        """Ask the peer to push to this host when the task changes; False when it cannot or will not.

        Its ``Idempotency-Key`` is ``record.push_config_key(handoff_id)``, the same on every attempt.
        """
        ...

    def watch(self, ref: PeerRef) -> AsyncGenerator[str, None]:
        """Follow the task's stream (resubscribe): one item per event, the first the task as it is now.

        Each item is only a hint that the task changed (the follower reads it with ``get``).
        It ends when the stream does; raises ``PeerRefused`` when the peer cannot stream,
        ``PeerUnavailable`` when the stream broke.
        """
        ...
