"""The inner-loop tier: ``pytest -m fast`` runs the tests that need no host and start nothing outside pytest.

A test is marked ``fast`` at collection unless it needs one of the slow things, told apart
by what it asks for:

- a host, in-process or not: the ``backend`` fixture, which every host factory
  (``start_host``, ``start_module_host``, ``start_process``) and every suite's ``host`` need,
  or a module that starts one itself (it imports ``inproc.InProcessHost``);
- a real process: the ``process`` marker, or a module that spawns one itself (it imports
  ``subprocess``, ``harness.HostProcess`` or ``harness.cli``, a sidecar environment, a Node
  project, or the hand-off's pair of ``tether serve`` processes);
- PostgreSQL: a ``postgres`` parameter, a fixture that makes a database (``postgres_dsn``,
  ``shared_database``) or a module that makes one itself (it imports from ``pg``);
- a browser: the ``browser`` fixture.

What is left is the engine, the SQLite store, egress, the CLI in-process, the projections
and the checks of documents: the loop a developer waits for between edits. The whole suite
still runs everything.
"""

from __future__ import annotations

from types import ModuleType

import pytest

#: fixtures that start a host or a process, make a PostgreSQL database or launch a browser
SLOW_FIXTURES = frozenset({"backend", "start_process", "postgres_dsn", "shared_database", "browser"})
#: where a test module's imports come from when it starts processes or databases itself
SPAWNING_SOURCES = frozenset({"subprocess", "sidecars", "node_client", "handoff_hosts", "pg"})
#: the names that start a host or a process, by the helper module they come from (``harness.wait_until``,
#: ``inproc.run_cli`` and the like start nothing)
SPAWNING_NAMES = frozenset(
    {("harness", "HostProcess"), ("harness", "cli"), ("harness", "create_key"), ("inproc", "InProcessHost")}
)


def _spawns(module: ModuleType | None) -> bool:
    """Whether the test module imported something that starts a host, a process or a PostgreSQL database."""
    if module is None:
        return False
    for value in vars(module).values():
        if isinstance(value, ModuleType):
            if value.__name__ in SPAWNING_SOURCES:
                return True
            continue
        source = getattr(value, "__module__", None)
        if source in SPAWNING_SOURCES or (source, getattr(value, "__name__", None)) in SPAWNING_NAMES:
            return True
    return False


def is_fast(item: pytest.Item, module_spawns: bool) -> bool:
    """Whether ``item`` needs no host, no process, no PostgreSQL and no browser."""
    if module_spawns or item.get_closest_marker("process") is not None:
        return False
    if SLOW_FIXTURES.intersection(getattr(item, "fixturenames", ())):
        return False
    callspec = getattr(item, "callspec", None)
    return callspec is None or "postgres" not in callspec.params.values()


def mark_fast(items: list[pytest.Item]) -> None:
    """Add the ``fast`` marker to every item ``is_fast`` admits (each module is looked through once).

    Then the modules that start processes of their own go first, the fast ones last: xdist
    hands a module to one worker whole, in this order, so the long modules start while every
    worker is busy and the short ones fill the end instead of one long module trailing alone
    (longest first, the classic way to shorten a schedule's tail). Within a module, the
    order is unchanged.
    """
    spawning: dict[ModuleType | None, bool] = {}
    for item in items:
        module = getattr(item, "module", None)
        if module not in spawning:
            spawning[module] = _spawns(module)
        if is_fast(item, spawning[module]):
            item.add_marker(pytest.mark.fast)
    slow = {getattr(item, "module", None) for item in items if item.get_closest_marker("fast") is None}

    def rank(item: pytest.Item) -> int:
        module = getattr(item, "module", None)
        return 0 if spawning[module] else 1 if module in slow else 2

    items.sort(key=rank)
