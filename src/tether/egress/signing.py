"""Webhook signatures: HMAC-SHA256 over ``"{timestamp}.{body}"``, in both header families, made and checked.

The signer is what Tether's outbox sends with; the verifier is what a receiver of those
deliveries (or of any OpenWOP host's) runs before acting on one. They share the bytes
signed and the header names, so neither can drift from the other.

A delivery names the scheme ``v1`` in two header families: ``X-openwop-*``, major 1's,
and ``OpenWOP-*``, major 2's (a host serving both majors sends both, with the same values;
a major-1 host may send only the first). The verifier accepts either family alone, and
when both are present both must verify: a delivery is not accepted on its better half.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["FAMILIES", "SCHEME", "TOLERANCE_SECONDS", "Verdict", "sign_webhook", "verify_webhook"]

#: the one signature scheme there is: ``sha256=<hex HMAC-SHA256(secret, "{timestamp}.{body}")>``
SCHEME = "v1"
#: the header families that carry it, by prefix: major 2's, then major 1's
FAMILIES = ("OpenWOP-", "X-openwop-")
#: how far a delivery's timestamp may be from the receiver's clock, either way (replays older than this are refused)
TOLERANCE_SECONDS = 300
_SIGNATURE = re.compile(r"sha256=([0-9a-fA-F]{64})")
_TIMESTAMP = re.compile(r"[0-9]{1,12}")


def _digest(secret: str, timestamp: str, body: bytes) -> str:
    return hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()


def sign_webhook(
    secret: str, body: bytes, *, webhook_id: str, event_type: str, timestamp: int | None = None, major: int = 1
) -> dict[str, str]:
    """Headers that let a receiver check origin and freshness (``X-openwop-*`` and ``OpenWOP-*``).

    Major 1 sends the ``X-openwop-*`` family and the ``OpenWOP-*`` timestamp and signature, as
    it always has; major 2 sends all five ``OpenWOP-*`` headers, with their ``X-openwop-*``
    twins while both majors are served (OpenWOP v2 webhooks.md, "Dual emission").
    """
    ts = str(int(time.time()) if timestamp is None else timestamp)
    signature = f"sha256={_digest(secret, ts, body)}"
    headers = {
        "X-openwop-Webhook-Id": webhook_id,
        "X-openwop-Event-Type": event_type,
        "X-openwop-Timestamp": ts,
        "X-openwop-Signature": signature,
        "X-openwop-Signature-Algorithm": SCHEME,
        "OpenWOP-Timestamp": ts,
        "OpenWOP-Signature": signature,
    }
    if major >= 2:
        headers["OpenWOP-Webhook-Id"] = webhook_id
        headers["OpenWOP-Event-Type"] = event_type
        headers["OpenWOP-Signature-Algorithm"] = SCHEME
    return headers


@dataclass(frozen=True, slots=True)
class Verdict:
    """What a receiver decides of one delivery: accepted, or refused with a reason a person can act on."""

    accepted: bool
    reason: str | None = None
    #: the header families that carried a signature and verified (on acceptance)
    families: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return self.accepted


def _refused(reason: str) -> Verdict:
    return Verdict(False, reason)


def verify_webhook(
    secret: str,
    headers: Mapping[str, str],
    body: bytes,
    *,
    now: float | None = None,
    tolerance: int = TOLERANCE_SECONDS,
) -> Verdict:
    """Check a delivery's signature and freshness with the subscription's ``secret``; never raises.

    Parameters
    ----------
    secret
        The subscription's signing secret.
    headers
        The delivery's headers; names are matched without regard to case.
    body
        The raw body bytes, exactly as received (the signature covers them, not a re-encoding).
    now
        The receiver's clock in Unix seconds (default: the system clock).
    tolerance
        Seconds a timestamp may differ from ``now``, either way.

    Returns
    -------
    Verdict
        Accepted when every family present carries scheme ``v1``, a fresh timestamp and a
        signature that matches; otherwise refused, naming the first problem found.
    """
    if not secret:
        return _refused("no secret to verify with")
    lowered = {name.lower(): value for name, value in headers.items()}
    present = [prefix for prefix in FAMILIES if f"{prefix}signature".lower() in lowered]
    if not present:
        return _refused("no signature: the delivery carries neither OpenWOP-Signature nor X-openwop-Signature")
    clock = time.time() if now is None else now
    for prefix in present:
        algorithm = lowered.get(f"{prefix}signature-algorithm".lower(), SCHEME).strip()
        if algorithm != SCHEME:
            return _refused(f"{prefix}Signature-Algorithm {algorithm!r:.40} is not the v1 scheme")
        timestamp = lowered.get(f"{prefix}timestamp".lower())
        if timestamp is None:
            return _refused(f"{prefix}Signature comes without {prefix}Timestamp, which it signs")
        timestamp = timestamp.strip()
        if _TIMESTAMP.fullmatch(timestamp) is None:
            return _refused(f"{prefix}Timestamp {timestamp!r:.40} is not Unix seconds")
        if abs(clock - int(timestamp)) > tolerance:
            return _refused(f"{prefix}Timestamp is more than {tolerance} s off this clock (stale, or replayed)")
        match = _SIGNATURE.fullmatch(lowered[f"{prefix}signature".lower()].strip())
        if match is None:
            return _refused(f"{prefix}Signature is not of the form sha256=<64 hex digits>")
        if not hmac.compare_digest(match.group(1).lower(), _digest(secret, timestamp, body)):
            return _refused(f"{prefix}Signature does not match the body and timestamp under this secret")
    return Verdict(True, families=tuple(present))
