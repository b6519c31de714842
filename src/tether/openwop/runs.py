"""Runs: create (idempotent), read, list, cancel, resolve an interrupt."""

from __future__ import annotations

import base64
import hashlib
from typing import Annotated, Any, Literal

import orjson
from fastapi import APIRouter, Depends, Header, Path, Query, Request
from starlette.responses import Response

from tether.engine.engine import IdempotencyClaim
from tether.engine.handoff.follower import Handoffs
from tether.engine.handoff.record import in_flight
from tether.engine.retention import BATCH
from tether.engine.state import STARTED
from tether.errors import Conflict, Forbidden, InvalidInput, NotFound
from tether.files import DIGEST
from tether.http.openapi import AUTHENTICATED, JSON_BODY, answer, refusals
from tether.http.requests import body_schema, json_body, parse_model, require
from tether.http.responses import json_response
from tether.ids import new_id
from tether.openwop.models import (
    ID_MAX,
    CancelRequest,
    CreateRunRequest,
    CreateRunResponse,
    PurgeRequest,
    PurgeResponse,
    ResolveRequest,
    ResolveResponse,
    RunList,
    RunSnapshot,
    StatusResponse,
)
from tether.openwop.snapshot import run_snapshot
from tether.openwop.surface import rest_of
from tether.openwop.tokens import TokenSigner
from tether.store.base import IdempotencyRecord, RunRow
from tether.types import Principal, RunStatus

IDEMPOTENCY_KEY_PATTERN = r"^[A-Za-z0-9._~:\-]{1,255}$"
CREATE_SCOPE = "POST /v1/runs"
REPLAY_HEADER = "openwop-Idempotent-Replay"

#: a run id in a path: at most ``ID_MAX`` characters (longer is a 400, never a lookup)
RunId = Annotated[str, Path(min_length=1, max_length=ID_MAX, description="The run's id (``run_…``).")]

router = APIRouter(tags=["runs"])


def _optional(extra: dict[str, Any]) -> dict[str, Any]:
    """A documented body the route also takes absent (``POST …/cancel`` with no body cancels)."""
    extra["requestBody"]["required"] = False
    return extra


def _digest(body: Any) -> str:
    return hashlib.sha256(orjson.dumps(body, option=orjson.OPT_SORT_KEYS)).hexdigest()


def _replay(record: IdempotencyRecord, digest: str) -> Response:
    if record.request_digest != digest:
        raise Conflict(
            "this Idempotency-Key was used with a different request body",
            code="idempotency_key_mismatch",
            details={"idempotencyKey": record.key},
        )
    return json_response(record.body, record.status_code, {REPLAY_HEADER: "true"})


@router.post(
    "/v1/runs",
    status_code=201,
    response_model=CreateRunResponse,
    # 404: the run an Idempotency-Key was first used for has since been purged
    responses=refusals(*AUTHENTICATED, *JSON_BODY, 404, 409),
    openapi_extra=body_schema(CreateRunRequest),
)
async def create_run(
    request: Request,
    idempotency_key: str | None = Header(
        default=None,
        alias="Idempotency-Key",
        pattern=IDEMPOTENCY_KEY_PATTERN,
        description="Repeat the request safely: the same key and body answer with the same run.",
    ),
    principal: Principal = Depends(require("runs:create")),
) -> Response:
    """Start a run. Answered 201 only once the run and its first event are on disk."""
    rest = rest_of(request)
    raw = await json_body(request)
    body: CreateRunRequest = parse_model(CreateRunRequest, raw)
    if body.tenantId is not None and body.tenantId != principal.tenant:
        raise Forbidden("tenantId names a tenant this API key does not belong to")
    if body.callbackUrl is not None:
        await rest.check_callback(body.callbackUrl)
    key = idempotency_key
    claim = None
    digest = _digest(raw)
    if key is not None:
        existing = await rest.store.get_idempotency(principal.tenant, CREATE_SCOPE, key)
        if existing is not None:
            return _replay(existing, digest)
    base = rest.settings.base_url
    run_id = new_id("run_")
    answer = {
        "runId": run_id,
        "status": STARTED,
        "eventsUrl": f"{base}/v1/runs/{run_id}/events",
        "statusUrl": f"{base}/v1/runs/{run_id}",
    }
    if key is not None:
        claim = IdempotencyClaim(CREATE_SCOPE, key, digest, 201, answer)
    metadata = dict(body.metadata)
    if body.configurable is not None:
        metadata["configurable"] = body.configurable
    created = await rest.engine.create_run(
        principal,
        body.workflowId,
        body.inputs,
        run_id=run_id,
        tags=body.tags,
        metadata=metadata,
        idempotency=claim,
        callback_url=body.callbackUrl,
    )
    if created.replayed is not None:
        return _replay(created.replayed, digest)
    return json_response(answer, 201)


