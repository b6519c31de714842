"""Node types: what each ``typeId`` does when the scheduler reaches it.

A node handler is a pure function of its context that returns an ``Outcome``. Side
effects of time and people (a delay, a gate) are not performed here: the handler says
"wait until" or "suspend with this question", and the engine makes that durable.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from tether.engine import expressions
from tether.engine.handoff.contract import CallPeer
from tether.engine.handoff.peer import PeerCall, PeerFile
from tether.engine.handoff.record import HANDOFF_ALIASES, HANDOFF_TYPE
from tether.engine.hitl import gate_actions
from tether.errors import InvalidInput
from tether.files import DIGEST
from tether.run_state import ErrorObject, InterruptKind


@dataclass(frozen=True, slots=True)
class NodeContext:
    run_id: str
    node_id: str
    type_id: str
    config: dict[str, Any]
    inputs: dict[str, Any]
    variables: dict[str, Any]
    node_outputs: dict[str, Any]

    @property
    def expression_context(self) -> dict[str, Any]:
        return {"variables": self.variables, "inputs": self.inputs, "nodes": self.node_outputs}


@dataclass(frozen=True, slots=True)
class Completed:
    outputs: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Failed:
    code: str
    message: str

    @property
    def error(self) -> ErrorObject:
        return {"code": self.code, "message": self.message}


@dataclass(frozen=True, slots=True)
class Sleep:
    """Wait ``ms`` milliseconds (durably: the deadline is recorded before waiting)."""

    ms: int


@dataclass(frozen=True, slots=True)
class Suspend:
    """Stop and wait for a person or system; ``data`` is the InterruptPayload's data."""

    kind: InterruptKind
    data: dict[str, Any]
    timeout_ms: int | None = None
    approval: dict[str, Any] | None = None  # extra approval.requested fields


Outcome = Completed | Failed | Sleep | Suspend | CallPeer
Handler = Callable[[NodeContext], Outcome]


def _noop(ctx: NodeContext) -> Outcome:
    return Completed({})


def _identity(ctx: NodeContext) -> Outcome:
    return Completed(dict(ctx.inputs))


def _fail(ctx: NodeContext) -> Outcome:
    return Failed(
        str(ctx.config.get("code") or "conformance_test_failure"),
        str(ctx.config.get("message") or "Intentional conformance failure"),
    )


def _delay(ctx: NodeContext) -> Outcome:
    raw = ctx.config.get("delayMs", ctx.config.get("ms", ctx.inputs.get("delayMs", 0)))
    if isinstance(raw, bool) or not isinstance(raw, (int, float)) or raw < 0:
        return Failed("config_validation_failed", f"node {ctx.node_id!r}: delayMs must be a non-negative number")
    return Sleep(int(raw))


def _template(ctx: NodeContext) -> Outcome:
    spec = ctx.config.get("outputs")
    if not isinstance(spec, dict):
        return Failed(
            "config_validation_failed", f"node {ctx.node_id!r}: config.outputs must be an object of templates"
        )
    try:
        rendered = expressions.render(spec, ctx.expression_context)
    except InvalidInput as exc:
        return Failed("node_execution_failed", f"node {ctx.node_id!r}: {exc.message}")
    return Completed(dict(rendered))


def _timeout(config: dict[str, Any]) -> int | None:
    raw = config.get("timeoutMs")
    if isinstance(raw, int) and not isinstance(raw, bool) and raw > 0:
        return raw
    return None


def _approval(ctx: NodeContext) -> Outcome:
    config = ctx.config
    actions = gate_actions(config)
    artifact = ctx.inputs if ctx.inputs else {k: v for k, v in ctx.node_outputs.items()}
    data: dict[str, Any] = {
        "artifactId": f"{ctx.run_id}:{ctx.node_id}",
        "artifactType": str(config.get("artifactType") or "json"),
        "title": str(config.get("title") or ctx.node_id),
        "actions": actions,
        "artifactData": artifact,
    }
    if isinstance(config.get("description"), str):
        data["description"] = config["description"]
    for name in ("requiredApprovals", "approversList", "rejectionPolicy"):
        if name in config:
            data[name] = config[name]
    return Suspend("approval", data, _timeout(config))


def _clarification(ctx: NodeContext) -> Outcome:
    questions = ctx.config.get("questions")
    if not isinstance(questions, list) or not questions:
        return Failed("config_validation_failed", f"node {ctx.node_id!r}: config.questions must be a non-empty list")
    cleaned = []
    for q in questions:
        if not isinstance(q, dict) or not isinstance(q.get("id"), str) or not isinstance(q.get("question"), str):
            return Failed("config_validation_failed", f"node {ctx.node_id!r}: each question needs an id and a question")
        cleaned.append({k: q[k] for k in ("id", "question", "schema") if k in q})
    return Suspend("clarification", {"questions": cleaned}, _timeout(ctx.config))


def _external(ctx: NodeContext) -> Outcome:
    event_type = str(ctx.config.get("eventType") or ctx.config.get("title") or f"{ctx.node_id}.event")
    correlation = ctx.config.get("correlation")
    return Suspend(
        "external-event",
        {
            "eventType": event_type,
            "correlation": correlation if isinstance(correlation, dict) else {"nodeId": ctx.node_id},
        },
        _timeout(ctx.config),
    )


_VERSIONS = ("auto", "1.0", "0.3")


