"""The events that answer an interrupt: an approval decision, clarification answers, an event.

One vocabulary for every transport: REST, signed tokens, the CLI and A2A replies all
resolve through ``resolution_events``; ``decided_by`` is always the authenticated caller.
"""

from __future__ import annotations

from typing import Any

from tether import clock
from tether.engine import hitl
from tether.engine.batch import Batch
from tether.errors import InvalidInput


def resolution_events(batch: Batch, interrupt: dict[str, Any], resume_value: Any, decided_by: str) -> None:
    """The events that resolve ``interrupt`` with ``resume_value`` (raises on a bad value)."""
    node_id = interrupt["nodeId"]
    interrupt_id = interrupt["interruptId"]
    kind = interrupt["kind"]
    now = clock.now_iso()
    if kind == "approval":
        decision = hitl.normalize_approval(resume_value, interrupt["data"]["actions"])
        if decision.action == "ask":
            batch.add("log.appended", {"kind": "approval.ask", "nodeId": node_id, "question": decision.fields["question"], "askedBy": decided_by, "level": "info", "message": decision.fields["question"]}, node_id)
            return
        resume = {"action": decision.action, **decision.fields, "decidedBy": decided_by, "decidedAt": now}
        batch.add("interrupt.resolved", {"nodeId": node_id, "interruptId": interrupt_id, "kind": kind, "resumeValue": resume, "resolvedAt": now, "resolvedBy": decided_by}, node_id)
        batch.add("approval.received", {"nodeId": node_id, **resume}, node_id)
        batch.add("node.resumed", {"nodeId": node_id, "interruptId": interrupt_id, "resumeValue": resume}, node_id)
        if decision.action == "reject":
            error: dict[str, Any] = {"code": "approval_rejected", "message": f"approval gate {node_id!r} was rejected by {decided_by}"}
            if "feedback" in decision.fields:
                error["details"] = {"feedback": decision.fields["feedback"]}
            batch.add("node.failed", {"nodeId": node_id, "error": error, "attempts": 1}, node_id)
        else:
            outputs = {"action": decision.action, "decidedBy": decided_by, **decision.fields}
            batch.add("node.completed", {"nodeId": node_id, "outputs": outputs, "durationMs": 0}, node_id)
        return
    if kind == "clarification":
        answers = hitl.normalize_answers(resume_value, interrupt["data"]["questions"])
        resume = {"answers": answers}
        batch.add("interrupt.resolved", {"nodeId": node_id, "interruptId": interrupt_id, "kind": kind, "resumeValue": resume, "resolvedAt": now, "resolvedBy": decided_by}, node_id)
        batch.add("clarification.resolved", {"nodeId": node_id, "answers": answers, "answeredBy": decided_by}, node_id)
        batch.add("node.resumed", {"nodeId": node_id, "interruptId": interrupt_id, "resumeValue": resume}, node_id)
        batch.add("node.completed", {"nodeId": node_id, "outputs": {"answers": answers}, "durationMs": 0}, node_id)
        return
    if not isinstance(resume_value, dict):
        raise InvalidInput("resumeValue for an external event must be an object")
    batch.add("interrupt.resolved", {"nodeId": node_id, "interruptId": interrupt_id, "kind": kind, "resumeValue": resume_value, "resolvedAt": now, "resolvedBy": decided_by}, node_id)
    batch.add("node.resumed", {"nodeId": node_id, "interruptId": interrupt_id, "resumeValue": resume_value}, node_id)
    batch.add("node.completed", {"nodeId": node_id, "outputs": {"event": resume_value}, "durationMs": 0}, node_id)
