"""Secrets at rest: push tokens, push credentials and webhook signing secrets.

Each is sealed with AES-GCM under a key derived from the host key (``host.key``), stored
by reference, and opened only at the moment of a delivery. What may be shown anywhere
else is a salted fingerprint, never the value.
"""

from __future__ import annotations

import hashlib
import hmac
import os

from cryptography.hazmat.primitives.ciphers.aead import AESGCM

_NONCE = 12


class SecretBox:
    def __init__(self, host_key: bytes) -> None:
        self._aead = AESGCM(hashlib.sha256(b"tether:secrets:v1\0" + host_key).digest())
        self._salt = hashlib.sha256(b"tether:fingerprint:v1\0" + host_key).digest()

    def seal(self, value: str, *, context: str) -> bytes:
        """Encrypt ``value``; ``context`` (e.g. the config id) is bound as associated data."""
        nonce = os.urandom(_NONCE)
        return nonce + self._aead.encrypt(nonce, value.encode(), context.encode())

    def open(self, sealed: bytes, *, context: str) -> str:
        return self._aead.decrypt(sealed[:_NONCE], sealed[_NONCE:], context.encode()).decode()

    def fingerprint(self, value: str) -> str:
        """A salted, truncated digest (16 hex characters) that identifies without revealing."""
        return hmac.new(self._salt, value.encode(), hashlib.sha256).hexdigest()[:16]