@router.get("/v1/runs", response_model=RunList, responses=refusals(*AUTHENTICATED, 400))
async def list_runs(
    request: Request,
    status: RunStatus | None = Query(default=None, description="Only runs in this status."),
    workflowId: str | None = Query(default=None, max_length=ID_MAX),
    limit: int = Query(default=50, ge=1, le=500),
    cursor: str | None = Query(default=None, max_length=256, description="``nextCursor`` of the page before."),
    waitingOn: Literal["peer"] | None = Query(
        default=None, description="``peer``: only the unfinished runs waiting on another agent (one page)."
    ),
    principal: Principal = Depends(require("runs:read")),
) -> Response:
    """Runs of the caller's tenant, newest first; ``nextCursor`` pages on.

    ``waitingOn=peer`` (a Tether extension) lists the unfinished runs that wait on another
    agent (a hand-off in flight), newest first, in one page: they are found among the
    host's unfinished runs, not by an index.
    """
    rest = rest_of(request)
    if waitingOn is not None:
        waiting = [
            row
            for row in await rest.store.active_runs()
            if row.tenant == principal.tenant
            and in_flight(row.state)
            and (status is None or row.status == status)
            and (workflowId is None or row.workflow_id == workflowId)
        ]
        waiting.sort(key=lambda row: (row.created_at, row.run_id), reverse=True)
        shown = [_snapshot(r, rest.signer, principal, rest.engine.handoffs) for r in waiting[:limit]]
        return json_response({"runs": shown, "nextCursor": None})
    before = None
    if cursor:
        try:
            before = base64.b64decode(cursor + "=" * (-len(cursor) % 4), altchars=b"-_", validate=True).decode()
        except ValueError as exc:
            raise InvalidInput("cursor is not one this host issued") from exc
        if not before.startswith("run_"):
            raise InvalidInput("cursor is not one this host issued")
    rows = await rest.store.list_runs(
        principal.tenant, status=status, workflow_id=workflowId, limit=limit + 1, before=before
    )
    next_cursor = None
    if len(rows) > limit:
        rows = rows[:limit]
        next_cursor = base64.urlsafe_b64encode(rows[-1].run_id.encode()).rstrip(b"=").decode()
    return json_response({"runs": [run_snapshot(r, rest.signer, principal) for r in rows], "nextCursor": next_cursor})


async def load_run(request: Request, run_id: str, principal: Principal) -> RunRow:
    row = await rest_of(request).store.get_run(run_id, principal.tenant)
    if row is None:
        raise NotFound(f"no run {run_id!r}", details={"runId": run_id})
    return row


@router.get("/v1/runs/{run_id}", response_model=RunSnapshot, responses=refusals(*AUTHENTICATED, 400, 404))
async def get_run(request: Request, run_id: RunId, principal: Principal = Depends(require("runs:read"))) -> Response:
    """The run's live snapshot (with a signed token for its pending interrupt)."""
    row = await load_run(request, run_id, principal)
    rest = rest_of(request)
    return json_response(_snapshot(row, rest.signer, principal, rest.engine.handoffs))


@router.get(
    "/v1/runs/{run_id}/files/{digest}",
    responses={
        **answer(200, "The file's bytes.", {"type": "string", "format": "binary"}, "application/octet-stream"),
        **refusals(*AUTHENTICATED, 400, 404),
    },
)
async def get_run_file(
    request: Request,
    run_id: RunId,
    digest: Annotated[
        str,
        Path(
            pattern=f"^{DIGEST.pattern}$",
            description="The ``blob`` of a file part of the run (``sha256:<hex>``), as its snapshot or events show it.",
        ),
    ],
    principal: Principal = Depends(require("runs:read")),
) -> Response:
    """The bytes of one of the run's files (a file part of the message that started it, or of its outputs).

    Runs, events and tasks hold a file part as a reference (``blob``, ``size``, ``name``,
    ``mimeType``); this is where its bytes are read. They are served as an attachment of
    ``application/octet-stream`` whatever the file says it is: a file a caller sent is
    never rendered by a browser on this origin.
    """
    await load_run(request, run_id, principal)
    found = await rest_of(request).store.read_blobs(run_id, [digest])
    if digest not in found:
        raise NotFound(f"run {run_id!r} has no file {digest!r}", details={"runId": run_id, "blob": digest})
    headers = {
        "Content-Disposition": "attachment",
        "X-Content-Type-Options": "nosniff",
        "Cache-Control": "private, max-age=31536000, immutable",  # a blob never changes
    }
    return Response(found[digest], media_type="application/octet-stream", headers=headers)


