"""Timestamps: ``now_iso`` is ``iso(now())``, in OpenWOP's form, to the millisecond."""

from __future__ import annotations

import re
import time
from datetime import UTC, datetime

import pytest

from tether import clock

STAMP = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z")


def test_now_iso_is_iso_of_now_to_the_millisecond() -> None:
    before = clock.iso(clock.now())
    stamped = clock.now_iso()
    after = clock.iso(clock.now())
    assert STAMP.fullmatch(stamped), stamped
    assert before <= stamped <= after


@pytest.mark.parametrize(
    ("epoch", "expected"),
    [
        (1_796_083_199.9996, "2026-11-30T23:59:59.999Z"),  # milliseconds are cut, never rounded up
        (1_796_083_200.0004, "2026-12-01T00:00:00.000Z"),  # the next second, the next day
        (1_796_083_200.5, "2026-12-01T00:00:00.500Z"),
    ],
)
def test_now_iso_across_a_second_and_a_day(monkeypatch: pytest.MonkeyPatch, epoch: float, expected: str) -> None:
    assert clock.iso(datetime.fromtimestamp(epoch, UTC)) == expected  # the slow way, the oracle
    monkeypatch.setattr(time, "time", lambda: epoch)
    assert clock.now_iso() == expected
