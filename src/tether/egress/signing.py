"""Webhook signatures: HMAC-SHA256 over ``"{timestamp}.{body}"``, in both header families."""

from __future__ import annotations

import hashlib
import hmac
import time


def sign_webhook(
    secret: str, body: bytes, *, webhook_id: str, event_type: str, timestamp: int | None = None, major: int = 1
) -> dict[str, str]:
    """Headers that let a receiver check origin and freshness (``X-openwop-*`` and ``OpenWOP-*``).

    Major 1 sends the ``X-openwop-*`` family and the ``OpenWOP-*`` timestamp and signature, as
    it always has; major 2 sends all five ``OpenWOP-*`` headers, with their ``X-openwop-*``
    twins while both majors are served (OpenWOP v2 webhooks.md, "Dual emission").
    """
    ts = str(int(time.time()) if timestamp is None else timestamp)
    digest = hmac.new(secret.encode(), f"{ts}.".encode() + body, hashlib.sha256).hexdigest()
    signature = f"sha256={digest}"
    headers = {
        "X-openwop-Webhook-Id": webhook_id,
        "X-openwop-Event-Type": event_type,
        "X-openwop-Timestamp": ts,
        "X-openwop-Signature": signature,
        "X-openwop-Signature-Algorithm": "v1",
        "OpenWOP-Timestamp": ts,
        "OpenWOP-Signature": signature,
    }
    if major >= 2:
        headers["OpenWOP-Webhook-Id"] = webhook_id
        headers["OpenWOP-Event-Type"] = event_type
        headers["OpenWOP-Signature-Algorithm"] = "v1"
    return headers
