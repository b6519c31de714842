"""The A2A HTTP surface: the agent card, ``POST /v1/a2a`` and the durable task read.

Authentication happens at the HTTP layer, as A2A wants: no valid key is a 401 with
``WWW-Authenticate`` and a key without the method's scope a 403, both in the REST
envelope. Everything after that is JSON-RPC: errors are HTTP 200 with an ``error``
member, and the streaming methods answer with server-sent events.
"""

from __future__ import annotations

import logging

from fastapi import APIRouter, Depends, Request
from starlette.responses import Response, StreamingResponse

from tether.a2a.capabilities import AGENT_CARD_PATH, LEGACY_CARD_PATH, RPC_PATH, a2a_capabilities
from tether.a2a.card import agent_card
from tether.a2a.handlers import METHODS, STREAMING_METHODS, A2AHandlers, Stream, required_scope
from tether.a2a.push import push_record
from tether.a2a.jsonrpc import InternalError, Rejected, RequestId, RpcError, error_body, parse_request, result_body, rpc_error_from
from tether.a2a.streams import SSE_HEADERS, error_stream, sse
from tether.engine.engine import Principal
from tether.errors import Forbidden, NotFound, TetherError
from tether.ids import new_id
from tether.openwop.deps import host_of, require
from tether.openwop.responses import json_response

__all__ = ["router"]

log = logging.getLogger("tether.a2a")
router = APIRouter(tags=["a2a"])


def _json(body: bytes) -> Response:
    return Response(body, media_type="application/json")


def _refusal(request_id: RequestId, method: str, error: RpcError) -> Response:
    """An error answer; a stream method gets it as its one SSE event (what v0.3 clients read)."""
    if method in STREAMING_METHODS:
        return StreamingResponse(error_stream(request_id, error), media_type="text/event-stream", headers=SSE_HEADERS)
    return _json(error_body(request_id, error))


@router.get(AGENT_CARD_PATH)
@router.get(LEGACY_CARD_PATH)
async def get_agent_card(request: Request) -> Response:
    """Public (no credentials): how to reach this agent and what it can do."""
    host = host_of(request)
    card = agent_card(a2a_capabilities(host.settings), host.registry, host.settings.default_skill)
    return json_response(card, headers={"Cache-Control": "public, max-age=60"})


@router.post(RPC_PATH)
async def rpc(request: Request) -> Response:
    """One JSON-RPC 2.0 request (batches are refused with a single -32600)."""
    host = host_of(request)
    principal: Principal = await host.verifier.verify(request.headers.get("authorization"))
    try:
        call = parse_request(await request.body(), METHODS)
    except Rejected as rejected:
        return _json(error_body(rejected.request_id, rejected.error))
    scope = required_scope(call)
    if scope is not None and not principal.can(scope):
        raise Forbidden(f"this API key lacks the scope {scope!r} that {call.method} needs", details={"scopeRequired": scope, "method": call.method})
    handlers = A2AHandlers(host, a2a_capabilities(host.settings))
    try:
        outcome = await handlers.handle(principal, call, last_event_id=request.headers.get("last-event-id"))
    except RpcError as error:
        return _refusal(call.id, call.method, error)
    except TetherError as exc:
        return _refusal(call.id, call.method, rpc_error_from(exc))
    except Exception:
        correlation = new_id("err_")
        log.exception("A2A %s failed [%s]", call.method, correlation)
        return _refusal(call.id, call.method, InternalError(f"the host failed to handle {call.method} (correlation id {correlation})"))
    if isinstance(outcome, Stream):
        return StreamingResponse(sse(call.id, outcome.frames), media_type="text/event-stream", headers=SSE_HEADERS)
    return _json(result_body(call.id, outcome))


@router.get("/v1/a2a/tasks/{task_id}")
@router.get("/v1/host/sample/a2a/tasks/{task_id}")
async def get_task_state(task_id: str, request: Request, principal: Principal = Depends(require("runs:read"))) -> Response:
    """The persisted A2ATaskState (RFC 0100 §2), flat; another tenant's task is a 404."""
    store = host_of(request).store
    record = await store.get_task(task_id, principal.tenant)
    if record is None:
        raise NotFound(f"no A2A task {task_id!r}", details={"taskId": task_id})
    return json_response(push_record(record.record, await store.list_push_configs(task_id)))
