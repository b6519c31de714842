"""Signed, expiring interrupt tokens: ``base64url(payload).base64url(hmac_sha256)``.

The token is the credential of ``/v1/interrupts/{token}``, so it names exactly one
interrupt of one run, carries its own expiry, and says whether it may resolve or only
inspect. It is minted when a snapshot is read, so it never outlives its ``ttl`` nor the
gate's own deadline.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import time
from dataclasses import dataclass
from typing import Any

import orjson

from tether.errors import Gone, InvalidInput


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


@dataclass(frozen=True, slots=True)
class TokenClaims:
    run_id: str
    node_id: str
    interrupt_id: str
    expires_at: float
    intent: str  # "resolve" or "inspect"


class TokenSigner:
    def __init__(self, secret: bytes, ttl: float = 1800.0) -> None:
        self._key = hashlib.sha256(b"tether:interrupt-token:v1\0" + secret).digest()
        self.ttl = ttl

    def mint(self, run_id: str, node_id: str, interrupt_id: str, *, intent: str, deadline: float | None = None) -> str:
        expires = time.time() + self.ttl
        if deadline is not None:
            expires = min(expires, deadline)
        payload = orjson.dumps(
            {
                "runId": run_id,
                "nodeId": node_id,
                "interruptId": interrupt_id,
                "expiresAt": int(expires),
                "intent": intent,
            }
        )
        mac = hmac.new(self._key, payload, hashlib.sha256).digest()
        return f"{_b64(payload)}.{_b64(mac)}"

    def verify(self, token: str) -> TokenClaims:
        """Claims of a genuine, unexpired token; InvalidInput or Gone otherwise."""
        encoded, _, signature = token.partition(".")
        try:
            payload = _unb64(encoded)
            mac = _unb64(signature)
        except (ValueError, TypeError) as exc:
            raise InvalidInput("malformed interrupt token", code="approval_token_invalid") from exc
        expected = hmac.new(self._key, payload, hashlib.sha256).digest()
        if not signature or not hmac.compare_digest(mac, expected):
            raise InvalidInput("the interrupt token's signature does not match", code="approval_token_invalid")
        claims: dict[str, Any] = orjson.loads(payload)
        if claims["expiresAt"] < time.time():
            raise Gone("this interrupt token has expired; read the run again for a fresh one", code="interrupt_expired")
        return TokenClaims(
            claims["runId"], claims["nodeId"], claims["interruptId"], float(claims["expiresAt"]), claims["intent"]
        )
