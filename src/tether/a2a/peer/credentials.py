"""Outbound credentials: the secrets a hand-off presents to another agent, held by name and bound to one origin.

An operator stores one with ``tether credentials add NAME --origin URL --scheme Bearer
--secret-file FILE``; a workflow names it (``config.credential``). The secret is sealed
with the host key, with its name, origin and scheme bound in as associated data, so a row
edited to point at another origin no longer opens. It is opened only for a request whose
URL has exactly that origin, at the moment of that request; everywhere else (events, the
run's log, the CLI) there is the name and a fingerprint, never the value.
"""

from __future__ import annotations

import re
from typing import Final
from urllib.parse import urlsplit

from cryptography.exceptions import InvalidTag

from tether import clock
from tether.engine.handoff.peer import PeerRefused
from tether.errors import InvalidInput
from tether.secrets import SecretBox
from tether.store.base import CredentialRow, Store

__all__ = ["OutboundCredentials", "add_credential", "canonical_origin"]

_NAME: Final = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
#: an RFC 9110 auth-scheme token
_SCHEME: Final = re.compile(r"^[A-Za-z0-9!#$%&'*+.^_`|~-]+$")
_DEFAULT_PORTS: Final = {"https": 443, "http": 80}


def canonical_origin(url: str) -> str:
    """``scheme://host[:port]`` of ``url``, lower-cased, without a default port: what a credential is bound to."""
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError as exc:
        raise InvalidInput(f"{url!r} is not a URL: {exc}") from exc
    scheme, host = parts.scheme.lower(), (parts.hostname or "").lower()
    if scheme not in _DEFAULT_PORTS or not host:
        raise InvalidInput(f"{url!r} is not an http(s) origin like https://agent.example:8443")
    if ":" in host:
        host = f"[{host}]"
    return f"{scheme}://{host}" if port in (None, _DEFAULT_PORTS[scheme]) else f"{scheme}://{host}:{port}"


def _context(name: str, origin: str, scheme: str) -> str:
    return f"tether:outbound-credential:v1\0{name}\0{origin}\0{scheme}"


async def add_credential(
    store: Store, box: SecretBox, *, name: str, origin: str, scheme: str, secret: str
) -> CredentialRow:
    """Seal ``secret`` and store it as credential ``name``, to be sent to ``origin`` only.

    Raises InvalidInput for a bad name, origin, scheme or an empty secret, and Conflict when
    a credential of that name exists (remove it first: a credential is never overwritten
    silently under a workflow that uses it).
    """
    if not _NAME.match(name):
        raise InvalidInput(f"{name!r}: a credential name is 1-64 letters, digits, '.', '_' or '-'")
    if not _SCHEME.match(scheme):
        raise InvalidInput(f"{scheme!r} is not an HTTP authorization scheme (e.g. Bearer)")
    secret = secret.strip()
    if not secret or any(c in secret for c in "\r\n\0"):
        raise InvalidInput("the secret is empty, or spans several lines")
    bound = canonical_origin(origin)
    row = CredentialRow(
        name=name,
        origin=bound,
        scheme=scheme,
        secret=box.seal(secret, context=_context(name, bound, scheme)),
        secret_fingerprint=box.fingerprint(secret),
        created_at=clock.now_iso(),
    )
    await store.insert_credential(row)
    return row


class OutboundCredentials:
    """The peer client's credential lookup: the ``Authorization`` value of a credential, for its own origin only."""

    def __init__(self, store: Store, box: SecretBox) -> None:
        self._store = store
        self._box = box

    async def __call__(self, name: str, url: str) -> str:
        """The header value to send with a request to ``url``; PeerRefused when ``name`` may not go there."""
        row = await self._store.get_credential(name)
        if row is None:
            raise PeerRefused(
                "credential_not_found", f"no outbound credential named {name!r} (see: tether credentials list)"
            )
        origin = canonical_origin(url)
        if row.origin != origin:
            raise PeerRefused(
                "credential_origin_mismatch",
                f"outbound credential {name!r} is bound to {row.origin}, not {origin}; it is never sent elsewhere",
            )
        try:
            secret = self._box.open(row.secret, context=_context(row.name, row.origin, row.scheme))
        except InvalidTag as exc:  # another host key, or an edited row
            raise PeerRefused(
                "credential_unreadable",
                f"outbound credential {name!r} does not open with this host's key (add it again)",
            ) from exc
        return f"{row.scheme} {secret}"
