"""The A2A 1.0 HTTP+JSON binding (a2a-v1.0-wire §4), under ``/v1/a2a/rest``.

Each route is one of the 1.0 methods of :mod:`tether.a2a.v1_0.methods`: the path, query and body
become that method's ProtoJSON params, and its answer is sent bare (no JSON-RPC envelope)
as ``application/a2a+json``; streams are server-sent events whose ``data:`` is a bare
``StreamResponse``. Errors are ``google.rpc.Status``-shaped bodies with the 1.0 status
table (:meth:`tether.a2a.errors.A2AError.status_body`), as ``application/json``
(:data:`ERROR_MEDIA_TYPE`). Every route also answers under a ``/{tenant}`` prefix, whose
value becomes the request's ``tenant``, and with a trailing slash, as clients that join
paths onto a base URL send it.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs

import orjson
from starlette.types import Receive, Scope, Send

from tether.a2a._asgi import Head, send_stream, send_whole
from tether.a2a.calls import Call, Methods, Stream, needs_key
from tether.a2a.capabilities import REST_PATH
from tether.a2a.errors import (
    A2AError,
    ContentTypeNotSupported,
    InternalError,
    InvalidParams,
    InvalidRequest,
    JSONParseError,
    MethodNotFound,
    a2a_error_from,
    quote,
)
from tether.a2a.streams import Framing, sse
from tether.a2a.versions import Version
from tether.errors import Forbidden, TetherError
from tether.exchange import note_operation
from tether.ids import new_id
from tether.types import INT32_MAX, Principal

__all__ = [
    "ERROR_MEDIA_TYPE",
    "MEDIA_TYPE",
    "BodyTooLarge",
    "BodyTypeNotSupported",
    "NotAllowed",
    "Route",
    "Routed",
    "auth_error",
    "auth_refusal",
    "match",
    "params_of",
    "send_error",
    "serve",
    "status_error",
]

log = logging.getLogger("tether.a2a")

#: the media type of an answer: the one A2A registers for this binding (§14.1; v1.0.1 §11.1 says SHOULD)
MEDIA_TYPE = "application/a2a+json"
#: the media type of an error: the body is a ``google.rpc.Status`` (AIP-193), not an A2A object, and A2A 1.0.0
#: §11.1 and §11.6 give ``application/json`` (the a2a-tck checks it, HTTP_JSON-ERR-001; a2a-sdk answers so)
ERROR_MEDIA_TYPE = "application/json"
_ERROR_TYPE = (b"content-type", ERROR_MEDIA_TYPE.encode())
_BODY_TYPES = ("application/a2a+json", "application/json")
#: query parameters that are numbers or flags in the proto (the rest are strings)
_INTS = frozenset({"historyLength", "pageSize"})
_FLAGS = frozenset({"includeArtifacts"})
#: an int32 as a query writes it (ASCII digits only: ``int`` takes other scripts' digits, spaces and ``_``)
_INT32_TEXT = re.compile("-?[0-9]{1,10}")

_SEGMENT = "([^/]+?)"


@dataclass(frozen=True, slots=True)
class Route:
    """``verb path`` → a 1.0 method; ``names`` are the path captures' param names."""

    verbs: tuple[str, ...]
    pattern: re.Pattern[str]
    method: str
    names: tuple[str, ...] = ()
    #: where the body goes: "params" (it is the params), "merge" (beside the path's), None (no body)
    body: str | None = None


def _route(verbs: str, path: str, method: str, names: tuple[str, ...] = (), body: str | None = None) -> Route:
    pattern = re.compile("^" + re.escape(path).replace(re.escape("{}"), _SEGMENT) + "$")
    return Route(tuple(verbs.split("|")), pattern, method, names, body)


ROUTES: tuple[Route, ...] = (
    _route("POST", "/message:send", "SendMessage", body="params"),
    _route("POST", "/message:stream", "SendStreamingMessage", body="params"),
    _route("POST", "/tasks/{}:cancel", "CancelTask", ("id",), body="merge"),
    _route("POST|GET", "/tasks/{}:subscribe", "SubscribeToTask", ("id",)),
    _route("POST", "/tasks/{}/pushNotificationConfigs", "CreateTaskPushNotificationConfig", ("taskId",), "merge"),
    _route("GET", "/tasks/{}/pushNotificationConfigs", "ListTaskPushNotificationConfigs", ("taskId",)),
    _route("GET", "/tasks/{}/pushNotificationConfigs/{}", "GetTaskPushNotificationConfig", ("taskId", "id")),
    _route("DELETE", "/tasks/{}/pushNotificationConfigs/{}", "DeleteTaskPushNotificationConfig", ("taskId", "id")),
    _route("GET", "/tasks/{}", "GetTask", ("id",)),
    _route("GET", "/tasks", "ListTasks"),
    _route("GET", "/extendedAgentCard", "GetExtendedAgentCard"),
)


