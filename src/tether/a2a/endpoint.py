"""``POST /v1/a2a`` and ``/v1/a2a/rest/…``: where every A2A call arrives, served straight from ASGI.

The endpoint decides three things and leaves the rest to the bindings: who is calling,
which binding the request speaks and which A2A version it asks for.

- Who: authentication happens at the HTTP layer, as A2A wants, before the body is read:
  no valid key is a 401 with ``WWW-Authenticate`` and a key without the method's scope a
  403. A host serving a public agent (``--a2a-anonymous-tenant``) lets a call without any
  key act as :func:`~tether.a2a.calls.anonymous`; a key that is sent is still checked, so
  a bad one is still a 401.
- Which binding: ``POST /v1/a2a`` (``/v1/a2a/`` too) is JSON-RPC, for both versions
  (:mod:`tether.a2a.jsonrpc`); a path under ``/v1/a2a/rest/`` is the 1.0 HTTP+JSON binding
  (:mod:`tether.a2a.v1_0.http_json`). ``POST /a2a`` is the interface the OpenWOP v2 root
  advertises: JSON-RPC, 1.0 only, task ids bound (:mod:`tether.a2a.v1_0.bound`), and every
  answer there in JSON-RPC's shape, a refusal before dispatch (401, 403, 413) included.
- Which version: one URL serves both (a2a-v1.0-wire §1.2). ``A2A-Version`` (header, else
  query parameter; absent means 0.3) picks the version's method table, and every answer
  says which version answered in its own ``A2A-Version`` header. HTTP+JSON serves 1.0
  only.

Skipping the REST stack (routing, dependencies, three response wrappers), the endpoint
does their work itself, once (:mod:`tether.a2a._asgi`): the body limit, the ``Date``
header and the ``traceparent`` echo.
"""

from __future__ import annotations

import logging
from typing import Any
from urllib.parse import parse_qs

import orjson
from starlette.applications import Starlette
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from tether.a2a import jsonrpc
from tether.a2a._asgi import CLOSE, Head, TooLarge, read_body, respond, send_stream, send_whole
from tether.a2a.calls import Call, Methods, anonymous
from tether.a2a.capabilities import REST_PATH, RPC_PATH, V2_RPC_PATH
from tether.a2a.card import v2_card
from tether.a2a.errors import (
    DOMAIN,
    ERROR_INFO,
    A2AError,
    InternalError,
    InvalidRequest,
    VersionNotSupportedError,
    clip,
)
from tether.a2a.generations import Generations
from tether.a2a.service import A2AService
from tether.a2a.surface import A2ASurface
from tether.a2a.v0_3.methods import V03Codec
from tether.a2a.v1_0 import http_json
from tether.a2a.v1_0.bound import BOUND_VERSION, bound_methods
from tether.a2a.v1_0.methods import V10Codec
from tether.a2a.versions import Version, VersionNotSupported, negotiate
from tether.errors import TetherError
from tether.exchange import note_principal
from tether.http.errors import envelope
from tether.http.middleware import too_large_body
from tether.ids import new_id
from tether.types import Principal

__all__ = ["A2AEndpoint"]

log = logging.getLogger("tether.a2a")

_REST_PREFIX = REST_PATH + "/"
#: the JSON-RPC endpoint, also with a trailing slash: httpx (the a2a-tck's client among others) joins "/" onto the
#: card's url, and a redirect to the bare path would make clients resend without the body or not at all
_RPC_PATHS = frozenset({RPC_PATH, RPC_PATH + "/"})
_V2_PATHS = frozenset({V2_RPC_PATH, V2_RPC_PATH + "/"})
#: what the v2-advertised interface serves: 1.0 alone (0.3 stays on /v1/a2a)
_V2_SERVED = (Version.V1_0,)


