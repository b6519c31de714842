"""The event vocabulary: one constructor per event type the engine emits.

Each payload is spelt here exactly once, so an emitter cannot misspell a key or forget
one, and readers can name the payload's ``TypedDict``. A constructor returns a
``NewEvent`` that ``Batch.add`` numbers, stamps and folds; the doc it writes is the same
JSON, key for key and in the same order, as the hand-written dicts this replaced.

Constructors sit on the hot path (a blocking A2A send emits about six events in ~0.24 ms
of CPU), so each builds its plain dict directly: no ``dataclasses.asdict``, no pydantic,
no validation. The official schema holds them to account in ``tests/engine/test_events.py``.
"""

from __future__ import annotations

from typing import Any, Literal, NamedTuple, NotRequired, TypedDict, get_args

from tether import __version__
from tether.engine.hitl import ApprovalFields, ApprovalOutcome, legacy_actions
from tether.engine.state import CANCEL_REQUESTED
from tether.run_state import DrainPolicy, ErrorObject, HandoffReply, InterruptKind, Owner, PeerTaskRecord

__all__ = [
    "ENGINE_VERSION",
    "EVENT_LOG_ERA",
    "EVENT_TYPES",
    "ApprovalResume",
    "EventPayload",
    "EventType",
    "NewEvent",
    "approval_ask",
    "approval_received",
    "approval_requested",
    "clarification_requested",
    "clarification_resolved",
    "handoff_accepted",
    "handoff_observed",
    "handoff_replied",
    "handoff_reply",
    "interrupt_requested",
    "interrupt_resolved",
    "node_cancel_requested",
    "node_cancelled",
    "node_completed",
    "node_failed",
    "node_resumed",
    "node_skipped",
    "node_started",
    "node_suspended",
    "run_cancelled",
    "run_completed",
    "run_failed",
    "run_paused",
    "run_resumed",
    "run_started",
]

ENGINE_VERSION = __version__
#: the event-log era of every run this host creates (OpenWOP v2's ``eventLogSchemaVersion``): runs with no stamp
#: were written before it and read as era 2; the stored events of both are spelt alike, and v2 readers project them
EVENT_LOG_ERA = 3

#: every event type the engine emits (a subset of the OpenWOP ``RunEventType``)
EventType = Literal[
    "run.started",
    "node.started",
    "node.completed",
    "node.failed",
    "node.skipped",
    "node.suspended",
    "interrupt.requested",
    "approval.requested",
    "clarification.requested",
    "interrupt.resolved",
    "approval.received",
    "clarification.resolved",
    "node.resumed",
    "log.appended",
    "node.cancelled",
    "run.completed",
    "run.failed",
    "run.cancelled",
    "run.paused",
    "run.resumed",
]
EVENT_TYPES: tuple[EventType, ...] = get_args(EventType)


# payloads ------------------------------------------------------------------------------------


class RunStartedPayload(TypedDict):
    workflowId: str
    inputs: dict[str, Any]
    transport: str
    engineVersion: str
    owner: Owner
    tags: list[str]
    metadata: dict[str, Any]
    #: who started the run, as OpenWOP v2 names a caller (v1's ``owner`` stays as it was)
    subject: NotRequired[dict[str, str]]
    #: the run's era (:data:`EVENT_LOG_ERA`); absent on runs written before eras were stamped
    eventLogSchemaVersion: NotRequired[int]
    callbackUrl: NotRequired[str]
    #: the W3C trace context the run continues (the creating request's), kept for every later span
    traceparent: NotRequired[str]


class NodeStartedPayload(TypedDict):
    nodeId: str
    typeId: str
    attempt: int
    #: a delay's wake-up: recorded before sleeping, so a restart sleeps only what is left
    wakeAt: NotRequired[str]


class NodeCompletedPayload(TypedDict):
    nodeId: str
    outputs: dict[str, Any]
    durationMs: int


class NodeFailedPayload(TypedDict):
    nodeId: str
    error: ErrorObject
    attempts: int


class NodeSkippedPayload(TypedDict):
    nodeId: str
    reason: str


