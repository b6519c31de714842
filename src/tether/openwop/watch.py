"""``GET /v1/runs:watch``: every change to the caller's tenant's runs, live, as server-sent events.

A Tether extension beside the OpenWOP runs API (the console's runs list follows it). The
frames, their order and their resume rules are ``tether.engine.run_feed``'s; here they are
written as SSE:

- ``event: sync`` (``id:`` a cursor; data ``{"reason": "start" | "gap"}``): read the list
  now (``GET /v1/runs``); every change after this point follows. Always the first frame
  of a stream that cannot resume exactly where its ``Last-Event-ID`` left off.
- ``event: run`` (``id:`` a cursor; data: the run's summary, below): a run was created or
  its status or pending interrupt changed. Keep the one with the highest ``lastSequence``.
- ``event: end`` (no ``id:``; data ``{"reason": "lagging" | "shutdown"}``): the host ends
  the stream (the client read too slowly, or the host stops); reconnect with the last id.
- ``:keepalive`` comments when nothing was sent for the keep-alive interval.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from contextlib import aclosing
from typing import Any, Final

import orjson
from fastapi import APIRouter, Depends, Request
from starlette.responses import Response, StreamingResponse

from tether.engine.run_feed import FeedItem, RunFeed
from tether.errors import InvalidInput
from tether.http.openapi import AUTHENTICATED, event_stream, refusals
from tether.http.requests import require
from tether.openwop.surface import rest_of
from tether.store.base import RunRow
from tether.types import Principal

__all__ = ["SUMMARY_DATA_MAX", "router", "run_summary"]

#: the most bytes of an interrupt's data a run's summary carries
SUMMARY_DATA_MAX: Final = 4096
#: a cursor as the feed writes it: its epoch (16 hex digits), a dash, a position
_CURSOR: Final = re.compile(r"^[0-9a-f]{16}-[0-9]{1,18}$")

_DESCRIPTION: Final = """\
`text/event-stream`. Frames: `sync` (read `GET /v1/runs` now; changes after it follow), `run`
(a run's summary after it was created or its status or pending interrupt changed; keep the one
with the highest `lastSequence`), `end` (the host ends the stream: `lagging` or `shutdown`;
reconnect), and `:keepalive` comments. Send the last `id:` seen as `Last-Event-ID` to resume:
the host replays what was missed, or answers `sync` (`gap`) when it cannot rule a gap out."""

router = APIRouter(tags=["runs"])


def run_summary(row: RunRow) -> bytes:
    """What a runs list shows of a run, as JSON: a ``GET /v1/runs`` item's fields less its state and token.

    The interrupt's ``data`` is left out (``dataOmitted``) past ``SUMMARY_DATA_MAX`` bytes: the
    host keeps the last changes in memory, and a client that needs it reads the run.
    """
    summary: dict[str, Any] = {
        "runId": row.run_id,
        "workflowId": row.workflow_id,
        "status": row.status,
        "createdAt": row.created_at,
        "updatedAt": row.updated_at,
        "lastSequence": row.last_sequence,
    }
    interrupt = row.state.get("interrupt")
    if interrupt:
        shown: dict[str, Any] = {
            key: interrupt[key] for key in ("kind", "nodeId", "interruptId", "requestedAt") if key in interrupt
        }
        data = orjson.dumps(interrupt.get("data"))
        if len(data) <= SUMMARY_DATA_MAX:
            shown["data"] = orjson.Fragment(data)
        else:
            shown["dataOmitted"] = True
        summary["interrupt"] = shown
    return orjson.dumps(summary)


def _frame(item: FeedItem) -> bytes:
    if item.kind == "run":
        assert item.summary is not None and item.cursor is not None
        return b"id: %s\nevent: run\ndata: %s\n\n" % (item.cursor.encode(), item.summary)
    data = orjson.dumps({"reason": item.reason})
    if item.cursor is None:
        return b"event: %s\ndata: %s\n\n" % (item.kind.encode(), data)
    return b"id: %s\nevent: %s\ndata: %s\n\n" % (item.cursor.encode(), item.kind.encode(), data)


async def _frames(feed: RunFeed, tenant: str, after: str | None, keepalive: float) -> AsyncIterator[bytes]:
    async with aclosing(feed.watch(tenant, after, keepalive)) as items:  # leaving early unsubscribes at once
        async for item in items:
            yield b":keepalive\n\n" if item is None else _frame(item)


@router.get(
    "/v1/runs:watch",
    response_class=StreamingResponse,
    summary="Watch the runs of the caller's tenant change (SSE)",
    description=_DESCRIPTION,
    responses={
        **event_stream("The run changes of the caller's tenant.", ("sync", "run", "end")),
        **refusals(400, *AUTHENTICATED),
    },
    openapi_extra={
        "parameters": [
            {
                "name": "Last-Event-ID",
                "in": "header",
                "required": False,
                "description": "The last `id:` this stream sent: resume after it.",
                "schema": {"type": "string", "pattern": "^[0-9a-f]{16}-[0-9]{1,18}$"},
            }
        ]
    },
)
async def watch_runs(request: Request, principal: Principal = Depends(require("runs:read"))) -> Response:
    """Run changes of the caller's tenant as server-sent events; ``Last-Event-ID`` resumes."""
    raw = request.headers.get("last-event-id")
    after = raw.strip() if raw is not None and raw.strip() else None
    if after is not None and not _CURSOR.match(after):
        raise InvalidInput("Last-Event-ID must be an id this stream sent (<epoch>-<position>)")
    rest = rest_of(request)
    frames = _frames(rest.feed, principal.tenant, after, rest.settings.keepalive_seconds)
    headers = {"Cache-Control": "no-store", "X-Accel-Buffering": "no"}
    return StreamingResponse(frames, media_type="text/event-stream", headers=headers)
