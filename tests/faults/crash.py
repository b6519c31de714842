"""The fault harness's engine: run a scenario with one failpoint armed, restart what died, finish, check.

A scenario (``scenarios``) is a list of idempotent steps over a ``Ctx`` (what the hosts
acknowledged is written there, and only that), plus a check of its invariants at the end.
``trace`` runs it once with every host tracing the failpoints it reaches; ``crash`` runs it
with one host armed at one failpoint (its Nth hit): when that host dies, it is started
again unarmed, and the steps run again from the first, each skipping what was acknowledged.
"""

from __future__ import annotations

import os
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from harness import HostProcess

from tether import failpoints

Doc = dict[str, Any]
#: a host that died answers no request: every step's request fails with one of these
GONE = (httpx.TransportError, ConnectionError)


class Died(Exception):
    """A host of the scenario died (its armed failpoint, or anything else: the check then says)."""


class FaultHost(HostProcess):
    """A ``tether serve`` process started with the failpoint environment of its next life (``env``)."""

    def __init__(self, data_dir: Path, *args: str, database_url: str | None = None) -> None:
        super().__init__(data_dir, *args, database_url=database_url)
        self.env: dict[str, str] = {}
        self.deaths = 0

    def start(self) -> FaultHost:
        saved = {key: os.environ.get(key) for key in self.env}
        os.environ.update(self.env)
        try:
            super().start()
        finally:
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value
        return self

    def dead(self) -> bool:
        return self.proc is not None and self.proc.poll() is not None

    def revive(self) -> None:
        """Started again, unarmed (the same store, the same port when it was fixed)."""
        self.deaths += 1
        self.env = {k: v for k, v in self.env.items() if k == failpoints.PLANT_ENV}  # a planted bug is in every life
        self._close_pipe()
        self.start()


@dataclass
class Ctx:
    """What one scenario run learnt: the hosts, what they acknowledged, and the violations found."""

    hosts: dict[str, FaultHost]
    key: str
    folder: Path
    acked: Doc = field(default_factory=dict)
    violations: list[str] = field(default_factory=list)
    extra: Doc = field(default_factory=dict)

    def http(self, name: str = "a") -> httpx.Client:
        host = self.hosts[name]
        verify: Any = self.extra.get("verify", True)
        return httpx.Client(
            base_url=host.url, headers={"Authorization": f"Bearer {self.key}"}, timeout=15, verify=verify
        )

    def alive(self) -> None:
        """Raise Died when a host of the scenario is gone."""
        if any(host.dead() for host in self.hosts.values()):
            raise Died

    def until(self, probe: Callable[[], Any], what: str, timeout: float = 20.0) -> Any:
        """``probe()``'s first truthy value; Died as soon as a host dies; AssertionError past ``timeout``."""
        deadline = time.monotonic() + timeout
        last: Any = None
        while True:
            self.alive()
            try:
                last = probe()
            except GONE:
                self.alive()
                last = None
            if last:
                return last
            if time.monotonic() > deadline:
                self.alive()
                raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what} (last: {last!r})")
            time.sleep(0.05)

    def call(self, fn: Callable[[], httpx.Response]) -> httpx.Response:
        """One request; Died when its host died before answering."""
        try:
            return fn()
        except GONE:
            time.sleep(0.2)  # the process is going: let it be gone before asking
            for host in self.hosts.values():
                if host.proc is not None:
                    try:
                        host.proc.wait(5)
                    except Exception:  # noqa: BLE001,S110 - still alive: the request failed for another reason
                        pass
            self.alive()
            raise


Step = Callable[[Ctx], None]


@dataclass(frozen=True)
class Scenario:
    """A sample workflow driven end to end: its hosts (``start``), steps and final check."""

    name: str
    start: Callable[[Path, str, str | None], Ctx]  # folder, store, a database URL (PostgreSQL)
    steps: tuple[Step, ...]
    check: Step
    #: hosts that may be armed (a hand-off: both)
    armed: tuple[str, ...] = ("a",)
    cleanup: Callable[[Ctx], None] = lambda ctx: None


