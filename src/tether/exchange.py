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

__all__ = ["CURRENT", "Exchange", "note_operation", "note_principal"]


@dataclass(slots=True)
class Exchange:
    """One request: who asked (``tenant/name``, never a key) and the operation it named."""

    principal: str | None = None
    operation: str | None = None


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
