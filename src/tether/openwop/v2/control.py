"""Run control at major 2: cancel, bulk-cancel, pause and resume.

Each is one engine transition, decided by compare-and-swap, so of racing requests exactly
one wins and the others learn why (``409``). This module only reads v2 requests and
writes v2 answers: closed bodies, ids bound to their tenant (checked before any lookup),
the codes of the v2 registry (the request's dialect renders every refusal raised here).
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any, TypeVar

from fastapi import APIRouter, Depends, Request
from pydantic import BaseModel, ConfigDict, Field
from starlette.responses import Response

from tether.errors import Conflict, Forbidden, InvalidInput, NotFound, TetherError
from tether.http.openapi import AUTHENTICATED, JSON_BODY, refusals
from tether.http.requests import json_body, parse_model, require
from tether.http.responses import json_response
from tether.openwop.surface import rest_of
from tether.openwop.v2.errors import dialect
from tether.openwop.v2.ids import bind, opaque_of, unproject
from tether.openwop.v2.runs import RunPath
from tether.run_state import DrainPolicy
from tether.store.base import RunRow
from tether.types import Principal

__all__ = ["MAX_RUN_IDS", "router"]

#: the most runs one ``POST /runs:bulk-cancel`` names (the cap runs.md recommends)
MAX_RUN_IDS = 100
#: the longest ``reason`` kept (it is written into the run's log)
REASON_MAX = 512
#: the scope every operation here needs (runs.md: pause and resume are cancel's peers)
SCOPE = "runs:cancel"

router = APIRouter(tags=["runs (v2)"])


class _Closed(BaseModel):
    """A request body that takes no key it does not declare, and no value of another JSON type."""

    model_config = ConfigDict(extra="forbid", strict=True)


class CancelRun(_Closed):
    reason: str | None = Field(default=None, max_length=REASON_MAX)


class BulkCancelRuns(_Closed):
    runIds: list[str] = Field(min_length=1, max_length=MAX_RUN_IDS)
    reason: str | None = Field(default=None, max_length=REASON_MAX)


class PauseRun(_Closed):
    reason: str | None = Field(default=None, max_length=REASON_MAX)
    drainPolicy: DrainPolicy = "drain-current-node"


class ResumeRun(_Closed):
    reason: str | None = Field(default=None, max_length=REASON_MAX)


M = TypeVar("M", bound=_Closed)


async def _body(request: Request, model: type[M]) -> M:
    """The request's body as ``model``; an absent body is ``{}`` (every key of these bodies is optional)."""
    raw = await json_body(request, required=False)
    parsed: M = parse_model(model, {} if raw is None else raw)
    return parsed


async def _control(segment: str, call: Awaitable[RunRow]) -> RunRow:
    """``call``'s run; a run that is not there is named as the path named it (as ``GET /runs/{id}`` does)."""
    try:
        return await call
    except NotFound as missing:
        raise NotFound(f"no run {segment!r:.160}", details={"runId": segment[:160]}) from missing


def _opaque(segment: str, principal: Principal) -> str:
    """The run a path names: decoded, and refused when bound to another tenant, before any lookup."""
    return opaque_of(unproject(segment, "runId"), principal.tenant, "runId")


@router.post(
    "/runs/{run_id}/cancel",
    responses=refusals(*AUTHENTICATED, *JSON_BODY, 404, 409),
)
async def cancel_run(request: Request, run_id: RunPath, principal: Principal = Depends(require(SCOPE))) -> Response:
    """Cancel: a waiting or paused run ends at once (``cancelled``), an executing one goes through ``cancelling``.

    A run that has ended, cancelled included, is ``409 run_terminal``.
    """
    opaque = _opaque(run_id, principal)
    body = await _body(request, CancelRun)
    engine = rest_of(request).engine
    row = await _control(run_id, engine.cancel(principal, opaque, body.reason, again_refused=True))
    return json_response({"runId": bind(row.tenant, row.run_id), "status": row.status})


