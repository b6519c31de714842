"""The one place an OpenWOP run becomes A2A: task states, Tasks, stream events, records.

Everything here is a pure function of a run snapshot (``RunRow.state``), so a Task
read with ``tasks/get``, a status update on a stream and the persisted A2ATaskState
always agree. The status table is the FINAL projection of a2a-integration.md
(§"State projection (forward)"), exhaustive over the ten run statuses.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from tether.run_state import RunSnapshot
from tether.store.base import RunRow

__all__ = [
    "INTERRUPTED",
    "RUN_TO_TASK_STATE",
    "TERMINAL",
    "artifacts",
    "interrupt_carrier",
    "status_view",
    "task",
    "task_record",
    "task_state",
    "updates",
]

#: run.status → A2A v0.3 TaskState (lowercase-hyphen, the wire and stored spelling)
RUN_TO_TASK_STATE: Mapping[str, str] = MappingProxyType(
    {
        "pending": "submitted",
        "running": "working",
        "paused": "working",
        "cancelling": "working",  # until the run is really cancelled (RFC 0094)
        "waiting-approval": "input-required",
        "waiting-input": "input-required",
        "waiting-external": "input-required",
        "completed": "completed",
        "failed": "failed",
        "cancelled": "canceled",  # one l on the A2A side
    }
)

#: A2ATaskState.interruptKind per waiting status (waiting-external has no value there)
_INTERRUPT_KIND: Mapping[str, str] = MappingProxyType(
    {"waiting-approval": "approval", "waiting-input": "clarification"}
)

TERMINAL = frozenset({"completed", "failed", "canceled", "rejected"})
INTERRUPTED = frozenset({"input-required", "auth-required"})
#: node events a multi-step task reports as progress (a2a-integration §3: status flows A2A-direction)
_PROGRESS = MappingProxyType({"node.started": "started", "node.completed": "finished"})


def task_state(run_status: str) -> str:
    """The A2A TaskState of a run status (ValueError for a status the engine never has)."""
    try:
        return RUN_TO_TASK_STATE[run_status]
    except KeyError:
        raise ValueError(f"unknown run status {run_status!r}") from None


def interrupt_carrier(interrupt: Mapping[str, Any]) -> dict[str, Any]:
    """``metadata.openwop.interrupt``: what a human-facing client needs to ask the question."""
    kind = interrupt["kind"]
    data = interrupt.get("data") or {}
    carrier: dict[str, Any] = {"kind": kind, "nodeId": interrupt["nodeId"]}
    if kind == "approval":
        carrier["title"] = str(data.get("title") or interrupt["nodeId"])
        if isinstance(data.get("description"), str):
            carrier["description"] = data["description"]
        carrier["actions"] = list(data.get("actions", []))
    elif kind == "clarification":
        carrier["title"] = (
            "Questions need answers" if len(data.get("questions", [])) > 1 else "A question needs an answer"
        )
        carrier["questions"] = [dict(q) for q in data.get("questions", [])]
    else:
        carrier["title"] = f"Waiting for the event {data.get('eventType') or interrupt['nodeId']}"
    return carrier


def _prompt_text(carrier: Mapping[str, Any]) -> str:
    if carrier["kind"] == "approval":
        text = carrier["title"] + (f": {carrier['description']}" if carrier.get("description") else "")
        return f'{text}. Reply with a data part {{"action": ...}} using one of: {", ".join(carrier["actions"])}.'
    if carrier["kind"] == "clarification":
        asked = "; ".join(f"{q['id']}: {q['question']}" for q in carrier["questions"])
        return (
            f'{asked}. Reply with a data part {{"answers": {{"<id>": <answer>}}}}, or plain text for a single question.'
        )
    return f"{carrier['title']}. Reply with a data part holding the event."


def _agent_message(message_id: str, task_id: str, context_id: str, text: str, data: dict[str, Any]) -> dict[str, Any]:
    return {
        "kind": "message",
        "role": "agent",
        "messageId": message_id,
        "taskId": task_id,
        "contextId": context_id,
        "parts": [{"kind": "text", "text": text}, {"kind": "data", "data": data}],
    }


def _error(state: RunSnapshot) -> dict[str, Any] | None:
    error = state.get("error")
    if state.get("status") != "failed" or not isinstance(error, dict):
        return None
    return {"code": str(error.get("code", "run_failed")), "message": str(error.get("message", "the run failed"))}


def status_view(state: RunSnapshot) -> tuple[str, dict[str, Any] | None, dict[str, Any] | None]:
    """(TaskState, interrupt carrier, error): what a client can see of a snapshot's status."""
    status = task_state(state["status"])
    interrupt = state.get("interrupt")
    carrier = interrupt_carrier(interrupt) if status == "input-required" and interrupt else None
    return status, carrier, _error(state)


