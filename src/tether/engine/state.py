"""The run state machine: how each event changes a run's snapshot.

``apply`` is the only place a run's state changes. The engine decides which events a
transition produces, then folds them with ``apply`` into the new snapshot that is
committed beside them; ``fold`` rebuilds the same snapshot from the log alone.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable
from typing import Any, Final, cast

from tether.run_state import (
    HandoffRecord,
    InterruptKind,
    InterruptRecord,
    NodeState,
    NodeStatus,
    PeerTaskRecord,
    PendingReply,
    RunSnapshot,
)
from tether.types import TERMINAL, RunStatus

#: the snapshot of one run (kept as the engine's name for ``tether.run_state.RunSnapshot``)
Snapshot = RunSnapshot


#: interrupt kind -> the run status while it waits
WAITING_STATUS_BY_KIND: Final[dict[InterruptKind, RunStatus]] = {
    "approval": "waiting-approval",
    "clarification": "waiting-input",
    "external-event": "waiting-external",
}

#: node statuses that mean "this node will not change any more"
NODE_FINISHED: Final[frozenset[NodeStatus]] = frozenset({"completed", "failed", "skipped", "cancelled"})

CANCEL_REQUESTED = "cancel-requested"

#: the status of a run once its ``run.started`` is committed: what a creation answers
STARTED: RunStatus = "running"


def initial_snapshot(run_id: str, workflow_id: str, created_at: str) -> Snapshot:
    return {
        "runId": run_id,
        "workflowId": workflow_id,
        "status": "pending",
        "createdAt": created_at,
        "nodeStates": {},
        "variables": {},
        "resolvedInterrupts": [],
    }


def _node(nodes: dict[str, NodeState], node_id: str, status: NodeStatus) -> NodeState:
    """The node's entry with its new status; created (status first, as before) if it has none."""
    entry = nodes.get(node_id)
    if entry is None:
        entry = nodes[node_id] = {"status": status}
    else:
        entry["status"] = status
    return entry


def apply(state: Snapshot, event: dict[str, Any]) -> Snapshot:
    """Fold one event into ``state`` (mutated and returned). Unknown types change nothing.

    ``event`` is a RunEventDoc as stored (JSON), so its payload is read as what it was
    written as (``tether.engine.events``); the snapshot it builds is typed.
    """
    kind = event["type"]
    payload: Any = event.get("payload") or {}
    node_id: Any = event.get("nodeId")
    at: str = event["timestamp"]
    nodes = state.setdefault("nodeStates", {})

    if kind == "run.started":
        state["status"] = STARTED
        state["startedAt"] = at
        state["inputs"] = payload.get("inputs", {})
        state["variables"] = dict(payload.get("inputs", {}))
        state["transport"] = payload.get("transport", "rest")
        if "owner" in payload:
            state["owner"] = payload["owner"]
        if "subject" in payload:
            state["subject"] = payload["subject"]
            state["eventLogSchemaVersion"] = payload.get("eventLogSchemaVersion", 3)
        state["tags"] = list(payload.get("tags", []))
        state["metadata"] = dict(payload.get("metadata", {}))
        if "callbackUrl" in payload:
            state["callbackUrl"] = payload["callbackUrl"]
        if "traceparent" in payload:
            state["traceparent"] = payload["traceparent"]
    elif kind == "node.started":
        started: NodeState = {
            "status": "running",
            "typeId": payload.get("typeId"),
            "attempt": payload.get("attempt", 0),
            "startedAt": at,
        }
        if "wakeAt" in payload:
            started["wakeAt"] = payload["wakeAt"]
        nodes[node_id] = started
        state["currentNodeId"] = node_id
    elif kind == "node.completed":
        entry = _node(nodes, node_id, "completed")
        entry["completedAt"] = at
        entry["outputs"] = payload.get("outputs", {})
        entry.pop("wakeAt", None)
        outputs = payload.get("outputs")
        if isinstance(outputs, dict):
            state["variables"].update(outputs)
    elif kind == "node.failed":
        entry = _node(nodes, node_id, "failed")
        entry["completedAt"] = at
        entry["error"] = payload.get("error")
    elif kind == "node.skipped":
        nodes[node_id] = {"status": "skipped", "reason": payload.get("reason"), "completedAt": at}
    elif kind == "node.suspended":
        _node(nodes, node_id, "suspended")
    elif kind == "interrupt.requested":
        interrupt: InterruptRecord = {
            "kind": payload["kind"],
            "nodeId": node_id,
            # node.suspended, committed just before, carries it (see the end of this function)
            "interruptId": payload.get("interruptId") or state["pendingInterruptId"],
            "key": payload["key"],
            "data": payload["data"],
            "requestedAt": at,
        }
        if "timeoutMs" in payload:
            interrupt["timeoutMs"] = payload["timeoutMs"]
        state["interrupt"] = interrupt
        state.pop("pendingInterruptId", None)
        state["status"] = WAITING_STATUS_BY_KIND.get(payload["kind"], "waiting-external")
        state["currentNodeId"] = node_id
    elif kind == "interrupt.resolved":
        state["resolvedInterrupts"].append({"nodeId": node_id, "interruptId": payload["interruptId"]})
        state["interrupt"] = None
        state["status"] = "running"
    elif kind == "node.resumed":
        _node(nodes, node_id, "running")
    elif kind == "log.appended" and payload.get("kind") == "approval.ask":
        state.setdefault("askExchanges", {}).setdefault(node_id, []).append(
            {"question": payload.get("question"), "askedBy": payload.get("askedBy"), "askedAt": at}
        )
    elif kind == "log.appended" and str(payload.get("kind", "")).startswith("a2a.handoff."):
        _handoff(nodes, node_id, payload, at)
    elif kind == "node.cancelled":
        _node(nodes, node_id, "cancelled")
        if payload.get("reason") == CANCEL_REQUESTED and state["status"] not in TERMINAL:
            state["status"] = "cancelling"  # a paused run too: a cancel is the other way out of a pause
            state["cancelReason"] = payload.get("cancelReason", "cancelled")
            state["cancelledBy"] = payload.get("cancelledBy", "system")
            state.pop("pausedAt", None)
    elif kind == "run.paused":
        state["status"] = "paused"
        state["pausedAt"] = at
        cut = payload.get("interruptedNodeId")
        if cut is not None:  # ``immediate``: the attempt is gone, as if never started; it starts afresh
            nodes.pop(cut, None)
            state.setdefault("cutAttempts", {})[cut] = payload.get("interruptedAttempt", 1)
    elif kind == "run.resumed":
        state["status"] = "running"
        state.pop("pausedAt", None)
        state["resumedAt"] = at
    elif kind == "run.completed":
        state["status"] = "completed"
        state["completedAt"] = at
        state["outputs"] = payload.get("outputs", {})
        state["currentNodeId"] = None
    elif kind == "run.failed":
        state["status"] = "failed"
        state["completedAt"] = at
        state["error"] = payload.get("error")
        state["currentNodeId"] = None
    elif kind == "run.cancelled":
        pending = state.get("interrupt")
        if pending:
            state["cancelledInterrupt"] = pending
        state["status"] = "cancelled"
        state["completedAt"] = at
        state.pop("pausedAt", None)
        state["interrupt"] = None
        state["currentNodeId"] = None
        for entry in nodes.values():
            if entry.get("status") in ("running", "suspended"):
                entry["status"] = "cancelled"
    # the interruptId is carried by node.suspended (the interrupt.requested payload is closed)
    if kind == "node.suspended":
        state["pendingInterruptId"] = payload["interruptId"]
    return state


