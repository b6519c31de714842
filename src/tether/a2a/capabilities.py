"""What the A2A surface really serves, computed once from the settings.

The agent card, the ``a2a`` block of ``/.well-known/openwop`` and the JSON-RPC router
all read :func:`a2a_capabilities`, so a flag can never be advertised in one place and
refused (or served) in another (OpenWOP invariant ``a2a-card-runtime-consistent``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tether.settings import Settings

__all__ = ["AGENT_CARD_PATH", "LEGACY_CARD_PATH", "RPC_PATH", "TRANSPORT", "A2ACapabilities", "a2a_capabilities"]

#: the discovery transport name, and the ``transport`` of runs started over A2A
TRANSPORT = "a2a"

#: the v0.3 well-known card path (public)
AGENT_CARD_PATH = "/.well-known/agent-card.json"
#: the same card beside the endpoint, for clients that look there
LEGACY_CARD_PATH = "/v1/a2a/agent.json"
#: the JSON-RPC 2.0 endpoint named by the card's ``url``
RPC_PATH = "/v1/a2a"


@dataclass(frozen=True, slots=True)
class A2ACapabilities:
    """The A2A feature flags of this host; each one is true only when it is served."""

    base_url: str
    streaming: bool
    push_notifications: bool
    durable_tasks: bool
    protocol_versions: tuple[str, ...] = ("0.3",)
    preferred_version: str = "0.3"
    profiles: tuple[str, ...] = ("a2a-0.3-legacy",)

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
    return A2ACapabilities(base_url=settings.base_url, streaming=True, push_notifications=True, durable_tasks=True)
