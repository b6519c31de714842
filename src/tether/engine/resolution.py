"""The events that answer an interrupt: an approval decision, clarification answers, an event.

One vocabulary for every transport: REST, signed tokens, the CLI and A2A replies all
resolve through ``resolution_events``; ``decided_by`` is always the authenticated caller.
"""

from __future__ import annotations

from typing import Any

from tether import clock
from tether.engine import events, hitl
from tether.engine.batch import Batch
from tether.engine.events import ApprovalResume
from tether.errors import InvalidInput
from tether.run_state import ErrorObject, InterruptRecord


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