class NodeSuspendedPayload(TypedDict):
    """Carries the interruptId, since the ``interrupt.requested`` payload is closed."""

    nodeId: str
    interruptId: str
    kind: InterruptKind
    key: str
    #: a hand-off's mirror of its peer's question ("a2a-peer-input", "auth"): not a local gate
    subkind: NotRequired[str]


class InterruptRequestedPayload(TypedDict):
    """The InterruptPayload (``suspend-request.schema.json``), which allows no other keys."""

    kind: InterruptKind
    key: str
    data: dict[str, Any]
    timeoutMs: NotRequired[int]


class ApprovalRequestedPayload(TypedDict):
    nodeId: str
    artifactId: str
    artifactType: str
    actions: list[str]
    interruptId: str
    title: str
    approversList: list[str]
    requiredApprovals: int


class ClarificationRequestedPayload(TypedDict):
    nodeId: str
    questions: list[dict[str, Any]]
    interruptId: str


class InterruptResolvedPayload(TypedDict):
    nodeId: str
    interruptId: str
    kind: InterruptKind
    resumeValue: Any
    resolvedAt: NotRequired[str]
    resolvedBy: str


class ApprovalResume(ApprovalFields):
    """An approval decision as recorded: its action, the checked fields, who decided and when."""

    action: ApprovalOutcome


class ApprovalReceivedPayload(ApprovalResume):
    nodeId: str


class ClarificationResolvedPayload(TypedDict):
    nodeId: str
    answers: dict[str, Any]
    answeredBy: str


class NodeResumedPayload(TypedDict):
    nodeId: str
    interruptId: str
    resumeValue: Any


class ApprovalAskPayload(TypedDict):
    """``log.appended`` of kind ``approval.ask``: a question that leaves the gate waiting."""

    kind: Literal["approval.ask"]
    nodeId: str
    question: str
    askedBy: str
    level: Literal["info"]
    message: str


class HandoffLogPayload(TypedDict):
    """``log.appended`` of kind ``a2a.handoff.*``: what a hand-off learnt or decided, in the run's own log.

    ``accepted`` is the replay cache of RFC 0006 §C: the peer's task, recorded once the
    peer answered the send, so that a restart or a replay follows it and never sends again.
    """

    kind: Literal[
        "a2a.handoff.negotiated",
        "a2a.handoff.accepted",
        "a2a.handoff.observed",
        "a2a.handoff.reply",
        "a2a.handoff.replied",
    ]
    nodeId: str
    level: Literal["info", "warn"]
    message: str
    handoff: NotRequired[PeerTaskRecord]
    peerState: NotRequired[str]
    question: NotRequired[str]
    reply: NotRequired[HandoffReply]
    replyIndex: NotRequired[int]
    #: ``negotiated``: the ``negotiation.decided`` payload of OpenWOP v2, as a v2 reader sees it
    negotiation: NotRequired[dict[str, Any]]
    offered: NotRequired[list[str]]
    downgraded: NotRequired[bool]


class NodeCancelledPayload(TypedDict):
    nodeId: str
    reason: str
    #: set with ``reason`` CANCEL_REQUESTED: the run's reason and who asked, for ``run.cancelled``
    cancelReason: NotRequired[str]
    cancelledBy: NotRequired[str]


class RunCompletedPayload(TypedDict):
    outputs: dict[str, Any]
    durationMs: int


class RunFailedPayload(TypedDict):
    error: ErrorObject
    failedNodeId: NotRequired[str]
    durationMs: int


class RunCancelledPayload(TypedDict):
    reason: str
    cancelledBy: str
    durationMs: int


class RunPausedPayload(TypedDict):
    """Valid for both majors' ``runPaused`` (v2 closes it): the request's words, and the attempt it cut.

    ``interruptedAttempt`` counts from 1, as v2 numbers it (``node.started.attempt`` counts
    retries from 0): the first attempt cut is attempt 1, and the node's next ``attempt`` is 1.
    """

    reason: NotRequired[str]
    drainPolicy: DrainPolicy
    interruptedNodeId: NotRequired[str]
    interruptedAttempt: NotRequired[int]


