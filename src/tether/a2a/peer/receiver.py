"""``POST /v1/a2a/handoffs/{id}/push``: a peer says a handed-off task changed.

A push is only a hint. Its token must be the hand-off's own (else 401 and nothing
happens); then the hand-off's follower reads the peer task itself and acts on what it
reads. With several hosts on one database the push may land on one that does not follow
the hand-off: that host passes the wake-up on to the others (a store hint). The body is
never read into run state, so a forged or replayed push can at most cost one read of the
peer.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from fastapi import APIRouter, Request
from starlette.responses import Response

from tether.a2a.peer.tokens import token_matches
from tether.errors import Unauthenticated
from tether.http.openapi import refusals

__all__ = ["PushReceiver", "router"]

router = APIRouter(tags=["a2a"])


@dataclass(frozen=True, slots=True)
class PushReceiver:
    """What the route needs: the host key the tokens derive from, and how to wake a hand-off."""

    host_key: bytes
    #: wakes the follower of a hand-off, wherever it runs
    wake: Callable[[str], Awaitable[None]]


def _presented(request: Request) -> str | None:
    token = request.headers.get("x-a2a-notification-token")
    if token:
        return token
    auth = request.headers.get("authorization", "")
    scheme, _, value = auth.partition(" ")
    return value.strip() if scheme.lower() == "bearer" and value.strip() else None


@router.post("/v1/a2a/handoffs/{handoff_id}/push", status_code=204, responses=refusals(401))
async def handoff_push(handoff_id: str, request: Request) -> Response:
    """Authenticated by the hand-off's token only (the peer holds no key of this host)."""
    receiver: PushReceiver | None = getattr(request.app.state, "handoff_pushes", None)
    if receiver is None or not token_matches(receiver.host_key, handoff_id, _presented(request)):
        raise Unauthenticated("this push does not carry the hand-off's token", code="push_token_invalid")
    await receiver.wake(handoff_id)
    return Response(status_code=204)
