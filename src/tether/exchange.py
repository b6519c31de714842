"""What one inbound request turned out to be, noted by the layers that learn it as it is served.

The request log and the request metrics sit in front of everything, so they see the
method, path, status and time, but not who the caller was (authentication happens
inside) nor which JSON-RPC method a ``POST /v1/a2a`` named (the body is parsed inside).
The layers that learn those note them here, on the request's own ``Exchange`` found
through a context variable: no argument is threaded through, and outside a request
(the CLI, tests of one layer) noting does nothing.
"""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass

from tether.types import Principal

__all__ = ["CURRENT", "Exchange", "current_traceparent", "note_operation", "note_principal", "note_traceparent"]


@dataclass(slots=True)
class Exchange:
    """One request: who asked (``tenant/name``, never a key) and the operation it named."""

    principal: str | None = None
    operation: str | None = None
    #: the ``traceparent`` work started by this request continues (its server span, or the caller's)
    traceparent: str | None = None


CURRENT: ContextVar[Exchange | None] = ContextVar("tether_exchange", default=None)


def note_principal(principal: Principal) -> None:
    """The caller is ``principal`` (its tenant and name; keys never appear)."""
    exchange = CURRENT.get()
    if exchange is not None:
        exchange.principal = f"{principal.tenant}/{principal.name}"


def note_operation(name: str) -> None:
    """The request named operation ``name`` (a JSON-RPC method the host serves)."""
    exchange = CURRENT.get()
    if exchange is not None:
        exchange.operation = name


def note_traceparent(value: str) -> None:
    """The caller sent this well-formed ``traceparent`` (kept unless a server span was noted first)."""
    exchange = CURRENT.get()
    if exchange is not None and exchange.traceparent is None:
        exchange.traceparent = value


def current_traceparent() -> str | None:
    """The ``traceparent`` the request being served continues, if any."""
    exchange = CURRENT.get()
    return exchange.traceparent if exchange is not None else None