def _status(task_id: str, context_id: str, state: RunSnapshot, timestamp: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The TaskStatus and the ``metadata`` of a snapshot (shared by Tasks and status updates)."""
    status_name, carrier, error = status_view(state)
    status: dict[str, Any] = {"state": status_name, "timestamp": timestamp}
    openwop: dict[str, Any] = {"runId": task_id, "runStatus": state["status"]}
    if carrier is not None:
        openwop["interrupt"] = carrier
        interrupt = state.get("interrupt")
        interrupt_id = (interrupt["interruptId"] if interrupt else None) or carrier["nodeId"]
        status["message"] = _agent_message(
            f"{interrupt_id}-request", task_id, context_id, _prompt_text(carrier), {"interrupt": carrier}
        )
    if error is not None:
        openwop["error"] = error
        status["message"] = _agent_message(f"{task_id}-error", task_id, context_id, error["message"], {"error": error})
    return status, {"openwop": openwop}


def _is_part(part: Any) -> bool:
    """Whether ``part`` is a canonical A2A part (a file by reference: its bytes are never in outputs)."""
    if not isinstance(part, dict):
        return False
    kind = part.get("kind")
    if kind == "text":
        return isinstance(part.get("text"), str)
    if kind == "data":
        return isinstance(part.get("data"), dict)
    file = part.get("file")
    return (
        kind == "file"
        and isinstance(file, dict)
        and (isinstance(file.get("blob"), str) or isinstance(file.get("uri"), str))
    )


def _answer_parts(outputs: dict[str, Any]) -> list[dict[str, Any]] | None:
    """The parts of the message a run answers with: an output ``message`` holding A2A parts (None: no such output)."""
    answer = outputs.get("message")
    parts = answer.get("parts") if isinstance(answer, dict) else None
    if not isinstance(parts, list) or not parts or not all(_is_part(p) for p in parts):
        return None
    return parts


def artifacts(task_id: str, state: RunSnapshot) -> list[dict[str, Any]]:
    """A completed run's outputs as one Artifact with a stable id (none before completion).

    A run answers with parts of its own choosing through an output named ``message`` that
    holds A2A parts (``{"parts": [...]}``, each canonical: text, data, or a file by reference,
    which is how a node gives back a file): the artifact is those parts, in order. Otherwise
    its outputs are one data part, after a text part when they are a single string.
    """
    if state.get("status") != "completed":
        return []
    outputs = state.get("outputs")
    if outputs is None or outputs == {}:
        return []
    data = outputs if isinstance(outputs, dict) else {"outputs": outputs}
    parts: list[dict[str, Any]] = []
    answered = _answer_parts(data)
    values = list(data.values())
    if answered is not None:
        parts.extend(answered)
    else:
        if len(values) == 1 and isinstance(values[0], str):
            parts.append({"kind": "text", "text": values[0]})
        parts.append({"kind": "data", "data": data})
    return [
        {"artifactId": f"{task_id}-outputs", "name": "outputs", "description": "The workflow's outputs", "parts": parts}
    ]


def task(
    row: RunRow, context_id: str, history: list[dict[str, Any]], history_length: int | None = None
) -> dict[str, Any]:
    """The A2A Task of a run, as it is now.

    ``history`` holds the A2A messages exchanged (oldest first); ``history_length``
    keeps the last N of them (0 keeps none, None keeps all).
    """
    status, metadata = _status(row.run_id, context_id, row.state, row.updated_at)
    kept = history if history_length is None else (history[-history_length:] if history_length > 0 else [])
    doc: dict[str, Any] = {
        "kind": "task",
        "id": row.run_id,
        "contextId": context_id,
        "status": status,
        "history": kept,
        "metadata": metadata,
    }
    produced = artifacts(row.run_id, row.state)
    if produced:
        doc["artifacts"] = produced
    return doc


def updates(
    task_id: str,
    context_id: str,
    event: Mapping[str, Any],
    before: tuple[str, dict[str, Any] | None, dict[str, Any] | None],
    after: RunSnapshot,
    *,
    final_on_input_required: bool,
) -> list[dict[str, Any]]:
    """The A2A stream events one run event causes, in order.

    ``before`` is the :func:`status_view` of the snapshot before ``event`` and
    ``after`` the snapshot with it applied. A completed run yields its artifacts, then
    the status update. A status update is sent only when what the client can see
    changed, with ``final`` set on terminal states, and on ``input-required`` when the
    stream ends there (``message/stream``) rather than staying attached.
    """
    out: list[dict[str, Any]] = []
    if event.get("type") == "run.completed":
        for artifact in artifacts(task_id, after):
            out.append(
                {
                    "kind": "artifact-update",
                    "taskId": task_id,
                    "contextId": context_id,
                    "artifact": artifact,
                    "append": False,
                    "lastChunk": True,
                }
            )
    view = status_view(after)
    timestamp = str(event.get("timestamp", ""))
    if view != before:
        status, metadata = _status(task_id, context_id, after, timestamp)
        final = view[0] in TERMINAL or (view[0] in INTERRUPTED and final_on_input_required)
        out.append(_status_update(task_id, context_id, status, metadata, final))
    elif view[0] == "working" and event.get("type") in _PROGRESS:
        progress = _progress(task_id, context_id, event, after)
        if progress is not None:
            out.append(progress)
    return out


def _status_update(
    task_id: str, context_id: str, status: dict[str, Any], metadata: dict[str, Any], final: bool
) -> dict[str, Any]:
    return {
        "kind": "status-update",
        "taskId": task_id,
        "contextId": context_id,
        "status": status,
        "final": final,
        "metadata": metadata,
    }


def _progress(task_id: str, context_id: str, event: Mapping[str, Any], after: RunSnapshot) -> dict[str, Any] | None:
    """A ``working`` update naming the step that started or finished (multi-step tasks only)."""
    meta = after.get("metadata", {}).get("a2a", {})
    steps = meta.get("steps") if isinstance(meta, Mapping) else None
    payload = event.get("payload") or {}
    node_id = payload.get("nodeId")
    if not isinstance(steps, Mapping) or len(steps) < 2 or node_id not in steps:
        return None
    what = _PROGRESS[event["type"]]
    index = list(steps).index(node_id) + 1
    name = str(steps[node_id])
    progress = {"nodeId": node_id, "step": name, "event": what, "index": index, "of": len(steps)}
    text = f"Step {index} of {len(steps)}, {name}, {what}"
    message_id = f"{task_id}-progress-{event.get('sequence')}"
    status: dict[str, Any] = {
        "state": "working",
        "timestamp": str(event.get("timestamp", "")),
        "message": _agent_message(message_id, task_id, context_id, text, {"progress": progress}),
    }
    metadata = {"openwop": {"runId": task_id, "runStatus": after["status"], "progress": progress}}
    return _status_update(task_id, context_id, status, metadata, False)


def task_record(task_id: str, context_id: str, state: RunSnapshot, updated_at: str) -> dict[str, Any]:
    """The persisted A2ATaskState: content-free (no inputs, outputs, artifacts, credentials)."""
    record: dict[str, Any] = {
        "taskId": task_id,
        "runId": task_id,
        "contextId": context_id,
        "state": task_state(state["status"]),
        "updatedAt": updated_at,
    }
    kind = _INTERRUPT_KIND.get(state["status"])
    if kind is not None:
        record["interruptKind"] = kind
    return record
