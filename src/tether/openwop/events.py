"""A run's events: the SSE stream (with ``Last-Event-ID`` resume) and the long-poll.

Both read the store after the caller's last sequence and wait on a wake-up hint, so a
stream missed nothing when it reconnects, and any number of observers see one log.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import aclosing

import orjson
from fastapi import APIRouter, Depends, Header, Query, Request
from starlette.responses import Response, StreamingResponse

from tether.errors import InvalidInput, UnsupportedStreamMode
from tether.http.openapi import AUTHENTICATED, event_stream, refusals
from tether.http.requests import require
from tether.openwop.models import EventPage
from tether.openwop.runs import RunId, load_run
from tether.openwop.surface import RestSurface, rest_of
from tether.store.base import EventRow, RunRow
from tether.types import INT64_MAX, TERMINAL, Principal

router = APIRouter(tags=["events"])

TERMINAL_EVENTS = frozenset({"run.completed", "run.failed", "run.cancelled"})
UPDATES = frozenset(
    {
        "run.started",
        "run.completed",
        "run.failed",
        "run.cancelled",
        "run.paused",
        "run.resumed",
        "node.completed",
        "node.failed",
        "node.skipped",
        "node.suspended",
        "node.dispatched",
        "approval.requested",
        "approval.received",
        "clarification.requested",
        "clarification.resolved",
        "interrupt.requested",
        "interrupt.resolved",
        "artifact.created",
        "run.annotated",
        "workspace.updated",
    }
)
STREAM_MODES = ("updates", "messages", "debug")
_MODE = "(" + "|".join(STREAM_MODES) + ")"
#: what ``streamMode`` takes: modes separated by commas, spaces around them allowed; empty is ``updates``
STREAM_MODE_PATTERN = rf"^( *{_MODE} *(, *{_MODE} *)*)?$"
_STREAM_MODE = re.compile(STREAM_MODE_PATTERN)


def parse_stream_modes(raw: str | None) -> frozenset[str]:
    """The modes ``raw`` asks for; anything ``STREAM_MODE_PATTERN`` does not match is refused (400)."""
    if not _STREAM_MODE.fullmatch(raw or ""):
        raise UnsupportedStreamMode(
            f"streamMode {raw!r} is not served here; use {', '.join(STREAM_MODES)}, separated by commas",
            details={"supported": list(STREAM_MODES)},
        )
    return frozenset(m.strip(" ") for m in (raw or "updates").split(","))


def admits(modes: frozenset[str], event_type: str) -> bool:
    if "debug" in modes:
        return True
    if "updates" in modes and event_type in UPDATES:
        return True
    return "messages" in modes and event_type == "ai.message.chunk"


#: ``Last-Event-ID``: the sequence number of the last event seen (-1: none yet); empty means none
LAST_EVENT_ID_PATTERN = r"^ *(-1|[0-9]{1,18})? *$"
_LAST_EVENT_ID = re.compile(LAST_EVENT_ID_PATTERN)


def parse_last_event_id(raw: str | None) -> int:
    if raw is None or raw.strip(" ") == "":
        return -1
    if not _LAST_EVENT_ID.fullmatch(raw):
        raise InvalidInput("Last-Event-ID must be the sequence number of an event (0 or more)")
    return int(raw.strip(" "))


async def wait_for_events(
    rest: RestSurface,
    row: RunRow,
    reload: Callable[[], Awaitable[RunRow]],
    after: int,
    timeout: float,
    limit: int,
) -> tuple[RunRow, list[EventRow]]:
    """A long poll's wait: up to ``limit`` events after ``after``, waiting up to ``timeout`` seconds for the first.

    Answers the run as it was read *before* its events, never after: a terminal status then
    means the events read hold the terminal one (a page read the other way round can pair
    a terminal status with events read before the run ended).
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    with rest.notifier.subscribe(row.run_id) as wake:
        while True:
            wake.clear()
            events = await rest.store.read_events(row.run_id, after, limit)
            if events or row.status in TERMINAL:
                return row, events
            remaining = deadline - loop.time()
            if remaining <= 0:
                return row, events
            await rest.notifier.wait(wake, remaining)
            row = await reload()


async def event_frames(rest: RestSurface, run_id: str, after: int, modes: frozenset[str]) -> AsyncIterator[bytes]:
    """SSE frames of the events after ``after``, live, until the terminal event."""
    follower = rest.logs.follow(run_id, after, rest.settings.keepalive_seconds)
    async with aclosing(follower.events()) as events:  # leaving early unsubscribes at once
        async for event in events:
            if event is None:
                yield b":keepalive\n\n"
                continue
            kind = orjson.loads(event.doc_json)["type"]
            if admits(modes, kind):
                yield b"id: %d\nevent: %s\ndata: %s\n\n" % (event.sequence, kind.encode(), event.doc_json)
                follower.wrote()
            if kind in TERMINAL_EVENTS:
                return


@router.get(
    "/v1/runs/{run_id}/events",
    response_class=StreamingResponse,
    responses={
        **event_stream("The run's events, each named by its type, its sequence as its id."),
        **refusals(*AUTHENTICATED, 400, 404),
    },
)
async def stream_events(
    request: Request,
    run_id: RunId,
    streamMode: str | None = Query(
        default=None,
        # documented, and checked by parse_stream_modes, which refuses with its own code
        json_schema_extra={"pattern": STREAM_MODE_PATTERN},
        description="Comma-separated: updates (the default), messages, debug.",
    ),
    last_event_id: str | None = Header(
        default=None,
        alias="Last-Event-ID",
        json_schema_extra={"pattern": LAST_EVENT_ID_PATTERN},
        description="Resume after this sequence number.",
    ),
    principal: Principal = Depends(require("runs:read")),
) -> Response:
    """Server-sent events; ``id:`` is the sequence, so ``Last-Event-ID`` resumes exactly."""
    modes = parse_stream_modes(streamMode)
    after = parse_last_event_id(last_event_id)
    await load_run(request, run_id, principal)
    rest = rest_of(request)
    headers = {"Cache-Control": "no-store", "X-Accel-Buffering": "no"}
    return StreamingResponse(event_frames(rest, run_id, after, modes), media_type="text/event-stream", headers=headers)


@router.get("/v1/runs/{run_id}/events/poll", response_model=EventPage, responses=refusals(*AUTHENTICATED, 400, 404))
async def poll_events(
    request: Request,
    run_id: RunId,
    lastSequence: int | None = Query(
        default=None, ge=-1, le=INT64_MAX, description="Events after this sequence number."
    ),
    timeout: float = Query(default=30, ge=0, le=60, description="Seconds to wait for the first event."),
    principal: Principal = Depends(require("runs:read")),
) -> Response:
    """Events after ``lastSequence``; waits up to ``timeout`` seconds for the first one."""
    after = -1 if lastSequence is None else lastSequence
    rest = rest_of(request)

    async def reload() -> RunRow:
        return await load_run(request, run_id, principal)

    _, events = await wait_for_events(rest, await reload(), reload, after, timeout, 1000)
    row = await reload()
    last = events[-1].sequence if events else max(after, -1)
    complete = row.status in TERMINAL and last >= row.last_sequence
    body = b'{"events":[%s],"isComplete":%s,"isTerminal":%s,"runStatus":"%s","lastEventSeq":%d}' % (
        b",".join(e.doc_json for e in events),
        b"true" if complete else b"false",
        b"true" if row.status in TERMINAL else b"false",
        row.status.encode(),
        row.last_sequence,
    )
    return Response(body, media_type="application/json")
