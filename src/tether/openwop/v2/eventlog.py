"""A stored event as major 2 reads it: the v2 ``RunEventDoc``, translated on every read, never rewritten.

Tether stores every event in v1 spelling, whatever the run's era. A v2 reader gets it
through the v1 → v2 codemap (``spec/v2/event-codemap.json``): the type renamed where a
row renames it, the payload projected onto the type's closed v2 definition, the run id
bound to its tenant and ``engineVersion`` an integer. One Tether log line is read as the
registered type it stands for: a hand-off's version negotiation (``negotiation.decided``). ``sequence``, ``eventId``,
``timestamp``, ``nodeId`` and ``causationId`` pass through unchanged.

Nothing is dropped silently: a type with no row is ``500 event_type_unmapped``, and a
payload key its v2 definition cannot carry is ``500 payload_unprojectable`` naming it.
Keys v1 wrote beside the closed shape (``transport``, the v1 ``engineVersion`` string)
have a v2 home or are carried under the ``x-tether-`` extension hatch.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

from tether.errors import TetherError
from tether.openwop.v2.ids import bind

__all__ = [
    "CONTEXT_DEPTH",
    "ENGINE_MAJOR",
    "NEEDS_CONTEXT",
    "NEGOTIATED",
    "NEGOTIATION_DECIDED",
    "REGISTERED_ORGS",
    "RENAMED",
    "EventUnmapped",
    "PayloadUnprojectable",
    "Translator",
    "interrupt_view",
    "legacy_subject",
    "v1_type",
    "v2_event",
    "v2_events",
    "v2_type",
]


#: ``engineVersion`` at major 2: an integer on every event, every snapshot and the discovery root
#: (major 1 spells it ``"0.1.0"``, Tether's package version)
ENGINE_MAJOR = 1


class EventUnmapped(TetherError):
    """A stored event whose type the codemap has no row for."""

    code = "event_type_unmapped"
    status = 500


class PayloadUnprojectable(TetherError):
    """A stored payload with a key its type's closed v2 definition cannot carry."""

    code = "payload_unprojectable"
    status = 500


#: the codemap's renamed rows: v1 name → v2 name (every other registered type keeps its name)
RENAMED: Mapping[str, str] = {
    "run.resuming": "run.resume-started",
    "run.dead_lettered": "run.dead-lettered",
    "replay.divergedAtRefusal": "replay.diverged-at-refusal",
    "agent.reasoning.delta": "agent.reasoning-delta",
    "agent.promptResolved": "agent.prompt-resolved",
    "agent.toolCalled": "agent.tool-called",
    "agent.toolReturned": "agent.tool-returned",
    "agent.invocation.started": "agent.invocation-started",
    "agent.invocation.completed": "agent.invocation-completed",
    "agent.memory.consolidated": "agent.memory-consolidated",
    "model.capability.substituted": "model.capability-substituted",
    "model.capability.insufficient": "model.capability-insufficient",
    "envelope.retry.attempted": "envelope.retry-attempted",
    "envelope.retry.exhausted": "envelope.retry-exhausted",
    "envelope.nlToFormat.engaged": "envelope.nl-to-format-engaged",
    "envelope.recovery.applied": "envelope.recovery-applied",
    "deployment.canary.adjusted": "deployment.canary-adjusted",
    "deployment.state.changed": "deployment.state-changed",
    "roster.run.initiated": "roster.run-initiated",
    "tool.session.opened": "tool.session-opened",
    "tool.session.closed": "tool.session-closed",
    "trigger.subscription.state.changed": "trigger.subscription-state-changed",
    "trigger.delivery.attempted": "trigger.delivery-attempted",
    "budget.threshold.crossed": "budget.threshold-crossed",
    "runOrchestrator.decided": "orchestrator.decided",
    "core.dispatch.fanOut": "dispatch.fanned-out",
    "core.dispatch.join": "dispatch.joined",
    "core.workflowChain.event": "workflow-chain.event",
    "core.workflowChain.confidence-escalated": "workflow-chain.confidence-escalated",
    "connector.auth_expired": "connector.auth-expired",
    "voice.speech_start": "voice.speech-start",
    "voice.endpoint_candidate": "voice.endpoint-candidate",
    "voice.turn_commit": "voice.turn-commit",
    "voice.synthesis_chunk": "voice.synthesis-chunk",
    "voice.barge_in": "voice.barge-in",
    "compensation.manual_intervention_required": "compensation.manual-intervention-required",
}
_V1_OF = {v2: v1 for v1, v2 in RENAMED.items()}
assert len(_V1_OF) == len(RENAMED), "the codemap's renames are a bijection"