class A2AEndpoint:
    """ASGI middleware: answers ``POST /v1/a2a`` and the 1.0 HTTP+JSON binding itself, passes the rest to ``app``.

    ``app`` is the REST app; its lifespan puts the A2A surface on ``app.state.a2a``.
    """

    def __init__(self, app: Starlette, limit: int) -> None:
        self.app = app
        self.limit = limit
        self._tables: dict[Version, Methods] | None = None
        self._bound: dict[Version, Methods] | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "")
        http = scope["type"] == "http"
        if http and path in _V2_PATHS:
            await self._v2(scope, receive, send)
            return
        rest = http and path.startswith(_REST_PREFIX)
        rpc = http and path in _RPC_PATHS
        if not rest and not (rpc and scope["method"] == "POST"):
            if rpc:
                await self._not_allowed(scope, receive, send)
                return
            await self.app(scope, receive, send)
            return
        head = Head.of(scope)
        a2a: A2ASurface = self.app.state.a2a
        # who is calling comes first, before the body is read: a caller without a valid key learns nothing else
        # (not the versions served) and makes this host read nothing (the body may be tens of MiB of files);
        # the unread body is why the connection closes
        try:
            principal = await _principal(a2a, head.authorization)
        except TetherError as exc:
            if rest:
                await http_json.auth_refusal(send, head.trace, exc, CLOSE)
            else:  # refused at the HTTP layer, in the REST envelope
                unauthorized = envelope(exc.status, exc.code, exc.message)
                await respond(scope, receive, send, head.trace, unauthorized, CLOSE)
            return
        except Exception:
            correlation = new_id("err_")
            log.exception("A2A authentication failed [%s]", correlation)
            failed = envelope(
                500, "internal_error", "the host failed to check this request's key", {"correlationId": correlation}
            )
            await respond(scope, receive, send, head.trace, failed, CLOSE)
            return
        too_large = head.length is not None and head.length > self.limit
        if not too_large:
            try:
                body = await read_body(receive, self.limit)
            except TooLarge:
                too_large = True
        if too_large:
            if rest:
                status, refusal, headers = http_json.status_error(http_json.BodyTooLarge(self.limit))
                await send_whole(send, head.trace, status, refusal, close=True, extra=headers)
            else:
                await send_whole(send, head.trace, 413, too_large_body(RPC_PATH, self.limit), close=True)
            return
        if rest:
            await self._rest(scope, receive, send, a2a, head, body, principal)
            return
        try:
            version = negotiate(head.version, _query_version(scope), a2a.capabilities.accepted)
        except VersionNotSupported as refused:
            await send_whole(send, head.trace, 200, _version_refusal(body, refused))
            return
        stamp = (b"a2a-version", version.value.encode())
        tables = self._codecs(a2a)
        answer = await jsonrpc.answer(a2a, tables, version, principal, head.last_event_id, head.content_type, body)
        if isinstance(answer, bytes):
            await send_whole(send, head.trace, 200, answer, extra=[stamp])
        elif isinstance(answer, Response):
            await respond(scope, receive, send, head.trace, answer)
        else:
            await send_stream(receive, send, head.trace, answer, stamp)

    async def _v2(self, scope: Scope, receive: Receive, send: Send) -> None:
        """One request to ``/a2a``: who calls, its body within the limit, 1.0, then the bound methods.

        Every answer is JSON-RPC's, whatever refuses the request: never the OpenWOP envelope.
        """
        head = Head.of(scope)
        if scope["method"] != "POST":
            refused = InvalidRequest(f"{scope['method']} is not allowed on {V2_RPC_PATH}: JSON-RPC calls are POSTed")
            await send_whole(send, head.trace, 405, _rpc_error(None, refused), extra=[(b"allow", b"POST")])
            return
        a2a: A2ASurface = self.app.state.a2a
        try:
            principal = await _principal(a2a, head.authorization)
        except TetherError as exc:
            status, body, headers = _rpc_refusal(None, exc)
            await send_whole(send, head.trace, status, body, close=True, extra=headers)
            return
        except Exception:
            correlation = new_id("err_")
            log.exception("A2A authentication failed [%s]", correlation)
            failed = InternalError(f"the host failed to check this request's key (correlation id {correlation})")
            await send_whole(send, head.trace, 500, _rpc_error(None, failed), close=True)
            return
        try:
            if head.length is not None and head.length > self.limit:
                raise TooLarge
            body = await read_body(receive, self.limit)
        except TooLarge:
            limit = InvalidRequest(
                f"the request body is larger than this host's limit of {self.limit} bytes",
                data={"maxBodyBytes": self.limit},
            )
            await send_whole(send, head.trace, 413, _rpc_error(None, limit), close=True)
            return
        try:
            version = negotiate(head.version, _query_version(scope), _V2_SERVED)
            if version not in _V2_SERVED:  # no A2A-Version at all: a 0.3 caller, below this interface's floor
                raise VersionNotSupported(head.version or "0.3 (no A2A-Version)", _V2_SERVED)
        except VersionNotSupported as refused:
            error = _version_error(refused, f"{V2_RPC_PATH} serves A2A 1.0 only: send A2A-Version: 1.0")
            await send_whole(send, head.trace, 200, _rpc_error(jsonrpc.request_id_of(body), error))
            return
        stamp = (b"a2a-version", version.value.encode())
        tables = self._bound_codecs(a2a)
        answer = await jsonrpc.answer(
            a2a, tables, version, principal, head.last_event_id, head.content_type, body, refuse=_rpc_response
        )
        if isinstance(answer, bytes):
            await send_whole(send, head.trace, 200, answer, extra=[stamp])
        elif isinstance(answer, Response):
            await respond(scope, receive, send, head.trace, answer, stamp)
        else:
            await send_stream(receive, send, head.trace, answer, stamp)

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
        head: Head,
        body: bytes,
        principal: Principal,
    ) -> None:
        """One request of the 1.0 HTTP+JSON binding, once its version is one that binding serves."""
        try:
            version = negotiate(head.version, _query_version(scope), a2a.capabilities.accepted)
            if version.is_legacy:
                served = tuple(v for v in a2a.capabilities.accepted if not v.is_legacy)
                raise VersionNotSupported(head.version or "0.3 (no A2A-Version)", served)
        except VersionNotSupported as refused:
            error = _version_error(refused, "this HTTP+JSON binding serves A2A 1.0 only: send A2A-Version: 1.0")
            await http_json.send_error(send, head.trace, error)
            return
        methods = self._codecs(a2a)[version]
        await http_json.serve(scope, receive, send, head, body, principal, version, methods)

    def _codecs(self, a2a: A2ASurface) -> dict[Version, Methods]:
        """Each version's method table (made with the host, on the first call)."""
        if self._tables is None:
            service = A2AService(a2a)
            v03 = V03Codec(service)
            v10 = V10Codec(service, v03.extended_card)
            draft = V10Codec(service, v03.extended_card, Generations(a2a.store))
            self._tables = {Version.V0_3: v03.methods, Version.V1_0: v10.methods, Version.V1_1: draft.methods}
        return self._tables

    def _bound_codecs(self, a2a: A2ASurface) -> dict[Version, Methods]:
        """The v2-advertised interface's tables: the 1.0 methods with bound ids (0.3's only to name in refusals)."""
        if self._bound is None:
            tables = self._codecs(a2a)
            service = A2AService(a2a)
            legacy = V03Codec(service)
            v10 = V10Codec(service, legacy.extended_card, version=BOUND_VERSION)

            async def card(call: Call) -> dict[str, Any]:
                return v2_card(a2a.capabilities, await legacy.extended_card(call))

            self._bound = {Version.V0_3: tables[Version.V0_3], Version.V1_0: bound_methods(v10.methods, card)}
        return self._bound


