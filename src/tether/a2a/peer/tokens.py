"""The per-hand-off push token: derived from the host key, so it is never stored anywhere on this host.

Each hand-off gets its own token (an HMAC of its id under the host key). The peer keeps
it (sealed, if it is Tether) and presents it on every push; this host recomputes it to
check. Nothing to leak from the store, and one hand-off's token opens no other.
"""

from __future__ import annotations

import base64
import hashlib
import hmac

__all__ = ["push_path", "push_token", "token_matches"]

_CONTEXT = b"tether:handoff-push-token:v1\0"


def push_token(host_key: bytes, handoff_id: str) -> str:
    digest = hmac.new(host_key, _CONTEXT + handoff_id.encode(), hashlib.sha256).digest()
    return base64.urlsafe_b64encode(digest).decode().rstrip("=")


def token_matches(host_key: bytes, handoff_id: str, presented: str | None) -> bool:
    """Whether ``presented`` is this hand-off's token (compared in constant time)."""
    return presented is not None and hmac.compare_digest(push_token(host_key, handoff_id), presented)


def push_path(handoff_id: str) -> str:
    return f"/v1/a2a/handoffs/{handoff_id}/push"
