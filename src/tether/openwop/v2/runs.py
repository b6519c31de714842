"""Runs at major 2: create (closed body, the v2 ``Idempotency-Key`` grammar), read, list.

The engine and the store are v1's; this module only reads v2 requests and writes v2
answers: ids bound to their tenant, the v2 snapshot, the v2 codes.
"""

from __future__ import annotations

import base64
import hashlib
import re
from typing import Annotated, Any, Literal

import orjson
from fastapi import APIRouter, Depends, Header, Path, Query, Request
from pydantic import BaseModel, ConfigDict, Field
from starlette.responses import Response

from tether.engine.engine import IdempotencyClaim
from tether.engine.state import STARTED
from tether.errors import Conflict, Forbidden, InvalidInput, NotFound
from tether.http.openapi import AUTHENTICATED, JSON_BODY, refusals
from tether.http.requests import json_body, parse_model, require
from tether.http.responses import json_response
from tether.ids import new_id
from tether.openwop.surface import RestSurface, rest_of
from tether.openwop.v2.ids import bind, opaque_of, project, unproject
from tether.openwop.v2.snapshot import snapshot
from tether.store.base import IdempotencyRecord, RunRow
from tether.types import Principal, RunStatus

__all__ = ["RunPath", "load_run", "replay_answer", "request_digest", "router", "run_url"]

#: the v2 ``Idempotency-Key`` (≥128 bits of entropy in 22-128 URL-safe characters); v1 keeps its own on /v1
IDEMPOTENCY_KEY_PATTERN = r"^[A-Za-z0-9._~-]{22,128}$"
_IDEMPOTENCY_KEY = re.compile(IDEMPOTENCY_KEY_PATTERN)
CREATE_SCOPE = "POST /runs"
REPLAY_HEADER = "OpenWOP-Idempotent-Replay"
TAGS_MAX = 100
TAG_LENGTH_MAX = 256
PAGE_MAX = 100

#: a run id in a v2 path: the bound id projected as one segment (``acme~2Frun_…``), or a v1 client's bare id
RunPath = Annotated[
    str, Path(min_length=1, max_length=400, description="The run's tenant-bound id, projected (``acme~2Frun_…``).")
]

router = APIRouter(tags=["runs (v2)"])


