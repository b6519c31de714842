"""``POST /v1/a2a``, the JSON-RPC endpoint, served straight from ASGI.

Every A2A call arrives here, so it skips the REST stack (routing, dependencies, three
response wrappers) and does their work itself, once: the body limit, the ``Date``
header and the ``traceparent`` echo. Authentication happens at the HTTP layer, as A2A
wants: no valid key is a 401 with ``WWW-Authenticate`` and a key without the method's
scope a 403, both in the REST envelope. A host serving a public agent
(``--a2a-anonymous-tenant``) lets a call without any key act as :func:`anonymous`; a
key that is sent is still checked, so a bad one is still a 401. Everything after that is JSON-RPC: errors are
HTTP 200 with an ``error`` member, and the streaming methods answer with server-sent
events.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import aclosing

from starlette.applications import Starlette
from starlette.responses import Response
from starlette.types import Message, Receive, Scope, Send

from tether.a2a.capabilities import RPC_PATH
from tether.a2a.handlers import (
    A2A_SCOPES,
    METHODS,
    STREAMING_METHODS,
    A2AHandlers,
    Stream,
    check_params,
    required_scope,
)
from tether.a2a.jsonrpc import (
    InternalError,
    Rejected,
    RequestId,
    RpcError,
    error_body,
    parse_request,
    result_body,
    rpc_error_from,
)
from tether.a2a.streams import SSE_HEADERS, StreamProjections, error_stream, sse
from tether.a2a.surface import A2ASurface
from tether.a2a.tasks import EncodedTasks
from tether.errors import Forbidden, TetherError
from tether.http.errors import envelope
from tether.http.middleware import http_date, too_large_body, well_formed_traceparent
from tether.ids import new_id
from tether.types import Principal

__all__ = ["ANONYMOUS", "RpcEndpoint", "anonymous"]

#: the principal name of keyless A2A callers: stable, so their messageIds stay idempotent, and no key's
#: (keys act as ``key:<name>``)
ANONYMOUS = "anonymous"

log = logging.getLogger("tether.a2a")

_JSON = (b"content-type", b"application/json")
_SSE = [
    (b"content-type", b"text/event-stream; charset=utf-8"),
    *((k.lower().encode(), v.encode()) for k, v in SSE_HEADERS.items()),
]


class _TooLarge(Exception):
    pass


def anonymous(tenant: str) -> Principal:
    """Who a keyless A2A caller is on a public agent: one fixed principal of ``tenant``, A2A scopes only.

    Only ``/v1/a2a`` ever makes it, so REST (and anything admin) stays behind a key.
    """
    return Principal(tenant=tenant, name=ANONYMOUS, scopes=A2A_SCOPES)


async def _body(receive: Receive, limit: int) -> bytes:
    """The whole request body; _TooLarge once it passes ``limit`` bytes."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            break
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise _TooLarge
        chunks.append(chunk)
        if not message.get("more_body", False):
            break
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