#: the registered types whose name is the same at both majors (the codemap's unrenamed rows)
KEPT: frozenset[str] = frozenset(
    {
        "run.started",
        "run.completed",
        "run.failed",
        "run.cancelled",
        "run.paused",
        "run.resumed",
        "run.restored-from-snapshot",
        "node.started",
        "node.completed",
        "node.failed",
        "node.suspended",
        "node.suspend-failed",
        "node.resumed",
        "node.retried",
        "node.skipped",
        "node.cancelled",
        "node.dispatched",
        "approval.requested",
        "approval.received",
        "approval.granted",
        "approval.rejected",
        "approval.overridden",
        "clarification.requested",
        "clarification.resolved",
        "interrupt.requested",
        "interrupt.resolved",
        "channel.written",
        "channel.presence",
        "context.summarized",
        "artifact.created",
        "output.chunk",
        "variable.changed",
        "log.appended",
        "version.pinned",
        "workflow.restored",
        "workflow.loopback-limit",
        "workflow.stalled",
        "cap.breached",
        "lease.acquired",
        "lease.renewed",
        "lease.lost",
        "lease.handed-off",
        "replay.diverged",
        "agent.reasoned",
        "provider.usage",
        "prompt.composed",
        "envelope.refusal",
        "envelope.truncated",
        "agent.handoff",
        "agent.decided",
        "agent.verified",
        "eval.started",
        "eval.scored",
        "eval.completed",
        "deployment.promoted",
        "deployment.rolled-back",
        "egress.decided",
        "budget.reserved",
        "budget.consumed",
        "budget.exhausted",
        "conversation.opened",
        "conversation.exchanged",
        "conversation.closed",
        "memory.compacted",
        "memory.written",
        "commitment.fired",
        "workspace.updated",
        "connector.authorized",
        "authorization.decided",
        "proposal.created",
        "proposal.activated",
        "goal.evaluated",
        "goal.closed",
        "import.applied",
        "voice.transcript",
        "voice.cancelled",
        "compensation.requested",
        "compensation.started",
        "compensation.completed",
        "compensation.failed",
        "compensation.paused",
    }
)


#: Tether's log line of a hand-off's version negotiation (``engine.events.handoff_negotiated``): v1 has no
#: type for it, so it is stored as ``log.appended``; a v2 reader sees its registered type, with the
#: schema's payload the line carries under ``negotiation`` (and nothing else of the line)
NEGOTIATED = "a2a.handoff.negotiated"
NEGOTIATION_DECIDED = "negotiation.decided"

#: the vendor-org registry (the ``extensions`` of ``spec/v2/declaration.json``): only ``example``, the
#: protocol's own, held for documentation and conformance
REGISTERED_ORGS: frozenset[str] = frozenset({"example"})
#: the shape of a vendor type (``run-event.schema.json``'s vendor branch, its org checked against the registry)
_VENDOR_TYPE = re.compile(r"[a-z][a-z0-9]*(-[a-z0-9]+)*\.[a-z][a-z0-9]*(-[a-z0-9]+)*(\.[a-z][a-z0-9]*(-[a-z0-9]+)*)?")


