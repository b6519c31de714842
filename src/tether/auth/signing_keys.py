"""The deployment's certification signing keys: Ed25519, made once, sealed at rest, rotatable, never forgotten.

A certification bundle is signed with one of these keys and names it by ``keyId``; a
reader resolves that id in the host's v2 discovery ``signingKeys[]`` and verifies with the
public half published there. So every host of one store must publish the same keys, and a
key that stops signing must stay listed (with ``retiredAt``), or every bundle it signed
stops verifying.

They live in ``host_settings``, which is written once per name (``claim_setting``), as a
chain:

- ``certify.key:<keyId>``: the key, ``{publicKey, sealed, createdAt}``; the private half is
  sealed with the host key (``SecretBox``), like every other secret at rest;
- ``certify.first``: the first key's id, claimed when the store is first served;
- ``certify.next:<keyId>``: ``{keyId, at}``, the key that replaced it and when.

A key row is written before the pointer that names it, so the chain never names a missing
key; two hosts (or a host and ``tether certify keys rotate``) racing to create or rotate
each claim the same pointer, one wins, and the loser's key row is never named, so never
published and never used.
"""

from __future__ import annotations

import base64
import hashlib
from dataclasses import dataclass
from typing import Any

import orjson
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from tether import clock
from tether.errors import Conflict
from tether.secrets import SecretBox
from tether.store.base import Store

__all__ = [
    "SigningKey",
    "b64url",
    "ensure_signing_key",
    "public_key",
    "published_keys",
    "rotate_signing_key",
    "signing_keys",
    "unb64url",
    "unsealed",
]

_PREFIX = "certify."
_FIRST = "certify.first"
#: what the key signs, as discovery ``signingKeys[].use`` names it
USE = "certification-bundle"


def b64url(raw: bytes) -> str:
    """Unpadded base64url (an Ed25519 public key is 43 characters, a signature 86)."""
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def unb64url(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


@dataclass(frozen=True, slots=True)
class SigningKey:
    """One key of the chain: its public half, when it was made, when (if ever) it stopped signing."""

    key_id: str
    public_key: str
    created_at: str
    sealed: bytes
    retired_at: str | None = None

    def published(self) -> dict[str, Any]:
        """The discovery ``signingKeys[]`` entry (``capabilities.schema.json``)."""
        entry: dict[str, Any] = {"keyId": self.key_id, "alg": "ed25519", "publicKey": self.public_key, "use": USE}
        if self.retired_at is not None:
            entry["retiredAt"] = self.retired_at
        return entry


def _context(key_id: str) -> str:
    return f"certify-key:{key_id}"


async def _new_key(store: Store, box: SecretBox) -> str:
    """Make a key and store its row (named by nothing yet); its id."""
    private = Ed25519PrivateKey.generate()
    public = private.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
    key_id = "ed25519-" + hashlib.sha256(public).hexdigest()[:16]
    seed = private.private_bytes_raw()
    row = {
        "publicKey": b64url(public),
        "sealed": base64.b64encode(box.seal(b64url(seed), context=_context(key_id))).decode(),
        "createdAt": clock.now_iso(),
    }
    await store.claim_setting(f"{_PREFIX}key:{key_id}", orjson.dumps(row).decode())
    return key_id


async def signing_keys(store: Store) -> list[SigningKey]:
    """The chain, oldest first; the last one signs. Empty before the store was first served."""
    rows = await store.settings_under(_PREFIX)
    key_id = rows.get(_FIRST)
    chain: list[SigningKey] = []
    while key_id is not None and len(chain) <= len(rows):
        row = orjson.loads(rows[f"{_PREFIX}key:{key_id}"])
        successor = rows.get(f"{_PREFIX}next:{key_id}")
        after = orjson.loads(successor) if successor is not None else None
        chain.append(
            SigningKey(
                key_id,
                row["publicKey"],
                row["createdAt"],
                base64.b64decode(row["sealed"]),
                retired_at=after["at"] if after is not None else None,
            )
        )
        key_id = after["keyId"] if after is not None else None
    return chain


async def published_keys(store: Store) -> list[dict[str, Any]]:
    """What discovery publishes: every key of the chain, retired ones with ``retiredAt``."""
    return [key.published() for key in await signing_keys(store)]


async def ensure_signing_key(store: Store, box: SecretBox) -> SigningKey:
    """The signing key, made the first time a store is served (every later call finds it)."""
    chain = await signing_keys(store)
    if not chain:
        await store.claim_setting(_FIRST, await _new_key(store, box))  # a racing host's claim may win: fine
        chain = await signing_keys(store)
    return chain[-1]


async def rotate_signing_key(store: Store, box: SecretBox) -> tuple[SigningKey, SigningKey]:
    """Retire the signing key for a new one; (retired, new). Raises ``Conflict`` if a concurrent rotation won."""
    current = await ensure_signing_key(store, box)
    unsealed(current, box)  # a key sealed with another host key would never open on the hosts: refuse first
    made = await _new_key(store, box)
    record = orjson.dumps({"keyId": made, "at": clock.now_iso()}).decode()
    stored = await store.claim_setting(f"{_PREFIX}next:{current.key_id}", record)
    if stored != record:
        raise Conflict(f"another rotation of {current.key_id} happened at the same time; list the keys and retry")
    chain = await signing_keys(store)
    return chain[-2], chain[-1]


def unsealed(key: SigningKey, box: SecretBox) -> Ed25519PrivateKey:
    """The private half, opened for one signing (raises if the host key is not the one that sealed it)."""
    try:
        seed = unb64url(box.open(key.sealed, context=_context(key.key_id)))
    except InvalidTag as exc:
        raise ValueError(
            f"signing key {key.key_id} does not open with this host key: use the host key the store's hosts use"
        ) from exc
    private = Ed25519PrivateKey.from_private_bytes(seed)
    public = private.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
    if b64url(public) != key.public_key:
        raise ValueError(f"signing key {key.key_id}: the sealed private key does not match its public key")
    return private


def public_key(text: str) -> Ed25519PublicKey:
    """A published ``publicKey`` as a key to verify with."""
    return Ed25519PublicKey.from_public_bytes(unb64url(text))
