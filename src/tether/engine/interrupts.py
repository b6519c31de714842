"""Interrupts: the events that ask one, and those that answer it (a person, a system, its deadline).

Every waiting node asks through ``ask_events``: a local gate, and a hand-off mirroring its
peer's question alike. A local interrupt is answered here, in one vocabulary for every
transport: REST, signed tokens, the CLI and A2A replies all resolve through
``resolution_events`` (``decided_by`` is always the authenticated caller), and a gate whose
time ran out through ``timeout_events``. The answer to a mirrored peer question is not
this module's: it is owed to the peer (``tether.engine.handoff.projection.forward``).
"""

from __future__ import annotations

from typing import Any

from tether import clock
from tether.engine import events, hitl
from tether.engine.batch import Batch
from tether.engine.events import ApprovalResume
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


def timeout_events(batch: Batch, interrupt: InterruptRecord) -> None:
    """The events of a gate whose time ran out: it resolves as rejected, whatever ``onTimeout`` says."""
    node_id = interrupt["nodeId"]
    interrupt_id = interrupt["interruptId"]
    kind = interrupt["kind"]
    batch.add(events.interrupt_resolved(node_id, interrupt_id, kind, {"action": "timeout"}, "system"))
    error: ErrorObject
    if kind == "approval":
        timed_out: ApprovalResume = {"action": "timeout", "decidedAt": clock.now_iso(), "reason": "timeout"}
        batch.add(events.approval_received(node_id, timed_out))
        message = f"approval gate {node_id!r} timed out and was rejected"
        error = {"code": "approval_rejected", "message": message, "details": {"reason": "timeout"}}
    else:
        error = {"code": "node_timeout", "message": f"node {node_id!r} timed out waiting for input"}
    batch.add(events.node_failed(node_id, error))