def _files_to_send(value: Any) -> tuple[PeerFile, ...] | str:
    """The file parts a hand-off's ``files`` input holds, in order; a string saying what is wrong otherwise.

    The input is a file part, a list of parts, or a message (anything with ``parts``: the
    run's ``message``, a node's ``message`` output). Its other parts are not sent: the text
    and data go as ``prompt`` and ``data``. A file is given as the run holds it, by
    reference (a blob of this run, whose bytes the follower reads at the send) or by URI.
    """
    if value is None:
        return ()
    if isinstance(value, dict) and value.get("kind") != "file" and isinstance(value.get("parts"), list):
        value = value["parts"]
    parts = value if isinstance(value, list) else [value]
    files: list[PeerFile] = []
    for index, part in enumerate(parts):
        where = f"files.{index}" if isinstance(value, list) else "files"
        if not isinstance(part, dict):
            return f"{where} must be an A2A part, a list of parts or a message with parts"
        if part.get("kind") != "file":
            if part.get("kind") in ("text", "data"):
                continue
            return f"{where} must be an A2A part, a list of parts or a message with parts"
        file = part.get("file")
        if not isinstance(file, dict):
            return f"{where}.file must be an object"
        name, media_type = file.get("name"), file.get("mimeType")
        name = name if isinstance(name, str) and name else None
        media_type = media_type if isinstance(media_type, str) and media_type else None
        blob, uri = file.get("blob"), file.get("uri")
        if isinstance(blob, str) and DIGEST.fullmatch(blob):
            files.append(PeerFile(blob=blob, name=name, media_type=media_type))
        elif isinstance(uri, str) and uri:
            files.append(PeerFile(uri=uri, name=name, media_type=media_type))
        elif "bytes" in file:
            return (
                f"{where} carries its bytes inline: give the hand-off a file this run holds (one of the "
                "message that started it, or one a node made) or a URI"
            )
        else:
            return f"{where}.file must name a blob (sha256:…) of this run or a uri"
    return tuple(files)


def _handoff(ctx: NodeContext) -> Outcome:
    """Check the config and say whom to call with what; the engine's hand-off follower does the rest."""
    config = ctx.config
    agent = config.get("agent")
    if not isinstance(agent, str) or not agent.strip():
        return Failed("config_validation_failed", f"node {ctx.node_id!r}: config.agent must be the peer's URL")
    version = str(config.get("version") or "auto")
    if version not in _VERSIONS:
        return Failed("config_validation_failed", f"node {ctx.node_id!r}: config.version must be auto, 1.0 or 0.3")
    for name in ("skill", "credential"):
        if config.get(name) is not None and not isinstance(config[name], str):
            return Failed("config_validation_failed", f"node {ctx.node_id!r}: config.{name} must be a string")
    prompt = ctx.inputs.get("prompt")
    data = ctx.inputs.get("data")
    if prompt is not None and not isinstance(prompt, str):
        prompt = str(prompt)
    if data is not None and not isinstance(data, dict):
        return Failed("node_execution_failed", f"node {ctx.node_id!r}: input data must be an object")
    files = _files_to_send(ctx.inputs.get("files"))
    if isinstance(files, str):
        return Failed("node_execution_failed", f"node {ctx.node_id!r}: input {files}")
    if prompt is None and data is None and not files:
        return Failed("node_execution_failed", f"node {ctx.node_id!r}: give the peer a prompt, data or files")
    timeout = config.get("timeout", config.get("timeoutMs"))
    call = PeerCall(agent.strip(), config.get("skill"), config.get("credential"), version, prompt, data, files=files)
    if isinstance(timeout, int) and not isinstance(timeout, bool) and timeout > 0:
        return CallPeer(call, timeout)
    return CallPeer(call)


HANDLERS: dict[str, Handler] = {
    "core.noop": _noop,
    "core.identity": _identity,
    "core.fail": _fail,
    "core.delay": _delay,
    "core.approvalGate": _approval,
    "core.clarificationGate": _clarification,
    "core.interrupt": _external,
    "vendor.tether.template": _template,
    HANDOFF_TYPE: _handoff,
}

SUPPORTED_TYPE_IDS = frozenset(HANDLERS)


def _conformance_invoke(peer_url: str) -> Handler:
    """A hand-off under the conformance fixtures' names: the peer is the configured conformance peer.

    The fixture ``conformance-a2a-task-roundtrip`` names no agent (its node says only
    ``skill: echo``) and maps no input, so the agent defaults to ``peer_url`` and, with no
    ``prompt`` or ``data``, the run's variables (e.g. ``driftScenario``) are sent as data.
    """

    def invoke(ctx: NodeContext) -> Outcome:
        config = {"agent": peer_url, **ctx.config}
        inputs = ctx.inputs
        if inputs.get("prompt") is None and inputs.get("data") is None:
            inputs = {**inputs, "data": dict(ctx.variables)}
        return _handoff(replace(ctx, config=config, inputs=inputs))

    return invoke


def node_handlers(*, test_seams: bool = False, conformance_peer: str | None = None) -> dict[str, Handler]:
    """The node types a host runs: every one in ``HANDLERS``, plus, with the test seams on and a
    conformance peer set, a hand-off under the conformance fixtures' names (``HANDOFF_ALIASES``).

    Without a peer those names stay unknown, so a fixture that uses them is not executable and
    is never advertised: the bridge is offered only when it can really run.
    """
    handlers = dict(HANDLERS)
    if test_seams and conformance_peer:
        invoke = _conformance_invoke(conformance_peer)
        handlers.update(dict.fromkeys(HANDOFF_ALIASES, invoke))
    return handlers
