"""What the A2A surface works with, handed in by the composition root."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from starlette.requests import Request

from tether.a2a.capabilities import A2ACapabilities
from tether.auth.keys import KeyVerifier
from tether.egress.guard import EgressGuard
from tether.engine.engine import Engine
from tether.engine.follow import RunLogs
from tether.engine.registry import WorkflowRegistry
from tether.secrets import SecretBox
from tether.settings import Settings
from tether.store.base import Store


class Prober(Protocol):
    """The hand-offs' A2A client as the invoke seam uses it (``tether.a2a.peer.client.PeerClient``)."""

    async def probe(self, agent: str, asked: str) -> str: ...


__all__ = ["A2ASurface", "Prober", "a2a_of"]


@dataclass(frozen=True, slots=True)
class A2ASurface:
    """The collaborators of ``/v1/a2a``, the agent card and the A2A seams: no more, no less."""

    settings: Settings
    #: what this surface serves, computed once: the card, the endpoint and discovery read it
    capabilities: A2ACapabilities
    store: Store
    engine: Engine
    registry: WorkflowRegistry
    logs: RunLogs
    verifier: KeyVerifier
    #: checks push URLs before anything is stored
    guard: EgressGuard
    #: seals push tokens and credentials
    box: SecretBox
    #: the hand-offs' A2A client (the invoke seam's ``requestVersion`` probes a peer with it)
    peers: Prober | None = None

    @property
    def anonymous(self) -> bool:
        """A public agent: keyless A2A callers are served (``--a2a-anonymous-tenant``)."""
        return self.settings.a2a_anonymous_tenant is not None


def a2a_of(request: Request) -> A2ASurface:
    """The A2A surface of the app serving ``request`` (put on its state by the lifespan)."""
    surface: A2ASurface = request.app.state.a2a
    return surface