def drive(ctx: Ctx, scenario: Scenario, lives: int = 4) -> None:
    """Run the steps and the check to the end, reviving each host that dies on the way (then from the first step)."""
    for _ in range(lives):
        try:
            for step in scenario.steps:
                _stepped(ctx, step)
            _stepped(ctx, scenario.check)
            return
        except Died:
            for host in ctx.hosts.values():
                if host.dead():
                    host.revive()
        except AssertionError as failed:
            ctx.violations.append(str(failed).splitlines()[0][:400])
            return
    ctx.violations.append(f"the scenario did not finish in {lives} lives")


def _stepped(ctx: Ctx, step: Step) -> None:
    """One step (or the check); Died when a host died under it, AssertionError naming the step when it failed."""
    try:
        step(ctx)
    except GONE as gone:
        ctx.alive()
        raise AssertionError(f"{_name(step)}: {type(gone).__name__}: {gone}") from gone
    except AssertionError as failed:
        ctx.alive()  # a host that died is why: not a violation yet
        raise AssertionError(f"{_name(step)}: {failed}") from failed


def _name(step: Step) -> str:
    return getattr(step, "__qualname__", repr(step)).replace(".<locals>", "")


@contextmanager
def running(scenario: Scenario, folder: Path, store: str, database: str | None) -> Iterator[Ctx]:
    folder.mkdir(parents=True, exist_ok=True)
    ctx = scenario.start(folder, store, database)
    try:
        yield ctx
    finally:
        scenario.cleanup(ctx)
        for host in ctx.hosts.values():
            host.kill()
            host.close_clients()


def trace(
    scenario: Scenario, folder: Path, store: str, database: str | None
) -> tuple[dict[str, Counter[str]], list[str]]:
    """Run ``scenario`` with every armable host tracing; the points each reached (with counts), and violations."""
    files = {name: folder / f"trace-{name}" for name in scenario.armed}
    os.environ["TETHER_FAULTS_TRACE_HOSTS"] = ",".join(f"{n}={p}" for n, p in files.items())
    try:
        with running(scenario, folder, store, database) as ctx:
            drive(ctx, scenario)
            violations = ctx.violations
    finally:
        os.environ.pop("TETHER_FAULTS_TRACE_HOSTS", None)
    reached = {name: Counter(p.read_text().split()) if p.exists() else Counter() for name, p in files.items()}
    return reached, violations


def crash(
    scenario: Scenario, folder: Path, store: str, database: str | None, host: str, point: str, nth: int
) -> tuple[bool, list[str]]:
    """Run ``scenario`` with ``host`` armed at ``point`` (its ``nth`` hit); whether it died there, and violations."""
    os.environ["TETHER_FAULTS_ARM"] = f"{host}={point}:{nth}"
    try:
        with running(scenario, folder, store, database) as ctx:
            drive(ctx, scenario)
            return ctx.hosts[host].deaths > 0, ctx.violations
    finally:
        os.environ.pop("TETHER_FAULTS_ARM", None)


def armed_env(name: str) -> dict[str, str]:
    """The failpoint environment of host ``name``'s first life, as ``trace``/``crash`` asked for it."""
    env = {}
    for item in filter(None, os.environ.get("TETHER_FAULTS_TRACE_HOSTS", "").split(",")):
        host, _, path = item.partition("=")
        if host == name:
            env[failpoints.TRACE_ENV] = path
    arm = os.environ.get("TETHER_FAULTS_ARM", "")
    host, _, point = arm.partition("=")
    if host == name:
        env[failpoints.ENV] = point
    plant = os.environ.get("TETHER_FAULTS_PLANTED")
    if plant:
        env[failpoints.PLANT_ENV] = plant
    return env


def sequence_clean(docs: list[Doc], what: str) -> None:
    """Every sequence once from 0, one ``run.started``, no node started or finished twice."""
    sequences = [e["sequence"] for e in docs]
    assert sequences == list(range(len(docs))), f"{what}: event-sequence gap or duplicate: {sequences}"
    assert Counter(e["type"] for e in docs)["run.started"] == 1, f"{what}: run.started not once"
    for kind in ("node.started", "node.completed", "node.failed"):
        twice = {n: c for n, c in Counter(e.get("nodeId") for e in docs if e["type"] == kind).items() if c > 1}
        assert not twice, f"{what}: {kind} more than once: {twice}"
