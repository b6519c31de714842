"""The JSON-RPC 2.0 binding of both A2A versions: the envelope, stream framing, and answering one request.

One ``POST /v1/a2a`` request, once :mod:`tether.a2a.endpoint` has authenticated it and
negotiated its version, is answered by :func:`answer`: parsed as one JSON-RPC 2.0 request
(batches and notifications are refused), looked up in that version's method table, its
scope checked, and run. Errors are HTTP 200 with an ``error`` member: 0.3 carries
``data`` as it is, 1.0 the typed details array (:mod:`tether.a2a.errors`). The streaming
methods answer with server-sent events whose every ``data:`` is a whole JSON-RPC response.

A method of the other version is refused, never served in the wrong shapes: a 1.0 name
under 0.3 is -32009 (the caller forgot the header), a 0.3 name under 1.0 is -32601.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable, Collection
from dataclasses import dataclass
from typing import Any

import orjson
from starlette.responses import Response

from tether.a2a.calls import Call, Methods, Stream, needs_key
from tether.a2a.errors import (
    A2AError,
    ContentTypeNotSupported,
    InternalError,
    InvalidParams,
    InvalidRequest,
    JSONParseError,
    MethodNotFound,
    UnsupportedOperation,
    VersionNotSupportedError,
    a2a_error_from,
    quote,
)
from tether.a2a.streams import Framing, error_stream, sse
from tether.a2a.surface import A2ASurface
from tether.a2a.versions import Version
from tether.errors import Forbidden, TetherError
from tether.exchange import note_operation
from tether.http.errors import envelope
from tether.ids import new_id
from tether.types import Principal

__all__ = [
    "Rejected",
    "RequestId",
    "RpcRequest",
    "answer",
    "error_body",
    "jsonrpc_framing",
    "parse_request",
    "request_id_of",
    "result_body",
]

RequestId = str | int | None

log = logging.getLogger("tether.a2a")


class Rejected(Exception):
    """A request answered with an error before any method ran (carries the id to echo)."""

    def __init__(self, request_id: RequestId, error: A2AError) -> None:
        super().__init__(error.message)
        self.request_id = request_id
        self.error = error


@dataclass(frozen=True, slots=True)
class RpcRequest:
    """One well-formed request: its id (to echo), its method and its params object."""

    id: str | int
    method: str
    params: dict[str, Any]


def _valid_id(value: Any) -> bool:
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


#: checks a method's params (raising InvalidParams); given by the codecs, which own the params models
ParamsCheck = Callable[[str, dict[str, Any]], None]


def parse_request(
    body: bytes,
    methods: Collection[str],
    check_params: ParamsCheck | None = None,
    foreign: Callable[[str], A2AError | None] | None = None,
) -> RpcRequest:
    """Decode one JSON-RPC request for one of ``methods``.

    A request without an id (a notification, which A2A does not accept) is judged on its
    method and params first: an unknown method is -32601 and bad params -32602, as they
    would be with an id, so the caller learns what to fix; only a notification that is
    otherwise right gets -32600 for its missing id. ``check_params`` is that params check
    (the methods run the same one when a request has an id). ``foreign`` may name a
    better error than -32601 for a method that is not in ``methods`` (one of another A2A
    version). An error answer echoes the id only when it was read; otherwise its id is
    null (JSON-RPC 2.0 §5).

    Raises
    ------
    Rejected
        With -32700 (not JSON), -32600 (not a request object, a batch, a missing or
        non-string method, an id that is not a string or an integer, a notification),
        -32601 (unknown method) or -32602 (params not an object, or failing
        ``check_params`` in a notification).
    """
    try:
        doc = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise Rejected(None, JSONParseError(f"the body is not valid JSON: {exc}")) from exc
    if isinstance(doc, list):
        raise Rejected(
            None, InvalidRequest("batch requests are not supported by A2A: send one JSON-RPC request object per call")
        )
    if not isinstance(doc, dict):
        raise Rejected(None, InvalidRequest("the body must be a JSON-RPC 2.0 request object"))
    request_id: RequestId = doc["id"] if _valid_id(doc.get("id")) else None
    if doc.get("jsonrpc") != "2.0":
        raise Rejected(request_id, InvalidRequest('the request must carry "jsonrpc": "2.0"'))
    notification = doc.get("id") is None
    if not notification and request_id is None:
        raise Rejected(None, InvalidRequest("the request id must be a string or an integer"))
    method = doc.get("method")
    if not isinstance(method, str) or not method:
        raise Rejected(request_id, InvalidRequest("the request needs a method (a non-empty string)"))
    if method not in methods:
        other = foreign(method) if foreign is not None else None
        if other is not None:
            raise Rejected(request_id, other)
        served = ", ".join(sorted(methods))
        raise Rejected(request_id, MethodNotFound(f"no method {quote(method)}; this agent serves {served}"))
    params = doc.get("params", {})
    if not isinstance(params, dict):
        raise Rejected(request_id, InvalidParams("params must be a JSON object"))
    if notification:
        if check_params is not None:
            try:
                check_params(method, params)
            except A2AError as error:
                raise Rejected(None, error) from error
        refused = "A2A requests need an id (a string or an integer); notifications are not accepted"
        raise Rejected(None, InvalidRequest(refused))
    assert request_id is not None
    return RpcRequest(request_id, method, params)


def result_body(request_id: RequestId, result: Any) -> bytes:
    """A success response (``result`` is already JSON-ready)."""
    return orjson.dumps({"jsonrpc": "2.0", "id": request_id, "result": result})


def error_body(request_id: RequestId, error: A2AError, *, legacy: bool = True) -> bytes:
    """An error response: ``data`` as it is for 0.3 (``legacy``), the typed details array for 1.0."""
    body = error.to_json() if legacy else error.to_json_v10()
    return orjson.dumps({"jsonrpc": "2.0", "id": request_id, "error": body})


def jsonrpc_framing(request_id: RequestId, legacy: bool) -> Framing:
    """Every ``data:`` a complete JSON-RPC response to ``request_id``; errors in the version's shape."""
    return Framing(
        data=lambda payload: result_body(request_id, payload),
        error=lambda exc: error_body(request_id, exc, legacy=legacy),
    )


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


