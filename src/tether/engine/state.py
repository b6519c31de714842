"""The run state machine: how each event changes a run's snapshot.

``apply`` is the only place a run's state changes. The engine decides which events a
transition produces, then folds them with ``apply`` into the new snapshot that is
committed beside them; ``fold`` rebuilds the same snapshot from the log alone.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable
from typing import Any

from tether.types import TERMINAL, WAITING, RunStatus

Snapshot = dict[str, Any]


#: interrupt kind -> the run status while it waits
WAITING_STATUS_BY_KIND = {
    "approval": "waiting-approval",
    "clarification": "waiting-input",
    "external-event": "waiting-external",
}

#: node statuses that mean "this node will not change any more"
NODE_FINISHED = frozenset({"completed", "failed", "skipped", "cancelled"})

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


def apply(state: Snapshot, event: dict[str, Any]) -> Snapshot:
    """Fold one event into ``state`` (mutated and returned). Unknown types change nothing."""
    kind = event["type"]
    payload = event.get("payload") or {}
    node_id = event.get("nodeId")
    at = event["timestamp"]
    nodes: dict[str, Any] = state.setdefault("nodeStates", {})

    if kind == "run.started":
        state["status"] = STARTED
        state["startedAt"] = at
        state["inputs"] = payload.get("inputs", {})
        state["variables"] = dict(payload.get("inputs", {}))
        state["transport"] = payload.get("transport", "rest")
        if "owner" in payload:
            state["owner"] = payload["owner"]
        state["tags"] = list(payload.get("tags", []))
        state["metadata"] = dict(payload.get("metadata", {}))
        if "callbackUrl" in payload:
            state["callbackUrl"] = payload["callbackUrl"]
    elif kind == "node.started":
        entry = {"status": "running", "typeId": payload.get("typeId"), "attempt": payload.get("attempt", 0), "startedAt": at}
        if "wakeAt" in payload:
            entry["wakeAt"] = payload["wakeAt"]
        nodes[node_id] = entry  # type: ignore[index]
        state["currentNodeId"] = node_id
    elif kind == "node.completed":
        entry = nodes.setdefault(node_id, {})  # type: ignore[arg-type]
        entry.update(status="completed", completedAt=at, outputs=payload.get("outputs", {}))
        entry.pop("wakeAt", None)
        outputs = payload.get("outputs")
        if isinstance(outputs, dict):
            state["variables"].update(outputs)
    elif kind == "node.failed":
        entry = nodes.setdefault(node_id, {})  # type: ignore[arg-type]
        entry.update(status="failed", completedAt=at, error=payload.get("error"))
    elif kind == "node.skipped":
        nodes[node_id] = {"status": "skipped", "reason": payload.get("reason"), "completedAt": at}  # type: ignore[index]
    elif kind == "node.suspended":
        nodes.setdefault(node_id, {})["status"] = "suspended"  # type: ignore[arg-type]
    elif kind == "interrupt.requested":
        state["interrupt"] = {
            "kind": payload["kind"],
            "nodeId": node_id,
            "interruptId": payload.get("interruptId") or state.get("pendingInterruptId"),
            "key": payload["key"],
            "data": payload["data"],
            "requestedAt": at,
            **({"timeoutMs": payload["timeoutMs"]} if "timeoutMs" in payload else {}),
        }
        state.pop("pendingInterruptId", None)
        state["status"] = WAITING_STATUS_BY_KIND.get(payload["kind"], "waiting-external")
        state["currentNodeId"] = node_id
    elif kind == "interrupt.resolved":
        state["resolvedInterrupts"].append({"nodeId": node_id, "interruptId": payload.get("interruptId")})
        state["interrupt"] = None
        state["status"] = "running"
    elif kind == "node.resumed":
        nodes.setdefault(node_id, {})["status"] = "running"  # type: ignore[arg-type]
    elif kind == "log.appended" and payload.get("kind") == "approval.ask":
        state.setdefault("askExchanges", {}).setdefault(node_id, []).append(
            {"question": payload.get("question"), "askedBy": payload.get("askedBy"), "askedAt": at}
        )
    elif kind == "node.cancelled":
        nodes.setdefault(node_id, {})["status"] = "cancelled"  # type: ignore[arg-type]
        if payload.get("reason") == CANCEL_REQUESTED and state["status"] not in TERMINAL:
            state["status"] = "cancelling"
            state["cancelReason"] = payload.get("cancelReason", "cancelled")
            state["cancelledBy"] = payload.get("cancelledBy", "system")
    elif kind == "run.completed":
        state.update(status="completed", completedAt=at, outputs=payload.get("outputs", {}), currentNodeId=None)
    elif kind == "run.failed":
        state.update(status="failed", completedAt=at, error=payload.get("error"), currentNodeId=None)
    elif kind == "run.cancelled":
        if state.get("interrupt"):
            state["cancelledInterrupt"] = state["interrupt"]
        state.update(status="cancelled", completedAt=at, interrupt=None, currentNodeId=None)
        for entry in nodes.values():
            if entry.get("status") in ("running", "suspended"):
                entry["status"] = "cancelled"
    # the interruptId is carried by node.suspended (the interrupt.requested payload is closed)
    if kind == "node.suspended":
        state["pendingInterruptId"] = payload.get("interruptId")
    return state


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
