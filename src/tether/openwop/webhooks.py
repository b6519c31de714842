"""OpenWOP webhooks: subscribe, unsubscribe, and the operators' view of the outbox."""

from __future__ import annotations

import functools
import secrets as random_secrets
from typing import Any, Literal

import orjson
from fastapi import APIRouter, Depends, Query, Request
from pydantic import BaseModel, ConfigDict, Field
from starlette.responses import Response

from tether import clock
from tether.errors import Forbidden, InvalidInput, NotFound
from tether.http.openapi import AUTHENTICATED, JSON_BODY, refusals
from tether.http.requests import body_schema, json_body, parse_model, require
from tether.http.responses import json_response
from tether.ids import new_id
from tether.openwop.models import ID_MAX, DeliveryStatus
from tether.openwop.surface import rest_of
from tether.store.base import DeliveryRow, Extra, Fanout, RunRow, WebhookRow
from tether.types import DeliveryKind, Principal

router = APIRouter(tags=["webhooks"])


class RegisterWebhook(BaseModel):
    """``events`` (or its older name ``eventTypes``) lists at least one run event type."""

    model_config = ConfigDict(
        extra="forbid",
        strict=True,
        json_schema_extra={"anyOf": [{"required": ["events"]}, {"required": ["eventTypes"]}]},
    )

    url: str = Field(min_length=1, max_length=2048, description="An https URL on a public address.")
    events: list[str] | None = Field(default=None, min_length=1, max_length=100)
    eventTypes: list[str] | None = Field(default=None, min_length=1, max_length=100)
    tenantId: str | None = Field(default=None, max_length=ID_MAX)
    secret: str | None = Field(default=None, max_length=512, description="Under 32 characters: one is made.")
    tags: list[str] = Field(default_factory=list, max_length=100)


class Webhook(BaseModel):
    """A subscription as created: the only answer that shows its secret."""

    webhookId: str
    subscriptionId: str
    url: str
    secret: str
    secretFingerprint: str
    events: list[str]
    eventTypes: list[str]
    tags: list[str]
    createdAt: str
    signatureAlgorithm: Literal["v1"]


class Delivery(BaseModel):
    deliveryId: str
    kind: DeliveryKind
    targetId: str
    runId: str
    sequence: int
    url: str
    status: DeliveryStatus
    attempts: int
    nextAttemptAt: str
    lastError: str | None
    createdAt: str
    updatedAt: str


class DeliveryList(BaseModel):
    deliveries: list[Delivery]


class Redelivery(BaseModel):
    deliveryId: str
    status: Literal["pending"]


def webhook_fanout(before: RunRow | None, after: RunRow, events: list[dict[str, Any]]) -> list[Extra]:
    """Every committed run event is offered to the tenant's webhooks (matched in the write; rendered if one matches)."""
    tags = list(after.state.get("tags", []))
    return [
        Fanout(
            kind="webhook",
            tenant=after.tenant,
            run_id=after.run_id,
            sequence=event["sequence"],
            body=functools.partial(orjson.dumps, {"runId": after.run_id, "workspaceId": after.tenant, "event": event}),
            event_type=event["type"],
            tags=tags,
        )
        for event in events
    ]


