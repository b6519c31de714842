"""Webhook signatures: HMAC-SHA256 over ``"{timestamp}.{body}"``, in both header families."""

from __future__ import annotations

import hashlib
import hmac
import time


def sign_webhook(
    secret: str, body: bytes, *, webhook_id: str, event_type: str, timestamp: int | None = None
) -> dict[str, str]:
    """Headers that let a receiver check origin and freshness (``X-openwop-*`` and ``OpenWOP-*``)."""
    ts = str(int(time.time()) if timestamp is None else timestamp)
    digest = hmac.new(secret.encode(), f"{ts}.".encode() + body, hashlib.sha256).hexdigest()
    signature = f"sha256={digest}"
    return {
        "X-openwop-Webhook-Id": webhook_id,
        "X-openwop-Event-Type": event_type,
        "X-openwop-Timestamp": ts,
        "X-openwop-Signature": signature,
        "X-openwop-Signature-Algorithm": "v1",
        "OpenWOP-Timestamp": ts,
        "OpenWOP-Signature": signature,
    }
