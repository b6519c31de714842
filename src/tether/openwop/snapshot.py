"""A run row as the RunSnapshot of ``GET /v1/runs/{id}``."""

from __future__ import annotations

from typing import Any

from tether import clock
from tether.engine.batch import ENGINE_VERSION
from tether.engine.handoff.record import peer_subkind
from tether.openwop.tokens import TokenSigner
from tether.run_state import HandoffRecord, InterruptRecord
from tether.store.base import RunRow
from tether.types import Principal


def interrupt_deadline(interrupt: InterruptRecord) -> float | None:
    timeout = interrupt.get("timeoutMs")
    if not timeout:
        return None
    return float(clock.parse(interrupt["requestedAt"]).timestamp() + timeout / 1000)


def run_snapshot(row: RunRow, signer: TokenSigner, principal: Principal | None) -> dict[str, Any]:
    state = row.state
    snap: dict[str, Any] = {
        "runId": row.run_id,
        "workflowId": row.workflow_id,
        "status": row.status,
        "owner": state.get("owner", {"tenant": row.tenant}),
        "createdAt": row.created_at,
        "updatedAt": row.updated_at,
        "nodeStates": state.get("nodeStates", {}),
        "inputs": state.get("inputs", {}),
        "variables": state.get("variables", {}),
        "tags": state.get("tags", []),
        "metadata": state.get("metadata", {}),
        "engineVersion": ENGINE_VERSION,
        "eventLogSchemaVersion": 1,
        "lastSequence": row.last_sequence,
    }
    for name in ("startedAt", "completedAt", "currentNodeId", "outputs"):
        if state.get(name) is not None:
            snap[name] = state[name]
    error = state.get("error")
    if error:
        snap["error"] = {k: error[k] for k in ("code", "message", "details") if k in error}
    interrupt = state.get("interrupt")
    if interrupt:
        intent = "resolve" if principal is None or principal.can("approvals:respond") else "inspect"
        token = signer.mint(
            row.run_id,
            interrupt["nodeId"],
            interrupt["interruptId"],
            intent=intent,
            deadline=interrupt_deadline(interrupt),
        )
        snap["interrupt"] = {
            "kind": interrupt["kind"],
            "nodeId": interrupt["nodeId"],
            "interruptId": interrupt["interruptId"],
            "interruptToken": token,
            "key": interrupt["key"],
            "data": interrupt["data"],
            "requestedAt": interrupt["requestedAt"],
            **({"timeoutMs": interrupt["timeoutMs"]} if interrupt.get("timeoutMs") else {}),
        }
        if state.get("askExchanges", {}).get(interrupt["nodeId"]):
            snap["interrupt"]["askExchanges"] = state["askExchanges"][interrupt["nodeId"]]
        if peer_subkind(interrupt):
            snap["interrupt"]["peerQuestion"] = peer_question(row, interrupt)
    return snap


def peer_question(row: RunRow, interrupt: InterruptRecord) -> dict[str, Any]:
    """What the peer of a hand-off asked, as it said it: the interrupt mirrors it (a Tether extension).

    ``message`` is the text of the status message the peer sent with ``input-required``
    (or ``auth-required``; None when it sent none), ``files`` the files it sent with it (by
    reference: ``GET /v1/runs/{id}/files/{blob}``, or a URI), ``agent`` and ``taskId`` say who asked.
    All of it is the peer's, never checked: ``contentTrust`` is always ``untrusted``, and a
    client shows it as text. Answer it at ``POST /v1/runs/{id}/interrupts/{nodeId}``.
    """
    node: dict[str, Any] = dict(row.state.get("nodeStates", {}).get(interrupt["nodeId"]) or {})
    handoff: HandoffRecord = node.get("handoff") or HandoffRecord()
    data: dict[str, Any] = interrupt.get("data") or {}
    artifact = data.get("artifactData")
    message = data.get("message", artifact.get("message") if isinstance(artifact, dict) else None)
    return {
        "agent": handoff.get("agent"),
        "taskId": handoff.get("taskId"),
        "peerState": handoff.get("peerState"),
        "message": message if isinstance(message, str) else None,
        "files": list(data.get("files") or []),
        "contentTrust": "untrusted",
    }
