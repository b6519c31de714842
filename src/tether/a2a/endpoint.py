"""``POST /v1/a2a`` (``/v1/a2a/`` too), the JSON-RPC endpoint, served straight from ASGI.

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
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs

import orjson
from starlette.applications import Starlette
from starlette.responses import Response
from starlette.types import Message, Receive, Scope, Send

from tether.a2a import rest10
from tether.a2a.calls import A2A_SCOPES, Call, Method, Methods, Stream
from tether.a2a.capabilities import REST_PATH, RPC_PATH
from tether.a2a.generations import Generations
from tether.a2a.jsonrpc import (
    ContentTypeNotSupported,
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
from tether.a2a.streams import SSE_HEADERS, Framing, error_stream, jsonrpc_framing, sse
from tether.a2a.surface import A2ASurface
from tether.a2a.versions import Version, VersionNotSupported, negotiate
from tether.errors import Forbidden, TetherError, Unauthenticated
from tether.exchange import note_operation, note_principal, note_traceparent
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
_REST_PREFIX = REST_PATH + "/"
#: the JSON-RPC endpoint, also with a trailing slash: httpx (the a2a-tck's client among others) joins "/" onto the
#: card's url, and a redirect to the bare path would make clients resend without the body or not at all
_RPC_PATHS = frozenset({RPC_PATH, RPC_PATH + "/"})
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
    return Principal(tenant=tenant, name=ANONYMOUS, scopes=A2A_SCOPES, anonymous=True)


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


@dataclass(slots=True)
class _Head:
    """What the A2A endpoints read of a request's headers."""

    authorization: str | None = None
    version: str | None = None
    last_event_id: str | None = None
    content_type: str | None = None
    trace: bytes | None = None
    length: int | None = None

    @classmethod
    def of(cls, scope: Scope) -> _Head:
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


#: the header of an answer after which the connection closes (its request's body was left unread)
CLOSE = (b"connection", b"close")

#: the 1.0 HTTP+JSON binding's streams: each ``data:`` a bare StreamResponse, an error a Status body
_REST_FRAMING = Framing(data=orjson.dumps, error=lambda exc: orjson.dumps(exc.status_body()))


