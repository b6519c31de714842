"""Which OpenWOP major a request speaks, and the ``OpenWOP-Version`` every protocol answer names.

Major 1 lives under ``/v1``, exactly as before; major 2 on the unversioned paths of the
same origin. ``OpenWOP-Version`` on a request names a major (``2`` or ``2.0``; only the
major selects): an unlisted one is ``406 protocol_version_unsupported``, a ``/v1`` path
asked for another major ``400 protocol_version_mismatch``, as is an unversioned path asked
for major 1 (major 1 has no unversioned paths). Without the header, ``/v1`` is major 1,
discovery the preferred major, and every other unversioned path major 2.

Every answer on a protocol path carries ``OpenWOP-Version: <major>.<minor>`` (refusals,
404s and 304s included). Tether's own routes carry no major: the console, metrics, health,
the A2A endpoints and agent card, the conformance seams.

Because a v2 path names a bound id as one segment (``acme~2Frun_…``), a ``%2F`` a client
wrote in its place is kept as ``~2F`` before routing: the server has already decoded it
into a ``/`` that would split the segment.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from urllib.parse import unquote

import orjson
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from tether.http.errors import DIALECT
from tether.openwop.v2.errors import dialect

__all__ = [
    "DISCOVERY_PATH",
    "MAJOR_HEADER",
    "PREFERRED_VERSION",
    "PROTOCOL_VERSIONS",
    "MajorSelection",
    "major_of",
]

#: the contract of each major this host serves, as ``protocolVersions`` lists them; v1 is preferred during the overlap
PROTOCOL_VERSIONS: tuple[str, ...] = ("1.0", "2.0")
PREFERRED_VERSION = "1.0"
_BY_MAJOR = {int(v.split(".")[0]): v for v in PROTOCOL_VERSIONS}

MAJOR_HEADER = "OpenWOP-Version"
DISCOVERY_PATH = "/.well-known/openwop"
#: Tether's own routes: no OpenWOP major selects them, and their answers name none
_PROPRIETARY = (
    "/console",
    "/metrics",
    "/healthz",
    "/readyz",
    "/conformance/",
    "/v1/a2a",
    "/a2a/",
    "/v1/host/",
    "/.well-known/agent-card.json",
    "/.well-known/agent.json",
)
_VERSION = re.compile(r" *([0-9]{1,3})(?:\.([0-9]{1,3}))? *")


def major_of(scope: Scope) -> int:
    """The major a request is served under (set by :class:`MajorSelection`; 1 where it did not run)."""
    state = scope.get("state") or {}
    major: int = state.get("openwop_major", 1)
    return major


def _refusal(status: int, code: str, message: str, details: dict[str, object], version: str) -> list[Message]:
    body = orjson.dumps({"error": code, "message": message, "details": details})
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        (MAJOR_HEADER.lower().encode(), version.encode()),
    ]
    return [
        {"type": "http.response.start", "status": status, "headers": headers},
        {"type": "http.response.body", "body": body},
    ]


def _kept_segments(scope: Scope) -> str:
    """The request path with each ``%2F`` kept as ``~2F``, everything else decoded as the server did."""
    raw: bytes = scope.get("raw_path") or scope["path"].encode()
    text = re.sub(r"%2[Ff]", "~2F", raw.decode("latin-1"))
    return unquote(text, encoding="utf-8", errors="replace")


class MajorSelection:
    """ASGI middleware: picks each protocol request's major, refuses what none serves, stamps the answer."""

    def __init__(self, app: ASGIApp, served: Iterable[str] = PROTOCOL_VERSIONS) -> None:
        self.app = app
        self.served = tuple(served)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path: str = scope.get("path", "")
        if scope["type"] != "http" or path.startswith(_PROPRIETARY):
            await self.app(scope, receive, send)
            return
        asked = next((v.decode("latin-1") for k, v in scope["headers"] if k == b"openwop-version"), None)
        versioned = path == "/v1" or path.startswith("/v1/")
        default = 1 if versioned or path == DISCOVERY_PATH else 2
        major = default
        if asked is not None:
            match = _VERSION.fullmatch(asked)
            if match is None or int(match.group(1)) not in _BY_MAJOR:
                for message in _refusal(
                    406,
                    "protocol_version_unsupported",
                    f"OpenWOP-Version {asked!r:.40} names no major this host serves: send one of "
                    + ", ".join(self.served),
                    {"protocolVersions": list(self.served)},
                    _BY_MAJOR[default],
                ):
                    await send(message)
                return
            major = int(match.group(1))
            if major != default and path != DISCOVERY_PATH:
                where = "/v1 paths speak major 1" if versioned else "major 1 is served under /v1"
                for message in _refusal(
                    400,
                    "protocol_version_mismatch",
                    f"OpenWOP-Version {asked!r:.40} does not fit {path!r:.100}: {where}",
                    {"path": path[:200], "protocolVersions": list(self.served)},
                    _BY_MAJOR[default],
                ):
                    await send(message)
                return
        state = scope.setdefault("state", {})
        state["openwop_major"] = major
        if major == 2:
            state[DIALECT] = dialect
            scope = {**scope, "path": _kept_segments(scope)}
        stamp = (MAJOR_HEADER.lower().encode(), _BY_MAJOR[major].encode())

        async def stamped(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), stamp]
            await send(message)

        await self.app(scope, receive, stamped)