class RpcEndpoint:
    """ASGI middleware: answers ``POST /v1/a2a`` itself and passes everything else to ``app``.

    ``app`` is the REST app; its lifespan puts the A2A surface on ``app.state.a2a``.
    """

    def __init__(self, app: Starlette, limit: int) -> None:
        self.app = app
        self.limit = limit
        self._handlers: A2AHandlers | None = None  # made with the host, on the first call

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] != RPC_PATH or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        authorization = last_event_id = trace = None
        for name, value in scope["headers"]:
            if name == b"authorization":
                authorization = value.decode("latin-1")
            elif name == b"last-event-id":
                last_event_id = value.decode("latin-1")
            elif name == b"traceparent":
                trace = well_formed_traceparent(value)
            elif name == b"content-length" and value.isdigit() and int(value) > self.limit:
                await self._send(send, trace, 413, too_large_body(RPC_PATH, self.limit), close=True)
                return
        try:
            body = await _body(receive, self.limit)
        except _TooLarge:
            await self._send(send, trace, 413, too_large_body(RPC_PATH, self.limit), close=True)
            return
        answer = await self._answer(self.app.state.a2a, authorization, last_event_id, body)
        if isinstance(answer, bytes):
            await self._send(send, trace, 200, answer)
        elif isinstance(answer, Response):

            async def stamped(message: Message) -> None:
                if message["type"] == "http.response.start":
                    message["headers"] = [*message["headers"], *self._headers(trace)]
                await send(message)

            await answer(scope, receive, stamped)
        else:
            await self._stream(receive, send, trace, answer)

    @staticmethod
    def _headers(trace: bytes | None) -> list[tuple[bytes, bytes]]:
        headers = [(b"date", http_date())]
        if trace is not None:
            headers.append((b"traceparent", trace))
        return headers

    async def _send(self, send: Send, trace: bytes | None, status: int, body: bytes, *, close: bool = False) -> None:
        headers = [_JSON, (b"content-length", str(len(body)).encode()), *self._headers(trace)]
        if close:
            headers.append((b"connection", b"close"))
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    async def _stream(self, receive: Receive, send: Send, trace: bytes | None, chunks: AsyncIterator[bytes]) -> None:
        """Server-sent events, a write per chunk, until the stream ends or the client leaves.

        A client that leaves is noticed at once, not at the next write: the stream is
        cancelled where it waits, and its generators close (which unsubscribes them).
        """
        await send({"type": "http.response.start", "status": 200, "headers": [*_SSE, *self._headers(trace)]})
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

    async def _answer(
        self, a2a: A2ASurface, authorization: str | None, last_event_id: str | None, body: bytes
    ) -> bytes | Response | AsyncIterator[bytes]:
        """One JSON-RPC 2.0 request (batches are refused with a single -32600)."""
        try:
            principal = await _principal(a2a, authorization)
            call = parse_request(body, METHODS, check_params)
            scope = required_scope(call)
            if scope is not None and not principal.can(scope):
                raise Forbidden(
                    f"this API key lacks the scope {scope!r} that {call.method} needs",
                    details={"scopeRequired": scope, "method": call.method},
                )
        except Rejected as rejected:
            return error_body(rejected.request_id, rejected.error)
        except TetherError as exc:  # 401 / 403: refused at the HTTP layer, in the REST envelope
            return envelope(exc.status, exc.code, exc.message, exc.details)
        except Exception:
            correlation = new_id("err_")
            log.exception("A2A authentication failed [%s]", correlation)
            return envelope(
                500, "internal_error", "the host failed to check this request's key", {"correlationId": correlation}
            )
        if self._handlers is None:
            self._handlers = A2AHandlers(a2a, EncodedTasks(), StreamProjections())
        try:
            outcome = await self._handlers.handle(principal, call, last_event_id=last_event_id)
        except RpcError as error:
            return _refusal(call.id, call.method, error)
        except TetherError as exc:
            return _refusal(call.id, call.method, rpc_error_from(exc))
        except Exception:
            correlation = new_id("err_")
            log.exception("A2A %s failed [%s]", call.method, correlation)
            return _refusal(
                call.id,
                call.method,
                InternalError(f"the host failed to handle {call.method} (correlation id {correlation})"),
            )
        if isinstance(outcome, Stream):
            return sse(call.id, outcome.frames)
        return result_body(call.id, outcome)


async def _principal(a2a: A2ASurface, authorization: str | None) -> Principal:
    """The caller: its key's principal, or the anonymous one when it sends no key to a public agent."""
    tenant = a2a.settings.a2a_anonymous_tenant
    if tenant is not None and not authorization:
        return anonymous(tenant)
    return await a2a.verifier.verify(authorization)


def _refusal(request_id: RequestId, method: str, error: RpcError) -> bytes | AsyncIterator[bytes]:
    """An error answer; a stream method gets it as its one SSE event (what v0.3 clients read)."""
    if method in STREAMING_METHODS:
        return error_stream(request_id, error)
    return error_body(request_id, error)
