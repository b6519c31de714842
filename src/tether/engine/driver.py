"""Driving runs: the loop that advances every unfinished run through its DAG, durably.

Every transition is decided on a snapshot read from the store and committed with the
sequence it was decided on (compare-and-swap). Whoever loses a race re-reads and decides
again, so a resolve, a cancel and the executing driver can never both win. The driver
keeps nothing that is not on disk: a restart re-reads every unfinished run and continues.

``Driver`` holds the machinery the public operations (``tether.engine.engine.Engine``)
build on: commits, one driver task per run, the pure steps of a run (``_advance``), delays,
gate deadlines, and, on a shared store, leases and hints from the other hosts.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Final

from tether import clock, failpoints
from tether.engine import events, replay
from tether.engine.batch import Batch, duration_ms, ms
from tether.engine.cluster import Cluster, LeaseSettings
from tether.engine.handoff.contract import CallPeer, Decide, EnginePort
from tether.engine.handoff.follower import Handoffs, HandoffSettings
from tether.engine.handoff.peer import PeerPort
from tether.engine.handoff.record import in_flight
from tether.engine.interrupts import ask_events, timeout_events
from tether.engine.nodes import HANDLERS, Completed, Failed, Handler, NodeContext, Outcome, Sleep, Suspend
from tether.engine.notifier import Notifier
from tether.engine.registry import WorkflowRegistry
from tether.engine.scheduler import Execute, Fail, Finish, Skip, Wait, node_outputs, plan, resolve_inputs
from tether.engine.workflow import WorkflowDefinition
from tether.errors import Conflict, InvalidInput, NotFound, SequenceConflict
from tether.files import stored_inline
from tether.ids import new_id
from tether.run_state import ErrorObject, RunSnapshot
from tether.store.base import Commit, Extra, Fanout, LeaseLost, RunRow, Store
from tether.types import TERMINAL, WAITING, RunStatus

#: Called with (run before, run after, the events) for every commit; what it returns is
#: written in the same transaction (task records, outbox rows). It must be pure.
Projector = Callable[[RunRow | None, RunRow, list[dict[str, Any]]], list[Extra]]
#: Called after each durable commit with it and the number of deliveries it enqueued.
CommitHook = Callable[[Commit, int], None]

log = logging.getLogger("tether.engine")

_MAX_RETRIES = 50

#: typed, so that mypy rejects a misspelt status here (a tuple literal it would not check)
_CANCELLING_OR_CANCELLED: Final[frozenset[RunStatus]] = frozenset({"cancelling", "cancelled"})


def executing(state: RunSnapshot) -> str | None:
    """The node started and not finished (a delay sleeping; Tether runs one node at a time), if any."""
    return next((node_id for node_id, entry in state["nodeStates"].items() if entry["status"] == "running"), None)


def sleep_ended(row: RunRow) -> bool:
    """Whether a delay's sleep in this run has nothing left to wait for: cancelled, or its attempt cut by a pause."""
    return row.status in _CANCELLING_OR_CANCELLED or executing(row.state) is None