def v2_type(v1: str) -> str:
    """A stored (v1) type's v2 name: the codemap's, or its own for a vendor type of a registered org.

    Raises
    ------
    EventUnmapped
        The codemap has no row for it, and its first segment is no registered org.
    """
    if v1 in KEPT:
        return v1
    renamed = RENAMED.get(v1)
    if renamed is None:
        if v1.partition(".")[0] in REGISTERED_ORGS and _VENDOR_TYPE.fullmatch(v1):
            return v1  # a registered vendor type is read under its own name (persistence.md, "The codemap is data")
        raise EventUnmapped(f"event type {v1!r} has no row in the v1 -> v2 codemap", details={"type": v1})
    return renamed


def v1_type(v2: str) -> str:
    """A v2 type name as it is stored (the codemap read backwards), e.g. to match a v2 subscription's events."""
    return _V1_OF.get(v2, v2)


#: keys any v2 payload definition carries opaquely (RFC 0185's extension hatch); Tether's own go under ``x-tether-``
_HATCH = re.compile(r"^(openwop-|x-|vendor\.)")
#: what each closed ``data`` of an InterruptPayload may hold, by kind (``suspend-request.schema.json``)
_DATA_KEYS: Mapping[str, tuple[frozenset[str], frozenset[str]]] = {
    # kind: (required, allowed)
    "approval": (
        frozenset({"artifactId", "artifactType", "title", "actions"}),
        frozenset(
            {
                "artifactId",
                "artifactType",
                "title",
                "actions",
                "onTimeout",
                "description",
                "artifactData",
                "requiredApprovals",
                "approversList",
                "rejectionPolicy",
                "overrideBypassesQuorum",
                "approverGroupRefs",
                "approverRoleRefs",
                "audience",
            }
        ),
    ),
    "clarification": (frozenset({"questions"}), frozenset({"questions", "contextType"})),
    "external-event": (frozenset({"eventType", "correlation"}), frozenset({"eventType", "correlation"})),
}
_ACTIONS = frozenset({"accept", "reject", "refine", "edit-accept", "ask"})
_QUESTION_KEYS = frozenset({"id", "question", "schema"})


def _hatched(payload: Mapping[str, Any], keys: frozenset[str]) -> dict[str, Any]:
    """``payload`` with every key outside ``keys`` (and the hatch) carried as ``x-tether-<key>``."""
    return {k if k in keys or _HATCH.match(k) else f"x-tether-{k}": v for k, v in payload.items()}


def _fits(kind: str, data: Mapping[str, Any]) -> bool:
    required, allowed = _DATA_KEYS[kind]
    if not required <= data.keys() or not data.keys() <= allowed:
        return False
    if kind == "approval":
        actions = data["actions"]
        return isinstance(actions, list) and bool(actions) and set(actions) <= _ACTIONS
    if kind == "clarification":
        questions = data["questions"]
        return (
            isinstance(questions, list)
            and bool(questions)
            and all(isinstance(q, dict) and {"id", "question"} <= q.keys() <= _QUESTION_KEYS for q in questions)
        )
    return True


def interrupt_view(kind: str, data: Any) -> tuple[str, dict[str, Any]]:
    """An interrupt's ``(kind, data)`` at major 2, where ``data`` is closed per kind.

    Major 1 spelt ``edit-accept`` as ``edit``. Data that does not fit its kind's closed
    shape (a hand-off's mirror of its peer's question carries who asked) is shown whole
    as a ``custom`` interrupt, ``customKind: "tether.<kind>"``, rather than cut.
    """
    if isinstance(data, dict) and kind == "approval" and isinstance(data.get("actions"), list):
        data = {**data, "actions": ["edit-accept" if a == "edit" else a for a in data["actions"]]}
    if isinstance(data, dict) and kind in _DATA_KEYS and _fits(kind, data):
        return kind, data
    return "custom", {"customKind": f"tether.{kind}", "payload": data}


class _Asked(NamedTuple):
    interrupt_id: str
    key: str
    kind: str