class RunResumedPayload(TypedDict):
    reason: NotRequired[str]


EventPayload = (
    RunStartedPayload
    | NodeStartedPayload
    | NodeCompletedPayload
    | NodeFailedPayload
    | NodeSkippedPayload
    | NodeSuspendedPayload
    | InterruptRequestedPayload
    | ApprovalRequestedPayload
    | ClarificationRequestedPayload
    | InterruptResolvedPayload
    | ApprovalReceivedPayload
    | ClarificationResolvedPayload
    | NodeResumedPayload
    | ApprovalAskPayload
    | HandoffLogPayload
    | NodeCancelledPayload
    | RunCompletedPayload
    | RunFailedPayload
    | RunCancelledPayload
    | RunPausedPayload
    | RunResumedPayload
)


class NewEvent(NamedTuple):
    """An event decided but not yet numbered: what ``Batch.add`` takes.

    A ``NamedTuple`` because it is built on the hot path and read once: it costs about as
    much as the tuple it is.
    """

    type: EventType
    payload: EventPayload
    node_id: str | None


# run events ----------------------------------------------------------------------------------


def run_started(
    workflow_id: str,
    inputs: dict[str, Any],
    *,
    transport: str,
    owner: Owner,
    tags: list[str],
    metadata: dict[str, Any],
    subject: dict[str, str] | None = None,
    callback_url: str | None = None,
    traceparent: str | None = None,
) -> NewEvent:
    payload: RunStartedPayload = {
        "workflowId": workflow_id,
        "inputs": inputs,
        "transport": transport,
        "engineVersion": ENGINE_VERSION,
        "owner": owner,
        "tags": tags,
        "metadata": metadata,
    }
    if subject is not None:
        payload["subject"] = subject
        payload["eventLogSchemaVersion"] = EVENT_LOG_ERA
    if callback_url is not None:
        payload["callbackUrl"] = callback_url
    if traceparent is not None:
        payload["traceparent"] = traceparent
    return NewEvent("run.started", payload, None)


def run_completed(outputs: dict[str, Any], duration_ms: int) -> NewEvent:
    return NewEvent("run.completed", {"outputs": outputs, "durationMs": duration_ms}, None)


def run_failed(error: ErrorObject, duration_ms: int, failed_node_id: str | None = None) -> NewEvent:
    payload: RunFailedPayload
    if failed_node_id is None:
        payload = {"error": error, "durationMs": duration_ms}
    else:
        payload = {"error": error, "failedNodeId": failed_node_id, "durationMs": duration_ms}
    return NewEvent("run.failed", payload, None)


def run_cancelled(reason: str, cancelled_by: str, duration_ms: int) -> NewEvent:
    return NewEvent("run.cancelled", {"reason": reason, "cancelledBy": cancelled_by, "durationMs": duration_ms}, None)


def run_paused(reason: str | None, drain_policy: DrainPolicy, cut: tuple[str, int] | None = None) -> NewEvent:
    """A pause; ``cut`` is the node whose attempt ``immediate`` cut and that attempt's number (from 1)."""
    payload: RunPausedPayload = {"drainPolicy": drain_policy}
    if reason is not None:
        payload = {"reason": reason, "drainPolicy": drain_policy}
    if cut is not None:
        payload["interruptedNodeId"], payload["interruptedAttempt"] = cut
    return NewEvent("run.paused", payload, None)


def run_resumed(reason: str | None) -> NewEvent:
    payload: RunResumedPayload = {} if reason is None else {"reason": reason}
    return NewEvent("run.resumed", payload, None)


# node events ---------------------------------------------------------------------------------


def node_started(node_id: str, type_id: str, wake_at: str | None = None, attempt: int = 0) -> NewEvent:
    """``attempt`` counts the node's earlier attempts: a pause cut them (``immediate``)."""
    payload: NodeStartedPayload = {"nodeId": node_id, "typeId": type_id, "attempt": attempt}
    if wake_at is not None:
        payload["wakeAt"] = wake_at
    return NewEvent("node.started", payload, node_id)


