"""Webhooks at major 2: register, unregister, the dead-letter read, and what a v2 subscriber receives.

One store and one outbox serve both majors. A subscription remembers the major it was
registered under (``WebhookRow.major``) and its events in stored (v1) spelling, so the
fan-out that writes outbox rows in a run's own commit matches it as it matches any other.
What differs is made at the edges: here, the closed v2 register body, bound ids and v2
codes; in the outbox, through :func:`webhook_body`, a v2 subscriber's delivery body
``{runId, event}`` (bound run id, the v2 ``RunEventDoc``; no ``workspaceId``: Tether has no
workspaces and must not put its tenant there), all five ``OpenWOP-*`` headers beside their
``X-openwop-*`` twins, and the advertised retry policy.

The retry policy is exponential: ``--webhook-max-attempts`` attempts (4), the first retry
``--webhook-first-retry`` seconds (1) after the first failure and each later one twice as
long (each ±10 %, so a gap is at least 1.6 times the one before; the suite asks 1.25);
every failed attempt is retried, a 3xx or a 4xx too. At the defaults a delivery is spent in
about 7 s, well inside the conformance suite's wait (20 s, up to 90 s with exponential
backoff); production hosts raise both. A spent delivery is a dead letter, read (never its body, headers or secret) at
``GET /webhooks/{id}/dead-letters`` for as long as runs are kept (``--task-retention``):
a run is not purged while it has a dead letter younger than that window.
"""

from __future__ import annotations

import base64
import binascii
import re
import secrets as random_secrets
from datetime import timedelta
from typing import Annotated, Any, Literal

import orjson
from cryptography.exceptions import InvalidTag
from fastapi import APIRouter, Depends, Path, Query, Request
from pydantic import BaseModel, ConfigDict, Field
from starlette.responses import Response

from tether import clock
from tether.egress.guard import EgressRefused
from tether.egress.outbox import RetrySchedule, WebhookBody, WebhookDelivery, webhook_as_stored
from tether.errors import InvalidInput, NotFound, TetherError
from tether.http.openapi import AUTHENTICATED, JSON_BODY, refusals
from tether.http.requests import body_schema, json_body, parse_model, require
from tether.http.responses import json_response
from tether.ids import new_id
from tether.openwop.surface import rest_of
from tether.openwop.v2.discovery import family
from tether.openwop.v2.eventlog import KEPT, RENAMED, v1_type, v2_event, v2_type
from tether.openwop.v2.ids import bind, opaque_of, unproject
from tether.secrets import SecretBox
from tether.settings import Settings
from tether.store.base import DeliveryRow, WebhookRow
from tether.types import Principal

__all__ = ["MAJOR", "retry_schedule", "router", "webhook_body", "webhooks_family"]

router = APIRouter(tags=["webhooks (v2)"])

#: the major a subscription made here is registered under
MAJOR = 2
#: a supplied signing secret shorter than this is refused (one made here is 64 hex digits)
SECRET_MIN = 32
#: dead letters per page at most (``deadLetter.maxPageSize``); a larger ``limit`` is clamped to it
DEAD_LETTER_PAGE_MAX = 100
_DEAD_LETTER_PAGE = 50
#: ``deadLetter.retentionDays`` when runs are kept forever (``--task-retention 0``)
_FOREVER_DAYS = 36500
_DAY = 86400.0
#: the v2 ladder's jitter: narrower than the host ladder's ±20 %, so its gaps always visibly widen
_JITTER = 0.1
#: the v2 event type names (the codemap's v2 column): what ``events[]`` may list
V2_EVENT_TYPES: frozenset[str] = KEPT | frozenset(RENAMED.values())
_HTTP_STATUS = re.compile(r"^HTTP (\d{3})\b")
_UNRENDERABLE = ("payload_unprojectable", "event_type_unmapped")

#: a webhook id in a v2 path: the bound id projected as one segment (``acme~2Fwh_…``), or a v1 client's bare id
WebhookPath = Annotated[
    str,
    Path(min_length=1, max_length=400, description="The subscription's tenant-bound id, projected (``acme~2Fwh_…``)."),
]


class RegisterWebhook(BaseModel):
    """``registerWebhook``'s closed body: an https URL, the v2 event types to receive, and optional extras."""

    model_config = ConfigDict(extra="forbid", strict=True)

    url: str = Field(min_length=1, max_length=2048, description="An https URL on a public address.")
    events: list[Annotated[str, Field(min_length=1, max_length=128)]] = Field(min_length=1, max_length=100)
    secret: str | None = Field(
        default=None, min_length=SECRET_MIN, max_length=512, description="Omitted: one is made and shown once."
    )
    tags: list[Annotated[str, Field(min_length=1, max_length=256)]] = Field(default_factory=list, max_length=100)
    signatureAlgorithms: list[Literal["v1"]] | None = Field(default=None, min_length=1, max_length=1)