class Translator:
    """One run's stored events in order, as v2 events: remembers what a later legacy event does not repeat.

    The legacy ``approval.*`` and ``clarification.*`` events are shown in the one v2 shape of
    an interrupt being asked or answered, which names the interrupt; they were written just
    after the event that names it (``node.suspended``, ``interrupt.resolved``), so a reader
    that starts at one of them first feeds the translator the few events before (``prime``).
    """

    def __init__(self, tenant: str) -> None:
        self.tenant = tenant
        self._asked: dict[str, _Asked] = {}
        self._answered: dict[str, _Asked] = {}

    def prime(self, docs: list[Mapping[str, Any]]) -> None:
        """Learn from events before the ones to translate, without translating them."""
        for doc in docs:
            self._learn(doc)

    def _learn(self, doc: Mapping[str, Any]) -> None:
        payload = doc.get("payload") or {}
        node: str = payload.get("nodeId") or doc.get("nodeId") or ""
        if doc["type"] == "node.suspended":
            self._asked[node] = _Asked(payload["interruptId"], payload["key"], payload["kind"])
        elif doc["type"] == "interrupt.resolved":
            asked = self._asked.get(node)
            key = asked.key if asked is not None else ""
            self._answered[node] = _Asked(payload["interruptId"], key, payload.get("kind", "approval"))

    def event(self, doc: Mapping[str, Any]) -> dict[str, Any]:
        """One stored event as a v2 ``RunEventDoc`` (its run belongs to this translator's tenant)."""
        self._learn(doc)
        kind = doc["type"]
        payload = doc.get("payload")
        v2_payload: Any
        if isinstance(payload, dict) and kind == "log.appended" and payload.get("kind") == NEGOTIATED:
            v2_kind, v2_payload = NEGOTIATION_DECIDED, dict(payload.get("negotiation") or {})
        else:
            project = _PROJECTIONS.get(kind)
            v2_kind = v2_type(kind)
            v2_payload = project(self, payload, doc) if project is not None and isinstance(payload, dict) else payload
        event: dict[str, Any] = {
            "eventId": doc["eventId"],
            "runId": bind(self.tenant, doc["runId"]),
            "type": v2_kind,
            "payload": v2_payload,
            "timestamp": doc["timestamp"],
            "sequence": doc["sequence"],
            "schemaVersion": doc.get("schemaVersion", 1),
            "engineVersion": ENGINE_MAJOR,
        }
        for name in ("nodeId", "causationId"):
            if name in doc:
                event[name] = doc[name]
        return event

    def bound(self, opaque: str) -> str:
        return bind(self.tenant, opaque)

    def asked(self, doc: Mapping[str, Any], payload: Mapping[str, Any]) -> _Asked:
        node: str = payload.get("nodeId") or doc.get("nodeId") or ""
        asked = self._asked.get(node)
        if asked is None:
            raise PayloadUnprojectable(
                f"{doc['type']} at sequence {doc['sequence']} names no interrupt this reader has seen",
                details={
                    "type": doc["type"],
                    "keys": ["interruptId", "key"],
                    "eventId": doc["eventId"],
                    "sequence": doc["sequence"],
                },
            )
        return asked

    def answered(self, doc: Mapping[str, Any], payload: Mapping[str, Any]) -> _Asked:
        node: str = payload.get("nodeId") or doc.get("nodeId") or ""
        answered = self._answered.get(node)
        if answered is None:
            raise PayloadUnprojectable(
                f"{doc['type']} at sequence {doc['sequence']} names no interrupt this reader has seen",
                details={
                    "type": doc["type"],
                    "keys": ["interruptId"],
                    "eventId": doc["eventId"],
                    "sequence": doc["sequence"],
                },
            )
        return answered


#: how a stored payload reads at major 2: (translator, payload, the stored event) -> v2 payload
Projection = Callable[[Translator, dict[str, Any], Mapping[str, Any]], dict[str, Any]]
#: the legacy events a reader starting at them needs the events before for
NEEDS_CONTEXT = frozenset(
    {"approval.requested", "clarification.requested", "approval.received", "clarification.resolved"}
)
#: how far before such an event the one that names its interrupt can be (written in the same commit)
CONTEXT_DEPTH = 4


