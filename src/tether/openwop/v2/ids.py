"""Tenant-bound ids (``<tenant>/<opaque>``) and their one-segment path form (RFC 0184).

Tether mints opaque ids (``run_`` + a UUIDv7's hex) and keeps them bare in the store; at
the v2 edge an id is bound to its tenant, and a path carries the bound id as one segment,
every byte outside ``[A-Za-z0-9._-]`` written ``~HH`` (so ``/`` is ``~2F``). A path
segment is read back with ``~HH`` and ``%HH`` alike. A bare id in a v2 path (an id a v1
client was given) still resolves, under the caller's own tenant, while v1 is served.
"""

from __future__ import annotations

import re

from tether.errors import Forbidden, InvalidInput

__all__ = ["BOUND_ID_PATTERN", "bind", "opaque_of", "project", "unproject"]

#: a tenant-bound id (``ids.schema.json``: ``runId``, ``interruptId``, ``subscriptionId``, ``deliveryId``, ``effectId``)
BOUND_ID_PATTERN = r"^(anon:)?[A-Za-z0-9._~-]{1,128}/[A-Za-z0-9._~-]{16,128}$"
_BOUND = re.compile(BOUND_ID_PATTERN)
#: what a bare (v1) opaque id may be: the same grammar as a bound id's second segment
_OPAQUE = re.compile(r"[A-Za-z0-9._~-]{16,128}")
_KEPT = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-")
_ESCAPE = re.compile(r"[~%]([0-9A-Fa-f]{2})?")


def bind(tenant: str, opaque: str) -> str:
    """The bound form of an id Tether minted for ``tenant``."""
    return f"{tenant}/{opaque}"


def project(bound: str) -> str:
    """``bound`` as one path segment: each byte outside ``[A-Za-z0-9._-]`` as ``~`` and two uppercase hex digits."""
    return "".join(chr(b) if b in _KEPT else f"~{b:02X}" for b in bound.encode())


def unproject(segment: str, what: str = "id") -> str:
    """A path segment's id: ``~HH`` and ``%HH`` decoded (either spelling of ``/`` is a separator).

    Raises
    ------
    InvalidInput
        A ``~`` or ``%`` not followed by two hex digits, or bytes that are not UTF-8.
    """
    raw = bytearray()
    position = 0
    for escape in _ESCAPE.finditer(segment):
        if escape.group(1) is None:
            raise InvalidInput(
                f"{what} {segment!r:.140}: '~' and '%' must be followed by two hex digits (e.g. ~2F for '/')",
                details={"field": what},
            )
        raw += segment[position : escape.start()].encode()
        raw.append(int(escape.group(1), 16))
        position = escape.end()
    raw += segment[position:].encode()
    try:
        return raw.decode()
    except UnicodeDecodeError:
        raise InvalidInput(f"{what} {segment!r:.140} does not decode to UTF-8 text", details={"field": what}) from None


def opaque_of(value: str, tenant: str, what: str = "runId") -> str:
    """The opaque id a v2 request names, checked against the caller's tenant before any lookup.

    A bound id of another tenant is refused the same way whether or not it exists
    (``403 id_tenant_mismatch``), so the answer says nothing about another tenant's ids. A
    bare id (one a v1 client was given) resolves under the caller's tenant.

    Raises
    ------
    InvalidInput
        ``value`` is neither a bound id nor a bare opaque id.
    Forbidden
        The id is bound to another tenant.
    """
    if "/" not in value:
        if _OPAQUE.fullmatch(value) is None:
            raise InvalidInput(f"{what} {value!r:.140} is not an id: write <tenant>/<id>", details={"field": what})
        return value
    if _BOUND.fullmatch(value) is None:
        raise InvalidInput(
            f"{what} {value!r:.140} is not a tenant-bound id (<tenant>/<id>, ids of 16-128 of A-Z a-z 0-9 . _ ~ -)",
            details={"field": what},
        )
    owner, _, opaque = value.partition("/")
    if owner != tenant:
        raise Forbidden(f"{what} names another tenant's resource", code="id_tenant_mismatch", details={"field": what})
    return opaque
