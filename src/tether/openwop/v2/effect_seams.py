"""The effect seams of the v2 conformance profile (``tether serve --enable-test-seams`` only).

Two scenarios of the ``openwop-conformance-seams-v2`` profile need an effect fired on
demand, inside a run, and recorded in the ledger (``tether.engine.effects``):

- ``POST /conformance/seams/sample/effect-seams/fire {seam, receiverUrl?}`` → ``201 {runId}``
  drives one manifest row once. The row it drives is a run's callback (``CALLBACK``, the
  manifest's first row): a run of ``approval-gated`` with a ``callbackUrl`` announces its gate
  there (to ``receiverUrl``, else to this host's own ``effect-seams/sink``), through the guard
  and the outbox like any callback. The seam answers once the attempt is in the ledger, and
  then approves the gate, so the run completes. The hand-off and fan-out rows need a peer or
  a subscription the suite does not give; asking for one is refused by name.
- ``POST /conformance/seams/sample/test/idempotency/effect-retry {providerUrl}`` →
  ``201 {runId, effectId}`` makes one outbound effect in the name of a new run: a POST to
  ``providerUrl`` through the egress client, tried again at once when the transport fails or
  the provider answers 408, 429 or 5xx (three attempts at most), every attempt claimed in the
  ledger first and sent under the same ``Idempotency-Key``, the effect's own id. The provider
  has no business key, so it is keyed on the activity recipe.

``effect_seams_router`` is how the host mounts them (beside ``tether.openwop.v2.seams``).
"""

from __future__ import annotations

import asyncio
from typing import Final

import httpx
import orjson
from fastapi import APIRouter, Depends, Request
from pydantic import BaseModel, ConfigDict, Field
from starlette.responses import Response

from tether.engine.effects import ACTIVITY_RECIPE, CALLBACK, SEAMS, EffectLedger, effect_id
from tether.errors import InvalidInput, TetherError
from tether.http.requests import json_body, parse_model, require
from tether.http.responses import json_response
from tether.ids import new_id
from tether.openwop.surface import RestSurface, rest_of
from tether.openwop.v2.ids import bind
from tether.types import Principal

__all__ = ["EFFECT_RETRY_NODE", "EFFECT_RETRY_SEAM", "PREFIX", "effect_seams_router"]

PREFIX: Final = "/conformance/seams/sample"
#: the workflow whose gate a fired callback announces, and that gate
_FIRED_WORKFLOW, _GATE = "approval-gated", "gate"
#: the seam and node the effect-retry seam's effect is recorded under (it is the seam's own, not a node's)
EFFECT_RETRY_SEAM: Final = "conformance.effect-retry"
EFFECT_RETRY_NODE: Final = "effect-retry"
_ATTEMPTS: Final = 3
#: how long ``fire`` waits for the outbox to make its attempt
_FIRE_WAIT: Final = 15.0

router = APIRouter(tags=["conformance seams (v2)"], include_in_schema=False)


class _Closed(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class Fire(_Closed):
    seam: str = Field(min_length=1, max_length=200)
    receiverUrl: str | None = Field(default=None, max_length=2048)


class EffectRetry(_Closed):
    providerUrl: str = Field(min_length=1, max_length=2048)


async def _checked(rest: RestSurface, url: str, field: str) -> None:
    try:
        await rest.guard.resolve_and_check(url)
    except InvalidInput as exc:
        raise InvalidInput(f"{field}: {exc.message}", details={"field": field, **(exc.details or {})}) from exc


@router.post(f"{PREFIX}/effect-seams/fire", status_code=201)
async def fire(request: Request, principal: Principal = Depends(require("runs:create"))) -> Response:
    """Drive one manifest row once inside a new run; answered when its attempt is in the ledger."""
    body: Fire = parse_model(Fire, await json_body(request))
    rows = [s.seam for s in SEAMS]
    if body.seam not in rows:
        raise InvalidInput(
            f"seam {body.seam!r} is not a row of the manifest ({', '.join(rows)})", details={"field": "seam"}
        )
    if body.seam != CALLBACK:
        raise InvalidInput(
            f"seam {body.seam!r} needs an A2A peer or a webhook subscription this seam is not given; "
            f"it fires {CALLBACK!r}",
            details={"field": "seam"},
        )
    rest = rest_of(request)
    url = body.receiverUrl
    if url is not None:
        await _checked(rest, url, "receiverUrl")
    else:  # nobody of the suite's listens: the host's own sink (an attempt the guard refuses is recorded too)
        url = f"{rest.settings.base_url}{PREFIX}/effect-seams/sink"
    run_id = new_id("run_")
    prompt = {"prompt": "a gate announced to a callback by the effect-seams seam"}
    await rest.engine.create_run(principal, _FIRED_WORKFLOW, prompt, run_id=run_id, callback_url=url)
    ledger = EffectLedger(rest.store)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + _FIRE_WAIT
    while not await ledger.recorded(run_id):
        if loop.time() > deadline:
            raise TetherError(f"the callback of run {run_id} was not attempted within {_FIRE_WAIT:g} s")
        await asyncio.sleep(0.05)
    await rest.engine.resolve(principal, run_id, _GATE, {"action": "accept"})
    return json_response({"runId": bind(principal.tenant, run_id)}, 201)


@router.post(f"{PREFIX}/effect-seams/sink", status_code=204)
async def sink() -> Response:
    """Where a fired callback goes when the suite names no receiver: taken and dropped."""
    return Response(status_code=204)


@router.post(f"{PREFIX}/test/idempotency/effect-retry", status_code=201)
async def effect_retry(request: Request, principal: Principal = Depends(require("runs:create"))) -> Response:
    """One outbound effect, retried at the transport under one ``Idempotency-Key``, each attempt in the ledger."""
    body: EffectRetry = parse_model(EffectRetry, await json_body(request))
    rest = rest_of(request)
    await _checked(rest, body.providerUrl, "providerUrl")
    run_id = new_id("run_")
    await rest.engine.create_run(principal, "echo", {"prompt": "effect-retry"}, run_id=run_id, advance=True)
    tenant = principal.tenant
    key = effect_id(tenant, run_id, EFFECT_RETRY_NODE, EFFECT_RETRY_SEAM)
    content = orjson.dumps({"runId": bind(tenant, run_id), "effectId": bind(tenant, key)})
    headers = {"Content-Type": "application/json", "Idempotency-Key": key}
    ledger = EffectLedger(rest.store)
    client = rest.outbox.client
    for _ in range(_ATTEMPTS):
        try:
            async with ledger.attempt(
                tenant, run_id, EFFECT_RETRY_NODE, EFFECT_RETRY_SEAM, key, keying=ACTIVITY_RECIPE
            ):
                answer = await client.post(body.providerUrl, content=content, headers=headers)
                if answer.status_code in (408, 429) or answer.status_code >= 500:
                    raise _TryAgain(answer.status_code)
            break
        except (httpx.TransportError, _TryAgain):
            continue
    return json_response({"runId": bind(tenant, run_id), "effectId": bind(tenant, key)}, 201)


class _TryAgain(Exception):
    """The provider answered with a status worth another attempt."""


def effect_seams_router(enabled: bool) -> APIRouter:
    """The effect seams when ``enabled`` (``--enable-test-seams``), else a router that serves nothing."""
    return router if enabled else APIRouter()
