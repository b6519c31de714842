"""The shape of a run's snapshot: what ``engine.state.apply`` folds events into.

The snapshot is stored beside the events (``RunRow.state``) and read by the store, the
engine and both HTTP surfaces, so its shape lives here, importing nothing of Tether but
``tether.types``: any layer may depend on it. These are ``TypedDict``s, not classes, because
the snapshot is JSON on disk and a plain dict in memory; typing it only lets mypy reject a
misspelt key (which a ``dict[str, Any]`` silently reads as ``None``) at no cost at run time.
"""

from __future__ import annotations

from typing import Any, Literal, NotRequired, TypedDict

from tether.types import RunStatus

__all__ = [
    "AskExchange",
    "DrainPolicy",
    "ErrorObject",
    "ForkRecord",
    "HandoffRecord",
    "HandoffReply",
    "InterruptKind",
    "InterruptRecord",
    "NodeState",
    "NodeStatus",
    "Owner",
    "PeerTaskRecord",
    "PendingReply",
    "RecordedEvent",
    "ResolvedInterrupt",
    "RunSnapshot",
]

#: the interrupts Tether's nodes raise (``suspend-request.schema.json`` ``kind``, the subset used)
InterruptKind = Literal["approval", "clarification", "external-event"]

#: what a pause does to the node executing when it is asked (OpenWOP ``pauseRun``): let it finish, or cut it
DrainPolicy = Literal["drain-current-node", "immediate"]

#: what ``apply`` records of a node (``nodeStates`` is implementation-shaped in the spec)
NodeStatus = Literal["running", "completed", "failed", "skipped", "suspended", "cancelled"]


class ErrorObject(TypedDict):
    """A structured failure (``_errorObject`` of the event payloads; the snapshot's ``error``)."""

    code: str
    message: str
    details: NotRequired[dict[str, Any]]


class Owner(TypedDict):
    """The identity that owns a run (RFC 0048); Tether always names the principal."""

    tenant: str
    principal: NotRequired[str]


class PeerTaskRecord(TypedDict):
    """Where a handed-off task lives, as ``a2a.handoff.accepted`` records it (``PeerRef.as_record``)."""

    agent: str
    rpcUrl: str
    version: str
    taskId: str
    contextId: NotRequired[str]
    #: the name of the sealed outbound credential the hand-off sends with
    credential: NotRequired[str]


class HandoffReply(TypedDict):
    """A local answer to a peer's mirrored question, owed to the peer (``a2a.handoff.reply``)."""

    kind: InterruptKind
    #: an approval decision, or clarification answers (``{"answers": ...}``)
    value: dict[str, Any]
    decidedBy: str


class PendingReply(HandoffReply):
    """An answer not yet delivered to the peer; ``index`` counts the hand-off's answers from 1."""

    index: int


class HandoffRecord(TypedDict, total=False):
    """A hand-off node's ``handoff`` entry, folded from its ``a2a.handoff.*`` log events.

    Empty until the peer took the task; each field appears with the event that brings it.
    """

    # a2a.handoff.negotiated: the version negotiation's outcome (accepted, refused) and version, once per hand-off
    negotiated: str
    negotiatedVersion: str
    # a2a.handoff.accepted: where the peer's task lives (``PeerTaskRecord``), and since when
    agent: str
    rpcUrl: str
    version: str
    taskId: str
    contextId: str
    credential: str
    acceptedAt: str
    # accepted and a2a.handoff.observed: the peer task's last state, when it was seen to
    # change, and the fingerprint of the question it asks (None when it asks none)
    peerState: str
    observedAt: str
    question: str | None
    # a2a.handoff.reply: the answer owed to the peer, until a2a.handoff.replied; how many were given
    pendingReply: PendingReply
    replies: int
    #: never stored: the OpenWOP snapshot of the host following the hand-off adds when it last read the peer
    lastReadAt: str


class NodeState(TypedDict):
    """One node's entry in ``nodeStates``: which keys are present depends on how far it got."""

    status: NodeStatus
    typeId: NotRequired[str]
    attempt: NotRequired[int]
    startedAt: NotRequired[str]
    #: a running delay's wake-up time: the engine sleeps until then, a restart too
    wakeAt: NotRequired[str]
    completedAt: NotRequired[str]
    outputs: NotRequired[dict[str, Any]]
    error: NotRequired[ErrorObject | None]
    reason: NotRequired[str | None]
    #: a hand-off's peer task (``a2a.handoff.*`` log events): where it is, what it last was, answers owed
    handoff: NotRequired[HandoffRecord]