class RpcEndpoint:
    """ASGI middleware: answers ``POST /v1/a2a`` and the 1.0 HTTP+JSON binding itself, passes the rest to ``app``.

    ``app`` is the REST app; its lifespan puts the A2A surface on ``app.state.a2a``.
    """

    def __init__(self, app: Starlette, limit: int) -> None:
        self.app = app
        self.limit = limit
        self._tables: dict[Version, Methods] | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "")
        http = scope["type"] == "http"
        rest = http and path.startswith(_REST_PREFIX)
        rpc = http and path in _RPC_PATHS
        if not rest and not (rpc and scope["method"] == "POST"):
            if rpc:
                await self._not_allowed(scope, receive, send)
                return
            await self.app(scope, receive, send)
            return
        head = _Head.of(scope)
        a2a: A2ASurface = self.app.state.a2a
        # who is calling comes first, before the body is read: a caller without a valid key learns nothing else
        # (not the versions served) and makes this host read nothing (the body may be tens of MiB of files);
        # the unread body is why the connection closes
        close = (CLOSE,)
        try:
            principal = await _principal(a2a, head.authorization)
        except TetherError as exc:
            if rest:
                await self._rest_auth_refusal(send, head.trace, exc, *close)
            else:  # refused at the HTTP layer, in the REST envelope
                unauthorized = envelope(exc.status, exc.code, exc.message)
                await self._respond(scope, receive, send, head.trace, unauthorized, *close)
            return
        except Exception:
            correlation = new_id("err_")
            log.exception("A2A authentication failed [%s]", correlation)
            failed = envelope(
                500, "internal_error", "the host failed to check this request's key", {"correlationId": correlation}
            )
            await self._respond(scope, receive, send, head.trace, failed, *close)
            return
        too_large = head.length is not None and head.length > self.limit
        if not too_large:
            try:
                body = await _body(receive, self.limit)
            except _TooLarge:
                too_large = True
        if too_large:
            if rest:
                status, refusal, headers = rest10.status_error(rest10.BodyTooLarge(self.limit))
                await self._send(send, head.trace, status, refusal, close=True, extra=headers)
            else:
                await self._send(send, head.trace, 413, too_large_body(RPC_PATH, self.limit), close=True)
            return
        if rest:
            await self._rest(scope, receive, send, a2a, head, body, principal)
            return
        try:
            version = negotiate(head.version, _query_version(scope), a2a.capabilities.accepted)
        except VersionNotSupported as refused:
            await self._send(send, head.trace, 200, _version_refusal(body, refused))
            return
        stamp = (b"a2a-version", version.value.encode())
        if not version.is_legacy and not _json_media(head.content_type):
            await self._send(send, head.trace, 200, _media_refusal(body, head.content_type), extra=[stamp])
            return
        answer = await self._answer(a2a, version, principal, head.last_event_id, body)
        if isinstance(answer, bytes):
            await self._send(send, head.trace, 200, answer, extra=[stamp])
        elif isinstance(answer, Response):
            await self._respond(scope, receive, send, head.trace, answer)
        else:
            await self._stream(receive, send, head.trace, answer, stamp)

    async def _respond(
        self,
        scope: Scope,
        receive: Receive,
        send: Send,
        trace: bytes | None,
        answer: Response,
        *extra: tuple[bytes, bytes],
    ) -> None:
        """A Starlette response (a refusal in the REST envelope), with this endpoint's own headers added."""

        async def stamped(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message["headers"], *self._headers(trace), *extra]
            await send(message)

        await answer(scope, receive, stamped)

    async def _not_allowed(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Another verb on the JSON-RPC endpoint: 405 naming POST, in the envelope every REST route's 405 has."""
        refused = envelope(
            405,
            "method_not_allowed",
            f"{scope['method']} is not allowed on {RPC_PATH}: A2A JSON-RPC calls are POSTed",
            headers={"Allow": "POST"},
        )
        await refused(scope, receive, send)

    async def _rest(
        self,
        scope: Scope,
        receive: Receive,
        send: Send,
        a2a: A2ASurface,
        head: _Head,
        body: bytes,
        principal: Principal,
    ) -> None:
        """One request of the 1.0 HTTP+JSON binding: a route, its method, a bare answer or a stream."""
        verb = scope["method"]
        try:
            version = negotiate(head.version, _query_version(scope), a2a.capabilities.accepted)
            if version.is_legacy:
                served = tuple(v for v in a2a.capabilities.accepted if not v.is_legacy)
                raise VersionNotSupported(head.version or "0.3 (no A2A-Version)", served)
        except VersionNotSupported as refused:
            error = _version_error(refused, "this HTTP+JSON binding serves A2A 1.0 only: send A2A-Version: 1.0")
            status, answer, headers = rest10.status_error(error)
            await self._send(send, head.trace, status, answer, extra=headers)
            return
        stamp = (b"a2a-version", version.value.encode())
        methods = self._codecs(a2a)[version]
        try:
            routed = rest10.match(verb, scope["path"][len(REST_PATH) :])
            note_operation(routed.route.method)
            method = methods[routed.route.method]
            _needs_key(method, principal, routed.route.method)
            params = rest10.params_of(routed, scope.get("query_string", b""), body, head.content_type)
            needed = method.scope(params)
            if needed is not None and not principal.can(needed):
                raise Forbidden(f"this API key lacks the scope {needed!r} that {routed.route.method} needs")
            outcome = await method.run(Call(principal, params, version, head.last_event_id))
        except RpcError as error:
            status, answer, headers = rest10.status_error(error)
            await self._send(send, head.trace, status, answer, extra=[*headers, stamp])
            return
        except TetherError as exc:
            if exc.status in (401, 403):
                await self._rest_auth_refusal(send, head.trace, exc, stamp)
                return
            status, answer, headers = rest10.status_error(rpc_error_from(exc))
            await self._send(send, head.trace, status, answer, extra=[*headers, stamp])
            return
        except Exception:
            correlation = new_id("err_")
            log.exception("A2A %s %s failed [%s]", verb, scope["path"], correlation)
            failed = InternalError(f"the host failed to handle {verb} {scope['path']} (correlation id {correlation})")
            status, answer, headers = rest10.status_error(failed)
            await self._send(send, head.trace, status, answer, extra=[*headers, stamp])
            return
        if isinstance(outcome, Stream):
            await self._stream(receive, send, head.trace, sse(_REST_FRAMING, outcome.frames), stamp)
            return
        media = (b"content-type", rest10.MEDIA_TYPE.encode())
        await self._send(send, head.trace, 200, orjson.dumps(outcome), extra=[media, stamp])

    async def _rest_auth_refusal(
        self, send: Send, trace: bytes | None, exc: TetherError, *extra: tuple[bytes, bytes]
    ) -> None:
        """A 401 or 403 of the HTTP+JSON binding, in its own error shape (a 401 says how to authenticate)."""
        headers = [(b"content-type", rest10.ERROR_MEDIA_TYPE.encode()), *extra]
        if exc.status == 401:
            headers.append((b"www-authenticate", b'Bearer realm="tether"'))
        await self._send(send, trace, exc.status, rest10.auth_error(exc.status, exc.message), extra=headers)

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
        extra: list[tuple[bytes, bytes]] | None = None,
    ) -> None:
        """A whole response; ``extra`` headers come last (a content type there replaces JSON's)."""
        named = {name for name, _ in extra or ()}
        headers = [_JSON] if b"content-type" not in named else []
        headers += [(b"content-length", str(len(body)).encode()), *self._headers(trace), *(extra or ())]
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
            draft = Current(service, legacy.extended_card, Generations(a2a.store))
            self._tables = {Version.V0_3: legacy.methods, Version.V1_0: current.methods, Version.V1_1: draft.methods}
        return self._tables

    async def _answer(
        self, a2a: A2ASurface, version: Version, principal: Principal, last_event_id: str | None, body: bytes
    ) -> bytes | Response | AsyncIterator[bytes]:
        """One JSON-RPC 2.0 request (batches are refused with a single -32600)."""
        tables = self._codecs(a2a)
        methods = tables[version]
        legacy = version.is_legacy
        try:
            call = parse_request(
                body,
                methods,
                lambda name, params: _check(methods, name, params),
                lambda name: _foreign(version, name, tables),
            )
            method = methods[call.method]
            note_operation(call.method)
            _needs_key(method, principal, call.method)
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


