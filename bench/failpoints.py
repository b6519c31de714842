"""What a disarmed failpoint costs: ``python bench/failpoints.py``.

A disarmed ``tether.failpoints.hit`` is a call that reads one module-level bool and returns.
This times it against an empty statement and an empty function call, and says what the
failpoints on one run's path (a handful: each commit twice, each delivery three or four
times) add per request, next to the request itself (about a millisecond here).
"""

from __future__ import annotations

import timeit

from tether.failpoints import hit

N = 2_000_000


def _ns(statement: str, **names: object) -> float:
    return min(timeit.repeat(statement, globals=names, number=N, repeat=7)) / N * 1e9


def main() -> None:
    empty = _ns("pass")
    call = _ns("f('x')", f=lambda name: None)
    disarmed = _ns("hit('store.commit.before')", hit=hit)
    per_run = 12 * (disarmed - empty)  # an approval run with a webhook reaches about a dozen
    print(f"empty statement      {empty:6.1f} ns")
    print(f"empty function call  {call:6.1f} ns")
    print(f"disarmed failpoint   {disarmed:6.1f} ns")
    print(f"a dozen per run      {per_run / 1000:6.2f} µs")


if __name__ == "__main__":
    main()
