"""Which A2A version a request speaks: the ``A2A-Version`` service parameter.

A2A 1.0 (§1.1 of the wire notes) makes every 1.x client send ``A2A-Version`` as a header
or a query parameter; a request without one, or with an empty one, is a 0.3 client's.
Only ``Major.Minor`` counts (``1.0.1`` is 1.0). Tether serves 0.3 and 1.0, and 1.1 (the
draft task generations, on top of 1.0) only where it is really served; anything else is
refused with ``VersionNotSupportedError`` naming what is served.
"""

from __future__ import annotations

import functools
import re
from enum import Enum

__all__ = ["SUPPORTED", "Version", "VersionNotSupported", "negotiate"]

_MAJOR_MINOR = re.compile(r"^(\d{1,4})\.(\d{1,4})(?:\.\d{1,4})?$")


class Version(Enum):
    """An A2A version a request is served in; ``value`` is its ``Major.Minor``."""

    V0_3 = "0.3"
    V1_0 = "1.0"
    #: 1.0 plus the dev-1.1 draft's task generations
    V1_1 = "1.1"

    @property
    def is_legacy(self) -> bool:
        """0.3: slash method names, ``kind`` discriminators, a bare Task as the send result."""
        return self is Version.V0_3


#: every version this host answers in, most preferred first (the card's and discovery's order)
SUPPORTED: tuple[Version, ...] = (Version.V1_0, Version.V0_3)


class VersionNotSupported(Exception):
    """The caller asked for a version this host does not serve."""

    def __init__(self, requested: str, served: tuple[Version, ...]) -> None:
        self.requested = requested[:32]
        self.served = served
        names = ", ".join(v.value for v in served)
        super().__init__(f"A2A-Version {self.requested!r} is not supported; this agent serves {names}")


def negotiate(header: str | None, query: str | None, served: tuple[Version, ...] = SUPPORTED) -> Version:
    """The version of one request: the header, else the query parameter; absent or empty is 0.3.

    Raises
    ------
    VersionNotSupported
        For a value that is not ``Major.Minor[.patch]`` of a version in ``served``.
    """
    raw = header if header is not None and header.strip() else query
    text = (raw or "").strip()
    if not text:
        return Version.V0_3
    version = _asked(text) if len(text) <= _LONGEST else None
    if version is not None and version in served:
        return version
    raise VersionNotSupported(text, served)


#: the longest value ``_MAJOR_MINOR`` matches (``1234.1234.1234``): anything longer is refused uncached
_LONGEST = 14
_BY_VALUE = {v.value: v for v in Version}


@functools.lru_cache(maxsize=64)
def _asked(text: str) -> Version | None:
    """The version ``Major.Minor[.patch]`` names (None: not such a value, or no version Tether knows).

    Kept per value: every 1.x request sends the same few, and parsing one costs a 1.0
    request more than its whole ``GetTask`` codec.
    """
    match = _MAJOR_MINOR.match(text)
    if match is None:
        return None
    return _BY_VALUE.get(f"{int(match.group(1))}.{int(match.group(2))}")
