"""Forks at major 2: ``POST /runs/{runId}:fork`` (replay, branch), ``GET /runs/{runId}/ancestry``, ``replay``.

A fork is a new run of the same engine and store that inherits its source's log below
``fromSeq`` (``tether.engine.replay`` says how a replay answers its effects from the
record and why it delivers nothing). This module only reads v2 requests and writes v2
answers: the closed body, ids bound to their tenant (another tenant's run is not found,
decided before any lookup), the v2 codes, ``Idempotency-Key`` as on ``POST /runs``.

The ``replay`` family binds three things, all served: fork (here), suppression in a replay
(``tether.engine.replay``) and the effect-seam manifest (``tether.openwop.v2.effects``).
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Final, Literal

from fastapi import APIRouter, Depends, Header, Request
from pydantic import BaseModel, ConfigDict, Field
from starlette.responses import Response

from tether.engine import replay
from tether.engine.engine import IdempotencyClaim
from tether.errors import Forbidden, InvalidInput, NotFound
from tether.http.openapi import AUTHENTICATED, JSON_BODY, refusals
from tether.http.requests import json_body, parse_model, require
from tether.http.responses import json_response
from tether.ids import new_id
from tether.openwop.surface import RestSurface, rest_of
from tether.openwop.v2.discovery import family
from tether.openwop.v2.effects import MANIFEST_PATH
from tether.openwop.v2.ids import bind
from tether.openwop.v2.runs import (
    IDEMPOTENCY_KEY_PATTERN,
    TAG_LENGTH_MAX,
    TAGS_MAX,
    Configurable,
    RunPath,
    load_run,
    replay_answer,
    request_digest,
    run_url,
)
from tether.types import Principal

__all__ = ["RETENTION_DAYS", "replay_family", "router"]

#: how long a source's log stays forkable when the host keeps runs for ever (``--task-retention 0``)
RETENTION_DAYS: Final = 30
FORK_SCOPE = "POST /runs/{runId}:fork"
_IDEMPOTENCY_KEY = re.compile(IDEMPOTENCY_KEY_PATTERN)

router = APIRouter(tags=["runs (v2)"])


class _Closed(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class RunOptionsOverlay(_Closed):
    """``run-options.schema.json``: what a branch may set anew (this host honours no ``configurable`` section)."""

    configurable: Configurable | None = None
    tags: list[Annotated[str, Field(max_length=TAG_LENGTH_MAX)]] | None = Field(default=None, max_length=TAGS_MAX)
    metadata: dict[str, Any] | None = None


class ForkRun(_Closed):
    mode: Literal["replay", "branch"]
    fromSeq: int | None = Field(default=None, ge=0, le=2**63 - 1)
    runOptionsOverlay: RunOptionsOverlay | None = None


def replay_family(rest: RestSurface) -> dict[str, Any]:
    """The ``replay`` record: the fork modes, the manifest's path, how long a source stays forkable."""
    retention = rest.settings.task_retention
    days = max(1, int(retention // 86400)) if retention > 0 else RETENTION_DAYS
    return family(
        "witnessable-gated",
        modes=list(replay.MODES),
        effectSeamsManifest=MANIFEST_PATH,
        retention={"days": days},
    )


@router.post(
    "/runs/{run_id}:fork",
    status_code=201,
    responses=refusals(*AUTHENTICATED, *JSON_BODY, 404, 409, 422),
)
async def fork_run(
    request: Request,
    run_id: RunPath,
    idempotency_key: str | None = Header(default=None, alias="Idempotency-Key"),
    principal: Principal = Depends(require("runs:create")),
) -> Response:
    """Fork the run: ``replay`` re-executes it from ``fromSeq`` (default 0) performing no outside effect,
    answering each from the run's record; ``branch`` (``fromSeq`` required) goes on from there as a new run.

    ``201`` once the fork and its inherited events are on disk. Refused: a replay with a
    ``runOptionsOverlay`` or a branch without ``fromSeq`` (``400``), a ``fromSeq`` the run's log
    does not have (``422 fork_point_invalid``), another tenant's or an unknown run (``404``).
    """
    if not principal.can("runs:read"):
        raise Forbidden("this API key lacks the scope 'runs:read'", details={"scopeRequired": "runs:read"})
    if idempotency_key is not None and not _IDEMPOTENCY_KEY.fullmatch(idempotency_key):
        raise InvalidInput(
            "Idempotency-Key must be 22 to 128 of A-Z a-z 0-9 . _ ~ - (at least 128 bits of entropy)",
            code="idempotency_key_invalid",
        )
    source = await load_run(request, run_id, principal)
    raw = await json_body(request)
    body: ForkRun = parse_model(ForkRun, raw)
    overlay = body.runOptionsOverlay.model_dump(exclude_none=True) if body.runOptionsOverlay is not None else {}
    if body.mode == "replay" and overlay:
        raise InvalidInput(
            "runOptionsOverlay is for a branch only: a replay re-executes the run as it was",
            details={"field": "runOptionsOverlay"},
        )
    if body.mode == "branch" and body.fromSeq is None:
        raise InvalidInput("a branch needs fromSeq: the sequence it goes on from", details={"field": "fromSeq"})
    from_seq = body.fromSeq if body.fromSeq is not None else 0
    rest = rest_of(request)
    scope = f"{FORK_SCOPE} {source.run_id}"
    digest = request_digest(raw)
    if idempotency_key is not None:
        existing = await rest.store.get_idempotency(principal.tenant, scope, idempotency_key)
        if existing is not None:
            return replay_answer(existing, digest)
    new = new_id("run_")
    answer: dict[str, Any] = {
        "runId": bind(principal.tenant, new),
        "sourceRunId": bind(source.tenant, source.run_id),
        "fromSeq": from_seq,
        "mode": body.mode,
        "status": "running",
        "eventsUrl": run_url(rest, principal.tenant, new, "/events"),
    }
    claim = None if idempotency_key is None else IdempotencyClaim(scope, idempotency_key, digest, 201, answer)
    options = {k: v for k, v in overlay.items() if k in ("tags", "metadata")}
    try:
        created = await rest.engine.fork(
            principal, source.run_id, body.mode, from_seq, run_id=new, options=options, idempotency=claim
        )
    except NotFound as missing:
        raise NotFound(f"no run {run_id!r:.160}", details={"runId": run_id[:160]}) from missing
    if created.replayed is not None:
        return replay_answer(created.replayed, digest)
    answer["status"] = created.run.status
    return json_response(answer, 201)


@router.get("/runs/{run_id}/ancestry", responses=refusals(*AUTHENTICATED, 400, 404))
async def run_ancestry(
    request: Request, run_id: RunPath, principal: Principal = Depends(require("runs:read"))
) -> Response:
    """The run that dispatched this one (``parent``), or null: no Tether run is dispatched by another here.

    A fork is not dispatched either (its lineage is the ``sourceRunId`` of its ``201`` and
    the snapshot's ``extensions["tether.fork"]``), so its parent is null too.
    """
    row = await load_run(request, run_id, principal)
    body = {"runId": bind(row.tenant, row.run_id), "hostId": rest_of(request).engine.owner, "parent": None}
    return json_response(body)