def _query_version(scope: Scope) -> str | None:
    """The ``A2A-Version`` query parameter, if the request has one."""
    query = scope.get("query_string", b"")
    if not query:
        return None
    values = parse_qs(query.decode("latin-1")).get("A2A-Version")
    return values[0] if values else None


def _version_error(refused: VersionNotSupported, advice: str) -> VersionNotSupportedError:
    served = ",".join(v.value for v in refused.served)
    return VersionNotSupportedError(
        f"{refused}: {advice}", data={"requestedVersion": refused.requested, "supportedVersions": served}
    )


def _rpc_error(request_id: jsonrpc.RequestId, error: A2AError) -> bytes:
    return jsonrpc.error_body(request_id, error, legacy=False)


def _rpc_refusal(request_id: jsonrpc.RequestId, exc: TetherError) -> tuple[int, bytes, list[tuple[bytes, bytes]]]:
    """A refusal at the HTTP layer (no key, a bad one, a missing scope) in JSON-RPC's shape, at its HTTP status.

    A2A leaves these to HTTP (401 with ``WWW-Authenticate``, 403); the body is still a
    JSON-RPC error, its ErrorInfo naming the reason (``UNAUTHENTICATED``, ``FORBIDDEN``).
    """
    info: dict[str, Any] = {"@type": ERROR_INFO, "reason": exc.code.upper(), "domain": DOMAIN}
    scalars = {k: str(v) for k, v in (exc.details or {}).items() if isinstance(v, str | int)}
    if scalars:
        info["metadata"] = scalars
    error = {"code": InvalidRequest.code, "message": clip(exc.message, 2048), "data": [info]}
    body = orjson.dumps({"jsonrpc": "2.0", "id": request_id, "error": error})
    headers = [(b"www-authenticate", b"Bearer")] if exc.status == 401 else []
    return exc.status, body, headers


def _rpc_response(request_id: jsonrpc.RequestId, exc: TetherError) -> Response:
    status, body, headers = _rpc_refusal(request_id, exc)
    return Response(body, status, {k.decode(): v.decode() for k, v in headers}, media_type="application/json")


def _version_refusal(body: bytes, refused: VersionNotSupported) -> bytes:
    error = _version_error(refused, "send A2A-Version with one of them (or none, for 0.3)")
    return jsonrpc.error_body(jsonrpc.request_id_of(body), error, legacy=False)


async def _principal(a2a: A2ASurface, authorization: str | None) -> Principal:
    """The caller: its key's principal, or the anonymous one when it sends no key to a public agent."""
    tenant = a2a.settings.a2a_anonymous_tenant
    if tenant is not None and not authorization:
        caller = anonymous(tenant)
        note_principal(caller)
        return caller
    return await a2a.verifier.verify(authorization)
