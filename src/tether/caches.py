"""Every in-memory copy of durable state, declared by the class that keeps it.

A class whose instances keep a copy of something the store holds (tasks, events, runs,
keys, leases, delivery claims) names the attributes that hold it with
:func:`holds_copies`. ``docs/caches.md`` says, for each one, what it holds, who fills it,
what invalidates it, what happens when several hosts share one PostgreSQL, and which test
proves it never answers staler than it should. ``tests/code/test_caches_page.py`` fails
when a declared copy has no section on that page, and when something looks like a cache
(an ``OrderedDict`` or a ``deque`` on an instance, a memoised function, an attribute or a
module-level container named for a cache) and is neither declared nor listed there as no copy.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

__all__ = ["DECLARED", "holds_copies"]

C = TypeVar("C", bound=type)

#: ``module.Class`` -> the attributes of its instances that hold copies of durable state
DECLARED: dict[str, tuple[str, ...]] = {}


def holds_copies(*attributes: str) -> Callable[[C], C]:
    """Declare that the decorated class's ``attributes`` hold copies of durable state; the class is unchanged."""

    def declare(cls: C) -> C:
        DECLARED[f"{cls.__module__}.{cls.__qualname__}"] = attributes
        return cls

    return declare
