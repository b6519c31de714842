"""What the A2A surface really serves, computed once from the settings.

The agent cards, the ``a2a`` block of ``/.well-known/openwop`` (v1) and the ``a2a``
family of the v2 root, and the JSON-RPC router all read :func:`a2a_capabilities`, so a
flag can never be advertised in one place and refused (or served) in another (OpenWOP
invariant ``a2a-card-runtime-consistent``).

Two interfaces: ``/v1/a2a`` (0.3 and 1.0, bare task ids, with the 1.0 HTTP+JSON binding
beside it) for the clients that have always used it, and ``/a2a``, the 1.0 JSON-RPC
interface the OpenWOP v2 root advertises, whose task ids are bound run ids
(:mod:`tether.a2a.v1_0.bound`), with a card of its own that lists it alone.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from typing import Any

from tether.a2a.versions import SUPPORTED, Version
from tether.settings import Settings

__all__ = [
    "AGENT_CARD_PATH",
    "LEGACY_CARD_PATH",
    "REST_PATH",
    "RPC_PATH",
    "TRANSPORT",
    "V2_CARD_PATH",
    "V2_RPC_PATH",
    "VERSIONS_REVIEWED",
    "A2ACapabilities",
    "a2a_capabilities",
]

#: the discovery transport name, and the ``transport`` of runs started over A2A
TRANSPORT = "a2a"

#: the v0.3 well-known card path (public)
AGENT_CARD_PATH = "/.well-known/agent-card.json"
#: the same card beside the endpoint, for clients that look there
LEGACY_CARD_PATH = "/v1/a2a/agent.json"
#: the JSON-RPC 2.0 endpoint (0.3 and 1.0) named by the card's ``url``
RPC_PATH = "/v1/a2a"
#: the base of the A2A 1.0 HTTP+JSON binding
REST_PATH = "/v1/a2a/rest"
#: the 1.0 JSON-RPC interface the OpenWOP v2 root advertises (task ids are bound run ids there)
V2_RPC_PATH = "/a2a"
#: its agent card, where A2A clients look for one when given the interface's URL as the agent's
V2_CARD_PATH = "/a2a/.well-known/agent-card.json"
#: when the A2A versions the v2 root offers were last checked against A2A's released versions (``refreshedAt``).
#: Move it, in the commit that does, whenever they are checked again: OpenWOP allows 90 days (RFC 0175 §D.4),
#: after which the advertisement is stale and a test says so
VERSIONS_REVIEWED = date(2026, 12, 8)
#: the OpenWOP discovery profile of each version
_PROFILES = {Version.V1_0: "a2a-1.0", Version.V0_3: "a2a-0.3-legacy", Version.V1_1: "a2a-1.1-draft"}


@dataclass(frozen=True, slots=True)
class A2ACapabilities:
    """The A2A feature flags of this host; each one is true only when it is served."""

    base_url: str
    streaming: bool
    push_notifications: bool
    durable_tasks: bool
    #: the authenticated extended card (``GetExtendedAgentCard``) is served
    extended_card: bool = True
    #: the versions served on the JSON-RPC endpoint, most preferred first
    versions: tuple[Version, ...] = SUPPORTED
    #: draft versions served to callers that ask for them by name, advertised nowhere
    draft_versions: tuple[Version, ...] = (Version.V1_1,)
    #: ``--a2a-skill``: the only workflows that are skills (empty: every loaded one)
    skills: tuple[str, ...] = ()

    @property
    def accepted(self) -> tuple[Version, ...]:
        """Every version a request may ask for: the advertised ones, then the drafts."""
        return self.versions + self.draft_versions

    @property
    def protocol_versions(self) -> tuple[str, ...]:
        return tuple(v.value for v in self.versions)

    @property
    def preferred_version(self) -> str:
        return self.versions[0].value

    @property
    def profiles(self) -> tuple[str, ...]:
        return tuple(_PROFILES[v] for v in self.versions)

    @property
    def rest_url(self) -> str:
        """The base URL of the 1.0 HTTP+JSON binding."""
        return f"{self.base_url}{REST_PATH}"

    def supported_interfaces(self) -> list[dict[str, str]]:
        """The card's ``supportedInterfaces``, in preference order: each (url, binding, version) served."""
        interfaces = [
            {"url": self.rpc_url, "protocolBinding": "JSONRPC", "protocolVersion": v.value} for v in self.versions
        ]
        if Version.V1_0 in self.versions:
            interfaces.insert(1, {"url": self.rest_url, "protocolBinding": "HTTP+JSON", "protocolVersion": "1.0"})
        return interfaces

    @property
    def transports(self) -> tuple[str, ...]:
        """What ``supportedTransports`` gains from this surface."""
        return (TRANSPORT,)

    @property
    def rpc_url(self) -> str:
        return f"{self.base_url}{RPC_PATH}"

    @property
    def agent_card_url(self) -> str:
        return f"{self.base_url}{AGENT_CARD_PATH}"

    @property
    def v2_rpc_url(self) -> str:
        return f"{self.base_url}{V2_RPC_PATH}"

    @property
    def v2_card_url(self) -> str:
        return f"{self.base_url}{V2_CARD_PATH}"

    def v2_interfaces(self) -> list[dict[str, str]]:
        """The v2 card's ``supportedInterfaces``: the one interface it routes, 1.0 JSON-RPC with bound ids."""
        return [{"url": self.v2_rpc_url, "protocolBinding": "JSONRPC", "protocolVersion": Version.V1_0.value}]

    def v2_facets(self) -> dict[str, Any]:
        """The facets of the v2 root's ``a2a`` family (RFC 0100's block at major 2), beside its status and witness.

        Only 1.0 is offered there (0.3 stays on ``/v1/a2a`` and the v1 document), so it is
        both the preferred version and the floor; the flags are the card's.
        """
        return {
            "versions": [Version.V1_0.value],
            "preferredVersion": Version.V1_0.value,
            "minimumVersion": Version.V1_0.value,
            "refreshedAt": VERSIONS_REVIEWED.isoformat(),
            "profiles": [_PROFILES[Version.V1_0]],
            "agentCardUrl": self.v2_card_url,
            "streaming": self.streaming,
            "pushNotifications": self.push_notifications,
            "durableTasks": self.durable_tasks,
        }

    def discovery_block(self) -> dict[str, Any]:
        """The root ``a2a`` family of ``/.well-known/openwop`` (RFC 0100 §1, RFC 0152 §A)."""
        return {
            "supported": True,
            "agentCardUrl": self.agent_card_url,
            "streaming": self.streaming,
            "pushNotifications": self.push_notifications,
            "durableTasks": self.durable_tasks,
            "protocolVersions": list(self.protocol_versions),
            "preferredVersion": self.preferred_version,
            "profiles": list(self.profiles),
        }


def a2a_capabilities(settings: Settings) -> A2ACapabilities:
    """The flags for a host built from ``settings``.

    Streaming (``message/stream``, ``tasks/resubscribe``), durable task records and push
    notifications (guarded URLs, a durable outbox) are always served.
    """
    return A2ACapabilities(
        base_url=settings.base_url,
        streaming=True,
        push_notifications=True,
        durable_tasks=True,
        skills=settings.a2a_skills,
    )