def node_completed(node_id: str, outputs: dict[str, Any], duration_ms: int = 0) -> NewEvent:
    return NewEvent("node.completed", {"nodeId": node_id, "outputs": outputs, "durationMs": duration_ms}, node_id)


def node_failed(node_id: str, error: ErrorObject) -> NewEvent:
    """A node's terminal failure; Tether does not retry, so it failed on its one attempt."""
    return NewEvent("node.failed", {"nodeId": node_id, "error": error, "attempts": 1}, node_id)


def node_skipped(node_id: str, reason: str) -> NewEvent:
    return NewEvent("node.skipped", {"nodeId": node_id, "reason": reason}, node_id)


def node_resumed(node_id: str, interrupt_id: str, resume_value: Any) -> NewEvent:
    return NewEvent(
        "node.resumed", {"nodeId": node_id, "interruptId": interrupt_id, "resumeValue": resume_value}, node_id
    )


def node_cancel_requested(node_id: str, reason: str, cancelled_by: str) -> NewEvent:
    """The in-flight node of an executing run is cancelled: the run goes to ``cancelling``."""
    payload: NodeCancelledPayload = {
        "nodeId": node_id,
        "reason": CANCEL_REQUESTED,
        "cancelReason": reason,
        "cancelledBy": cancelled_by,
    }
    return NewEvent("node.cancelled", payload, node_id)


def node_cancelled(node_id: str) -> NewEvent:
    """The node a waiting run waited at, cancelled with the run (``run.cancelled`` follows)."""
    return NewEvent("node.cancelled", {"nodeId": node_id, "reason": "run-cancelled"}, node_id)


# interrupts ----------------------------------------------------------------------------------


def node_suspended(
    node_id: str, interrupt_id: str, kind: InterruptKind, key: str, subkind: str | None = None
) -> NewEvent:
    payload: NodeSuspendedPayload = {"nodeId": node_id, "interruptId": interrupt_id, "kind": kind, "key": key}
    if subkind is not None:
        payload["subkind"] = subkind
    return NewEvent("node.suspended", payload, node_id)


def interrupt_requested(
    node_id: str, kind: InterruptKind, key: str, data: dict[str, Any], timeout_ms: int | None = None
) -> NewEvent:
    payload: InterruptRequestedPayload = {"kind": kind, "key": key, "data": data}
    if timeout_ms:
        payload["timeoutMs"] = timeout_ms
    return NewEvent("interrupt.requested", payload, node_id)


def approval_requested(node_id: str, interrupt_id: str, data: dict[str, Any]) -> NewEvent:
    """The legacy approval event, from the gate's ApprovalData (actions in the legacy spelling)."""
    payload: ApprovalRequestedPayload = {
        "nodeId": node_id,
        "artifactId": data["artifactId"],
        "artifactType": data["artifactType"],
        "actions": legacy_actions(data["actions"]),
        "interruptId": interrupt_id,
        "title": data["title"],
        "approversList": data.get("approversList", []),
        "requiredApprovals": data.get("requiredApprovals", 1),
    }
    return NewEvent("approval.requested", payload, node_id)


def clarification_requested(node_id: str, interrupt_id: str, questions: list[dict[str, Any]]) -> NewEvent:
    payload: ClarificationRequestedPayload = {"nodeId": node_id, "questions": questions, "interruptId": interrupt_id}
    return NewEvent("clarification.requested", payload, node_id)


def interrupt_resolved(
    node_id: str,
    interrupt_id: str,
    kind: InterruptKind,
    resume_value: Any,
    resolved_by: str,
    resolved_at: str | None = None,
) -> NewEvent:
    """An interrupt answered (``resolved_at``) or timed out (no answer, so no time of one)."""
    payload: InterruptResolvedPayload
    if resolved_at is None:
        payload = {
            "nodeId": node_id,
            "interruptId": interrupt_id,
            "kind": kind,
            "resumeValue": resume_value,
            "resolvedBy": resolved_by,
        }
    else:
        payload = {
            "nodeId": node_id,
            "interruptId": interrupt_id,
            "kind": kind,
            "resumeValue": resume_value,
            "resolvedAt": resolved_at,
            "resolvedBy": resolved_by,
        }
    return NewEvent("interrupt.resolved", payload, node_id)


