"""The A2A agent card (1.0 and 0.3 in one document): what this host serves, computed, never hand-written.

Skills are the workflows routing accepts (:func:`tether.a2a.skills.served_skills`),
capability flags come from :class:`~tether.a2a.capabilities.A2ACapabilities`, and the
security block describes the bearer key that ``/v1/a2a`` really enforces: required, or
(on a public agent, ``--a2a-anonymous-tenant``) a scheme declared but not required.
"""

from __future__ import annotations

from typing import Any

from tether import __version__
from tether.a2a.capabilities import A2ACapabilities
from tether.a2a.skills import INPUT_MODES, OUTPUT_MODES, served_skills
from tether.engine.registry import Entry, WorkflowRegistry

__all__ = ["agent_card", "strict_v10", "v2_card"]


def _skill(entry: Entry) -> dict[str, Any]:
    wf = entry.workflow
    tags = [t for t in wf.metadata.get("tags", []) if isinstance(t, str)] or ["workflow"]
    variables = ", ".join(v.name + ("" if v.required else "?") for v in wf.variables)
    description = wf.description or wf.name
    if variables:
        description += f" (inputs: {variables}; text parts become 'prompt', data parts merge into the inputs)"
    return {
        "id": wf.id,
        "name": wf.name,
        "description": description,
        "tags": tags,
        "inputModes": list(INPUT_MODES),
        "outputModes": list(OUTPUT_MODES),
    }


_LEGACY_KEYS = (
    "protocolVersion",
    "url",
    "preferredTransport",
    "additionalInterfaces",
    "security",
    "supportsAuthenticatedExtendedCard",
)


def _bearer(anonymous: bool) -> dict[str, Any]:
    """The one security scheme, in both shapes: the 1.0 member-keyed one and the 0.3 flat one."""
    scheme = {
        "scheme": "bearer",
        "bearerFormat": "tk_<key id>_<secret>",
        "description": "A Tether API key (tether keys create), sent as 'Authorization: Bearer <key>'"
        + ("; optional here: a call without one acts as this agent's anonymous caller" if anonymous else ""),
    }
    return {"httpAuthSecurityScheme": dict(scheme), "type": "http", **scheme}


def agent_card(
    capabilities: A2ACapabilities,
    registry: WorkflowRegistry,
    default_skill: str,
    *,
    anonymous: bool = False,
    keyed: bool = False,
) -> dict[str, Any]:
    """The card served at ``/.well-known/agent-card.json``: one document both generations of clients read.

    The full 1.0 card (``supportedInterfaces`` in preference order, 1.0 JSON-RPC first;
    ``securitySchemes`` keyed by member; ``securityRequirements``) beside the 0.3
    top-level fields (``protocolVersion``, ``url``, ``preferredTransport``, the flat scheme
    keys, ``security``): 1.x parsers ignore the 0.3 fields and 0.3 parsers the 1.0 ones.

    ``anonymous``: keyless calls are served, so the card requires no security (an absent
    requirement, which both versions read as "none"); ``securitySchemes`` still says how a
    caller with a key presents it. The extended card is advertised there only on the card
    a key holder is given (``keyed``): the public card is read by keyless callers, who
    cannot have it (A2A: the client must authenticate for it), and a client that sees
    the flag fetches it.
    """
    extended = capabilities.extended_card and (keyed or not anonymous)
    card: dict[str, Any] = {
        "name": "Tether",
        "description": (
            "An OpenWOP host whose workflow runs are durable A2A tasks: tasks survive disconnects and host "
            "restarts, pause for human approval or answers (input-required), and can be re-attached without loss. "
            f"Name a skill with message.metadata.skillId; without one, '{default_skill}' runs."
        ),
        "supportedInterfaces": capabilities.supported_interfaces(),
        "version": __version__,
        "capabilities": {
            "streaming": capabilities.streaming,
            "pushNotifications": capabilities.push_notifications,
            "extendedAgentCard": extended,
        },
        "securitySchemes": {"bearer": _bearer(anonymous)},
        "securityRequirements": [{"schemes": {"bearer": {}}}],
        "defaultInputModes": list(INPUT_MODES),
        "defaultOutputModes": list(OUTPUT_MODES),
        "skills": [_skill(e) for e in served_skills(registry, capabilities.skills)],
        # A2A 0.3, for the clients of that generation
        "protocolVersion": "0.3.0",
        "url": capabilities.rpc_url,
        "preferredTransport": "JSONRPC",
        "additionalInterfaces": [{"url": capabilities.rpc_url, "transport": "JSONRPC"}],
        "security": [{"bearer": []}],
        "supportsAuthenticatedExtendedCard": extended,
    }
    if anonymous:
        del card["security"], card["securityRequirements"]
    return card


def strict_v10(card: dict[str, Any]) -> dict[str, Any]:
    """The card with only A2A 1.0 fields: what a caller that says ``A2A-Version: 1.0`` is served.

    Validators built from the 1.0 proto reject unknown fields, the 0.3 ones included.
    """
    strict = {k: v for k, v in card.items() if k not in _LEGACY_KEYS}
    strict["securitySchemes"] = {
        name: {k: v for k, v in scheme.items() if k.endswith("SecurityScheme")}
        for name, scheme in card["securitySchemes"].items()
    }
    return strict


def v2_card(capabilities: A2ACapabilities, card: dict[str, Any]) -> dict[str, Any]:
    """The card of the interface the OpenWOP v2 root advertises: the strict 1.0 ``card``, listing that interface alone.

    Only what is routed there is listed (1.0 JSON-RPC, task ids bound), so a 1.x client
    given it can only pick that interface; ``/v1/a2a`` keeps its own card.
    """
    return {**strict_v10(card), "supportedInterfaces": capabilities.v2_interfaces()}
