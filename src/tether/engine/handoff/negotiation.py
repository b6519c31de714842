"""A hand-off's A2A version negotiation: which version it speaks to its peer, decided once, before any send.

The operator's floor (``--a2a-minimum-version``, 1.0 unless legacy peers must be reached)
bounds every choice: ``auto`` takes 1.0 when the peer's card offers it, else 0.3 if the
floor allows it (a *downgrade*); a node pinned to a version takes that one or none. A peer
offering only versions below the floor, or a node pinned below it, is refused
(``below-floor``); a peer offering nothing this hand-off speaks is refused too
(``unsupported``). A refusal sends nothing to the peer: the node fails
``interop_version_unsupported``.

Every outcome is recorded once in the run's log (``events.handoff_negotiated``), as the
content-free ``negotiation.decided`` of OpenWOP v2 (``run-event-payloads.schema.json``,
``negotiationDecided``): the peer only as the SHA-256 of its origin. That schema knows two
outcomes, so a downgrade is an ``accepted`` one at the lower version (``downgraded`` is
kept beside it in Tether's own log line).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any, Final, Literal
from urllib.parse import urlsplit

__all__ = [
    "MINIMUM_VERSION_FLAG",
    "PREFERRED",
    "VERSIONS",
    "Negotiation",
    "decide",
    "peer_digest",
    "pinned_below_floor",
]

#: the versions a hand-off speaks, most preferred first
VERSIONS: Final = ("1.0", "0.3")
PREFERRED: Final = VERSIONS[0]
#: the operator's knob, named in every refusal
MINIMUM_VERSION_FLAG: Final = "--a2a-minimum-version"
_DEFAULT_PORTS: Final = {"http": 80, "https": 443}


def _rank(version: str) -> tuple[int, ...]:
    return tuple(int(piece) for piece in version.split("."))


def peer_digest(agent: str) -> str:
    """SHA-256 (hex) of the peer's origin (``scheme://host[:port]``, the default port left out), never the URL."""
    parts = urlsplit(agent)
    scheme, host = parts.scheme.lower(), (parts.hostname or "").lower()
    if ":" in host:
        host = f"[{host}]"
    port = parts.port
    origin = f"{scheme}://{host}" if port is None or port == _DEFAULT_PORTS.get(scheme) else f"{scheme}://{host}:{port}"
    return hashlib.sha256(origin.encode()).hexdigest()


@dataclass(frozen=True, slots=True)
class Negotiation:
    """What was decided: ``version`` to speak (None when refused), and why."""

    outcome: Literal["accepted", "refused"]
    reason: Literal["ok", "below-floor", "unsupported"]
    floor: str
    peer_digest: str
    version: str | None = None
    #: the versions the peer's card offered (empty when the node's pin was refused without reading it)
    offered: tuple[str, ...] = ()
    #: ``auto`` settled below the preferred version (the floor allowed it)
    downgraded: bool = False
    #: for a person: what was decided, and for a refusal what to change
    message: str = ""

    @property
    def refused(self) -> bool:
        return self.outcome == "refused"

    def payload(self, at: str) -> dict[str, Any]:
        """The ``negotiation.decided`` payload (the v2 schema's shape, nothing else)."""
        out: dict[str, Any] = {"protocol": "a2a", "outcome": self.outcome}
        if self.version is not None:
            out["version"] = self.version
        out.update(floor=self.floor, peerDigest=self.peer_digest, reason=self.reason, at=at)
        return out


def pinned_below_floor(version: str, floor: str) -> bool:
    """A node pinned to a version under the floor: refused without asking the peer anything."""
    return version != "auto" and _rank(version) < _rank(floor)


def decide(agent: str, wanted: str, offered: tuple[str, ...] | list[str], floor: str) -> Negotiation:
    """The version hand-off ``wanted`` (``auto`` or a pin) speaks to a peer offering ``offered``, under ``floor``."""
    digest = peer_digest(agent)
    offered = tuple(v for v in VERSIONS if v in offered)
    candidates = VERSIONS if wanted == "auto" else (wanted,)
    allowed = [v for v in candidates if _rank(v) >= _rank(floor)]
    for version in allowed:
        if version in offered:
            downgraded = wanted == "auto" and version != PREFERRED
            note = f" (a downgrade from {PREFERRED}, allowed by {MINIMUM_VERSION_FLAG} {floor})" if downgraded else ""
            return Negotiation(
                "accepted", "ok", floor, digest, version, offered, downgraded, f"speaking A2A {version}{note}"
            )
    shown = ", ".join(offered) or "no JSON-RPC interface this host speaks"
    below = [v for v in candidates if _rank(v) < _rank(floor) and (v in offered or wanted != "auto")]
    if below:
        message = (
            f"the peer at {agent} offers {shown}; this hand-off may speak only A2A {floor} or later "
            f"({MINIMUM_VERSION_FLAG} {floor}{'' if wanted == 'auto' else f', the node pins {wanted}'}); "
            f"nothing was sent. To hand off to a legacy 0.3 peer, start the host with {MINIMUM_VERSION_FLAG} 0.3"
        )
        return Negotiation("refused", "below-floor", floor, digest, None, offered, False, message)
    message = f"the peer at {agent} offers {shown}; this hand-off speaks {' or '.join(allowed)}; nothing was sent"
    return Negotiation("refused", "unsupported", floor, digest, None, offered, False, message)
