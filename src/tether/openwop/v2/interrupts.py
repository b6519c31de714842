"""Interrupts at major 2: answer the one a run waits at by its run, or by its signed token alone.

The token routes need no API key: the token is the credential, so it is checked first,
and a token this host did not sign, or signed with a key it does not hold, is
``401 interrupt_token_invalid``. Tokens minted for major 1 keep working here until they
expire (``kid: legacy``).
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Request
from pydantic import BaseModel, ConfigDict
from starlette.responses import Response

from tether.errors import Conflict, Forbidden
from tether.http.openapi import AUTHENTICATED, JSON_BODY, refusals
from tether.http.requests import json_body, parse_model, require
from tether.http.responses import json_response
from tether.openwop.surface import rest_of
from tether.openwop.tokens import TokenClaims
from tether.openwop.v2.ids import bind
from tether.openwop.v2.runs import RunPath, load_run
from tether.run_state import InterruptRecord
from tether.store.base import RunRow
from tether.types import Principal

__all__ = ["router"]

router = APIRouter(tags=["interrupts (v2)"])


class Resolve(BaseModel):
    """The closed resolve body: only ``resumeValue``, which the interrupt's kind then checks."""

    model_config = ConfigDict(extra="forbid", strict=True)

    resumeValue: Any


def _answer(row: RunRow, node_id: str) -> Response:
    return json_response({"runId": bind(row.tenant, row.run_id), "nodeId": node_id, "status": row.status})


@router.post("/runs/{run_id}/interrupts/{node_id}", responses=refusals(*AUTHENTICATED, *JSON_BODY, 404, 409, 410))
async def resolve_by_run(
    request: Request, run_id: RunPath, node_id: str, principal: Principal = Depends(require("approvals:respond"))
) -> Response:
    """Answer the run's pending interrupt at ``node_id`` (exactly one of two racing answers wins)."""
    row = await load_run(request, run_id, principal)
    body: Resolve = parse_model(Resolve, await json_body(request))
    done = await rest_of(request).engine.resolve(principal, row.run_id, node_id, body.resumeValue)
    return _answer(done, node_id)


async def _live(request: Request, token: str) -> tuple[TokenClaims, RunRow, InterruptRecord]:
    rest = rest_of(request)
    claims = rest.signer.verify(token)
    row = await rest.store.get_run(claims.run_id)
    interrupt = row.state.get("interrupt") if row else None
    if row is None or not interrupt or interrupt["interruptId"] != claims.interrupt_id:
        raise Conflict("this interrupt was already resolved, or its run ended", code="interrupt_already_resolved")
    return claims, row, interrupt


@router.get("/interrupts/{token}", responses=refusals(401, 409, 410))
async def inspect_by_token(request: Request, token: str) -> Response:
    """What the interrupt asks; no API key (the token is the credential)."""
    _, row, interrupt = await _live(request, token)
    body: dict[str, Any] = {k: interrupt[k] for k in ("kind", "key", "data", "nodeId", "requestedAt") if k in interrupt}
    body["interruptId"] = bind(row.tenant, interrupt["interruptId"])
    body["runId"] = bind(row.tenant, row.run_id)
    if interrupt.get("timeoutMs"):
        body["timeoutMs"] = interrupt["timeoutMs"]
    return json_response(body)


@router.post("/interrupts/{token}", responses=refusals(401, 403, *JSON_BODY, 404, 409, 410))
async def resolve_by_token(request: Request, token: str) -> Response:
    """Answer with the token; once used it answers 409, once expired 410."""
    claims, row, _ = await _live(request, token)
    if claims.intent != "resolve":
        raise Forbidden("this token may inspect the interrupt but not resolve it")
    body: Resolve = parse_model(Resolve, await json_body(request))
    principal = Principal(row.tenant, f"token:{claims.interrupt_id}")
    done = await rest_of(request).engine.resolve(
        principal, claims.run_id, claims.node_id, body.resumeValue, interrupt_id=claims.interrupt_id
    )
    return _answer(done, claims.node_id)