@dataclass(frozen=True, slots=True)
class Routed:
    """A request matched to a route: the route, the path's captures and the tenant prefix."""

    route: Route
    captures: dict[str, str]
    tenant: str | None


class NotAllowed(A2AError):
    """The path exists, not for this verb (HTTP 405, ``Allow`` lists the verbs served)."""

    code = -32601
    title = "Method not allowed"
    reason = "METHOD_NOT_ALLOWED"
    http_status = 405
    rpc_status = "UNIMPLEMENTED"

    def __init__(self, message: str, allowed: tuple[str, ...]) -> None:
        super().__init__(message)
        self.allowed = allowed


class BodyTypeNotSupported(ContentTypeNotSupported):
    """The request body is not in a media type this binding reads: HTTP 415, as HTTP defines it for exactly
    this (RFC 9110 §15.5.16) and A2A 1.0.0's table gives ContentTypeNotSupportedError; the ErrorInfo reason
    stays CONTENT_TYPE_NOT_SUPPORTED. A message *part* of a media type the agent does not take keeps the
    status table's 400 (its class's)."""

    http_status = 415


class BodyTooLarge(InvalidRequest):
    """A body over the host's limit: HTTP 413, in this binding's Status shape (the JSON-RPC endpoint answers
    the same refusal as a -32600 error)."""

    http_status = 413

    def __init__(self, limit: int) -> None:
        super().__init__(
            f"the request body is larger than this host's limit of {limit} bytes", data={"maxBodyBytes": limit}
        )


def _find(verb: str, path: str) -> Routed | None | tuple[str, ...]:
    allowed: tuple[str, ...] = ()
    for route in ROUTES:
        found = route.pattern.match(path)
        if found is None:
            continue
        if verb not in route.verbs:
            allowed += route.verbs
            continue
        return Routed(route, dict(zip(route.names, found.groups())), None)
    return allowed or None


def match(verb: str, path: str) -> Routed:
    """The route of ``verb path`` (``path`` below the binding's base), with or without a tenant prefix.

    Raises
    ------
    MethodNotFound
        No route has that path (HTTP 404).
    NotAllowed
        A route has the path, for other verbs (HTTP 405).
    """
    if len(path) > 1 and path.endswith("/"):  # "/tasks/" is "/tasks": no route ends in a slash
        path = path[:-1]
    found = _find(verb, path)
    if found is None and path.count("/") >= 2:
        tenant, _, rest = path[1:].partition("/")
        inner = _find(verb, "/" + rest)
        if isinstance(inner, Routed):
            return Routed(inner.route, inner.captures, tenant)
        found = inner
    if isinstance(found, Routed):
        return found
    if found:
        verbs = tuple(dict.fromkeys(found))
        raise NotAllowed(f"{verb} is not served on {quote(path)}; use {', '.join(verbs)}", verbs)
    raise MethodNotFound(
        f"no A2A 1.0 HTTP+JSON route {verb} {quote(path)}: see the HTTP+JSON binding of the A2A 1.0 specification"
    )


def _query(raw: bytes) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, values in parse_qs(raw.decode("latin-1"), keep_blank_values=True).items():
        value = values[-1]
        if name in _INTS:
            if not _INT32_TEXT.fullmatch(value) or abs(int(value)) > INT32_MAX:
                raise InvalidParams(
                    f"query parameter {name} must be a whole number up to {INT32_MAX} (an int32), not {quote(value)}",
                    data={"errors": [{"path": name, "message": "not an int32"}]},
                )
            out[name] = int(value)
        elif name in _FLAGS:
            if value not in ("true", "false"):
                raise InvalidParams(
                    f"query parameter {name} must be true or false, not {quote(value)}",
                    data={"errors": [{"path": name, "message": "not true or false"}]},
                )
            out[name] = value == "true"
        elif name != "A2A-Version":
            out[name] = value
    return out


