"""Tether's error hierarchy; mapped to HTTP, JSON-RPC and CLI exit codes in one place each.

    TetherError                    internal_error
    ├── InvalidInput               validation_error        (400)
    │   ├── WorkflowInvalid        validation_error        (400)
    │   └── UnsupportedStreamMode  unsupported_stream_mode (400)
    ├── Unauthenticated            unauthenticated         (401)
    ├── Forbidden                  forbidden               (403)
    ├── NotFound                   not_found               (404)
    ├── Conflict                   (code per case)         (409)
    ├── Gone                       (code per case)         (410)
    ├── Unprocessable              (code per case)         (422)
    └── StoreUnavailable           service_unavailable     (503)

Domain code raises these; it never builds HTTP responses itself.
"""

from __future__ import annotations

from typing import Any


class TetherError(Exception):
    """Something Tether refuses or cannot do; carries a stable machine code."""

    code = "internal_error"
    status = 500

    def __init__(self, message: str, *, code: str | None = None, details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code
        self.details = details

    def __repr__(self) -> str:
        return f"{type(self).__name__}(code={self.code!r}, message={self.message!r})"


class InvalidInput(TetherError):
    """The request is well-formed transport-wise but its content is wrong."""

    code = "validation_error"
    status = 400


class WorkflowInvalid(InvalidInput):
    """A workflow definition does not validate; details name the node or field."""


class UnsupportedStreamMode(InvalidInput):
    """The SSE streamMode asked for is not one this host serves."""

    code = "unsupported_stream_mode"


class Unauthenticated(TetherError):
    """No credential, or one that is unknown, revoked or malformed."""

    code = "unauthenticated"
    status = 401


class Forbidden(TetherError):
    """A valid credential that lacks the scope the operation needs."""

    code = "forbidden"
    status = 403


class NotFound(TetherError):
    """The resource does not exist, or belongs to another tenant (indistinguishable)."""

    code = "not_found"
    status = 404


class Conflict(TetherError):
    """The request lost a race or contradicts the resource's state."""

    code = "conflict"
    status = 409


class Gone(TetherError):
    """The resource existed but has expired."""

    code = "gone"
    status = 410


class Unprocessable(TetherError):
    """The request is valid but the resource's state makes it meaningless."""

    code = "unprocessable"
    status = 422


class StoreUnavailable(TetherError):
    """The store cannot be reached or refused the write."""

    code = "service_unavailable"
    status = 503


class SequenceConflict(Exception):
    """A commit's expected sequence no longer matches the run: re-read and decide again.

    Internal to the engine/store boundary; never reaches a caller.
    """
