"""A run's events at major 2: the closed long-poll and the SSE stream, every event read through the codemap.

Both read the one store log the v1 routes read. The poll's cursor is ``afterSequence``
(exclusive; none: from sequence 0), and its answer is closed: ``{runId, events,
lastSequence, status, isTerminal}``. The stream names each frame by its v2 type with the
sequence as its ``id:``, resumes after an exclusive ``Last-Event-ID`` (read only once the
caller may see the run, so it cannot tell a foreign run from a missing one), and closes
after the terminal event. ``values`` mode sends the run's ``state.snapshot`` first and
after each step; ``bufferMs`` sends each read's events as one ``batch`` frame.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from contextlib import aclosing

import orjson
from fastapi import APIRouter, Depends, Header, Query, Request
from starlette.responses import Response, StreamingResponse

from tether.errors import InvalidInput, UnsupportedStreamMode
from tether.http.openapi import AUTHENTICATED, refusals
from tether.http.requests import require
from tether.openwop.events import TERMINAL_EVENTS, UPDATES, wait_for_events
from tether.openwop.surface import RestSurface, rest_of
from tether.openwop.v2.eventlog import CONTEXT_DEPTH, NEEDS_CONTEXT, Translator
from tether.openwop.v2.ids import bind
from tether.openwop.v2.runs import RunPath, load_run
from tether.openwop.v2.snapshot import snapshot
from tether.store.base import EventRow, RunRow
from tether.types import INT64_MAX, TERMINAL, Principal

__all__ = ["router"]

router = APIRouter(tags=["events (v2)"])

#: every mode a v2 stream serves, one at a time (``values``) or combined (the others)
MODES = ("values", "updates", "messages", "debug")
_MODE = re.compile(r"values|(updates|messages|debug)(,(updates|messages|debug))*")
_SEQUENCE = re.compile(r"[0-9]{1,19}")
#: what a client waits before reconnecting, sent once at the top of every stream
_RETRY = b"retry: 3000\n\n"
POLL_PAGE = 1000


def _modes(raw: str | None) -> frozenset[str]:
    """The modes ``raw`` asks for; anything else is ``400 unsupported_stream_mode`` naming what is served."""
    if raw is None or raw == "":
        return frozenset({"updates"})
    if _MODE.fullmatch(raw) is None:
        raise UnsupportedStreamMode(
            f"streamMode {raw!r:.80} is not served: use values, or any of updates, messages, debug joined by commas",
            details={"supported": list(MODES)},
        )
    return frozenset(raw.split(","))


def _shown(modes: frozenset[str], kind: str) -> bool:
    return "debug" in modes or ("updates" in modes and kind in UPDATES) or "values" in modes


def _after(raw: str | None) -> int:
    """The sequence a ``Last-Event-ID`` names (-1: none): a whole number, else ``400 validation_error``."""
    if raw is None or raw.strip() == "":
        return -1
    if _SEQUENCE.fullmatch(raw.strip()) is None or int(raw) > INT64_MAX:
        raise InvalidInput("Last-Event-ID must be the sequence number of an event the stream sent (0 or more)")
    return int(raw)


async def translator_for(rest: RestSurface, tenant: str, run_id: str, first: EventRow | None) -> Translator:
    """A translator for the run's events from ``first`` on, told the few before it that a legacy one needs."""
    translator = Translator(tenant)
    if first is not None and first.sequence > 0 and first.doc["type"] in NEEDS_CONTEXT:
        since = max(first.sequence - CONTEXT_DEPTH - 1, -1)
        before = await rest.store.read_events(run_id, since, first.sequence - since - 1)
        translator.prime([e.doc for e in before])
    return translator


def _frame(name: str, ident: int | None, data: bytes) -> bytes:
    head = b"id: %d\n" % ident if ident is not None else b""
    return head + b"event: " + name.encode() + b"\ndata: " + data + b"\n\n"


