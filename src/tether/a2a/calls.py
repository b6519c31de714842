"""What a method of either A2A version is, to the bindings that dispatch to it, and who may call it.

A version's codec is a table of :class:`Method` by wire name. The JSON-RPC binding and
the HTTP+JSON routes look a method up, check the caller's key (:func:`needs_key`) and
scope, and run it; the method parses its params in its version's shapes, asks the
version-neutral :class:`~tether.a2a.service.A2AService`, and renders the answer in its
version. A keyless caller of a public agent is :func:`anonymous`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from tether.a2a.streams import Frame
from tether.a2a.versions import Version
from tether.errors import Unauthenticated
from tether.types import Principal

__all__ = ["A2A_SCOPES", "ANONYMOUS", "Call", "Method", "Methods", "Stream", "anonymous", "message_scope", "needs_key"]

#: every scope a method can ask for: what the A2A methods need, and no more
A2A_SCOPES = frozenset({"runs:create", "runs:read", "runs:cancel", "approvals:respond"})
#: the principal name of keyless A2A callers: stable, so their messageIds stay idempotent, and no key's
#: (keys act as ``key:<name>``)
ANONYMOUS = "anonymous"


@dataclass(frozen=True, slots=True)
class Stream:
    """A streaming answer: the frames to send as server-sent events, in batches written at once."""

    frames: AsyncIterator[list[Frame]]


@dataclass(frozen=True, slots=True)
class Call:
    """One call of a method: who asks, with which params, in which version."""

    principal: Principal
    params: dict[str, Any]
    version: Version
    #: the ``Last-Event-ID`` header a re-attaching stream sent
    last_event_id: str | None = None


@dataclass(frozen=True, slots=True)
class Method:
    """A method: what it does, the key scope it needs (decided from raw params), whether it streams."""

    run: Callable[[Call], Awaitable[Any]]
    scope: Callable[[dict[str, Any]], str | None]
    streaming: bool = False
    #: checks params as ``run`` would, without running (for a request refused anyway)
    check: Callable[[dict[str, Any]], object] | None = None
    #: needs a key even on a public agent: the authenticated extended card
    keyed: bool = False


Methods = Mapping[str, Method]


def message_scope(params: dict[str, Any]) -> str:
    """A message that names a task answers its interrupt (``approvals:respond``); others start runs."""
    message = params.get("message")
    if isinstance(message, dict) and (message.get("taskId") or message.get("task_id")) is not None:
        return "approvals:respond"
    return "runs:create"


def anonymous(tenant: str) -> Principal:
    """Who a keyless A2A caller is on a public agent: one fixed principal of ``tenant``, A2A scopes only.

    Only the A2A endpoint ever makes it, so REST (and anything admin) stays behind a key.
    """
    return Principal(tenant=tenant, name=ANONYMOUS, scopes=A2A_SCOPES, anonymous=True)


def needs_key(method: Method, principal: Principal, name: str) -> None:
    """A method that needs a key even on a public agent, called without one: 401, as on a private agent."""
    if method.keyed and principal.name == ANONYMOUS:
        raise Unauthenticated(
            f"{name} needs an API key even on this public agent: send 'Authorization: Bearer <api key>'"
        )