@router.post(
    "/v1/webhooks",
    status_code=201,
    response_model=Webhook,
    responses=refusals(*AUTHENTICATED, *JSON_BODY),
    openapi_extra=body_schema(RegisterWebhook),
)
async def register_webhook(request: Request, principal: Principal = Depends(require("webhooks:manage"))) -> Response:
    """Subscribe an https URL to run events; the signing secret is shown only in this answer."""
    rest = rest_of(request)
    body: RegisterWebhook = parse_model(RegisterWebhook, await json_body(request))
    if body.tenantId is not None and body.tenantId != principal.tenant:
        raise Forbidden("tenantId names a tenant this API key does not belong to")
    events = body.events if body.events is not None else body.eventTypes
    if not events:
        raise InvalidInput("events must list at least one run event type", details={"field": "events"})
    try:
        await rest.guard.resolve_and_check(body.url)
    except InvalidInput as exc:
        raise InvalidInput(
            exc.message, code="webhook_url_rejected", details={"url": body.url, **(exc.details or {})}
        ) from exc
    secret = body.secret if body.secret and len(body.secret) >= 32 else random_secrets.token_hex(32)
    webhook_id = new_id("wh_")
    now = clock.now_iso()
    fingerprint = rest.box.fingerprint(secret)
    await rest.store.put_webhook(
        WebhookRow(
            webhook_id,
            principal.tenant,
            body.url,
            list(events),
            list(body.tags),
            rest.box.seal(secret, context=f"webhook:{webhook_id}"),
            fingerprint,
            now,
        )
    )
    return json_response(
        {
            "webhookId": webhook_id,
            "subscriptionId": webhook_id,
            "url": body.url,
            "secret": secret,
            "secretFingerprint": fingerprint,
            "events": list(events),
            "eventTypes": list(events),
            "tags": list(body.tags),
            "createdAt": now,
            "signatureAlgorithm": "v1",
        },
        201,
    )


@router.delete("/v1/webhooks/{webhook_id}", status_code=204, responses=refusals(*AUTHENTICATED, 404))
async def delete_webhook(
    request: Request,
    webhook_id: str,
    tenantId: str | None = Query(default=None),
    principal: Principal = Depends(require("webhooks:manage")),
) -> Response:
    """Unsubscribe; pending deliveries to it are dropped at their next attempt."""
    if tenantId is not None and tenantId != principal.tenant:
        raise Forbidden("tenantId names a tenant this API key does not belong to")
    if not await rest_of(request).store.delete_webhook(principal.tenant, webhook_id):
        raise NotFound(f"no webhook {webhook_id!r}", code="subscription_not_found")
    return Response(status_code=204)


def delivery_view(row: DeliveryRow) -> dict[str, Any]:
    """A delivery as operators see it: where it goes and how it fared, never a secret."""
    return {
        "deliveryId": row.delivery_id,
        "kind": row.kind,
        "targetId": row.target_id,
        "runId": row.run_id,
        "sequence": row.sequence,
        "url": row.url,
        "status": row.status,
        "attempts": row.attempts,
        "nextAttemptAt": row.next_attempt_at,
        "lastError": row.last_error,
        "createdAt": row.created_at,
        "updatedAt": row.updated_at,
    }


@router.get("/v1/deliveries", response_model=DeliveryList, responses=refusals(*AUTHENTICATED, 400))
async def list_deliveries(
    request: Request,
    status: DeliveryStatus | None = Query(default=None, description="``dead`` lists the dead letters."),
    kind: DeliveryKind | None = Query(default=None, description="Only webhooks, A2A pushes or run callbacks."),
    limit: int = Query(default=100, ge=1, le=1000),
    principal: Principal = Depends(require("webhooks:manage")),
) -> Response:
    """Outbound deliveries of the caller's tenant (``status=dead`` lists dead letters), newest first."""
    rows = await rest_of(request).store.list_deliveries(principal.tenant, status, limit, kind)
    return json_response({"deliveries": [delivery_view(r) for r in rows]})


@router.post(
    "/v1/deliveries/{delivery_id}/redeliver", response_model=Redelivery, responses=refusals(*AUTHENTICATED, 404)
)
async def redeliver(
    request: Request, delivery_id: str, principal: Principal = Depends(require("webhooks:manage"))
) -> Response:
    """Put a dead letter back in line; it is attempted again on the whole ladder."""
    rest = rest_of(request)
    if not await rest.store.redeliver(delivery_id, principal.tenant, clock.now_iso()):
        raise NotFound(f"no dead delivery {delivery_id!r}")
    rest.outbox.wake()
    return json_response({"deliveryId": delivery_id, "status": "pending"})
