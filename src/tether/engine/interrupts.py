"""Interrupts: the events that ask one (``ask_events``) and those that answer it (``resolution_events``).

Every waiting node asks through ``ask_events``: a local gate, and a hand-off mirroring its
peer's question. One vocabulary answers them for every transport: REST, signed tokens, the
CLI and A2A replies all resolve through ``resolution_events``; ``decided_by`` is always the
authenticated caller.
"""

from __future__ import annotations

from typing import Any

from tether import clock
from tether.engine import events, hitl
from tether.engine.batch import Batch
from tether.engine.events import ApprovalResume
from tether.engine.handoff.record import peer_subkind
from tether.errors import InvalidInput
from tether.ids import new_id
from tether.run_state import ErrorObject, InterruptKind, InterruptRecord


def ask_events(
    batch: Batch,
    node_id: str,
    kind: InterruptKind,
    data: dict[str, Any],
    timeout_ms: int | None = None,
    subkind: str | None = None,
) -> None:
    """Suspend ``node_id`` on an interrupt: the events every waiting node writes, a gate's or a mirror's."""
    interrupt_id = new_id("int_")
    count = sum(1 for r in batch.state.get("resolvedInterrupts", []) if r.get("nodeId") == node_id)
    key = f"{batch.row.run_id}:{node_id}:{count}"
    batch.add(events.node_suspended(node_id, interrupt_id, kind, key, subkind))
    batch.add(events.interrupt_requested(node_id, kind, key, data, timeout_ms))
    if kind == "approval":
        batch.add(events.approval_requested(node_id, interrupt_id, data))
    elif kind == "clarification":
        batch.add(events.clarification_requested(node_id, interrupt_id, data["questions"]))


def resolution_events(batch: Batch, interrupt: InterruptRecord, resume_value: Any, decided_by: str) -> None:
    """The events that resolve ``interrupt`` with ``resume_value`` (raises on a bad value)."""
    node_id = interrupt["nodeId"]
    interrupt_id = interrupt["interruptId"]
    kind = interrupt["kind"]
    now = clock.now_iso()
    if peer_subkind(interrupt) is not None:
        _forward_events(batch, interrupt, resume_value, decided_by, now)
        return
    if kind == "approval":
        decision = hitl.normalize_approval(resume_value, interrupt["data"]["actions"])
        fields = decision.fields
        if decision.action == "ask":
            batch.add(events.approval_ask(node_id, fields["question"], decided_by))
            return
        resume: ApprovalResume = {"action": decision.action, **fields, "decidedBy": decided_by, "decidedAt": now}
        batch.add(events.interrupt_resolved(node_id, interrupt_id, kind, resume, decided_by, resolved_at=now))
        batch.add(events.approval_received(node_id, resume))
        batch.add(events.node_resumed(node_id, interrupt_id, resume))
        if decision.action == "reject":
            message = f"approval gate {node_id!r} was rejected by {decided_by}"
            error: ErrorObject = {"code": "approval_rejected", "message": message}
            if "feedback" in fields:
                error["details"] = {"feedback": fields["feedback"]}
            batch.add(events.node_failed(node_id, error))
        else:
            batch.add(events.node_completed(node_id, {"action": decision.action, "decidedBy": decided_by, **fields}))
        return
    if kind == "clarification":
        answers = hitl.normalize_answers(resume_value, interrupt["data"]["questions"])
        answered = {"answers": answers}
        batch.add(events.interrupt_resolved(node_id, interrupt_id, kind, answered, decided_by, resolved_at=now))
        batch.add(events.clarification_resolved(node_id, answers, decided_by))
        batch.add(events.node_resumed(node_id, interrupt_id, answered))
        batch.add(events.node_completed(node_id, {"answers": answers}))
        return
    if not isinstance(resume_value, dict):
        raise InvalidInput("resumeValue for an external event must be an object")
    batch.add(events.interrupt_resolved(node_id, interrupt_id, kind, resume_value, decided_by, resolved_at=now))
    batch.add(events.node_resumed(node_id, interrupt_id, resume_value))
    batch.add(events.node_completed(node_id, {"event": resume_value}))


def _forward_events(batch: Batch, interrupt: InterruptRecord, resume_value: Any, decided_by: str, now: str) -> None:
    """Answer a hand-off's mirror of its peer's question: the answer is owed to the peer, the node goes on waiting.

    Checked like any answer of its kind, and recorded with the local principal as the
    decider; the hand-off forwards it to the peer (``a2a.handoff.reply``) and follows the
    peer task as before. Nothing here completes the node: only the peer's task can.
    """
    node_id = interrupt["nodeId"]
    interrupt_id = interrupt["interruptId"]
    kind = interrupt["kind"]
    value: dict[str, Any]
    if kind == "approval":
        decision = hitl.normalize_approval(resume_value, interrupt["data"]["actions"])
        value = {"action": decision.action, **decision.fields}
        resolved: Any = {**value, "decidedBy": decided_by, "decidedAt": now}
    else:
        answers = hitl.normalize_answers(resume_value, interrupt["data"]["questions"])
        value = {"answers": answers}
        resolved = value
    batch.add(events.interrupt_resolved(node_id, interrupt_id, kind, resolved, decided_by, resolved_at=now))
    if kind == "approval" and value["action"] != "ask":
        batch.add(events.approval_received(node_id, resolved))
    elif kind == "clarification":
        batch.add(events.clarification_resolved(node_id, value["answers"], decided_by))
    batch.add(events.node_resumed(node_id, interrupt_id, resolved))
    entry = batch.state["nodeStates"].get(node_id)
    handoff: dict[str, Any] = entry.get("handoff", {}) if entry is not None else {}
    index = int(handoff.get("replies", 0)) + 1
    batch.add(events.handoff_reply(node_id, {"kind": kind, "value": value, "decidedBy": decided_by}, index))
