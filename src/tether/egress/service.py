"""The egress side of a host, built once at the root: guard, sealed secrets, client, worker."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

import httpx

from tether.egress.guard import EgressGuard, EgressPolicy, Resolver
from tether.egress.outbox import OutboxWorker, PushBody, RetrySchedule, WebhookBody, as_stored, webhook_as_stored
from tether.egress.transport import DEFAULT_MAX_RESPONSE_BYTES, build_egress_client, make_ssl_context
from tether.secrets import SecretBox
from tether.settings import Settings
from tether.store.base import Store


@dataclass(slots=True)
class Egress:
    """Everything that sends bytes out of the host, and the one client that does it."""

    guard: EgressGuard
    box: SecretBox
    client: httpx.AsyncClient
    worker: OutboxWorker
    #: hand-offs' client: the same guard, reading answers as long as a peer's files may make them
    handoff_client: httpx.AsyncClient
    _task: asyncio.Task[None] | None = field(default=None)

    def start(self) -> None:
        if self._task is not None:
            raise RuntimeError("the outbox worker is already running")
        self._task = asyncio.create_task(self.worker.run(), name="tether-outbox")

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
        await self.client.aclose()
        await self.handoff_client.aclose()


def build_egress(
    settings: Settings,
    store: Store,
    host_key: bytes,
    *,
    owner: str = "local",
    resolver: Resolver | None = None,
    push_body: PushBody = as_stored,
    webhook_body: WebhookBody = webhook_as_stored,
    handoff_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
) -> Egress:
    """Validate the egress switches and build the guarded clients and the outbox worker.

    ``handoff_response_bytes``: the longest answer a hand-off reads from a peer (a task with
    files is as long as its files in base64). Pushes and webhooks keep the default cap: a
    receiver's answer is only a status.
    """
    guard = EgressGuard(EgressPolicy(allow_cidrs=settings.egress_allow_cidrs), resolver)
    tls = make_ssl_context(settings.egress_ca_bundle)
    client = build_egress_client(guard, tls)
    handoff_client = build_egress_client(guard, tls, max_response_bytes=handoff_response_bytes)
    box = SecretBox(host_key)
    worker = OutboxWorker(
        store,
        client,
        box,
        RetrySchedule.parse(settings.push_retry_schedule),
        owner=owner,
        fallback=settings.fallback_poll_seconds if store.shared else None,
        concurrency=settings.delivery_concurrency,
        # outcome writes at once: SQLite's writer process puts every write waiting into one
        # transaction, so they go as they come; on PostgreSQL each takes a pooled connection,
        # and four at most leave the pool to the requests
        recording=4 if store.shared else None,
        push_body=push_body,
        webhook_body=webhook_body,
    )
    return Egress(guard, box, client, worker, handoff_client)
