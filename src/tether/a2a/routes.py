"""The A2A routes of the REST app: the agent card, the durable task state, and the test seams' router.

``POST /v1/a2a`` itself is :mod:`tether.a2a.endpoint`, served before this router; the
OpenAPI document declares it from :data:`OPENAPI_PATHS`. The conformance test seams are
private to the package (:mod:`tether.a2a._seams`); :func:`seams_router` is how the host
mounts them, or the plain 404 that stands in for them when they are off, and
:func:`handoff_pause` how it takes the crash tests' pause between a hand-off's send and its record.
"""

from __future__ import annotations

import hashlib
from collections.abc import Awaitable, Callable
from typing import Any

import orjson
from fastapi import APIRouter, Depends, Request
from starlette.responses import Response

from tether.a2a import _invoke, _seams
from tether.a2a.capabilities import AGENT_CARD_PATH, LEGACY_CARD_PATH, RPC_PATH, V2_CARD_PATH
from tether.a2a.card import agent_card, strict_v10, v2_card
from tether.a2a.push import push_record
from tether.a2a.surface import a2a_of
from tether.errors import NotFound
from tether.http.openapi import AUTHENTICATED, answer, refusals
from tether.http.requests import require
from tether.http.responses import json_response
from tether.settings import Settings
from tether.types import Principal

__all__ = ["OPENAPI_PATHS", "handoff_pause", "router", "seams_router"]

router = APIRouter(tags=["a2a"])

_ENVELOPE_REF = {"$ref": "#/components/schemas/ErrorEnvelope"}
_JSONRPC_ID = {"type": ["string", "integer", "null"]}

#: ``POST /v1/a2a`` as the OpenAPI document declares it (:mod:`tether.a2a.endpoint` answers it, ahead of the
#: REST app). Every body is answered 200 with a JSON-RPC response, a malformed one with a JSON-RPC error
#: (``-32700``, ``-32600``...), so the body's schema is any JSON; only the key and the size are refused in HTTP.
OPENAPI_PATHS: dict[str, Any] = {
    RPC_PATH: {
        "post": {
            "tags": ["a2a"],
            "summary": "A2A JSON-RPC 2.0: 1.0 methods with A2A-Version: 1.0, 0.3 methods without it",
            "description": (
                "One JSON-RPC 2.0 request (``{jsonrpc, id, method, params}``); see docs/a2a.md. A streaming method "
                "(``message/stream``, ``SendStreamingMessage``, ``tasks/resubscribe``, ``SubscribeToTask``) answers "
                "server-sent events whose ``data:`` is a JSON-RPC response each."
            ),
            "operationId": "a2a_jsonrpc",
            "security": [{"apiKey": []}],
            "parameters": [
                {
                    "name": "A2A-Version",
                    "in": "header",
                    "required": False,
                    "schema": {"type": "string"},
                    "description": "1.0 (or 1.1, the draft) for the 1.0 methods; none for 0.3; others: -32009.",
                }
            ],
            # not required: a missing or malformed request is answered like any other, a JSON-RPC error at 200
            "requestBody": {
                "required": False,
                "content": {"application/json": {"schema": {"description": "A JSON-RPC 2.0 request."}}},
            },
            "responses": {
                "200": {
                    "description": "A JSON-RPC 2.0 response (its error member for a refused call), or its stream.",
                    "content": {
                        "application/json": {
                            "schema": {
                                "type": "object",
                                "required": ["jsonrpc", "id"],
                                "properties": {
                                    "jsonrpc": {"const": "2.0"},
                                    "id": _JSONRPC_ID,
                                    "result": {},
                                    "error": {"type": "object", "required": ["code", "message"]},
                                },
                            }
                        },
                        "text/event-stream": {
                            "schema": {
                                "type": "object",
                                "required": ["data"],
                                "properties": {"data": {"type": "string", "contentMediaType": "application/json"}},
                            }
                        },
                    },
                },
                **{
                    str(status): {
                        "description": description,
                        "content": {"application/json": {"schema": _ENVELOPE_REF}},
                    }
                    for status, description in (
                        (401, "No API key (on an agent that is not public), or one that is unknown or revoked."),
                        (403, "The API key lacks the scope the method needs."),
                        (413, "The request body is larger than this host's limit."),
                    )
                },
            },
        }
    }
}


_CARD = answer(200, "The agent card.")
_TASK = {**answer(200, "The A2ATaskState."), **refusals(*AUTHENTICATED, 404)}


@router.get(AGENT_CARD_PATH, responses=_CARD)
@router.get(LEGACY_CARD_PATH, responses=_CARD)
async def get_agent_card(request: Request) -> Response:
    """Public (no credentials): how to reach this agent and what it can do.

    One document serves both generations of clients (0.3 fields beside 1.0 ones); a caller
    that says ``A2A-Version: 1.x`` (both 1.x SDKs do, when they fetch the card) gets the
    strict 1.0 card, which validators built from the 1.0 proto accept.
    """
    a2a = a2a_of(request)
    card = agent_card(a2a.capabilities, a2a.registry, a2a.settings.default_skill, anonymous=a2a.anonymous)
    asked = request.headers.get("a2a-version") or request.query_params.get("A2A-Version") or ""
    if asked.strip().startswith("1."):
        card = strict_v10(card)
    return _card_answer(card)


@router.get(V2_CARD_PATH, responses=_CARD)
async def get_v2_agent_card(request: Request) -> Response:
    """Public: the card of the A2A 1.0 interface the OpenWOP v2 root advertises (``a2a.agentCardUrl``).

    The strict 1.0 card, listing ``/a2a`` alone: a 1.x client given it speaks 1.0 there,
    where task ids are bound run ids.
    """
    a2a = a2a_of(request)
    card = agent_card(a2a.capabilities, a2a.registry, a2a.settings.default_skill, anonymous=a2a.anonymous)
    return _card_answer(v2_card(a2a.capabilities, card))


def _card_answer(card: dict[str, Any]) -> Response:
    body = orjson.dumps(card)
    headers = {
        "Cache-Control": "public, max-age=60",
        "Vary": "A2A-Version",
        "ETag": '"' + hashlib.sha256(body).hexdigest()[:32] + '"',
    }
    return Response(body, media_type="application/json", headers=headers)


@router.get("/v1/a2a/tasks/{task_id}", responses=_TASK)
@router.get("/v1/host/sample/a2a/tasks/{task_id}", responses=_TASK)
async def get_task_state(
    task_id: str, request: Request, principal: Principal = Depends(require("runs:read"))
) -> Response:
    """The persisted A2ATaskState (RFC 0100 §2), flat; another tenant's task is a 404."""
    store = a2a_of(request).store
    record = await store.get_task(task_id, principal.tenant)
    if record is None:
        raise NotFound(f"no A2A task {task_id!r}", details={"taskId": task_id})
    return json_response(push_record(record.record, await store.list_push_configs(task_id)))


def seams_router(enabled: bool) -> APIRouter:
    """The conformance test seams when ``enabled`` (``--enable-test-seams``), else a router that serves nothing."""
    if not enabled:
        return _seams.absent_router
    seams = APIRouter(include_in_schema=False)
    seams.include_router(_seams.router)
    seams.include_router(_invoke.router)
    return seams


def handoff_pause(settings: Settings) -> Callable[[], Awaitable[None]] | None:
    """The hand-off's pause between its send and its record, with the seams on and ``--test-handoff-pause-file``."""
    return _seams.handoff_pause(settings)
