"""Timestamps as OpenWOP writes them: ISO 8601, UTC, milliseconds, ``Z``."""

from __future__ import annotations

import re
import time
from datetime import UTC, datetime, timedelta, timezone


def now() -> datetime:
    return datetime.now(UTC)


def iso(moment: datetime) -> str:
    if moment.tzinfo is not UTC:
        moment = moment.astimezone(UTC)
    return moment.isoformat(timespec="milliseconds")[:-6] + "Z"  # drop "+00:00"


#: the current second, formatted once: a send stamps half a dozen times
_second: tuple[int, str] = (-1, "")


def now_iso() -> str:
    """``iso(now())``, a third of the cost: the second's text is kept, the milliseconds added."""
    global _second
    t = time.time()
    whole = int(t)
    if whole != _second[0]:
        _second = (whole, time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(whole)))
    return f"{_second[1]}.{int((t - whole) * 1000):03d}Z"


def parse(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


#: RFC 3339's ``date-time`` (JSON Schema's ``format: date-time``, a ProtoJSON Timestamp): an offset is required
RFC3339 = re.compile(
    r"([0-9]{4})-([0-9]{2})-([0-9]{2})[Tt]([0-9]{2}):([0-9]{2}):([0-9]{2})(?:\.([0-9]+))?([Zz]|[+-][0-9]{2}:[0-9]{2})"
)
_DATE_TIME_HINT = "an RFC 3339 date-time with an offset, e.g. 2026-01-31T00:00:00Z or 2026-01-31T01:00:00.5+01:00"


def stamp_bound(text: str) -> str:
    """The stored stamp that the instant ``text`` names, for comparing stored stamps with it as text.

    Stored stamps (:func:`iso`) are UTC with whole milliseconds, so their text sorts as the
    instants do. An instant given with another offset, or with more fraction digits, is
    turned into that form, rounded *up* to the next whole millisecond: for every stored
    stamp ``s``, ``s >= bound`` exactly when ``s`` is at or after the instant, and
    ``s < bound`` exactly when it is before it. Comparing the caller's text instead would
    order ``+01:00`` and ``Z`` stamps of one instant differently, and a Unix time or a word
    not at all.

    Raises
    ------
    ValueError
        Anything but an RFC 3339 date-time with an offset (a bare date, a Unix time, a word),
        one naming no real instant (February 30th, a leap second, hour 24), or one outside
        the years 1 to 9999 in UTC.
    """
    match = RFC3339.fullmatch(text)
    if match is None:
        raise ValueError(f"must be {_DATE_TIME_HINT}")
    year, month, day, hour, minute, second, fraction, offset = match.groups()
    try:
        zone = UTC if offset in ("Z", "z") else _zone(offset)
        moment = datetime(int(year), int(month), int(day), int(hour), int(minute), int(second), tzinfo=zone)
        if fraction:
            # the exact fraction, in whole milliseconds rounded up (every digit counts, not Python's six)
            moment += timedelta(milliseconds=-(-int(fraction) * 1000 // 10 ** len(fraction)))
        return iso(moment)
    except ValueError:
        raise ValueError(f"names no real instant (a date or time out of range): it must be {_DATE_TIME_HINT}") from None
    except OverflowError:
        raise ValueError("is outside 0001-01-01T00:00:00Z to 9999-12-31T23:59:59.999Z") from None


def _zone(offset: str) -> timezone:
    hours, minutes = int(offset[1:3]), int(offset[4:6])
    if hours > 23 or minutes > 59:
        raise ValueError(offset)
    span = timedelta(hours=hours, minutes=minutes)
    return timezone(-span if offset[0] == "-" else span)


_SPAN = re.compile(r"(\d+(?:\.\d+)?)([smhd])")
_SPAN_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_span(text: str) -> float:
    """Seconds in a span written ``90s``, ``15m``, ``12h``, ``30d`` (or ``0``)."""
    if text.strip() == "0":
        return 0.0
    match = _SPAN.fullmatch(text.strip())
    if match is None:
        raise ValueError(f"{text!r} is not a span: write e.g. 90s, 15m, 12h or 30d (0 for none)")
    return float(match.group(1)) * _SPAN_UNITS[match.group(2)]