def _json_media(content_type: str | None) -> bool:
    """Whether a JSON-RPC body says it is JSON (``application/json``, any ``+json``), or says nothing."""
    media = (content_type or "").split(";")[0].strip().lower()
    return not media or media == "application/json" or (media.startswith("application/") and media.endswith("+json"))


def _media_refusal(body: bytes, content_type: str | None) -> bytes:
    """-32005 for a 1.0 JSON-RPC body typed as something other than JSON (A2A 1.0 §9.1: ``application/json``).

    0.3 callers keep being read whatever they label their body, as they always were.
    """
    media = (content_type or "").split(";")[0].strip().lower()
    error = ContentTypeNotSupported(
        f"an A2A 1.0 JSON-RPC request is application/json, not {quote(media)}: send Content-Type: application/json",
        data={"contentType": media},
    )
    return error_body(_request_id(body), error, legacy=False)


def _version_error(refused: VersionNotSupported, advice: str) -> VersionNotSupportedError:
    served = ",".join(v.value for v in refused.served)
    return VersionNotSupportedError(
        f"{refused}: {advice}", data={"requestedVersion": refused.requested, "supportedVersions": served}
    )


def _version_refusal(body: bytes, refused: VersionNotSupported) -> bytes:
    error = _version_error(refused, "send A2A-Version with one of them (or none, for 0.3)")
    return error_body(_request_id(body), error, legacy=False)


async def _principal(a2a: A2ASurface, authorization: str | None) -> Principal:
    """The caller: its key's principal, or the anonymous one when it sends no key to a public agent."""
    tenant = a2a.settings.a2a_anonymous_tenant
    if tenant is not None and not authorization:
        caller = anonymous(tenant)
        note_principal(caller)
        return caller
    return await a2a.verifier.verify(authorization)


def _needs_key(method: Method, principal: Principal, name: str) -> None:
    """A method that needs a key even on a public agent, called without one: 401, as on a private agent."""
    if method.keyed and principal.name == ANONYMOUS:
        raise Unauthenticated(
            f"{name} needs an API key even on this public agent: send 'Authorization: Bearer <api key>'"
        )


def _refusal(request_id: RequestId, streaming: bool, legacy: bool, error: RpcError) -> bytes | AsyncIterator[bytes]:
    """An error answer; a 0.3 stream method gets it as its one SSE event (what 0.3 clients read),
    a 1.0 one as a plain JSON-RPC error (a2a-v1.0-wire §1.2)."""
    if streaming and legacy:
        return error_stream(jsonrpc_framing(request_id, legacy), error)
    return error_body(request_id, error, legacy=legacy)