class _Closed(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class Configurable(_Closed):
    """``configurable.schema.json``: versioned; this host honours none of its sections, so it takes none."""

    version: Literal[1]


class CreateRun(_Closed):
    """``createRun``'s closed body; the keys this host cannot honour are refused by name, never ignored."""

    workflowId: str = Field(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9._~:-]{1,128}$")
    inputs: dict[str, Any] = Field(default_factory=dict)
    tenantId: str | None = Field(default=None, max_length=128)
    scopeId: str | None = Field(default=None, max_length=128)
    callbackUrl: str | None = None
    configurable: Configurable | None = None
    tags: list[Annotated[str, Field(max_length=TAG_LENGTH_MAX)]] = Field(default_factory=list, max_length=TAGS_MAX)
    metadata: dict[str, Any] = Field(default_factory=dict)
    # keys of the closed body that name features this host does not have: refused with a reason
    residency: Any = None
    mode: Any = None
    evalSuiteRef: Any = None
    agentId: Any = None


def run_url(rest: RestSurface, row_tenant: str, run_id: str, tail: str = "") -> str:
    """The absolute v2 URL of a run (its bound id projected into one segment)."""
    return f"{rest.settings.base_url}/runs/{project(bind(row_tenant, run_id))}{tail}"


async def load_run(request: Request, segment: str, principal: Principal) -> RunRow:
    """The caller's run a v2 path names: the tenant checked before the lookup, another tenant's never found."""
    run_id = opaque_of(unproject(segment, "runId"), principal.tenant, "runId")
    row = await rest_of(request).store.get_run(run_id, principal.tenant)
    if row is None:
        raise NotFound(f"no run {segment!r:.160}", details={"runId": segment[:160]})
    return row


def request_digest(body: Any) -> str:
    """What a repeat of a request under one ``Idempotency-Key`` must match: its body, canonically."""
    return hashlib.sha256(orjson.dumps(body, option=orjson.OPT_SORT_KEYS)).hexdigest()


def replay_answer(record: IdempotencyRecord, digest: str) -> Response:
    """The answer an earlier request with this key got (``OpenWOP-Idempotent-Replay``), or 409 for another body."""
    if record.request_digest != digest:
        raise Conflict("this Idempotency-Key was used with a different request body", code="idempotency_key_mismatch")
    return json_response(record.body, record.status_code, {REPLAY_HEADER: "true"})


def _refuse_unserved(body: CreateRun) -> None:
    for name in ("residency", "mode", "evalSuiteRef", "agentId"):
        if getattr(body, name) is not None:
            raise InvalidInput(f"{name} is not served by this host", details={"field": name})


@router.post(
    "/runs",
    status_code=201,
    responses=refusals(*AUTHENTICATED, *JSON_BODY, 404, 409),
)
async def create_run(
    request: Request,
    idempotency_key: str | None = Header(default=None, alias="Idempotency-Key"),
    principal: Principal = Depends(require("runs:create")),
) -> Response:
    """Start a run; answered 201 once the run and its first event are on disk."""
    if idempotency_key is not None and not _IDEMPOTENCY_KEY.fullmatch(idempotency_key):
        raise InvalidInput(
            "Idempotency-Key must be 22 to 128 of A-Z a-z 0-9 . _ ~ - (at least 128 bits of entropy)",
            code="idempotency_key_invalid",
        )
    rest = rest_of(request)
    raw = await json_body(request)
    body: CreateRun = parse_model(CreateRun, raw)
    _refuse_unserved(body)
    if body.tenantId is not None and body.tenantId != principal.tenant:
        raise Forbidden("tenantId names a tenant this API key does not belong to", code="id_tenant_mismatch")
    if body.callbackUrl is not None:
        await rest.check_callback(body.callbackUrl)
    digest = request_digest(raw)
    if idempotency_key is not None:
        existing = await rest.store.get_idempotency(principal.tenant, CREATE_SCOPE, idempotency_key)
        if existing is not None:
            return replay_answer(existing, digest)
    run_id = new_id("run_")
    answer = {
        "runId": bind(principal.tenant, run_id),
        "status": STARTED,
        "eventsUrl": run_url(rest, principal.tenant, run_id, "/events"),
        "statusUrl": run_url(rest, principal.tenant, run_id),
    }
    claim = None if idempotency_key is None else IdempotencyClaim(CREATE_SCOPE, idempotency_key, digest, 201, answer)
    created = await rest.engine.create_run(
        principal,
        body.workflowId,
        body.inputs,
        run_id=run_id,
        tags=body.tags,
        metadata=body.metadata,
        idempotency=claim,
        callback_url=body.callbackUrl,
    )
    if created.replayed is not None:
        return replay_answer(created.replayed, digest)
    return json_response(answer, 201)


@router.get("/runs/{run_id}", responses=refusals(*AUTHENTICATED, 400, 404))
async def get_run(request: Request, run_id: RunPath, principal: Principal = Depends(require("runs:read"))) -> Response:
    """The run's live v2 snapshot (with an ``ow2.`` token for its pending interrupt)."""
    row = await load_run(request, run_id, principal)
    return json_response(snapshot(row, rest_of(request).signer, principal))


@router.get("/runs", responses=refusals(*AUTHENTICATED, 400))
async def list_runs(
    request: Request,
    status: RunStatus | None = Query(default=None),
    workflowId: str | None = Query(default=None, max_length=128),
    limit: int = Query(default=50, ge=1, le=PAGE_MAX),
    cursor: str | None = Query(default=None, max_length=256),
    principal: Principal = Depends(require("runs:read")),
) -> Response:
    """The caller's tenant's runs, newest first; ``nextCursor`` pages on (a cursor this host did not mint: 400)."""
    before = None
    if cursor:
        try:
            before = base64.b64decode(cursor + "=" * (-len(cursor) % 4), altchars=b"-_", validate=True).decode()
        except ValueError as exc:
            raise InvalidInput("cursor is not one this host issued", details={"field": "cursor"}) from exc
        if not before.startswith("run_"):
            raise InvalidInput("cursor is not one this host issued", details={"field": "cursor"})
    rest = rest_of(request)
    rows = await rest.store.list_runs(
        principal.tenant, status=status, workflow_id=workflowId, limit=limit + 1, before=before
    )
    page: dict[str, Any] = {"runs": [snapshot(r, rest.signer, principal) for r in rows[:limit]]}
    if len(rows) > limit:
        page["nextCursor"] = base64.urlsafe_b64encode(rows[limit - 1].run_id.encode()).rstrip(b"=").decode()
    return json_response(page)
