"""The reverse projection: a peer's A2A task state becomes this run's state (a2a-integration §10.5).

Pure: given the run as a ``Batch`` and the peer's task as read, add the events that make
the local run say what the peer says. Peer ``submitted``/``working`` leave the node in
flight; ``input-required`` mirrors the peer's question as a local interrupt (marked with a
subkind, so it is never taken for a local gate); ``auth-required`` asks for credentials
(drift #3); ``completed`` completes the node with the peer's artifacts, marked untrusted;
``failed``/``canceled`` fail it with ``a2a_peer_terminal`` and ``rejected`` with
``rejected_by_remote`` (drift #4). A mirrored question the peer has moved past is withdrawn.
A file the peer sent (in its artifacts, or with its question) is recorded by reference,
and its bytes (``PeerTask.blobs``) are committed with the event that records it.

And the way back: a local answer to a mirrored question (``forward``) is checked like any
answer of its kind and recorded as owed to the peer, for the follower to send.
"""

from __future__ import annotations

import hashlib
from typing import Any, Final

import orjson

from tether import clock
from tether.engine import events
from tether.engine.batch import Batch
from tether.engine.handoff.peer import PeerRef, PeerTask
from tether.engine.handoff.record import PEER_AUTH, PEER_INPUT, handoff_record, peer_subkind
from tether.engine.hitl import APPROVAL_ACTIONS, normalize_answers, normalize_approval
from tether.engine.interrupts import ask_events
from tether.files import digest_of, file_parts
from tether.run_state import ErrorObject, InterruptRecord

__all__ = ["forward", "project", "withdraw"]

#: who withdraws a mirrored question the peer no longer asks
WITHDRAWN_BY: Final = "a2a-peer"
#: an error's message taken from a peer is cut to this many characters
_MESSAGE_MAX = 2000


def _fingerprint(task: PeerTask) -> str:
    """Which question the peer asks: a new one replaces a mirror of the old."""
    question: dict[str, Any] = {"s": task.state, "i": task.interrupt, "m": task.message}
    if task.files:  # only then: a question without files reads as it did before files were kept
        question["f"] = task.files
    return hashlib.sha256(orjson.dumps(question, option=orjson.OPT_SORT_KEYS)).hexdigest()[:16]


def _untrusted(part: dict[str, Any], source: dict[str, Any]) -> dict[str, Any]:
    """A part of the peer's, marked as such in its own metadata, so the mark goes wherever the part is copied."""
    metadata = part.get("metadata")
    own: dict[str, Any] = metadata if isinstance(metadata, dict) else {}
    return {**part, "metadata": {**own, "contentTrust": "untrusted", "source": source}}


def _keep_files(batch: Batch, task: PeerTask, recorded: Any) -> None:
    """Commit with the batch the blobs of the peer's files that ``recorded`` (what its events hold) refers to."""
    wanted = {digest for part in file_parts(recorded) if (digest := digest_of(part)) is not None}
    batch.blobs.extend(blob for blob in task.blobs if blob.digest in wanted)


def _text(value: Any, fallback: str) -> str:
    return value[:_MESSAGE_MAX] if isinstance(value, str) and value.strip() else fallback


def _mirror(batch: Batch, node_id: str, task: PeerTask, ref: PeerRef) -> None:
    """Ask locally what the peer asks: an OpenWOP peer's approval stays an approval, the rest a clarification."""
    carrier = task.interrupt or {}
    source = {"agent": ref.agent, "taskId": ref.task_id, "contentTrust": "untrusted"}
    files = [_untrusted(part, {"agent": ref.agent, "taskId": ref.task_id}) for part in task.files]
    _keep_files(batch, task, files)
    if task.state == "auth-required":
        question = _text(task.message, "The peer agent needs authentication to go on.")
        data: dict[str, Any] = {"questions": [{"id": "auth", "question": question}], "contextType": PEER_AUTH}
        data["peer"] = source
        if task.message is not None:
            data["message"] = task.message[:_MESSAGE_MAX]
        if files:
            data["files"] = files
        ask_events(batch, node_id, "clarification", data, subkind=PEER_AUTH)
        return
    if carrier.get("kind") == "approval":
        actions = [a for a in carrier.get("actions", []) if a in APPROVAL_ACTIONS] or ["accept", "reject"]
        data = {
            "artifactId": f"{ref.task_id}:{carrier.get('nodeId') or 'peer'}",
            "artifactType": "a2a-peer-question",
            "title": _text(carrier.get("title"), "The peer agent asks for a decision"),
            "actions": actions,
            "artifactData": {"peer": source, "message": task.message},
            "subkind": PEER_INPUT,
        }
        if isinstance(carrier.get("description"), str):
            data["description"] = carrier["description"][:_MESSAGE_MAX]
        if files:
            data["files"] = files
        ask_events(batch, node_id, "approval", data, subkind=PEER_INPUT)
        return
    questions = [
        {"id": q["id"], "question": _text(q.get("question"), q["id"])}
        for q in carrier.get("questions", [])
        if isinstance(q, dict) and isinstance(q.get("id"), str) and q["id"]
    ]
    if not questions:
        questions = [{"id": "q1", "question": _text(task.message, "The peer agent needs more input.")}]
    data = {"questions": questions, "contextType": PEER_INPUT, "peer": source}
    if task.message is not None:
        data["message"] = task.message[:_MESSAGE_MAX]  # the peer's own words, beside the questions made of them
    if files:
        data["files"] = files
    ask_events(batch, node_id, "clarification", data, subkind=PEER_INPUT)