async def _frames(
    rest: RestSurface,
    principal: Principal,
    run_id: str,
    after: int,
    modes: frozenset[str],
    buffered: bool,
) -> AsyncIterator[bytes]:
    tenant = principal.tenant
    yield _RETRY
    values = "values" in modes
    if values:
        row = await rest.store.get_run(run_id, tenant)
        if row is not None:
            yield _frame("state.snapshot", row.last_sequence, orjson.dumps(snapshot(row, rest.signer, principal)))
    follower = rest.logs.follow(run_id, after, rest.settings.keepalive_seconds)
    translator: Translator | None = None
    async with aclosing(follower.pages()) as pages:  # leaving early unsubscribes at once
        async for page in pages:
            if page is None:
                yield b":keepalive\n\n"
                continue
            if translator is None:
                translator = await translator_for(rest, tenant, run_id, page[0])
            docs = [e.doc for e in page]
            v2 = [translator.event(d) for d in docs]  # every one, in order: a later one may need an earlier
            shown = [(e, t) for e, d, t in zip(page, docs, v2) if _shown(modes, d["type"])]
            ended = any(d["type"] in TERMINAL_EVENTS for d in docs)
            if values and shown:
                row = await rest.store.get_run(run_id, tenant)
                if row is not None:
                    yield _frame(
                        "state.snapshot", row.last_sequence, orjson.dumps(snapshot(row, rest.signer, principal))
                    )
            elif buffered and shown:
                yield _frame("batch", shown[-1][0].sequence, orjson.dumps([d for _, d in shown]))
            else:
                for event, doc in shown:
                    yield _frame(doc["type"], event.sequence, orjson.dumps(doc))
            if shown:
                follower.wrote()
            if ended:
                return


@router.get("/runs/{run_id}/events", response_class=StreamingResponse, responses=refusals(*AUTHENTICATED, 400, 404))
async def stream_events(
    request: Request,
    run_id: RunPath,
    streamMode: str | None = Query(default=None),
    bufferMs: int | None = Query(default=None, ge=0, le=5000),
    last_event_id: str | None = Header(default=None, alias="Last-Event-ID"),
    principal: Principal = Depends(require("runs:read")),
) -> Response:
    """Server-sent events of the run, each named by its v2 type, ``id:`` its sequence; closes after the last."""
    modes = _modes(streamMode)
    row = await load_run(request, run_id, principal)
    after = _after(last_event_id)  # only now: an unreadable run answers the same whatever the header says
    rest = rest_of(request)
    frames = _frames(rest, principal, row.run_id, after, modes, bufferMs is not None)
    headers = {"Cache-Control": "no-store", "X-Accel-Buffering": "no"}
    return StreamingResponse(frames, media_type="text/event-stream", headers=headers)


@router.get("/runs/{run_id}/events/poll", responses=refusals(*AUTHENTICATED, 400, 404))
async def poll_events(
    request: Request,
    run_id: RunPath,
    afterSequence: int | None = Query(default=None, ge=-1, le=INT64_MAX),
    timeout: float = Query(default=30, ge=0, le=60),
    principal: Principal = Depends(require("runs:read")),
) -> Response:
    """The events after ``afterSequence`` (exclusive); waits up to ``timeout`` seconds for the first one."""
    after = -1 if afterSequence is None else afterSequence
    rest = rest_of(request)

    async def reload() -> RunRow:
        return await load_run(request, run_id, principal)

    row, events = await wait_for_events(rest, await reload(), reload, after, timeout, POLL_PAGE)
    translator = await translator_for(rest, row.tenant, row.run_id, events[0] if events else None)
    body = {
        "runId": bind(row.tenant, row.run_id),
        "events": [translator.event(e.doc) for e in events],
        "lastSequence": max(row.last_sequence, events[-1].sequence if events else -1),
        "status": row.status,
        "isTerminal": row.status in TERMINAL,
    }
    return Response(orjson.dumps(body), media_type="application/json")
