"""API keys: created once, shown once, stored only as a hash, checked in constant time.

A raw key reads ``tk_<key id>_<secret>``. The key id is public and indexes the row; the
secret is 256 random bits of which only the SHA-256 is kept. A key's row is cached for
``ttl`` seconds, so a key created or revoked while the host runs counts within seconds
without a database read (or a hash) on every request.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import time

from tether import clock
from tether.caches import holds_copies
from tether.errors import InvalidInput, Unauthenticated
from tether.exchange import note_principal
from tether.store.base import KeyRow, Store
from tether.types import Principal

ALL_SCOPES = (
    "manifest:read",
    "runs:create",
    "runs:read",
    "runs:cancel",
    "runs:purge",
    "approvals:respond",
    "webhooks:manage",
    "artifacts:read",
    "audit:read",
)
_KEY = re.compile(r"^tk_([0-9a-f]{16})_([0-9a-f]{64})$")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


def valid_tenant(tenant: str) -> bool:
    """Whether ``tenant`` is a tenant name a key could have (so the CLI checks other tenants the same way)."""
    return _NAME.match(tenant) is not None


def _hash(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def parse_scopes(raw: str | None) -> list[str]:
    """``None`` means every scope; otherwise a comma or space separated subset."""
    if raw is None:
        return list(ALL_SCOPES)
    scopes = [s for s in re.split(r"[,\s]+", raw) if s]
    unknown = [s for s in scopes if s not in ALL_SCOPES]
    if unknown or not scopes:
        raise InvalidInput(f"unknown scope {unknown[0] if unknown else '(none)'}; scopes are {', '.join(ALL_SCOPES)}")
    return scopes


async def create_key(store: Store, name: str, tenant: str = "default", scopes: list[str] | None = None) -> str:
    """Store a new key and return the raw key (the only time it exists in clear)."""
    if not _NAME.match(name):
        raise InvalidInput(f"key name {name!r} must be 1-64 letters, digits, '.', '_' or '-'")
    if not _NAME.match(tenant):
        raise InvalidInput(f"tenant {tenant!r} must be 1-64 letters, digits, '.', '_' or '-'")
    key_id = secrets.token_hex(8)
    secret = secrets.token_hex(32)
    await store.insert_key(KeyRow(key_id, name, tenant, list(scopes or ALL_SCOPES), _hash(secret), clock.now_iso()))
    return f"tk_{key_id}_{secret}"


@holds_copies("_cache", "_verified")
class KeyVerifier:
    """Turns an ``Authorization`` header into a Principal, or refuses it."""

    def __init__(self, store: Store, ttl: float = 2.0) -> None:
        self.store = store
        self.ttl = ttl
        self._cache: dict[str, tuple[KeyRow | None, float]] = {}
        #: raw keys checked within ``ttl``: a repeat skips the hash (the row's own ttl still bounds it)
        self._verified: dict[str, tuple[Principal, float]] = {}

    async def _row(self, key_id: str) -> KeyRow | None:
        cached = self._cache.get(key_id)
        now = time.monotonic()
        if cached is not None and now - cached[1] < self.ttl:
            return cached[0]
        row = await self.store.get_key(key_id)
        if len(self._cache) > 10_000:
            self._cache.clear()
        self._cache[key_id] = (row, now)
        return row

    async def verify(self, authorization: str | None) -> Principal:
        verified = self._verified.get(authorization) if authorization else None
        if verified is not None and time.monotonic() - verified[1] < self.ttl:
            note_principal(verified[0])
            return verified[0]
        principal = await self._check(authorization)
        note_principal(principal)
        if len(self._verified) > 10_000:
            self._verified.clear()
        self._verified[authorization or ""] = (principal, time.monotonic())
        return principal

    async def _check(self, authorization: str | None) -> Principal:
        if not authorization:
            raise Unauthenticated("this endpoint needs 'Authorization: Bearer <api key>'")
        scheme, _, token = authorization.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise Unauthenticated("use 'Authorization: Bearer <api key>'")
        match = _KEY.match(token.strip())
        if match is None:
            raise Unauthenticated("that is not a Tether API key (they read tk_<id>_<secret>)")
        row = await self._row(match.group(1))
        if row is None or not hmac.compare_digest(row.secret_hash, _hash(match.group(2))):
            raise Unauthenticated("unknown API key")
        if row.revoked_at is not None:
            raise Unauthenticated("this API key was revoked", code="key_revoked")
        return Principal(tenant=row.tenant, name=f"key:{row.name}", scopes=frozenset(row.scopes), key_id=row.key_id)