def withdraw(batch: Batch, interrupt: InterruptRecord, peer_state: str) -> None:
    """The peer moved on without our answer: the mirrored question goes, and the node is in flight again."""
    node_id, interrupt_id = interrupt["nodeId"], interrupt["interruptId"]
    value = {"withdrawn": True, "peerState": peer_state}
    now = clock.now_iso()
    batch.add(events.interrupt_resolved(node_id, interrupt_id, interrupt["kind"], value, WITHDRAWN_BY, resolved_at=now))
    batch.add(events.node_resumed(node_id, interrupt_id, value))


def forward(batch: Batch, interrupt: InterruptRecord, resume_value: Any, decided_by: str) -> None:
    """Answer a hand-off's mirror of its peer's question: the answer is owed to the peer, the node goes on waiting.

    Checked like any answer of its kind, and recorded with the local principal as the
    decider; the hand-off forwards it to the peer (``a2a.handoff.reply``) and follows the
    peer task as before. Nothing here completes the node: only the peer's task can.
    """
    node_id = interrupt["nodeId"]
    interrupt_id = interrupt["interruptId"]
    kind = interrupt["kind"]
    now = clock.now_iso()
    value: dict[str, Any]
    if kind == "approval":
        decision = normalize_approval(resume_value, interrupt["data"]["actions"])
        value = {"action": decision.action, **decision.fields}
        resolved: Any = {**value, "decidedBy": decided_by, "decidedAt": now}
    else:
        answers = normalize_answers(resume_value, interrupt["data"]["questions"])
        value = {"answers": answers}
        resolved = value
    batch.add(events.interrupt_resolved(node_id, interrupt_id, kind, resolved, decided_by, resolved_at=now))
    if kind == "approval" and value["action"] != "ask":
        batch.add(events.approval_received(node_id, resolved))
    elif kind == "clarification":
        batch.add(events.clarification_resolved(node_id, value["answers"], decided_by))
    batch.add(events.node_resumed(node_id, interrupt_id, resolved))
    handoff = handoff_record(batch.state, node_id)
    index = int(handoff.get("replies", 0)) + 1
    batch.add(events.handoff_reply(node_id, {"kind": kind, "value": value, "decidedBy": decided_by}, index))


def _outputs(task: PeerTask, ref: PeerRef) -> dict[str, Any]:
    """The node's outputs: the peer's state, task and artifacts, each marked as the peer's (untrusted).

    ``message`` holds every part of the peer's artifacts, in order, each marked untrusted in
    its own metadata: a run that ends with the hand-off answers with them (its artifact is
    an output ``message`` holding parts), files included. ``statusMessage`` is the text of
    the peer's last status message.
    """
    source = {"agent": ref.agent, "taskId": ref.task_id}
    artifacts = [{**a, "contentTrust": "untrusted", "source": source} for a in task.artifacts]
    outputs: dict[str, Any] = {
        "state": task.state,
        "taskId": ref.task_id,
        "contextId": ref.context_id,
        "artifacts": artifacts,
        "contentTrust": "untrusted",
    }
    parts = [_untrusted(p, source) for a in task.artifacts for p in a.get("parts") or () if isinstance(p, dict)]
    if parts:
        outputs["message"] = {"parts": parts}
    if task.message is not None:
        outputs["statusMessage"] = task.message
    return outputs


def _failure(task: PeerTask, ref: PeerRef) -> ErrorObject:
    said = _text(task.message, f"the peer task ended {task.state}")
    details = {"peerState": task.state, "taskId": ref.task_id, "agent": ref.agent, "contentTrust": "untrusted"}
    if task.state == "rejected":
        return {"code": "rejected_by_remote", "message": f"the peer rejected the task: {said}", "details": details}
    return {"code": "a2a_peer_terminal", "message": f"the peer task ended {task.state}: {said}", "details": details}


def project(batch: Batch, node_id: str, task: PeerTask, ref: PeerRef) -> bool:
    """Add the events that bring the run in line with ``task``; True when the node is now finished."""
    handoff = handoff_record(batch.state, node_id)
    interrupt = batch.state.get("interrupt")
    mirrored = interrupt if interrupt and interrupt["nodeId"] == node_id and peer_subkind(interrupt) else None
    asking = task.state in ("input-required", "auth-required")
    fingerprint = _fingerprint(task) if asking else None
    if mirrored is not None and (not asking or handoff.get("question") != fingerprint):
        withdraw(batch, mirrored, task.state)
        mirrored = None
    if handoff.get("peerState") != task.state or (asking and handoff.get("question") != fingerprint):
        batch.add(events.handoff_observed(node_id, task.state, fingerprint))
    if task.state == "completed":
        outputs = _outputs(task, ref)
        _keep_files(batch, task, outputs)
        batch.add(events.node_completed(node_id, outputs))
        return True
    if task.state in ("failed", "canceled", "rejected"):
        batch.add(events.node_failed(node_id, _failure(task, ref)))
        return True
    if asking and mirrored is None and "pendingReply" not in handoff:
        _mirror(batch, node_id, task, ref)
    return False
