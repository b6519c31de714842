"""Time-ordered identifiers: inserts touch few B-tree pages and ids sort by creation."""

from __future__ import annotations

import os
import random
import threading
import time
import uuid

#: ids must be unique and ordered, not secret (nothing is authorised by knowing one), so a
#: generator seeded once from the OS is enough, and far cheaper than a system call per id
_random = random.Random(os.urandom(32))

_lock = threading.Lock()
_last_millis = 0
_counter = 0


def uuid7() -> uuid.UUID:
    """A UUIDv7 (RFC 9562): 48-bit Unix milliseconds, a 12-bit counter, 62 random bits.

    Within one process the ids strictly increase, even for ids made in the same
    millisecond (the counter, RFC 9562 method 1) or when the clock steps back.
    """
    return uuid.UUID(int=_uuid7_int())


def _uuid7_int() -> int:
    global _last_millis, _counter
    millis = time.time_ns() // 1_000_000
    with _lock:
        if millis <= _last_millis:
            millis = _last_millis
            _counter += 1
            if _counter > 0xFFF:
                millis += 1
                _counter = 0
        else:
            _counter = _random.getrandbits(10)  # room to count up
        _last_millis = millis
        counter = _counter
        rand = _random.getrandbits(62)
    return (millis & ((1 << 48) - 1)) << 80 | 0x7 << 76 | counter << 64 | 0b10 << 62 | rand


def new_id(prefix: str = "") -> str:
    """A time-ordered opaque id (a UUIDv7's 32 hex digits), optionally prefixed (``run_…``)."""
    return f"{prefix}{_uuid7_int():032x}"
