"""The two wires a peer speaks, as the hand-off client writes and reads them.

Messages are built in the canonical (0.3) shape and rendered for 1.0 by the ProtoJSON the
server side uses (:mod:`tether.a2a.v1_0.protojson`); a peer's Task is read back into the canonical
shape, then into the engine's ``PeerTask``. Nothing the peer says is trusted: only the
state, text, artifacts, the status message's files and an OpenWOP interrupt carrier are
kept, and sizes are bounded (files by ``_files``, within this host's file limits).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from pydantic import ValidationError

from tether.a2a.errors import InvalidParams
from tether.a2a.v1_0 import protojson
from tether.engine.handoff.peer import PeerTask

__all__ = ["METHODS", "message", "render_message", "task_of"]

#: JSON-RPC method names per version (a2a-v1.0-wire §4, a2a-v0.3-wire §2)
METHODS: Final[dict[str, dict[str, str]]] = {
    "1.0": {
        "send": "SendMessage",
        "get": "GetTask",
        "cancel": "CancelTask",
        "push": "CreateTaskPushNotificationConfig",
        "subscribe": "SubscribeToTask",
    },
    "0.3": {
        "send": "message/send",
        "get": "tasks/get",
        "cancel": "tasks/cancel",
        "push": "tasks/pushNotificationConfig/set",
        "subscribe": "tasks/resubscribe",
    },
}
_STATES: Final = frozenset(
    {"submitted", "working", "input-required", "auth-required", "completed", "failed", "canceled", "rejected"}
)
_TEXT_MAX: Final = 4000
_ARTIFACTS_MAX: Final = 32


def message(
    message_id: str,
    *,
    text: str | None = None,
    data: dict[str, Any] | None = None,
    task_id: str | None = None,
    context_id: str | None = None,
    metadata: dict[str, Any] | None = None,
    files: Sequence[dict[str, Any]] = (),
) -> dict[str, Any]:
    """A user message in the canonical (0.3) shape: its text, its data, then its files (canonical parts)."""
    parts: list[dict[str, Any]] = []
    if text is not None:
        parts.append({"kind": "text", "text": text})
    if data is not None:
        parts.append({"kind": "data", "data": data})
    parts.extend(files)
    doc: dict[str, Any] = {"kind": "message", "role": "user", "messageId": message_id, "parts": parts}
    if task_id:
        doc["taskId"] = task_id
    if context_id:
        doc["contextId"] = context_id
    if metadata:
        doc["metadata"] = metadata
    return doc


def render_message(doc: dict[str, Any], version: str) -> dict[str, Any]:
    """The message as ``version`` spells it (0.3 is the canonical shape itself)."""
    return doc if version == "0.3" else protojson.message(doc)


def _text(msg: Any) -> str | None:
    if not isinstance(msg, dict):
        return None
    texts = [p["text"] for p in msg.get("parts", []) if isinstance(p, dict) and isinstance(p.get("text"), str)]
    return "\n".join(texts)[:_TEXT_MAX] if texts else None


def _files(msg: Any) -> list[dict[str, Any]]:
    """The file parts of a status message (a question may come with a file), as the peer wrote them."""
    if not isinstance(msg, dict) or not isinstance(msg.get("parts"), list):
        return []
    return [p for p in msg["parts"] if isinstance(p, dict) and p.get("kind") == "file"]


def _interrupt(metadata: Any) -> dict[str, Any] | None:
    """An OpenWOP peer's question (``metadata.openwop.interrupt``), kept only if it has a known kind."""
    carrier = ((metadata or {}).get("openwop") or {}).get("interrupt") if isinstance(metadata, dict) else None
    if isinstance(carrier, dict) and carrier.get("kind") in ("approval", "clarification"):
        return carrier
    return None


def task_of(result: Any, version: str) -> PeerTask:
    """A send's or a read's result as a ``PeerTask``; ValueError when it is no Task.

    A peer may answer a send with a Message instead of a Task (0.3 allows it, 1.0 as
    ``{message}``): the exchange is then over, and it reads as a completed task of that id.
    """
    if not isinstance(result, dict):
        raise ValueError("the peer's answer is not an object")
    if version != "0.3":
        if "message" in result and "task" not in result:
            return _from_message(result["message"])
        inner = result.get("task", result)
        try:
            doc = protojson.canonical_task(inner)
        except (ValidationError, InvalidParams) as exc:
            raise ValueError(f"the peer's answer is not a 1.0 Task: {exc}") from exc
    else:
        if result.get("kind") == "message":
            return _from_message(result)
        doc = result
    task_id, status = doc.get("id"), doc.get("status")
    if not isinstance(task_id, str) or not task_id or not isinstance(status, dict):
        raise ValueError("the peer's answer is not a Task (no id or status)")
    state = status.get("state")
    state = "canceled" if state == "cancelled" else state
    artifacts = [a for a in doc.get("artifacts") or [] if isinstance(a, dict)][:_ARTIFACTS_MAX]
    context_id = doc.get("contextId")
    return PeerTask(
        task_id=task_id,
        context_id=context_id if isinstance(context_id, str) else None,
        state=state if state in _STATES else "unknown",
        message=_text(status.get("message")),
        artifacts=artifacts,
        interrupt=_interrupt(doc.get("metadata")),
        files=_files(status.get("message")),
    )


def _from_message(msg: Any) -> PeerTask:
    if not isinstance(msg, dict):
        raise ValueError("the peer's message is not an object")
    if "kind" not in msg:  # 1.0: read through the codec into the canonical shape
        try:
            msg = protojson.canonical_message(msg, "message").model_dump(exclude_none=True)
        except (ValidationError, InvalidParams) as exc:
            raise ValueError(f"the peer's message is malformed: {exc}") from exc
    message_id = str(msg.get("messageId") or "message")
    artifact = {"artifactId": f"{message_id}-reply", "name": "reply", "parts": list(msg.get("parts") or [])}
    return PeerTask(message_id, msg.get("contextId"), "completed", message=_text(msg), artifacts=[artifact])
