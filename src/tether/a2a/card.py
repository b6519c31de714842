"""The A2A v0.3 agent card: what this host serves, computed, never hand-written.

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

__all__ = ["agent_card"]


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


def agent_card(
    capabilities: A2ACapabilities, registry: WorkflowRegistry, default_skill: str, *, anonymous: bool = False
) -> dict[str, Any]:
    """The public card served at ``/.well-known/agent-card.json``.

    ``anonymous``: keyless calls are served, so the card has no ``security`` requirement
    (an absent one, not an empty list: the v0.3 schema and A2A 1.0's
    ``securityRequirements`` both read absence as "none"); ``securitySchemes`` still says
    how a caller with a key presents it.
    """
    card: dict[str, Any] = {
        "protocolVersion": "0.3.0",
        "name": "Tether",
        "description": (
            "An OpenWOP host whose workflow runs are durable A2A tasks: tasks survive disconnects and host "
            "restarts, pause for human approval or answers (input-required), and can be re-attached without loss. "
            f"Name a skill with message.metadata.skillId; without one, '{default_skill}' runs."
        ),
        "url": capabilities.rpc_url,
        "preferredTransport": "JSONRPC",
        "additionalInterfaces": [{"url": capabilities.rpc_url, "transport": "JSONRPC"}],
        "version": __version__,
        "capabilities": {
            "streaming": capabilities.streaming,
            "pushNotifications": capabilities.push_notifications,
            "stateTransitionHistory": False,
        },
        "securitySchemes": {
            "bearer": {
                "type": "http",
                "scheme": "bearer",
                "bearerFormat": "tk_<key id>_<secret>",
                "description": "A Tether API key (tether keys create), sent as 'Authorization: Bearer <key>'"
                + ("; optional here: a call without one acts as this agent's anonymous caller" if anonymous else ""),
            }
        },
        "security": [{"bearer": []}],
        "defaultInputModes": list(INPUT_MODES),
        "defaultOutputModes": list(OUTPUT_MODES),
        "skills": [_skill(e) for e in served_skills(registry)],
        "supportsAuthenticatedExtendedCard": False,
    }
    if anonymous:
        del card["security"]
    return card
