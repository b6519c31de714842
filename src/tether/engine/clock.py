"""Timestamps as OpenWOP writes them: ISO 8601, UTC, milliseconds, ``Z``."""

from __future__ import annotations

from datetime import datetime, timezone


def now() -> datetime:
    return datetime.now(timezone.utc)


def iso(moment: datetime) -> str:
    if moment.tzinfo is not timezone.utc:
        moment = moment.astimezone(timezone.utc)
    return moment.isoformat(timespec="milliseconds")[:-6] + "Z"  # drop "+00:00"


def now_iso() -> str:
    return iso(now())


def parse(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))