def approval_received(node_id: str, resume: ApprovalResume) -> NewEvent:
    return NewEvent("approval.received", {"nodeId": node_id, **resume}, node_id)


def approval_ask(node_id: str, question: str, asked_by: str) -> NewEvent:
    """An ``ask`` on an approval gate: logged (``log.appended``), and the gate keeps waiting."""
    payload: ApprovalAskPayload = {
        "kind": "approval.ask",
        "nodeId": node_id,
        "question": question,
        "askedBy": asked_by,
        "level": "info",
        "message": question,
    }
    return NewEvent("log.appended", payload, node_id)


def clarification_resolved(node_id: str, answers: dict[str, Any], answered_by: str) -> NewEvent:
    payload: ClarificationResolvedPayload = {"nodeId": node_id, "answers": answers, "answeredBy": answered_by}
    return NewEvent("clarification.resolved", payload, node_id)


# hand-offs -----------------------------------------------------------------------------------


def handoff_negotiated(node_id: str, negotiation: dict[str, Any], offered: list[str], downgraded: bool) -> NewEvent:
    """The version the hand-off speaks to its peer was decided (or refused): once, before any send.

    A v2 reader sees it as ``negotiation.decided`` with ``negotiation`` as its payload.
    """
    outcome = negotiation["outcome"]
    said = f"A2A {negotiation['version']}" if "version" in negotiation else negotiation.get("reason", "")
    payload: HandoffLogPayload = {
        "kind": "a2a.handoff.negotiated",
        "nodeId": node_id,
        "level": "info" if outcome == "accepted" else "warn",
        "message": f"version negotiation {outcome}: {said}",
        "negotiation": negotiation,
        "offered": offered,
        "downgraded": downgraded,
    }
    return NewEvent("log.appended", payload, node_id)


def handoff_accepted(node_id: str, handoff: PeerTaskRecord, peer_state: str) -> NewEvent:
    """The peer took the task: where it lives (the replay cache), recorded before anything else is done."""
    payload: HandoffLogPayload = {
        "kind": "a2a.handoff.accepted",
        "nodeId": node_id,
        "level": "info",
        "message": f"handed to {handoff['agent']} as task {handoff['taskId']}",
        "handoff": handoff,
        "peerState": peer_state,
    }
    return NewEvent("log.appended", payload, node_id)


def handoff_observed(node_id: str, peer_state: str, question: str | None = None) -> NewEvent:
    """The peer's task is in a new state, or asks a new ``question`` (read from the peer, never from a push)."""
    payload: HandoffLogPayload = {
        "kind": "a2a.handoff.observed",
        "nodeId": node_id,
        "level": "info",
        "message": f"peer task is {peer_state}",
        "peerState": peer_state,
    }
    if question is not None:
        payload["question"] = question
    return NewEvent("log.appended", payload, node_id)


def handoff_reply(node_id: str, reply: HandoffReply, index: int) -> NewEvent:
    """A local answer to the mirrored peer question, to forward to the peer (``reply.decidedBy`` answered)."""
    payload: HandoffLogPayload = {
        "kind": "a2a.handoff.reply",
        "nodeId": node_id,
        "level": "info",
        "message": f"answer {index} for the peer, from {reply.get('decidedBy')}",
        "reply": reply,
        "replyIndex": index,
    }
    return NewEvent("log.appended", payload, node_id)


def handoff_replied(node_id: str, index: int) -> NewEvent:
    """The peer has the answer: it is not forwarded again."""
    payload: HandoffLogPayload = {
        "kind": "a2a.handoff.replied",
        "nodeId": node_id,
        "level": "info",
        "message": f"answer {index} delivered to the peer",
        "replyIndex": index,
    }
    return NewEvent("log.appended", payload, node_id)