def _run_started(t: Translator, p: dict[str, Any], doc: Mapping[str, Any]) -> dict[str, Any]:
    owner = p.get("owner") or {"tenant": t.tenant}
    subject = p.get("subject") or legacy_subject(owner)
    out = _hatched(
        {k: v for k, v in p.items() if k not in ("owner", "subject", "engineVersion")},
        frozenset({"workflowId", "inputs", "transport", "tags", "metadata"}),
    )
    out["engineVersion"] = ENGINE_MAJOR
    out["owner"] = {"tenant": owner["tenant"], "subject": subject}
    return out


def _error(error: Any) -> Any:
    return _hatched(error, frozenset({"code", "message", "details", "retryable"})) if isinstance(error, dict) else error


def _with_error(keys: frozenset[str]) -> Projection:
    def project(t: Translator, p: dict[str, Any], doc: Mapping[str, Any]) -> dict[str, Any]:
        out = _hatched(p, keys)
        if "error" in out:
            out["error"] = _error(out["error"])
        return out

    return project


def _keys(keys: frozenset[str]) -> Projection:
    return lambda t, p, doc: _hatched(p, keys)


def _completed(t: Translator, p: dict[str, Any], doc: Mapping[str, Any]) -> dict[str, Any]:
    return {"outputs": {}, **_hatched(p, frozenset({"outputs", "durationMs"}))}  # outputs always present at v2


def _node_suspended(t: Translator, p: dict[str, Any], doc: Mapping[str, Any]) -> dict[str, Any]:
    out = _hatched(p, frozenset({"nodeId", "interruptId", "kind", "reason", "key"}))
    out["interruptId"] = t.bound(p["interruptId"])
    return out


def _interrupt_requested(t: Translator, p: dict[str, Any], doc: Mapping[str, Any]) -> dict[str, Any]:
    kind, data = interrupt_view(p["kind"], p.get("data"))
    out: dict[str, Any] = {"kind": kind, "key": p["key"], "data": data}
    for name in ("resumeSchema", "timeoutMs"):
        if name in p:
            out[name] = p[name]
    extra = p.keys() - {"kind", "key", "data", "resumeSchema", "timeoutMs"}
    if extra:  # the InterruptPayload has no extension hatch
        raise PayloadUnprojectable(
            f"interrupt.requested carries {sorted(extra)} that its closed v2 payload cannot",
            details={
                "type": "interrupt.requested",
                "keys": sorted(extra),
                "eventId": doc["eventId"],
                "sequence": doc["sequence"],
            },
        )
    return out


def _legacy_requested(kind: str) -> Projection:
    def project(t: Translator, p: dict[str, Any], doc: Mapping[str, Any]) -> dict[str, Any]:
        asked = t.asked(doc, p)
        data = {k: v for k, v in p.items() if k not in ("nodeId", "interruptId")}
        shown, data = interrupt_view(kind, data)
        return {"kind": shown, "key": asked.key, "data": data}

    return project


_RESOLVED_KEYS = frozenset(
    {
        "nodeId",
        "interruptId",
        "kind",
        "reason",
        "resumeValue",
        "decision",
        "action",
        "refineFeedback",
        "editedArtifactData",
    }
)
_DECISIONS = {"accept": "granted", "edit-accept": "granted", "reject": "rejected", "timeout": "rejected"}


def _interrupt_resolved(t: Translator, p: dict[str, Any], doc: Mapping[str, Any]) -> dict[str, Any]:
    out = _hatched(p, _RESOLVED_KEYS)
    out["interruptId"] = t.bound(p["interruptId"])
    if "kind" in p:
        out["kind"] = t.answered(doc, p).kind if p["kind"] not in _DATA_KEYS else p["kind"]
    return out


def _approval_received(t: Translator, p: dict[str, Any], doc: Mapping[str, Any]) -> dict[str, Any]:
    answered = t.answered(doc, p)
    out = _hatched(p, _RESOLVED_KEYS)
    out["interruptId"] = t.bound(answered.interrupt_id)
    out["kind"] = "approval"
    decision = _DECISIONS.get(p.get("action", ""))
    if decision is not None:
        out["decision"] = decision
    return out