@router.post(
    "/runs:bulk-cancel",
    responses=refusals(*AUTHENTICATED, *JSON_BODY),
)
async def bulk_cancel_runs(request: Request, principal: Principal = Depends(require(SCOPE))) -> Response:
    """Cancel each run named, independently; ``200`` with one result per id, in the request's order.

    An id the caller may not touch (another tenant's: ``id_tenant_mismatch``), an unknown
    one (``not_found``) or an ended run (``run_terminal``) fails its own entry only, with a
    v2 error envelope in it. More than :data:`MAX_RUN_IDS` ids: ``400`` with ``details.maxRunIds``.
    """
    raw = await json_body(request)
    named = raw.get("runIds") if isinstance(raw, dict) else None
    if isinstance(named, list) and len(named) > MAX_RUN_IDS:
        raise InvalidInput(
            f"runIds: at most {MAX_RUN_IDS} runs per request, not {len(named)}",
            details={"field": "runIds", "maxRunIds": MAX_RUN_IDS},
        )
    body: BulkCancelRuns = parse_model(BulkCancelRuns, raw)
    engine = rest_of(request).engine
    results: list[dict[str, Any]] = []
    for value in body.runIds:
        try:
            opaque = opaque_of(value, principal.tenant, "runId")
            row = await engine.cancel(principal, opaque, body.reason, again_refused=True)
        except NotFound:
            results.append(_failed(value, "not_found", f"no run {value!r:.160}"))
        except (InvalidInput, Forbidden, Conflict) as refused:
            results.append(_failed(value, refused.code, refused.message, refused))
        else:
            results.append({"runId": value, "ok": True, "status": row.status})
    return json_response({"results": results})


def _failed(value: str, code: str, message: str, error: TetherError | None = None) -> dict[str, Any]:
    """One bulk entry's failure: the id as the request spelt it, and a v2 error envelope."""
    status = 404 if error is None else error.status
    envelope: dict[str, Any] = {"error": dialect(status, code)[1], "message": message}
    if error is not None and error.details:
        envelope["details"] = error.details
    return {"runId": value, "ok": False, "error": envelope}


@router.post(
    "/runs/{run_id}:pause",
    status_code=202,
    responses=refusals(*AUTHENTICATED, *JSON_BODY, 404, 409),
)
async def pause_run(request: Request, run_id: RunPath, principal: Principal = Depends(require(SCOPE))) -> Response:
    """Pause an executing run: no node starts until it is resumed (or cancelled); it stays paused across restarts.

    ``drainPolicy``: ``drain-current-node`` (default) lets the node executing finish;
    ``immediate`` cuts its attempt, which starts afresh on resume. ``409``: ``run_terminal``
    when the run ended, else ``run_state_conflict`` naming its status (already paused,
    cancelling, waiting at an interrupt, or handing a task to another agent).
    """
    opaque = _opaque(run_id, principal)
    body = await _body(request, PauseRun)
    engine = rest_of(request).engine
    row = await _control(run_id, engine.pause(principal, opaque, body.reason, body.drainPolicy))
    answer = {"runId": bind(row.tenant, row.run_id), "status": row.status, "pausedAt": row.state.get("pausedAt")}
    return json_response(answer, 202)


@router.post(
    "/runs/{run_id}:resume",
    status_code=202,
    responses=refusals(*AUTHENTICATED, *JSON_BODY, 404, 409),
)
async def resume_run(request: Request, run_id: RunPath, principal: Principal = Depends(require(SCOPE))) -> Response:
    """Resume a paused run where it stopped; ``409`` when it is not paused (``run_terminal`` if it ended)."""
    opaque = _opaque(run_id, principal)
    body = await _body(request, ResumeRun)
    engine = rest_of(request).engine
    row = await _control(run_id, engine.resume(principal, opaque, body.reason))
    answer = {"runId": bind(row.tenant, row.run_id), "status": row.status, "resumedAt": row.state.get("resumedAt")}
    return json_response(answer, 202)