def _body(raw: bytes, content_type: str | None) -> dict[str, Any]:
    if not raw.strip():
        return {}
    media = (content_type or "").split(";")[0].strip().lower()
    if media not in _BODY_TYPES:
        raise BodyTypeNotSupported(
            f"the body must be {MEDIA_TYPE} (or application/json), not {quote(media or 'untyped')}",
            data={"contentType": media},
        )
    try:
        doc = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise JSONParseError(f"the body is not valid JSON: {exc}") from exc
    if not isinstance(doc, dict):
        raise InvalidParams("the body must be a JSON object")
    return doc


def params_of(routed: Routed, query: bytes, body: bytes, content_type: str | None) -> dict[str, Any]:
    """The 1.0 method's params: the query, the body where the route takes one, the path's ids, the tenant."""
    params = _query(query)
    if routed.route.body is not None:
        params.update(_body(body, content_type))
    params.update(routed.captures)
    if routed.tenant is not None:
        params["tenant"] = routed.tenant
    return params


def status_error(error: A2AError) -> tuple[int, bytes, list[tuple[bytes, bytes]]]:
    """An error as this binding answers it: status, ``google.rpc.Status`` body, headers (its content type first)."""
    headers = [_ERROR_TYPE]
    if isinstance(error, NotAllowed):
        headers.append((b"allow", ", ".join(error.allowed).encode()))
    return error.http_status, orjson.dumps(error.status_body()), headers


#: (status, code name) of the HTTP-layer refusals (auth), as this binding spells them
AUTH_STATUS: dict[int, str] = {401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED", 500: "INTERNAL"}


def auth_error(status: int, message: str) -> bytes:
    """A refusal at the HTTP layer (no key, a key without the scope) in this binding's error shape."""
    return orjson.dumps({"error": {"code": status, "status": AUTH_STATUS.get(status, "UNKNOWN"), "message": message}})


#: this binding's streams: each ``data:`` a bare StreamResponse, an error a Status body
_FRAMING = Framing(data=orjson.dumps, error=lambda exc: orjson.dumps(exc.status_body()))


async def send_error(send: Send, trace: bytes | None, error: A2AError, *extra: tuple[bytes, bytes]) -> None:
    """An error answer of this binding, ``extra`` headers after its own."""
    status, answer, headers = status_error(error)
    await send_whole(send, trace, status, answer, extra=[*headers, *extra])


async def auth_refusal(send: Send, trace: bytes | None, exc: TetherError, *extra: tuple[bytes, bytes]) -> None:
    """A 401 or 403 of this binding, in its own error shape (a 401 says how to authenticate)."""
    headers = [(b"content-type", ERROR_MEDIA_TYPE.encode()), *extra]
    if exc.status == 401:
        headers.append((b"www-authenticate", b'Bearer realm="tether"'))
    await send_whole(send, trace, exc.status, auth_error(exc.status, exc.message), extra=headers)


async def serve(
    scope: Scope,
    receive: Receive,
    send: Send,
    head: Head,
    body: bytes,
    principal: Principal,
    version: Version,
    methods: Methods,
) -> None:
    """One request, its caller known and its version negotiated: a route, its method, a bare answer or a stream."""
    verb = scope["method"]
    stamp = (b"a2a-version", version.value.encode())
    try:
        routed = match(verb, scope["path"][len(REST_PATH) :])
        note_operation(routed.route.method)
        method = methods[routed.route.method]
        needs_key(method, principal, routed.route.method)
        params = params_of(routed, scope.get("query_string", b""), body, head.content_type)
        needed = method.scope(params)
        if needed is not None and not principal.can(needed):
            raise Forbidden(f"this API key lacks the scope {needed!r} that {routed.route.method} needs")
        outcome = await method.run(Call(principal, params, version, head.last_event_id))
    except A2AError as error:
        await send_error(send, head.trace, error, stamp)
        return
    except TetherError as exc:
        if exc.status in (401, 403):
            await auth_refusal(send, head.trace, exc, stamp)
            return
        await send_error(send, head.trace, a2a_error_from(exc), stamp)
        return
    except Exception:
        correlation = new_id("err_")
        log.exception("A2A %s %s failed [%s]", verb, scope["path"], correlation)
        failed = InternalError(f"the host failed to handle {verb} {scope['path']} (correlation id {correlation})")
        await send_error(send, head.trace, failed, stamp)
        return
    if isinstance(outcome, Stream):
        await send_stream(receive, send, head.trace, sse(_FRAMING, outcome.frames), stamp)
        return
    media = (b"content-type", MEDIA_TYPE.encode())
    await send_whole(send, head.trace, 200, orjson.dumps(outcome), extra=[media, stamp])
