"""``/v1/interrupts/{token}``: inspect or resolve an interrupt with its signed token alone."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from starlette.responses import Response

from tether.errors import Conflict, Forbidden
from tether.http.openapi import JSON_BODY, refusals
from tether.http.requests import body_schema, json_body, parse_model
from tether.http.responses import json_response
from tether.openwop.models import InterruptView, ResolveRequest, ResolveResponse
from tether.openwop.surface import rest_of
from tether.openwop.tokens import TokenClaims
from tether.run_state import InterruptRecord
from tether.types import Principal

router = APIRouter(tags=["interrupts"])

#: what every token route refuses: a forged or malformed token (400), one resolved or whose run ended (409),
#: one expired (410)
_TOKEN_REFUSALS = (400, 409, 410)


async def _live(request: Request, token: str) -> tuple[TokenClaims, InterruptRecord]:
    rest = rest_of(request)
    claims = rest.signer.verify(token)
    row = await rest.store.get_run(claims.run_id)
    interrupt = row.state.get("interrupt") if row else None
    if row is None or not interrupt or interrupt["interruptId"] != claims.interrupt_id:
        raise Conflict("this interrupt was already resolved, or its run ended", code="interrupt_already_resolved")
    return claims, interrupt


@router.get("/v1/interrupts/{token}", response_model=InterruptView, responses=refusals(*_TOKEN_REFUSALS))
async def inspect_interrupt(request: Request, token: str) -> Response:
    """What the interrupt asks (no API key: the token is the credential)."""
    _, interrupt = await _live(request, token)
    body: dict[str, Any] = {
        k: interrupt[k] for k in ("kind", "key", "data", "nodeId", "interruptId", "requestedAt") if k in interrupt
    }
    if interrupt.get("timeoutMs"):
        body["timeoutMs"] = interrupt["timeoutMs"]
    return json_response(body)


async def _resolve(request: Request, token: str) -> Response:
    claims, _ = await _live(request, token)
    if claims.intent != "resolve":
        raise Forbidden("this token may inspect the interrupt but not resolve it")
    body: ResolveRequest = parse_model(ResolveRequest, await json_body(request))
    owner = await rest_of(request).store.get_run(claims.run_id)
    assert owner is not None
    principal = Principal(owner.tenant, f"token:{claims.interrupt_id}")
    row = await rest_of(request).engine.resolve(
        principal, claims.run_id, claims.node_id, body.resumeValue, interrupt_id=claims.interrupt_id
    )
    return json_response({"runId": row.run_id, "nodeId": claims.node_id, "status": row.status})


@router.post(
    "/v1/interrupts/{token}",
    response_model=ResolveResponse,
    # 403: the token may inspect the interrupt, not resolve it; 404/422: the engine's, as on the run's route
    responses=refusals(*_TOKEN_REFUSALS, *JSON_BODY, 403, 404, 422),
    openapi_extra=body_schema(ResolveRequest),
)
async def resolve_by_token(request: Request, token: str) -> Response:
    """Resolve with the token; once used it answers 409, once expired 410."""
    return await _resolve(request, token)


@router.post("/v1/interrupts/{token}/resolve", include_in_schema=False)
async def resolve_by_token_alias(request: Request, token: str) -> Response:
    return await _resolve(request, token)