def retry_schedule(settings: Settings) -> RetrySchedule:
    """The advertised exponential policy as the outbox's ladder: a delay before each retry, each twice the
    last, within ±10 % (so each gap is at least 2 x 0.9 / 1.1 = 1.6 times the one before)."""
    delays = tuple(settings.webhook_first_retry * 2**step for step in range(settings.webhook_max_attempts - 1))
    return RetrySchedule(delays, jitter=_JITTER)


def retention_days(settings: Settings) -> int | None:
    """Whole days a dead letter is kept at least (runs are: see ``Store.purge_runs``); None under one day."""
    if settings.task_retention <= 0:
        return _FOREVER_DAYS
    days = int(settings.task_retention // _DAY)
    return days if days >= 1 else None


def webhooks_family(settings: Settings) -> dict[str, Any]:
    """The v2 discovery ``webhooks`` record: what this host serves, and the policy its outbox applies.

    ``deadLetter`` is advertised only when dead letters are kept a whole day or more (the
    facet's ``retentionDays`` is at least 1); the read is served either way. No
    ``maxElapsedMs``: an attempt's time is the receiver's, so the host promises no bound.
    """
    facets: dict[str, Any] = {
        "signatureAlgorithms": ["v1"],
        "retryPolicy": {"maxAttempts": settings.webhook_max_attempts, "backoff": "exponential"},
    }
    days = retention_days(settings)
    if days is not None:
        facets["deadLetter"] = {"retentionDays": days, "maxPageSize": DEAD_LETTER_PAGE_MAX}
    return family("witnessable-gated", **facets)


def webhook_body(settings: Settings) -> WebhookBody:
    """How the outbox renders a webhook delivery: a v2 subscription's in major 2's terms, a v1 one's as stored."""
    schedule = retry_schedule(settings)

    def render(hook: WebhookRow, stored: bytes) -> WebhookDelivery:
        if hook.major < MAJOR:
            return webhook_as_stored(hook, stored)
        doc = orjson.loads(stored)
        event = v2_event(doc["event"], hook.tenant)
        body = orjson.dumps({"runId": bind(hook.tenant, doc["runId"]), "event": event})
        return WebhookDelivery(body, bind(hook.tenant, hook.webhook_id), event["type"], MAJOR, schedule)

    return render


def _stored_events(events: list[str]) -> list[str]:
    """The v2 type names of ``events`` as the store spells them, each checked against the codemap."""
    stored: list[str] = []
    for index, name in enumerate(events):
        if name not in V2_EVENT_TYPES:
            renamed = RENAMED.get(name)
            hint = f" (its v2 name is {renamed!r})" if renamed else ""
            raise InvalidInput(
                f"events[{index}]: {name!r:.140} is not a v2 run event type{hint}",
                details={"field": f"events[{index}]"},
            )
        if v1_type(name) not in stored:
            stored.append(v1_type(name))
    return stored


@router.post(
    "/webhooks",
    status_code=201,
    responses=refusals(*AUTHENTICATED, *JSON_BODY),
    openapi_extra=body_schema(RegisterWebhook),
)
async def register_webhook(request: Request, principal: Principal = Depends(require("webhooks:manage"))) -> Response:
    """Subscribe an https URL to v2 run events; a secret made here is shown in this answer only.

    The URL is checked by the egress guard now and again before every attempt. A name that
    does not resolve yet is taken (it is resolved and checked at delivery); one that resolves
    to an address that is not public, a non-https URL, ``localhost`` or an IP literal of a
    private, loopback, link-local or metadata range (IPv4-mapped ones by the IPv4 they carry)
    is refused: ``400 webhook_url_rejected``, nothing stored.
    """
    rest = rest_of(request)
    body: RegisterWebhook = parse_model(RegisterWebhook, await json_body(request))
    stored_events = _stored_events(body.events)
    try:
        await rest.guard.resolve_and_check(body.url)
    except EgressRefused as exc:
        if (exc.details or {}).get("reason") != "unresolvable":
            raise InvalidInput(
                exc.message, code="webhook_url_rejected", details={"field": "url", **(exc.details or {})}
            ) from exc
    secret = body.secret if body.secret is not None else random_secrets.token_hex(32)
    webhook_id = new_id("wh_")
    now = clock.now_iso()
    await rest.store.put_webhook(
        WebhookRow(
            webhook_id,
            principal.tenant,
            body.url,
            stored_events,
            list(body.tags),
            rest.box.seal(secret, context=f"webhook:{webhook_id}"),
            rest.box.fingerprint(secret),
            now,
            MAJOR,
        )
    )
    bound = bind(principal.tenant, webhook_id)
    # webhookId is the spec's answer; subscriptionId, url, eventTypes and createdAt are what openwop-client 2.7.0 reads
    answer: dict[str, Any] = {
        "webhookId": bound,
        "subscriptionId": bound,
        "url": body.url,
        "events": list(body.events),
        "eventTypes": list(body.events),
        "createdAt": now,
    }
    if body.secret is None:
        answer["secret"] = secret
    if body.signatureAlgorithms is not None:
        answer["signatureAlgorithms"] = list(body.signatureAlgorithms)
    return json_response(answer, 201)


def _webhook_id(segment: str, principal: Principal) -> str:
    """The opaque id a path names, another tenant's refused (403) before anything is looked up."""
    return opaque_of(unproject(segment, "webhookId"), principal.tenant, "webhookId")


@router.delete("/webhooks/{webhook_id}", status_code=204, responses=refusals(*AUTHENTICATED, 400, 404))
async def unregister_webhook(
    request: Request, webhook_id: WebhookPath, principal: Principal = Depends(require("webhooks:manage"))
) -> Response:
    """Unsubscribe; deliveries still pending to it are dropped at their next attempt."""
    opaque = _webhook_id(webhook_id, principal)
    if not await rest_of(request).store.delete_webhook(principal.tenant, opaque):
        raise NotFound(f"no webhook {webhook_id!r:.160}", details={"webhookId": webhook_id[:160]})
    return Response(status_code=204)


def _mint_cursor(box: SecretBox, webhook_id: str, delivery_id: str) -> str:
    """A cursor for the page after ``delivery_id``: sealed to this subscription, so no other one takes it."""
    return base64.urlsafe_b64encode(box.seal(delivery_id, context=f"dead-letters:{webhook_id}")).rstrip(b"=").decode()


def _read_cursor(box: SecretBox, webhook_id: str, value: str) -> str:
    """The delivery id a cursor stands for; one not minted here for this subscription is refused (400)."""
    try:
        return box.open(base64.urlsafe_b64decode(value + "=" * (-len(value) % 4)), context=f"dead-letters:{webhook_id}")
    except (binascii.Error, ValueError, InvalidTag) as exc:
        raise InvalidInput(
            "cursor is not one this host issued for this subscription", details={"field": "cursor"}
        ) from exc


def _reason(row: DeliveryRow) -> str:
    error = row.last_error or ""
    return "payload_unprojectable" if error.startswith(_UNRENDERABLE) else "retries_exhausted"


def dead_letter(row: DeliveryRow, major: int, days: int | None, window: float) -> dict[str, Any]:
    """A dead letter as v2 names it: which delivery, of what, how it died, until when it is kept; nothing it
    carried. Its event type is spelled as its subscription's major renders it."""
    event: dict[str, Any] = orjson.loads(row.body).get("event", {})
    kind = str(event.get("type", ""))
    if major >= MAJOR:
        try:
            kind = v2_type(kind)
        except TetherError:
            pass  # a type with no v2 name (the delivery died of it): named as stored
    died = clock.parse(row.updated_at)
    kept = timedelta(days=days) if days is not None else timedelta(seconds=window)
    record: dict[str, Any] = {
        "deliveryId": bind(row.tenant, row.delivery_id),
        "webhookId": bind(row.tenant, row.target_id),
        "runId": bind(row.tenant, row.run_id),
        "eventId": str(event.get("eventId", "")),
        "eventType": kind,
        "attempts": row.attempts,
        "deadLetteredAt": row.updated_at,
        "expiresAt": clock.iso(died + kept),
        "reason": _reason(row),
    }
    status = _HTTP_STATUS.match(row.last_error or "")
    if status is not None:
        record["lastStatus"] = int(status.group(1))
    return record


@router.get("/webhooks/{webhook_id}/dead-letters", responses=refusals(*AUTHENTICATED, 400, 404))
async def list_dead_letters(
    request: Request,
    webhook_id: WebhookPath,
    limit: int = Query(default=_DEAD_LETTER_PAGE, ge=1, description=f"Clamped to {DEAD_LETTER_PAGE_MAX}."),
    cursor: str | None = Query(default=None, min_length=1, max_length=256),
    principal: Principal = Depends(require("webhooks:manage")),
) -> Response:
    """The subscription's dead letters, newest first: each names a delivery that was given up on, never
    its body, headers or secret. An unregistered subscription reads as one that never was (404)."""
    opaque = _webhook_id(webhook_id, principal)
    rest = rest_of(request)
    before = _read_cursor(rest.box, opaque, cursor) if cursor is not None else None
    hook = await rest.store.get_webhook(opaque)
    if hook is None or hook.tenant != principal.tenant:
        raise NotFound(f"no webhook {webhook_id!r:.160}", details={"webhookId": webhook_id[:160]})
    size = min(limit, DEAD_LETTER_PAGE_MAX)
    rows = await rest.store.dead_letters(principal.tenant, opaque, size + 1, before)
    days, window = retention_days(rest.settings), rest.settings.task_retention
    page: dict[str, Any] = {"deliveries": [dead_letter(row, hook.major, days, window) for row in rows[:size]]}
    if len(rows) > size:
        page["nextCursor"] = _mint_cursor(rest.box, opaque, rows[size - 1].delivery_id)
    return json_response(page)