def _handoff(nodes: dict[str, NodeState], node_id: str, payload: dict[str, Any], at: str) -> None:
    """Fold what a hand-off recorded into its node's ``handoff`` entry (the payloads are the log's, as written)."""
    entry = nodes.get(node_id)
    if entry is None:
        return
    handoff: HandoffRecord = entry.setdefault("handoff", {})
    kind = payload["kind"]
    if kind == "a2a.handoff.negotiated":
        decided = payload.get("negotiation") or {}
        handoff["negotiated"] = str(decided.get("outcome", "accepted"))
        if "version" in decided:
            handoff["negotiatedVersion"] = str(decided["version"])
    if kind == "a2a.handoff.accepted":
        accepted: PeerTaskRecord | None = payload.get("handoff")
        if accepted:
            handoff.update(cast(HandoffRecord, accepted))  # its keys are the record's first ones
        handoff["acceptedAt"] = at
    if "peerState" in payload:
        handoff["peerState"] = payload["peerState"]
        handoff["observedAt"] = at
        handoff["question"] = payload.get("question")
    if kind == "a2a.handoff.reply":
        handoff["pendingReply"] = cast(PendingReply, {"index": payload["replyIndex"], **(payload.get("reply") or {})})
        handoff["replies"] = payload["replyIndex"]
    elif kind == "a2a.handoff.replied":
        pending = handoff.get("pendingReply")
        if pending and pending.get("index") == payload.get("replyIndex"):
            del handoff["pendingReply"]


def apply_all(state: Snapshot, events: Iterable[dict[str, Any]]) -> Snapshot:
    for event in events:
        apply(state, event)
    return state


def fold(run_id: str, workflow_id: str, created_at: str, events: Iterable[dict[str, Any]]) -> Snapshot:
    """Rebuild a run's snapshot from its event log alone."""
    return apply_all(initial_snapshot(run_id, workflow_id, created_at), events)


def evolve(state: Snapshot, events: Iterable[dict[str, Any]]) -> Snapshot:
    """A new snapshot: ``state`` with ``events`` applied; ``state`` itself is untouched."""
    return apply_all(copy.deepcopy(state), events)