def _snapshot(row: RunRow, signer: TokenSigner, principal: Principal, handoffs: Handoffs) -> dict[str, Any]:
    """The run's snapshot; a hand-off this host follows also says when it last read its peer task.

    ``lastReadAt`` lives in the follower's memory (a read that changes nothing writes
    nothing), so only the host that follows a hand-off can say it; ``observedAt`` (when the
    peer's state last changed) is in the run's log and read anywhere.
    """
    snap = run_snapshot(row, signer, principal)
    for node_id in in_flight(row.state):
        read_at = handoffs.last_read(row.run_id, node_id)
        entry = snap["nodeStates"].get(node_id)
        if read_at is None or entry is None:
            continue
        # copies: the snapshot shares its dicts with the (cached) run row
        handoff = {**entry.get("handoff", {}), "lastReadAt": read_at}
        snap["nodeStates"] = {**snap["nodeStates"], node_id: {**entry, "handoff": handoff}}
    return snap


async def _cancel(request: Request, run_id: str, principal: Principal) -> Response:
    raw = await json_body(request, required=False)
    body: CancelRequest = parse_model(CancelRequest, raw if raw is not None else {})
    row = await rest_of(request).engine.cancel(principal, run_id, body.reason)
    return json_response({"runId": row.run_id, "status": row.status})


@router.post(
    "/v1/runs:purge",
    response_model=PurgeResponse,
    responses=refusals(*AUTHENTICATED, *JSON_BODY),
    openapi_extra=body_schema(PurgeRequest),
)
async def purge_runs(request: Request, principal: Principal = Depends(require("runs:purge"))) -> Response:
    """Purge now, as task retention would later: the caller's tenant's runs that ended before ``before``.

    Runs that have not ended, or still have a delivery pending, stay. A purged run, its
    events and its A2A task read afterwards exactly as an unknown id.
    """
    body: PurgeRequest = parse_model(PurgeRequest, await json_body(request))
    store = rest_of(request).store
    if body.dryRun:
        ids = await store.purge_runs(body.before, body.limit, tenant=principal.tenant, dry_run=True)
    else:
        ids = []
        while len(ids) < body.limit:  # in the background purge's batches: no long write blocks the others
            wanted = min(BATCH, body.limit - len(ids))
            batch = await store.purge_runs(body.before, wanted, tenant=principal.tenant)
            ids += batch
            if len(batch) < wanted:
                break
    return json_response({"runIds": ids, "dryRun": body.dryRun, "more": len(ids) == body.limit})


@router.post(
    "/v1/runs/{run_id}/cancel",
    response_model=StatusResponse,
    responses=refusals(*AUTHENTICATED, *JSON_BODY, 404, 409),
    openapi_extra=_optional(body_schema(CancelRequest)),
)
async def cancel_run(
    request: Request, run_id: RunId, principal: Principal = Depends(require("runs:cancel"))
) -> Response:
    """Cancel: a waiting run ends at once (``cancelled``), a running one goes through ``cancelling``."""
    return await _cancel(request, run_id, principal)


@router.post("/v1/runs/{run_id}:cancel", include_in_schema=False)
async def cancel_run_alias(
    request: Request, run_id: RunId, principal: Principal = Depends(require("runs:cancel"))
) -> Response:
    return await _cancel(request, run_id, principal)


@router.post(
    "/v1/runs/{run_id}/interrupts/{node_id}",
    response_model=ResolveResponse,
    # 422: the run was cancelled while that node waited
    responses=refusals(*AUTHENTICATED, *JSON_BODY, 404, 409, 422),
    openapi_extra=body_schema(ResolveRequest),
)
async def resolve_interrupt(
    request: Request, run_id: RunId, node_id: str, principal: Principal = Depends(require("approvals:respond"))
) -> Response:
    """Answer the run's pending approval, clarification or external event at ``node_id``."""
    body: ResolveRequest = parse_model(ResolveRequest, await json_body(request))
    row = await rest_of(request).engine.resolve(principal, run_id, node_id, body.resumeValue)
    return json_response({"runId": row.run_id, "nodeId": node_id, "status": row.status})
