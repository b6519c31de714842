"""What the OpenWOP REST surface works with, handed in by the composition root."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from starlette.requests import Request

from tether.egress.guard import EgressGuard
from tether.egress.outbox import OutboxWorker
from tether.engine.engine import Engine
from tether.engine.follow import RunLogs
from tether.engine.notifier import Notifier
from tether.engine.registry import WorkflowRegistry
from tether.engine.run_feed import RunFeed
from tether.errors import InvalidInput
from tether.openwop.tokens import TokenSigner
from tether.secrets import SecretBox
from tether.settings import Settings
from tether.store.base import Store

__all__ = ["RestSurface", "rest_of"]


@dataclass(frozen=True, slots=True)
class RestSurface:
    """The collaborators of the REST routes: no more, no less."""

    settings: Settings
    store: Store
    engine: Engine
    registry: WorkflowRegistry
    notifier: Notifier
    logs: RunLogs
    #: every run change of the host: what ``GET /v1/runs:watch`` follows
    feed: RunFeed
    signer: TokenSigner
    #: checks webhook and callback URLs before anything is stored
    guard: EgressGuard
    #: seals webhook secrets
    box: SecretBox
    #: woken when a redelivery is due
    outbox: OutboxWorker
    #: what the other surfaces add to discovery: their ``supportedTransports`` and root families
    transports: tuple[str, ...] = ()
    families: Mapping[str, Mapping[str, Any]] | None = None
    #: what they add to the v2 root: whole family records (``a2a``)
    v2_families: Mapping[str, Mapping[str, Any]] | None = None

    async def check_callback(self, url: str) -> None:
        """A run's ``callbackUrl`` through the egress guard before anything is stored; a refusal names the field."""
        try:
            await self.guard.resolve_and_check(url)
        except InvalidInput as exc:
            details = {"field": "callbackUrl", **(exc.details or {})}
            raise InvalidInput(f"callbackUrl: {exc.message}", details=details) from exc


def rest_of(request: Request) -> RestSurface:
    """The REST surface of the app serving ``request`` (put on its state by the lifespan)."""
    surface: RestSurface = request.app.state.rest
    return surface
