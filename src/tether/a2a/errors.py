"""The A2A errors: every way an A2A request can be refused, for every version and binding.

The service and the codecs raise these, never a wire's shapes; every ``TetherError`` the
engine raises maps to one of them in :func:`a2a_error_from`, so what a client is told is
decided here alone. A2A defines each error once, with what each binding calls it, and so
does each class: its JSON-RPC code (the same in 0.3 and 1.0), and for 1.0 the ErrorInfo
``reason``, the HTTP status and the ``google.rpc`` status of the HTTP+JSON binding::

    A2AError                      -32603  Internal error
    ├── JSONParseError            -32700  the body is not JSON
    ├── InvalidRequest            -32600  not a single JSON-RPC request object
    ├── MethodNotFound            -32601
    ├── InvalidParams             -32602
    │   └── FileTooLarge          -32602  a file part, or a message's files, over an operator's limit (HTTP 413)
    ├── TaskNotFound              -32001  unknown, or another tenant's (indistinguishable)
    ├── TaskNotCancelable         -32002  already terminal
    ├── PushNotificationNotSupported -32003
    ├── UnsupportedOperation      -32004
    ├── ContentTypeNotSupported   -32005
    ├── ExtendedCardNotConfigured -32007
    ├── VersionNotSupportedError  -32009  an ``A2A-Version`` this host does not serve
    └── TaskGenerationMismatch    -32010  (1.1 draft) ``ifGenerationMatch`` no longer matches

The bindings write the envelopes (:mod:`tether.a2a.jsonrpc`, :mod:`tether.a2a.v1_0.http_json`,
which adds the refusals only HTTP has): a 0.3 error carries ``data`` as it is
(:meth:`A2AError.to_json`), a 1.0 one :meth:`A2AError.details`, the typed array 1.0
requires. Every quote of a caller's value in a message is clipped (:func:`clip`,
:func:`quote`), so no error grows with what the caller sent.
"""

from __future__ import annotations

from typing import Any, ClassVar

import orjson

from tether.errors import Conflict, Gone, InvalidInput, NotFound, TetherError, Unprocessable

__all__ = [
    "ECHO_LIMIT",
    "ContentTypeNotSupported",
    "ExtendedCardNotConfigured",
    "FileTooLarge",
    "InternalError",
    "InvalidParams",
    "InvalidRequest",
    "JSONParseError",
    "MethodNotFound",
    "PushNotificationNotSupported",
    "A2AError",
    "TaskNotCancelable",
    "TaskGenerationMismatch",
    "TaskNotFound",
    "UnsupportedOperation",
    "VersionNotSupportedError",
    "clip",
    "quote",
    "a2a_error_from",
]


#: the most characters of a caller's value an error quotes (REST's run-id limit, so a valid id is quoted whole)
ECHO_LIMIT = 128
#: the ErrorInfo domain of every A2A error (1.0)
DOMAIN = "a2a-protocol.org"
ERROR_INFO = "type.googleapis.com/google.rpc.ErrorInfo"
BAD_REQUEST = "type.googleapis.com/google.rpc.BadRequest"
#: backstops, should a message or a string in ``data`` quote caller input without :func:`clip`
_MESSAGE_LIMIT = 2048
_DATA_STRING_LIMIT = 1024


def clip(text: str, limit: int = ECHO_LIMIT) -> str:
    """``text``, cut to ``limit`` characters and an ellipsis when longer.

    Errors quote what the caller sent so they can find the mistake; without a bound, a
    900 KB id would come back as a 1.8 MB error. Every quote of caller input goes
    through here (or :func:`quote`).
    """
    return text if len(text) <= limit else text[:limit] + "…"


def quote(value: object, limit: int = ECHO_LIMIT) -> str:
    """A caller's value as an error message quotes it: ``repr`` of the value, clipped."""
    return repr(clip(value, limit)) if isinstance(value, str) else clip(repr(value), limit)


def _bounded(data: Any) -> Any:
    """``data`` with every string clipped to the backstop (dicts and lists kept as they are)."""
    if isinstance(data, str):
        return clip(data, _DATA_STRING_LIMIT)
    if isinstance(data, dict):
        return {clip(str(k), _DATA_STRING_LIMIT): _bounded(v) for k, v in data.items()}
    if isinstance(data, list | tuple):
        return [_bounded(v) for v in data]
    return data


class A2AError(Exception):
    """A JSON-RPC error answer: a fixed code, a message a person can act on, optional data.

    Message and data are bounded here, whoever built them, so no error answer can grow
    with what the caller sent (engine messages, for one, may quote a resume value).
    """

    code: ClassVar[int] = -32603
    title: ClassVar[str] = "Internal error"
    #: A2A 1.0: the ErrorInfo reason, the HTTP+JSON status and its google.rpc status name
    reason: ClassVar[str] = "INTERNAL_ERROR"
    http_status: ClassVar[int] = 500
    rpc_status: ClassVar[str] = "INTERNAL"

    def __init__(self, message: str | None = None, *, data: Any = None) -> None:
        self.message = clip(message or self.title, _MESSAGE_LIMIT)
        super().__init__(self.message)
        self.data = _bounded(data)

    def to_json(self) -> dict[str, Any]:
        """The 0.3 error object: ``data`` free-form."""
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            error["data"] = self.data
        return error

    def details(self) -> list[dict[str, Any]]:
        """The 1.0 typed details: an ErrorInfo (its metadata the scalar entries of ``data``, as strings),
        and a BadRequest naming each bad field when ``data`` lists them."""
        info: dict[str, Any] = {"@type": ERROR_INFO, "reason": self.reason, "domain": DOMAIN}
        data = self.data if isinstance(self.data, dict) else {}
        metadata = {
            str(k): v if isinstance(v, str) else orjson.dumps(v).decode()
            for k, v in data.items()
            if v is not None and not isinstance(v, dict | list)
        }
        if metadata:
            info["metadata"] = metadata
        out = [info]
        errors = data.get("errors")
        if isinstance(errors, list) and errors:
            violations = [
                {"field": str(e.get("path", "")), "description": str(e.get("message", ""))}
                for e in errors
                if isinstance(e, dict)
            ]
            out.append({"@type": BAD_REQUEST, "fieldViolations": violations})
        return out

    def to_json_v10(self) -> dict[str, Any]:
        """The 1.0 error object: ``code``, ``message`` and the typed ``data`` array, nothing else."""
        return {"code": self.code, "message": self.message, "data": self.details()}

    def status_body(self) -> dict[str, Any]:
        """The HTTP+JSON binding's ``google.rpc.Status``-shaped body."""
        return {
            "error": {
                "code": self.http_status,
                "status": self.rpc_status,
                "message": self.message,
                "details": self.details(),
            }
        }