class InterruptRecord(TypedDict):
    """The interrupt a run waits at: the ``interrupt.requested`` payload plus its identity."""

    kind: InterruptKind
    nodeId: str
    interruptId: str
    key: str
    data: dict[str, Any]
    requestedAt: str
    timeoutMs: NotRequired[int]


class ResolvedInterrupt(TypedDict):
    """An interrupt already answered: a second answer to it is a conflict, not a miss."""

    nodeId: str
    interruptId: str


class AskExchange(TypedDict):
    """One ``ask`` on an approval gate: a question that does not end the wait."""

    question: str | None
    askedBy: str | None
    askedAt: str


class RecordedEvent(TypedDict):
    """One event of a source run's recorded node execution, as a replay re-emits it."""

    type: str
    payload: dict[str, Any]
    nodeId: str


class ForkRecord(TypedDict):
    """What a fork knows of its source, written once when it is created."""

    sourceRunId: str
    mode: str
    fromSeq: int
    #: replay only: node id -> the source's events of its first execution, from ``fromSeq`` on, through its
    #: ``node.completed`` or ``node.failed`` (nodes the source never finished are absent)
    recorded: NotRequired[dict[str, list[RecordedEvent]]]
    #: replay only: ``[eventId, fingerprint]`` of each source event from ``max(fromSeq, 1)`` on, to notice divergence
    expected: NotRequired[list[list[str]]]
    #: replay only: the sequence of its first event that differed from its source's (``replay.diverged`` names it)
    divergedAt: NotRequired[int]


class RunSnapshot(TypedDict):
    """A run as ``apply`` leaves it; the required keys are those of ``initial_snapshot``.

    ``interrupt`` and ``currentNodeId`` are set to ``None`` (not removed) when they end,
    which is what the stored snapshots hold, so ``None`` is part of their type.
    """

    runId: str
    workflowId: str
    status: RunStatus
    createdAt: str
    nodeStates: dict[str, NodeState]
    variables: dict[str, Any]
    resolvedInterrupts: list[ResolvedInterrupt]
    startedAt: NotRequired[str]
    inputs: NotRequired[dict[str, Any]]
    transport: NotRequired[str]
    owner: NotRequired[Owner]
    #: who started it, as OpenWOP v2 names a caller (absent on runs started before subjects were recorded)
    subject: NotRequired[dict[str, str]]
    #: its event-log era (OpenWOP v2); absent: era 2, a run written before eras were stamped
    eventLogSchemaVersion: NotRequired[int]
    tags: NotRequired[list[str]]
    metadata: NotRequired[dict[str, Any]]
    callbackUrl: NotRequired[str]
    #: the run's trace (``run.started``): its spans and its hand-offs' requests continue it
    traceparent: NotRequired[str]
    currentNodeId: NotRequired[str | None]
    interrupt: NotRequired[InterruptRecord | None]
    #: carried from ``node.suspended`` to the ``interrupt.requested`` that follows it
    pendingInterruptId: NotRequired[str]
    askExchanges: NotRequired[dict[str, list[AskExchange]]]
    #: while ``paused``: when it was paused
    pausedAt: NotRequired[str]
    #: when it was last resumed
    resumedAt: NotRequired[str]
    #: node id -> attempts of it a pause cut (``immediate``): its next ``node.started`` counts on from there
    cutAttempts: NotRequired[dict[str, int]]
    cancelReason: NotRequired[str]
    cancelledBy: NotRequired[str]
    #: the interrupt a cancel ended: a late answer to it learns the run was cancelled
    cancelledInterrupt: NotRequired[InterruptRecord]
    completedAt: NotRequired[str]
    outputs: NotRequired[dict[str, Any]]
    error: NotRequired[ErrorObject | None]
    #: set on a fork when it is created (``tether.engine.replay``): its source, its mode, and in a replay
    #: the source's recorded outcomes its effecting and asking nodes are answered from
    fork: NotRequired[ForkRecord]