class Driver(EnginePort):
    """Drives runs durably, one task per run on this host. Collaborators are handed in; nothing is global.

    It is the engine a hand-off sees (``EnginePort``: ``transition``, ``peer_call``, ``kick``,
    ``unfollowed``), and tells the hand-offs it follows (``handoffs``) what concerns them.
    """

    def __init__(
        self,
        store: Store,
        registry: WorkflowRegistry,
        notifier: Notifier,
        *,
        projectors: Sequence[Projector] = (),
        on_commit: Sequence[CommitHook] = (),
        on_hint: Sequence[Callable[[str], None]] = (),
        owner: str | None = None,
        leases: LeaseSettings | None = None,
        peers: PeerPort | None = None,
        handoffs: HandoffSettings | None = None,
        handlers: Mapping[str, Handler] = HANDLERS,
    ) -> None:
        """``projectors`` say what a commit writes beside its events and run row (task
        records, outbox rows), in order; ``on_commit`` hooks learn of each commit once it is
        durable, before observers are woken; ``on_hint`` hooks learn of each run another host
        sharing the store changed (its id, as the hint says). ``peers`` is how hand-off nodes reach other
        agents (without it they fail ``a2a_peer_not_configured``); ``handlers`` the node types it
        runs (``nodes.node_handlers``: the registry is built from the same)."""
        self._handlers = handlers
        self.store = store
        self.registry = registry
        self.notifier = notifier
        self.owner = owner or new_id("host_")
        #: on a shared store, runs are driven under leases (see ``tether.engine.cluster``)
        self.cluster = (
            Cluster(
                store,
                self.owner,
                leases or LeaseSettings(),
                on_lost=self._lost,
                on_orphan=self._adopt,
                on_hint=self._hint,
            )
            if store.shared
            else None
        )
        self._drivers: dict[str, asyncio.Task[None]] = {}
        self._again: set[str] = set()
        self._sleeps: dict[str, asyncio.Task[None]] = {}
        self._timers: dict[str, asyncio.TimerHandle] = {}
        self._retry_after: dict[str, float] = {}
        self._background: set[asyncio.Task[Any]] = set()
        #: orphans found by the lease scan and kicked, until their driver claims them (or not)
        self._adopting: set[str] = set()
        #: told each time this host takes a run over whose lease had lapsed (metrics)
        self.on_taken_over: Callable[[], None] | None = None
        self._stopping = False
        self._projectors = tuple(projectors)
        self._on_commit = tuple(on_commit)
        self._on_hint = tuple(on_hint)
        #: a hand-off is followed only by the host holding its run's lease, for as long as it follows it
        self.handoffs = Handoffs(self, store, peers, handoffs)

    # lifecycle -------------------------------------------------------------------------

    async def start(self) -> int:
        """Continue every unfinished run from its last committed step; returns how many."""
        rows = await self.store.active_runs()
        for row in rows:
            self._resume(row)
        if self.cluster is not None:
            self.cluster.start()
        return len(rows)

    def _resume(self, row: RunRow) -> None:
        if replay.unsettled(row.state):
            self.kick(row.run_id)  # a replay settles what its prefix left in flight from the record
        elif row.status in WAITING and (self.cluster is None or not in_flight(row.state)):
            self._arm_timeout(row)
            self.handoffs.notice(row)  # a mirrored peer question: its hand-off still follows the peer
        else:
            self.kick(row.run_id)

    async def stop(self, grace: float = 5.0) -> None:
        """Stop driving runs; all state is already committed, so nothing is lost."""
        self._stopping = True
        await self.handoffs.stop(grace)
        if self.cluster is not None:
            await self.cluster.stop()
        for timer in self._timers.values():
            timer.cancel()
        self._timers.clear()
        tasks = list(self._drivers.values()) + list(self._background)
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=grace)

    # commits ---------------------------------------------------------------------------

    async def _commit(self, batch: Batch, *, extras: list[Extra] | None = None, commit: Commit | None = None) -> RunRow:
        """Write the batch (or ``commit``, made from it already), with what the projectors add."""
        commit = commit or batch.commit()
        before = None if commit.expected_sequence is None else batch.row
        commit.extras.extend(extras or [])  # first: a push config written here must see this commit's push
        for projector in self._projectors:
            commit.extras.extend(projector(before, commit.run, batch.docs))
        if replay.replaying(commit.run.state) or (before is None and replay.forked(commit.run.state)):
            # fixed history is never delivered again, and a replay delivers nothing at all
            commit.extras = [extra for extra in commit.extras if not isinstance(extra, Fanout)]
        if failpoints.planted("ack-before-commit") and any(d["type"] == "interrupt.resolved" for d in batch.docs):
            self._planted_late(commit)  # the fault harness's planted bug (test seams only)
            return commit.run
        await self._write(commit)
        return commit.run

    def _planted_late(self, commit: Commit) -> None:
        """The planted bug: an answer acknowledged now and written 0.3 s later (a crash between loses it)."""

        async def late() -> None:
            await asyncio.sleep(0.3)
            await self._write(commit)
            self.kick(commit.run.run_id)

        task = asyncio.get_running_loop().create_task(late())
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _write(self, commit: Commit) -> None:
        enqueued = await self.store.commit(commit)
        for hook in self._on_commit:  # before the wake-up: observers woken by it may rely on a hook
            hook(commit, enqueued)
        self.notifier.publish(commit.run.run_id)
        self.handoffs.committed(commit.run.run_id)
        if self.cluster is not None:
            self.cluster.announce(commit.run.run_id)

    async def transition(self, run_id: str, decide: Decide) -> RunRow:
        """``EnginePort``: a hand-off's transition, decided and committed as any other (on no tenant's behalf)."""
        row, _ = await self._transition(None, run_id, decide)
        return row

    def peer_call(self, row: RunRow, node_id: str) -> CallPeer | None:
        """``EnginePort``: what a hand-off node asks for, computed again from the run as it is (the same every time)."""
        outcome = self._run_node(self.registry.get(row.workflow_id).workflow, node_id, row.state, row.run_id)
        return outcome if isinstance(outcome, CallPeer) else None

    async def _transition(
        self,
        tenant: str | None,
        run_id: str,
        decide: Callable[[RunRow, Batch], Awaitable[Any] | Any],
        extras: list[Extra] | None = None,
    ) -> tuple[RunRow, Any]:
        """Read, decide, commit; on a lost race read and decide again."""
        for _ in range(_MAX_RETRIES):
            row = await self.store.get_run(run_id, tenant)
            if row is None:
                raise NotFound(f"no run {run_id!r}", details={"runId": run_id})
            batch = Batch(row)
            result = decide(row, batch)
            if asyncio.iscoroutine(result):
                result = await result
            if not batch.docs:
                return row, result
            try:
                return await self._commit(batch, extras=extras), result
            except SequenceConflict:
                continue
        raise Conflict(f"run {run_id} is changing too fast; try again", code="run_busy")

    # driving runs ----------------------------------------------------------------------

    def kick(self, run_id: str) -> None:
        """Make sure a driver is advancing this run (at most one per run per process)."""
        if self._stopping:
            return
        task = self._drivers.get(run_id)
        if task is not None and not task.done():
            self._again.add(run_id)
            return
        task = asyncio.create_task(self._drive(run_id), name=f"tether-drive-{run_id}")
        self._drivers[run_id] = task
        task.add_done_callback(functools.partial(self._driver_done, run_id))

    def _driver_done(self, run_id: str, task: asyncio.Task[None]) -> None:
        if self._drivers.get(run_id) is task:
            del self._drivers[run_id]
        if not task.cancelled() and task.exception() is not None:
            # a store that failed mid-step (a dropped connection, a full pool): nothing
            # half-written, so try again, later each time, rather than leave the run stuck
            delay = self._retry_after.get(run_id, 0.5) * 2
            self._retry_after[run_id] = min(delay, 60.0)
            log.error("driver of run %s failed; retrying in %.0f s", run_id, delay, exc_info=task.exception())
            if self.cluster is not None:
                self.cluster.forget(run_id)
            if not self._stopping:
                asyncio.get_running_loop().call_later(delay, self.kick, run_id)
            return
        self._retry_after.pop(run_id, None)
        if run_id in self._again:
            self._again.discard(run_id)
            self.kick(run_id)

    async def _drive(self, run_id: str) -> None:
        fence = None
        if self.cluster is not None:
            fence = await self.cluster.claim(run_id)
            adopted = run_id in self._adopting
            self._adopting.discard(run_id)
            if fence is None:
                return  # another host drives it
            if adopted and self.on_taken_over is not None:
                self.on_taken_over()
        try:
            await self._drive_under(run_id, fence)
        except LeaseLost:
            log.warning("run %s was taken over by another host; this host stops driving it", run_id)
            return
        if self.cluster is not None and not self._stopping and not self.handoffs.follows(run_id):
            await self.cluster.release(run_id)  # a followed hand-off keeps it (``unfollowed`` lets it go)

    def unfollowed(self, run_id: str) -> None:
        """``EnginePort``: the last hand-off of ``run_id`` followed here ended: give up its lease, unless a driver
        still holds it."""
        driver = self._drivers.get(run_id)
        if self.cluster is None or self._stopping or (driver is not None and not driver.done()):
            return  # a driver running decides at its end (a finished one kept the lease for the follower)
        task = asyncio.create_task(self.cluster.release(run_id), name=f"tether-release-{run_id}")
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _drive_under(self, run_id: str, fence: tuple[str, int] | None) -> None:
        while True:
            self._again.discard(run_id)
            row = await self.store.get_run(run_id)
            if row is None or row.status in TERMINAL:
                return
            if replay.unsettled(row.state):
                try:
                    await self._settle(row, fence)
                except SequenceConflict:
                    pass
                continue
            if row.status in WAITING:
                self._arm_timeout(row)
                self.handoffs.notice(row)
                return
            if row.status == "running" and in_flight(row.state):
                self.handoffs.notice(row)  # parked: the hand-off's follower takes it from here
                return
            if row.status == "paused" and executing(row.state) is None:
                return  # nothing runs until it is resumed (a node executing when it was paused drains first)
            try:
                wait = await self._step(row, fence)
            except SequenceConflict:
                continue
            except NotFound as exc:  # its workflow is no longer loaded: fail it, loudly
                await self._fail_unrunnable(row, exc.message)
                return
            if wait is None or wait is False:
                continue  # re-read: a waiting run arms its gate's deadline, a finished one ends
            await self._sleep(run_id, wait)

    async def _step(self, row: RunRow, fence: tuple[str, int] | None = None) -> float | bool | None:
        """Advance as far as pure steps go, then commit once.

        Returns seconds to sleep before the next step, False when the run stops here
        (terminal or waiting), or None to step again at once.
        """
        wf = self.registry.get(row.workflow_id).workflow
        batch = Batch(row, fence)
        if row.status == "cancelling":
            state = row.state
            reason, by = state.get("cancelReason", "cancelled"), state.get("cancelledBy", "system")
            batch.add(events.run_cancelled(reason, by, duration_ms(state)))
            await self._commit(batch)
            return False
        sleep = self._advance(wf, batch)
        if batch.docs:
            await self._commit(replay.noted(batch))
        return False if sleep is None else sleep

    def _advance(self, wf: WorkflowDefinition, batch: Batch) -> float | None:
        """Add the events of every step that needs no waiting; stop at the first that does.

        Returns the seconds a started delay still has to sleep, or None when the run now
        ends or waits (for a person, or for nothing more to do). Nothing is committed here.
        """
        run_id = batch.row.run_id
        while True:
            if batch.state["status"] == "paused" and executing(batch.state) is None:
                return None  # paused: the node executing when it was paused may finish (drain), nothing more
            try:
                decision = plan(wf, batch.state)
            except InvalidInput as exc:  # an edge condition that cannot be evaluated on this data
                error: ErrorObject = {"code": "node_execution_failed", "message": exc.message}
                batch.add(events.run_failed(error, duration_ms(batch.state)))
                return None
            if isinstance(decision, Skip):
                batch.add(events.node_skipped(decision.node_id, decision.reason))
                continue
            if isinstance(decision, Finish):
                batch.add(events.run_completed(decision.outputs, duration_ms(batch.state)))
                return None
            if isinstance(decision, Fail):
                batch.add(events.run_failed(decision.error, duration_ms(batch.state), failed_node_id=decision.node_id))
                return None
            if isinstance(decision, Wait):
                return None
            assert isinstance(decision, Execute)
            node = wf.node(decision.node_id)
            if replay.replaying(batch.state) and replay.effecting(node.typeId):
                # a replay never executes a node that acts outside the run: the source's record answers it
                if not decision.resume:
                    batch.add(events.node_started(node.id, node.typeId))
                if not replay.answer(batch, node.id):
                    source = batch.state["fork"]["sourceRunId"]
                    batch.add(events.node_failed(node.id, replay.source_missing(node.id, source)))
                continue
            outcome = self._run_node(wf, decision.node_id, batch.state, run_id)
            if isinstance(outcome, Sleep):
                entry_state = batch.state["nodeStates"].get(node.id)
                if decision.resume and entry_state and "wakeAt" in entry_state:
                    remaining = (clock.parse(entry_state["wakeAt"]) - clock.now()).total_seconds()
                    if remaining > 0:
                        return remaining
                    batch.add(events.node_completed(node.id, {}, outcome.ms))
                    continue
                attempt = batch.state.get("cutAttempts", {}).get(node.id, 0)
                if outcome.ms == 0:
                    batch.add(events.node_started(node.id, node.typeId, attempt=attempt))
                    batch.add(events.node_completed(node.id, {}))
                    continue
                wake_at = clock.iso(clock.now() + ms(outcome.ms))
                batch.add(events.node_started(node.id, node.typeId, wake_at, attempt))
                return outcome.ms / 1000
            if not decision.resume:
                batch.add(events.node_started(node.id, node.typeId))
            if isinstance(outcome, Suspend) and replay.replaying(batch.state) and replay.answer(batch, node.id):
                continue  # a replay's gate takes the source's recorded answer; one never answered asks again
            if isinstance(outcome, CallPeer):
                return None  # committed as started; the run parks and the hand-off follows the peer
            if isinstance(outcome, Completed):
                try:  # a file a node makes with its bytes inline is stored as a blob; its outputs refer to it
                    outputs, made = stored_inline(outcome.outputs)
                except ValueError as exc:
                    failure = f"node {node.id!r}: a file part's bytes are {exc}"
                    batch.add(events.node_failed(node.id, {"code": "node_execution_failed", "message": failure}))
                    continue
                batch.blobs.extend(made)
                batch.add(events.node_completed(node.id, outputs))
                continue
            if isinstance(outcome, Failed):
                batch.add(events.node_failed(node.id, outcome.error))
                continue
            assert isinstance(outcome, Suspend)
            self._suspend(batch, node.id, outcome)
            return None

    async def _settle(self, row: RunRow, fence: tuple[str, int] | None) -> None:
        """A replay's nodes its prefix left in flight take their recorded rest; a hand-off with none fails closed."""
        batch = Batch(row, fence)
        for node_id in replay.unsettled(row.state):
            if not replay.answer(batch, node_id):
                source = row.state["fork"]["sourceRunId"]
                batch.add(events.node_failed(node_id, replay.source_missing(node_id, source)))
        await self._commit(replay.noted(batch))

    # several hosts -----------------------------------------------------------------------

    def _lost(self, run_ids: set[str]) -> None:
        """Another host took these runs over: stop driving them here."""
        for run_id in run_ids:
            self.handoffs.drop(run_id)
            task = self._drivers.get(run_id)
            if task is not None:
                task.cancel()

    async def _adopt(self, run_id: str) -> None:
        """A run with no live lease: continue it, or time out the gate it waits at."""
        row = await self.store.get_run(run_id)
        if row is None or row.is_terminal:
            return
        interrupt = row.state.get("interrupt")
        if row.status in WAITING and not in_flight(row.state):
            if interrupt and row.due_at and row.due_at <= clock.now_iso():
                await self._expire(run_id, interrupt["interruptId"])
            return
        self._adopting.add(run_id)
        self.kick(run_id)

    def _hint(self, run_id: str) -> None:
        """Another host committed to ``run_id`` (or passed on a push for a hand-off followed here):
        wake local observers, and a delay if it was cancelled."""
        if self.handoffs.hint(run_id):  # a hand-off id, not a run id: a push that landed on another host
            return
        self.notifier.publish(run_id)
        for hook in self._on_hint:
            hook(run_id)
        self.handoffs.committed(run_id)  # a cancel or an answer made on another host: its follower here acts now
        if run_id in self._sleeps:
            task = asyncio.create_task(self._check_sleep(run_id), name=f"tether-check-{run_id}")
            self._background.add(task)
            task.add_done_callback(self._background.discard)

    async def _check_sleep(self, run_id: str) -> None:
        """Cut a delay's sleep here when another host cancelled its run, or paused it ``immediate``."""
        row = await self.store.get_run(run_id)
        sleep = self._sleeps.get(run_id)
        if row is not None and sleep is not None and sleep_ended(row):
            sleep.cancel()

    async def _fail_unrunnable(self, row: RunRow, message: str) -> None:
        batch = Batch(row)
        error: ErrorObject = {"code": "invalid_workflow_definition", "message": message}
        batch.add(events.run_failed(error, duration_ms(row.state)))
        try:
            await self._commit(batch)
        except SequenceConflict:
            self.kick(row.run_id)

    def _run_node(self, wf: WorkflowDefinition, node_id: str, state: RunSnapshot, run_id: str) -> Outcome:
        node = wf.node(node_id)
        try:
            inputs = resolve_inputs(wf, node_id, state)
        except InvalidInput as exc:
            return Failed("node_execution_failed", f"node {node_id!r}: {exc.message}")
        ctx = NodeContext(
            run_id,
            node_id,
            node.typeId,
            dict(node.config),
            inputs,
            dict(state.get("variables", {})),
            node_outputs(state),
        )
        return self._handlers[node.typeId](ctx)

    def _suspend(self, batch: Batch, node_id: str, outcome: Suspend) -> None:
        ask_events(batch, node_id, outcome.kind, outcome.data, outcome.timeout_ms)

    async def _sleep(self, run_id: str, seconds: float) -> None:
        """Sleep for a delay node; a cancel request cuts it short."""
        task = asyncio.create_task(asyncio.sleep(max(seconds, 0)))
        self._sleeps[run_id] = task
        try:
            await task
        except asyncio.CancelledError:
            if not task.cancelled() or asyncio.current_task().cancelling():  # type: ignore[union-attr]
                raise
        finally:
            self._sleeps.pop(run_id, None)

    # gate timeouts ---------------------------------------------------------------------

    def _arm_timeout(self, row: RunRow) -> None:
        interrupt = row.state.get("interrupt")
        if not interrupt or not interrupt.get("timeoutMs") or self._stopping:
            return
        interrupt_id = interrupt["interruptId"]
        if interrupt_id in self._timers:
            return
        deadline = clock.parse(interrupt["requestedAt"]) + ms(interrupt["timeoutMs"])
        delay = max((deadline - clock.now()).total_seconds(), 0.0)
        loop = asyncio.get_running_loop()
        self._timers[interrupt_id] = loop.call_later(delay, self._fire_timeout, row.run_id, interrupt_id)

    def _fire_timeout(self, run_id: str, interrupt_id: str) -> None:
        task = asyncio.create_task(self._expire(run_id, interrupt_id), name=f"tether-timeout-{interrupt_id}")
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _expire(self, run_id: str, interrupt_id: str) -> None:
        """A gate's time ran out: it resolves as rejected, whatever ``onTimeout`` says."""
        self._timers.pop(interrupt_id, None)

        def decide(row: RunRow, batch: Batch) -> None:
            interrupt = row.state.get("interrupt")
            if not interrupt or interrupt.get("interruptId") != interrupt_id:
                return
            timeout_events(batch, interrupt)

        await self._transition(None, run_id, decide)
        self.kick(run_id)
