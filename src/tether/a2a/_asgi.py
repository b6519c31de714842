"""Answering an A2A request straight over ASGI: its head, its body within a limit, whole answers and streams.

Both A2A bindings answer outside the REST stack, so they do its work themselves, here and
once: every answer carries ``Date`` and echoes a well-formed ``traceparent``; a body past
the limit is never read whole; a stream ends as soon as its client leaves.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import aclosing
from dataclasses import dataclass

from starlette.responses import Response
from starlette.types import Message, Receive, Scope, Send

from tether.a2a.streams import SSE_HEADERS
from tether.exchange import note_traceparent
from tether.http.middleware import http_date, well_formed_traceparent

__all__ = ["CLOSE", "Head", "TooLarge", "read_body", "respond", "send_stream", "send_whole"]

#: the header of an answer after which the connection closes (its request's body was left unread)
CLOSE = (b"connection", b"close")

_JSON = (b"content-type", b"application/json")
_SSE = [
    (b"content-type", b"text/event-stream; charset=utf-8"),
    *((k.lower().encode(), v.encode()) for k, v in SSE_HEADERS.items()),
]


class TooLarge(Exception):
    """The request body passed the limit while it was read."""


async def read_body(receive: Receive, limit: int) -> bytes:
    """The whole request body; TooLarge once it passes ``limit`` bytes."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            break
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise TooLarge
        chunks.append(chunk)
        if not message.get("more_body", False):
            break
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


@dataclass(slots=True)
class Head:
    """What the A2A bindings read of a request's headers."""

    authorization: str | None = None
    version: str | None = None
    last_event_id: str | None = None
    content_type: str | None = None
    trace: bytes | None = None
    length: int | None = None

    @classmethod
    def of(cls, scope: Scope) -> Head:
        head = cls()
        for name, value in scope["headers"]:
            if name == b"authorization":
                head.authorization = value.decode("latin-1")
            elif name == b"a2a-version":
                head.version = value.decode("latin-1")
            elif name == b"content-type":
                head.content_type = value.decode("latin-1")
            elif name == b"last-event-id":
                head.last_event_id = value.decode("latin-1")
            elif name == b"traceparent":
                head.trace = well_formed_traceparent(value)
                if head.trace is not None:
                    note_traceparent(head.trace.decode())
            elif name == b"content-length" and value.isdigit():
                head.length = int(value)
        return head


def _headers(trace: bytes | None) -> list[tuple[bytes, bytes]]:
    headers = [(b"date", http_date())]
    if trace is not None:
        headers.append((b"traceparent", trace))
    return headers


async def respond(
    scope: Scope, receive: Receive, send: Send, trace: bytes | None, answer: Response, *extra: tuple[bytes, bytes]
) -> None:
    """A Starlette response (a refusal in the REST envelope), with the A2A answers' own headers added."""

    async def stamped(message: Message) -> None:
        if message["type"] == "http.response.start":
            message["headers"] = [*message["headers"], *_headers(trace), *extra]
        await send(message)

    await answer(scope, receive, stamped)


async def send_whole(
    send: Send,
    trace: bytes | None,
    status: int,
    body: bytes,
    *,
    close: bool = False,
    extra: list[tuple[bytes, bytes]] | None = None,
) -> None:
    """A whole response; ``extra`` headers come last (a content type there replaces JSON's)."""
    named = {name for name, _ in extra or ()}
    headers = [_JSON] if b"content-type" not in named else []
    headers += [(b"content-length", str(len(body)).encode()), *_headers(trace), *(extra or ())]
    if close:
        headers.append(CLOSE)
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def send_stream(
    receive: Receive,
    send: Send,
    trace: bytes | None,
    chunks: AsyncIterator[bytes],
    stamp: tuple[bytes, bytes] | None = None,
) -> None:
    """Server-sent events, a write per chunk, until the stream ends or the client leaves.

    A client that leaves is noticed at once, not at the next write: the stream is
    cancelled where it waits, and its generators close (which unsubscribes them).
    """
    headers = [*_SSE, *_headers(trace), *([stamp] if stamp else [])]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    streaming = asyncio.current_task()
    assert streaming is not None
    ended = left = False

    async def watch() -> None:
        nonlocal left
        while (await receive())["type"] != "http.disconnect":
            pass
        if not ended:
            left = True
            streaming.cancel()

    watcher = asyncio.ensure_future(watch())
    try:
        async with aclosing(chunks):  # type: ignore[type-var]
            async for chunk in chunks:
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
        ended = True
        await send({"type": "http.response.body", "body": b"", "more_body": False})
    except asyncio.CancelledError:
        if not left:
            raise
        streaming.uncancel()  # the client left: the stream is over, nothing failed
    finally:
        ended = True
        watcher.cancel()