def _clarification_resolved(t: Translator, p: dict[str, Any], doc: Mapping[str, Any]) -> dict[str, Any]:
    answered = t.answered(doc, p)
    out = _hatched({k: v for k, v in p.items() if k != "answers"}, _RESOLVED_KEYS)
    out["interruptId"] = t.bound(answered.interrupt_id)
    out["kind"] = "clarification"
    out["resumeValue"] = p.get("answers")
    return out


def _node_resumed(t: Translator, p: dict[str, Any], doc: Mapping[str, Any]) -> dict[str, Any]:
    out = _hatched(p, frozenset({"nodeId", "interruptId", "resumeValue"}))
    if "interruptId" in p:
        out["interruptId"] = t.bound(p["interruptId"])
    return out


def _log_appended(t: Translator, p: dict[str, Any], doc: Mapping[str, Any]) -> dict[str, Any]:
    """Tether's structured log lines (an ``ask``, a hand-off's record) keep their facts in ``fields``."""
    out: dict[str, Any] = {k: p[k] for k in ("level", "message", "nodeId") if k in p}
    fields = {k: v for k, v in p.items() if k not in ("level", "message", "nodeId", "fields")}
    if isinstance(p.get("fields"), dict):
        fields.update(p["fields"])
    if fields:
        out["fields"] = fields
    return out


_PROJECTIONS: dict[str, Projection] = {
    "run.started": _run_started,
    "run.completed": _completed,
    "run.failed": _with_error(frozenset({"error", "failedNodeId", "durationMs"})),
    "run.cancelled": _keys(frozenset({"reason", "cancelledBy", "durationMs", "parentRunId"})),
    "run.paused": _keys(frozenset({"reason", "drainPolicy", "interruptedNodeId", "interruptedAttempt"})),
    "node.started": _keys(frozenset({"nodeId", "typeId", "attempt"})),
    "node.completed": _keys(frozenset({"nodeId", "outputs", "durationMs"})),
    "node.failed": _with_error(frozenset({"nodeId", "error", "attempts"})),
    "node.skipped": _keys(frozenset({"nodeId", "reason"})),
    "node.cancelled": _keys(frozenset({"nodeId", "reason"})),
    "node.suspended": _node_suspended,
    "interrupt.requested": _interrupt_requested,
    "approval.requested": _legacy_requested("approval"),
    "clarification.requested": _legacy_requested("clarification"),
    "interrupt.resolved": _interrupt_resolved,
    "approval.received": _approval_received,
    "clarification.resolved": _clarification_resolved,
    "node.resumed": _node_resumed,
    "log.appended": _log_appended,
}


def legacy_subject(owner: Mapping[str, Any]) -> dict[str, str]:
    """The subject of a run started before subjects were recorded (OpenWOP's legacy stamp), from its owner."""
    principal = owner.get("principal") or "unknown"
    anonymous = principal == "anonymous"
    return {
        "issuer": "urn:openwop:legacy",
        "subjectId": principal,
        "tenant": owner["tenant"],
        "lane": "anonymous" if anonymous else "api-key",
        "kind": "anonymous" if anonymous else "user",
    }


def v2_event(doc: Mapping[str, Any], tenant: str) -> dict[str, Any]:
    """One stored event as a v2 ``RunEventDoc``, on its own (a legacy interrupt event needs :class:`Translator`)."""
    return Translator(tenant).event(doc)


def v2_events(
    docs: list[Mapping[str, Any]], tenant: str, before: list[Mapping[str, Any]] | None = None
) -> list[dict[str, Any]]:
    """Consecutive stored events as v2 events, ``before`` the few events that precede them (:data:`NEEDS_CONTEXT`)."""
    translator = Translator(tenant)
    translator.prime(before or [])
    return [translator.event(d) for d in docs]