class InternalError(A2AError):
    """The host failed; nothing the caller sent was wrong."""


class JSONParseError(A2AError):
    """The body is not JSON at all."""

    code = -32700
    title = "Invalid JSON payload"
    reason = "PARSE_ERROR"
    http_status = 400
    rpc_status = "INVALID_ARGUMENT"


class InvalidRequest(A2AError):
    """JSON, but not one JSON-RPC 2.0 request object (batches included)."""

    code = -32600
    title = "Request payload validation error"
    reason = "INVALID_REQUEST"
    http_status = 400
    rpc_status = "INVALID_ARGUMENT"


class MethodNotFound(A2AError):
    """A method this agent does not have."""

    code = -32601
    title = "Method not found"
    reason = "METHOD_NOT_FOUND"
    http_status = 404
    rpc_status = "NOT_FOUND"


class InvalidParams(A2AError):
    """The method exists but its params are wrong; ``data`` names the fields."""

    code = -32602
    title = "Invalid parameters"
    reason = "INVALID_PARAMS"
    http_status = 400
    rpc_status = "INVALID_ARGUMENT"


class FileTooLarge(InvalidParams):
    """A file part, or a message's files together, is over a limit the operator set; ``data`` names it.

    The JSON-RPC code stays -32602 (what to change is in the params), and the HTTP+JSON
    binding answers 413, HTTP's word for a body too large to take.
    """

    reason = "FILE_TOO_LARGE"
    http_status = 413


class TaskNotFound(A2AError):
    """No task with that id is visible to the caller."""

    code = -32001
    title = "Task not found"
    reason = "TASK_NOT_FOUND"
    http_status = 404
    rpc_status = "NOT_FOUND"


class TaskNotCancelable(A2AError):
    """The task already ended."""

    code = -32002
    title = "Task cannot be canceled"
    reason = "TASK_NOT_CANCELABLE"
    http_status = 400
    rpc_status = "FAILED_PRECONDITION"


class PushNotificationNotSupported(A2AError):
    """Push configs are asked for, and this host does not deliver pushes."""

    code = -32003
    title = "Push Notification is not supported"
    reason = "PUSH_NOTIFICATION_NOT_SUPPORTED"
    http_status = 400
    rpc_status = "FAILED_PRECONDITION"


class UnsupportedOperation(A2AError):
    """The operation exists but cannot apply here (a terminal task, a task waiting for nothing)."""

    code = -32004
    title = "This operation is not supported"
    reason = "UNSUPPORTED_OPERATION"
    http_status = 400
    rpc_status = "FAILED_PRECONDITION"


class ContentTypeNotSupported(A2AError):
    """A part or an output mode this agent cannot handle."""

    code = -32005
    title = "Incompatible content types"
    reason = "CONTENT_TYPE_NOT_SUPPORTED"
    http_status = 400
    rpc_status = "INVALID_ARGUMENT"


class ExtendedCardNotConfigured(A2AError):
    """There is no authenticated extended card; the public one is complete."""

    code = -32007
    title = "Authenticated Extended Card not configured"
    reason = "EXTENDED_AGENT_CARD_NOT_CONFIGURED"
    http_status = 400
    rpc_status = "FAILED_PRECONDITION"


class VersionNotSupportedError(A2AError):
    """The request's ``A2A-Version`` is not one this host serves; ``data`` lists the served ones."""

    code = -32009
    title = "Protocol version not supported"
    reason = "VERSION_NOT_SUPPORTED"
    http_status = 400
    rpc_status = "FAILED_PRECONDITION"


class TaskGenerationMismatch(A2AError):
    """(A2A 1.1 draft) a follow-up's ``ifGenerationMatch`` is not the task's generation any more."""

    code = -32010
    title = "Task generation mismatch"
    reason = "TASK_GENERATION_MISMATCH"
    http_status = 409
    rpc_status = "ABORTED"


def a2a_error_from(exc: TetherError) -> A2AError:
    """The JSON-RPC error for a domain error the engine or store raised.

    Invalid input (a resume value outside the gate's vocabulary, missing workflow
    inputs) is the caller's to fix: -32602 with the engine's message and details. A
    missing resource is TaskNotFound, its message saying "not found" (clients match on
    it); a state that forbids the operation (already resolved, cancelled meanwhile) is
    UnsupportedOperation; anything else is internal.
    """
    details = exc.details or None
    if isinstance(exc, InvalidInput):
        return InvalidParams(exc.message, data=details)
    if isinstance(exc, NotFound):
        return TaskNotFound(exc.message if "not found" in exc.message else f"not found: {exc.message}")
    if isinstance(exc, Conflict | Unprocessable | Gone):
        return UnsupportedOperation(exc.message, data={"reason": exc.code})
    return InternalError(exc.message)
