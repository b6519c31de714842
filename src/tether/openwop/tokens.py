"""Signed, expiring interrupt tokens: the credential of ``/interrupts/{token}`` at both majors.

A token names exactly one interrupt of one run, carries its own expiry, and says whether
it may resolve or only inspect. It is minted when a snapshot is read, so it never
outlives its ``ttl`` nor the gate's own deadline. Major 1 mints
``base64url(payload).base64url(mac)``; major 2 ``ow2.hs256.<kid>.base64url(payload).base64url(mac)``,
the MAC over everything before it, ``kid`` naming this host's token key. A token is told
apart by its ``ow2.`` prefix, never by counting dots: a major-1 token keeps working at
major 2 (as ``kid: legacy``) until it expires.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import time
from dataclasses import dataclass
from typing import Any

import orjson

from tether.errors import Gone, InvalidInput, Unauthenticated


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


#: the prefix of a major-2 token, and the one MAC algorithm it may name
V2_PREFIX = "ow2."
_ALG = "hs256"


class TokenSigner:
    def __init__(self, secret: bytes, ttl: float = 1800.0) -> None:
        self._key = hashlib.sha256(b"tether:interrupt-token:v1\0" + secret).digest()
        #: names this key in major-2 tokens (a digest of it, so a new host key is a new kid)
        self.kid = "k" + hashlib.sha256(b"tether:interrupt-token:kid\0" + self._key).hexdigest()[:16]
        self.ttl = ttl

    def _payload(self, run_id: str, node_id: str, interrupt_id: str, intent: str, deadline: float | None) -> bytes:
        expires = time.time() + self.ttl
        if deadline is not None:
            expires = min(expires, deadline)
        claims = {"runId": run_id, "nodeId": node_id, "interruptId": interrupt_id, "expiresAt": int(expires)}
        return orjson.dumps({**claims, "intent": intent})

    def mint(self, run_id: str, node_id: str, interrupt_id: str, *, intent: str, deadline: float | None = None) -> str:
        payload = self._payload(run_id, node_id, interrupt_id, intent, deadline)
        mac = hmac.new(self._key, payload, hashlib.sha256).digest()
        return f"{_b64(payload)}.{_b64(mac)}"

    def mint_v2(
        self, run_id: str, node_id: str, interrupt_id: str, *, intent: str, deadline: float | None = None
    ) -> str:
        """The major-2 form: ``ow2.hs256.<kid>.<payload>.<mac>``, the MAC over the four segments before it."""
        signed = f"{V2_PREFIX}{_ALG}.{self.kid}.{_b64(self._payload(run_id, node_id, interrupt_id, intent, deadline))}"
        return f"{signed}.{_b64(hmac.new(self._key, signed.encode(), hashlib.sha256).digest())}"

    def verify(self, token: str) -> TokenClaims:
        """Claims of a genuine, unexpired token of either form; InvalidInput (v1) / Unauthenticated (v2) or Gone.

        An ``ow2.`` token naming an algorithm or key this host does not hold, or failing its
        MAC, is ``401 interrupt_token_invalid``; a major-1 token keeps its 400.
        """
        if token.startswith(V2_PREFIX):
            return self._claims(self._verify_v2(token))
        encoded, _, signature = token.partition(".")
        try:
            payload = _unb64(encoded)
            mac = _unb64(signature)
        except (ValueError, TypeError) as exc:
            raise InvalidInput("malformed interrupt token", code="approval_token_invalid") from exc
        expected = hmac.new(self._key, payload, hashlib.sha256).digest()
        if not signature or not hmac.compare_digest(mac, expected):
            raise InvalidInput("the interrupt token's signature does not match", code="approval_token_invalid")
        return self._claims(payload)

    def _verify_v2(self, token: str) -> bytes:
        parts = token.split(".")
        if len(parts) != 5:
            raise Unauthenticated("malformed interrupt token", code="interrupt_token_invalid")
        _, alg, kid, encoded, signature = parts
        if alg != _ALG:
            raise Unauthenticated(
                f"interrupt token algorithm {alg!r:.20} is not served", code="interrupt_token_invalid"
            )
        if kid != self.kid:
            raise Unauthenticated(
                "the interrupt token names a key this host does not hold", code="interrupt_token_invalid"
            )
        try:
            payload, mac = _unb64(encoded), _unb64(signature)
        except (ValueError, TypeError):
            raise Unauthenticated("malformed interrupt token", code="interrupt_token_invalid") from None
        expected = hmac.new(self._key, token.rpartition(".")[0].encode(), hashlib.sha256).digest()
        if not hmac.compare_digest(mac, expected):
            raise Unauthenticated("the interrupt token's signature does not match", code="interrupt_token_invalid")
        return payload

    @staticmethod
    def _claims(payload: bytes) -> TokenClaims:
        claims: dict[str, Any] = orjson.loads(payload)
        if claims["expiresAt"] < time.time():
            raise Gone("this interrupt token has expired; read the run again for a fresh one", code="interrupt_expired")
        return TokenClaims(
            claims["runId"], claims["nodeId"], claims["interruptId"], float(claims["expiresAt"]), claims["intent"]
        )
