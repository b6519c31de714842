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

One URL serves both A2A versions (a2a-v1.0-wire §1.2): ``A2A-Version`` (header, else
query parameter; absent means 0.3) picks the version's method table, and every answer
says which version answered in its own ``A2A-Version`` header. A method of the other
version is refused, never served in the wrong shapes: a 1.0 name under 0.3 is -32009
(the caller forgot the header), a 0.3 name under 1.0 is -32601.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import aclosing
from typing import Any
from urllib.parse import parse_qs

import orjson
from starlette.applications import Starlette
from starlette.responses import Response
from starlette.types import Message, Receive, Scope, Send

from tether.a2a.calls import A2A_SCOPES, Call, Methods, Stream
from tether.a2a.capabilities import RPC_PATH
from tether.a2a.jsonrpc import (
    InternalError,
    MethodNotFound,
    Rejected,
    RequestId,
    RpcError,
    UnsupportedOperation,
    VersionNotSupportedError,
    error_body,
    parse_request,
    quote,
    result_body,
    rpc_error_from,
)
from tether.a2a.rpc03 import Legacy
from tether.a2a.rpc10 import Current
from tether.a2a.service import A2AService
from tether.a2a.streams import SSE_HEADERS, error_stream, jsonrpc_framing, sse
from tether.a2a.surface import A2ASurface
from tether.a2a.versions import Version, VersionNotSupported, negotiate
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
#: 0.3 method → its 1.0 name (what a refusal suggests)
_RENAMED = {
    "message/send": "SendMessage",
    "message/stream": "SendStreamingMessage",
    "tasks/get": "GetTask",
    "tasks/cancel": "CancelTask",
    "tasks/resubscribe": "SubscribeToTask",
    "tasks/pushNotificationConfig/set": "CreateTaskPushNotificationConfig",
    "tasks/pushNotificationConfig/get": "GetTaskPushNotificationConfig",
    "tasks/pushNotificationConfig/list": "ListTaskPushNotificationConfigs",
    "tasks/pushNotificationConfig/delete": "DeleteTaskPushNotificationConfig",
    "agent/getAuthenticatedExtendedCard": "GetExtendedAgentCard",
}
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
        self._tables: dict[Version, Methods] | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] != RPC_PATH or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        authorization = last_event_id = trace = version_header = None
        for name, value in scope["headers"]:
            if name == b"authorization":
                authorization = value.decode("latin-1")
            elif name == b"a2a-version":
                version_header = value.decode("latin-1")
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
        a2a: A2ASurface = self.app.state.a2a
        try:
            version = negotiate(version_header, _query_version(scope), a2a.capabilities.versions)
        except VersionNotSupported as refused:
            await self._send(send, trace, 200, _version_refusal(body, refused))
            return
        answer = await self._answer(a2a, version, authorization, last_event_id, body)
        stamp = (b"a2a-version", version.value.encode())
        if isinstance(answer, bytes):
            await self._send(send, trace, 200, answer, extra=stamp)
        elif isinstance(answer, Response):

            async def stamped(message: Message) -> None:
                if message["type"] == "http.response.start":
                    message["headers"] = [*message["headers"], *self._headers(trace)]
                await send(message)

            await answer(scope, receive, stamped)
        else:
            await self._stream(receive, send, trace, answer, stamp)

    @staticmethod
    def _headers(trace: bytes | None) -> list[tuple[bytes, bytes]]:
        headers = [(b"date", http_date())]
        if trace is not None:
            headers.append((b"traceparent", trace))
        return headers

    async def _send(
        self,
        send: Send,
        trace: bytes | None,
        status: int,
        body: bytes,
        *,
        close: bool = False,
        extra: tuple[bytes, bytes] | None = None,
    ) -> None:
        headers = [_JSON, (b"content-length", str(len(body)).encode()), *self._headers(trace)]
        if extra is not None:
            headers.append(extra)
        if close:
            headers.append((b"connection", b"close"))
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    async def _stream(
        self,
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
        headers = [*_SSE, *self._headers(trace), *([stamp] if stamp else [])]
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

    def _codecs(self, a2a: A2ASurface) -> dict[Version, Methods]:
        """Each version's method table (made with the host, on the first call)."""
        if self._tables is None:
            service = A2AService(a2a)
            legacy = Legacy(service)
            current = Current(service, legacy.extended_card)
            self._tables = {Version.V0_3: legacy.methods, Version.V1_0: current.methods}
        return self._tables

    async def _answer(
        self, a2a: A2ASurface, version: Version, authorization: str | None, last_event_id: str | None, body: bytes
    ) -> bytes | Response | AsyncIterator[bytes]:
        """One JSON-RPC 2.0 request (batches are refused with a single -32600)."""
        tables = self._codecs(a2a)
        methods = tables[version]
        legacy = version.is_legacy
        try:
            principal = await _principal(a2a, authorization)
            call = parse_request(
                body,
                methods,
                lambda name, params: _check(methods, name, params),
                lambda name: _foreign(version, name, tables),
            )
            method = methods[call.method]
            scope = method.scope(call.params)
            if scope is not None and not principal.can(scope):
                raise Forbidden(
                    f"this API key lacks the scope {scope!r} that {call.method} needs",
                    details={"scopeRequired": scope, "method": call.method},
                )
        except Rejected as rejected:
            return error_body(rejected.request_id, rejected.error, legacy=legacy)
        except TetherError as exc:  # 401 / 403: refused at the HTTP layer, in the REST envelope
            return envelope(exc.status, exc.code, exc.message, exc.details)
        except Exception:
            correlation = new_id("err_")
            log.exception("A2A authentication failed [%s]", correlation)
            return envelope(
                500, "internal_error", "the host failed to check this request's key", {"correlationId": correlation}
            )
        try:
            if method.streaming and not a2a.capabilities.streaming:
                raise UnsupportedOperation(f"{call.method} is not served: this agent's capabilities.streaming is false")
            outcome = await method.run(Call(principal, call.params, version, last_event_id))
        except RpcError as error:
            return _refusal(call.id, method.streaming, legacy, error)
        except TetherError as exc:
            return _refusal(call.id, method.streaming, legacy, rpc_error_from(exc))
        except Exception:
            correlation = new_id("err_")
            log.exception("A2A %s failed [%s]", call.method, correlation)
            failed = InternalError(f"the host failed to handle {call.method} (correlation id {correlation})")
            return _refusal(call.id, method.streaming, legacy, failed)
        if isinstance(outcome, Stream):
            return sse(jsonrpc_framing(call.id, legacy), outcome.frames)
        return result_body(call.id, outcome)


def _check(methods: Methods, name: str, params: dict[str, Any]) -> None:
    check = methods[name].check
    if check is not None:
        check(params)


def _foreign(version: Version, name: str, tables: dict[Version, Methods]) -> RpcError | None:
    """The refusal of a method of the other version (None: a method of neither)."""
    if version.is_legacy and name in tables[Version.V1_0]:
        return VersionNotSupportedError(
            f"{name} is an A2A 1.0 method, and this request speaks 0.3 (it sent no A2A-Version): "
            "send the header A2A-Version: 1.0 to call it",
            data={"requestedVersion": "0.3", "method": name},
        )
    if not version.is_legacy and name in tables[Version.V0_3]:
        return MethodNotFound(
            f"{quote(name)} is an A2A 0.3 method; under A2A-Version {version.value} call {_RENAMED[name]}",
            data={"method": name},
        )
    return None


def _query_version(scope: Scope) -> str | None:
    """The ``A2A-Version`` query parameter, if the request has one."""
    query = scope.get("query_string", b"")
    if not query:
        return None
    values = parse_qs(query.decode("latin-1")).get("A2A-Version")
    return values[0] if values else None


def _request_id(body: bytes) -> RequestId:
    """The id of a request refused before it was parsed, if it can be read (else null)."""
    try:
        doc = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None
    found = doc.get("id") if isinstance(doc, dict) else None
    return found if isinstance(found, str | int) and not isinstance(found, bool) else None


def _version_refusal(body: bytes, refused: VersionNotSupported) -> bytes:
    served = ",".join(v.value for v in refused.served)
    error = VersionNotSupportedError(
        f"{refused}: send A2A-Version with one of them (or none, for 0.3)",
        data={"requestedVersion": refused.requested, "supportedVersions": served},
    )
    return error_body(_request_id(body), error, legacy=False)


async def _principal(a2a: A2ASurface, authorization: str | None) -> Principal:
    """The caller: its key's principal, or the anonymous one when it sends no key to a public agent."""
    tenant = a2a.settings.a2a_anonymous_tenant
    if tenant is not None and not authorization:
        return anonymous(tenant)
    return await a2a.verifier.verify(authorization)


def _refusal(request_id: RequestId, streaming: bool, legacy: bool, error: RpcError) -> bytes | AsyncIterator[bytes]:
    """An error answer; a 0.3 stream method gets it as its one SSE event (what 0.3 clients read),
    a 1.0 one as a plain JSON-RPC error (a2a-v1.0-wire §1.2)."""
    if streaming and legacy:
        return error_stream(jsonrpc_framing(request_id, legacy), error)
    return error_body(request_id, error, legacy=legacy)