async def answer(
    a2a: A2ASurface,
    tables: dict[Version, Methods],
    version: Version,
    principal: Principal,
    last_event_id: str | None,
    content_type: str | None,
    body: bytes,
    refuse: Callable[[RequestId, TetherError], Response] | None = None,
) -> bytes | Response | AsyncIterator[bytes]:
    """One JSON-RPC 2.0 request in ``version`` (batches are refused with a single -32600).

    The answer is a whole body, a refusal at the HTTP layer (a 401 or 403, in the REST
    envelope unless ``refuse`` writes it otherwise) or the chunks of a server-sent event stream.
    """
    legacy = version.is_legacy
    if not legacy and not _json_media(content_type):
        return _media_refusal(body, content_type)
    methods = tables[version]
    try:
        call = parse_request(
            body,
            methods,
            lambda name, params: _check(methods, name, params),
            lambda name: _foreign(version, name, tables),
        )
        method = methods[call.method]
        note_operation(call.method)
        needs_key(method, principal, call.method)
        scope = method.scope(call.params)
        if scope is not None and not principal.can(scope):
            raise Forbidden(
                f"this API key lacks the scope {scope!r} that {call.method} needs",
                details={"scopeRequired": scope, "method": call.method},
            )
    except Rejected as rejected:
        return error_body(rejected.request_id, rejected.error, legacy=legacy)
    except TetherError as exc:  # 401 / 403: refused at the HTTP layer, in the REST envelope
        if refuse is not None:
            return refuse(call.id, exc)
        return envelope(exc.status, exc.code, exc.message, exc.details)
    try:
        if method.streaming and not a2a.capabilities.streaming:
            raise UnsupportedOperation(f"{call.method} is not served: this agent's capabilities.streaming is false")
        outcome = await method.run(Call(principal, call.params, version, last_event_id))
    except A2AError as error:
        return _refusal(call.id, method.streaming, legacy, error)
    except TetherError as exc:
        return _refusal(call.id, method.streaming, legacy, a2a_error_from(exc))
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


def _foreign(version: Version, name: str, tables: dict[Version, Methods]) -> A2AError | None:
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


def request_id_of(body: bytes) -> RequestId:
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
    return error_body(request_id_of(body), error, legacy=False)


def _refusal(request_id: RequestId, streaming: bool, legacy: bool, error: A2AError) -> bytes | AsyncIterator[bytes]:
    """An error answer; a 0.3 stream method gets it as its one SSE event (what 0.3 clients read),
    a 1.0 one as a plain JSON-RPC error (a2a-v1.0-wire §1.2)."""
    if streaming and legacy:
        return error_stream(jsonrpc_framing(request_id, legacy), error)
    return error_body(request_id, error, legacy=legacy)
