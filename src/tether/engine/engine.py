"""The durable run engine: what can be done to runs (create, resolve, cancel, pause, resume, wait for).

Each operation reads the run, decides on that snapshot and commits compare-and-swap
(``Driver._transition``): of racing operations exactly one wins, the others decide again
on what it wrote. Driving the runs those operations start or unblock is the ``Driver``'s
(``tether.engine.driver``), which ``Engine`` extends.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final

import orjson

from tether import clock, tracing
from tether.engine import events, replay
from tether.engine.batch import Batch, due_at, duration_ms
from tether.engine.driver import Driver, executing, sleep_ended
from tether.engine.events import EVENT_LOG_ERA
from tether.engine.handoff import projection
from tether.engine.handoff.record import in_flight, peer_subkind
from tether.engine.interrupts import resolution_events
from tether.engine.state import evolve, initial_snapshot
from tether.engine.validation import validate_inputs
from tether.errors import Conflict, InvalidInput, NotFound, Unprocessable
from tether.exchange import current_traceparent
from tether.failpoints import hit
from tether.files import Blob
from tether.ids import new_id
from tether.run_state import DrainPolicy, ForkRecord
from tether.store.base import Commit, EventRow, Extra, IdempotencyClaimed, IdempotencyRecord, RunRow
from tether.types import TERMINAL, WAITING, Principal, RunStatus

#: the statuses a pause is taken in: the run executes (a waiting run already runs nothing; see ``pause``)
_PAUSABLE: Final[frozenset[RunStatus]] = frozenset({"pending", "running"})


def _refuse(row: RunRow, what: str) -> Conflict:
    """Why ``what`` cannot be done in the run's status: ``run_terminal``, else ``run_state_conflict``."""
    code = "run_terminal" if row.is_terminal else "run_state_conflict"
    return Conflict(f"run {row.run_id} is {row.status}: {what}", code=code, details={"runStatus": row.status})


@dataclass(frozen=True, slots=True)
class IdempotencyClaim:
    """A (scope, key) to claim with a new run, and the answer a repeat of the request gets.

    The answer is the caller's own (a surface's status code and body): the engine keeps it
    beside the claim, in the run's creating transaction, and never reads it.
    """

    scope: str
    key: str
    request_digest: str
    answer_status: int
    answer: dict[str, Any]

    def record(self, tenant: str, run_id: str, at: str) -> IdempotencyRecord:
        """The claim as the store keeps it, beside run ``run_id`` created at ``at``."""
        args = (self.request_digest, run_id, self.answer_status, self.answer, at)
        return IdempotencyRecord(tenant, self.scope, self.key, *args)


@dataclass(frozen=True, slots=True)
class Created:
    """A new run, or (``replayed``) the run an earlier request with the same claim created."""

    run: RunRow
    replayed: IdempotencyRecord | None = None


class Engine(Driver):
    """Runs workflows durably: the operations on runs, over the ``Driver`` that drives them."""

    # creating runs ---------------------------------------------------------------------

    async def create_run(
        self,
        principal: Principal,
        workflow_id: str,
        inputs: Any,
        *,
        run_id: str | None = None,
        tags: list[str] | None = None,
        metadata: dict[str, Any] | None = None,
        transport: str = "rest",
        idempotency: IdempotencyClaim | None = None,
        extras: list[Extra] | None = None,
        callback_url: str | None = None,
        blobs: Sequence[Blob] = (),
        advance: bool = False,
    ) -> Created:
        """Validate, then write the run and its ``run.started`` in one fsync'd transaction.

        A caller that writes more with the run (``extras``: the first A2A message, a push
        config; ``blobs``: the bytes of the files its inputs refer to) or answers with its id
        mints ``run_id`` itself (``new_id("run_")``). With
        ``advance`` the run's first steps that need no waiting (a whole echo, everything up
        to a gate) are committed in that same transaction, for a caller that waits for the
        outcome anyway.
        """
        try:
            entry = self.registry.get(workflow_id)
        except NotFound as exc:
            raise InvalidInput(exc.message, details={"workflowId": workflow_id}) from exc
        if not entry.executable:
            raise InvalidInput(
                f"workflow {workflow_id!r} cannot run on this host: {'; '.join(entry.problems)}",
                code="capability_not_provided",
                details={"workflowId": workflow_id, "problems": list(entry.problems)},
            )
        variables = validate_inputs(entry.workflow, inputs if inputs is not None else {})
        run_id = run_id or new_id("run_")
        now = clock.now_iso()
        empty = RunRow(
            run_id, principal.tenant, workflow_id, "pending", -1, initial_snapshot(run_id, workflow_id, now), now, now
        )
        batch = Batch(empty, owned=True)
        started = events.run_started(
            workflow_id,
            variables,
            transport=transport,
            owner={"tenant": principal.tenant, "principal": principal.name},
            tags=list(tags or []),
            metadata=dict(metadata or {}),
            subject=principal.subject(),
            callback_url=callback_url,
            traceparent=current_traceparent() or (tracing.new_traceparent() if tracing.tracer() else None),
        )
        batch.add(started, at=now)
        batch.blobs.extend(blobs)
        if advance:
            self._advance(entry.workflow, batch)
        commit = batch.commit(new=True)
        if idempotency is not None:
            commit.idempotency = idempotency.record(principal.tenant, run_id, now)
        try:
            run = await self._commit(batch, extras=extras, commit=commit)
        except IdempotencyClaimed as claimed:
            existing = await self.store.get_run(claimed.existing.run_id or "", principal.tenant)
            if existing is None:
                raise NotFound("the run of that idempotency key no longer exists") from claimed
            return Created(existing, claimed.existing)
        if run.status in WAITING:
            self._arm_timeout(run)
        elif not run.is_terminal:
            self.kick(run_id)
        return Created(run)

    async def fork(
        self,
        principal: Principal,
        source_id: str,
        mode: replay.ForkMode,
        from_seq: int,
        *,
        run_id: str,
        options: dict[str, Any] | None = None,
        idempotency: IdempotencyClaim | None = None,
    ) -> Created:
        """A new run inheriting the source's log below ``from_seq``, written (with what it knows of its source)
        in one fsync'd transaction, then driven like any run (``tether.engine.replay`` says how it replays).

        ``options`` (a branch's overlay: ``tags``, ``metadata``) replace the source's on the new run's
        snapshot; the inherited events stay as they were. The new run has the source's owner and workflow
        (one no longer loaded here fails the fork at its first step, as it would any run).
        """
        source = await self.store.get_run(source_id, principal.tenant)
        if source is None:
            raise NotFound(f"no run {source_id!r}", details={"runId": source_id})
        docs = await self._whole_log(source_id)
        replay.check_fork_point(docs, from_seq, mode)
        prefix = replay.inherited(docs, from_seq, run_id)
        now = clock.now_iso()
        state = evolve(initial_snapshot(run_id, source.workflow_id, now), prefix)
        record: ForkRecord = {"sourceRunId": source_id, "mode": mode, "fromSeq": from_seq}
        if mode == "replay":
            record["recorded"] = replay.recorded(docs, from_seq)
            record["expected"] = replay.expected(docs, from_seq)
        state["fork"] = record
        state["eventLogSchemaVersion"] = EVENT_LOG_ERA  # made by this host now, whatever era its source is of
        state.pop("callbackUrl", None)  # a fork calls nobody back: its source's caller asked for its source only
        if state["status"] == "paused":  # a fork folds its source's pause as nothing: it is driven at once
            state["status"] = "running"
            state.pop("pausedAt", None)
        for name, value in (options or {}).items():
            state[name] = value  # type: ignore[literal-required]
        empty = RunRow(run_id, principal.tenant, source.workflow_id, "pending", -1, state, now, now)
        batch = Batch(empty, owned=True)
        batch.docs = prefix
        workflow_id, last = source.workflow_id, len(prefix) - 1
        run = RunRow(run_id, principal.tenant, workflow_id, state["status"], last, state, now, now, due_at(state))
        rows = [EventRow(run_id, d["sequence"], orjson.dumps(d)) for d in prefix]
        # the files its events will refer to (inherited, or written again from the record) are the fork's too
        referred = sorted(replay.blob_digests([*prefix, *(e for w in record.get("recorded", {}).values() for e in w)]))
        found = await self.store.read_blobs(source_id, referred) if referred else {}
        blobs = [Blob(digest, data) for digest, data in found.items()]
        commit = Commit(run=run, events=rows, expected_sequence=None, blobs=blobs)
        if idempotency is not None:
            commit.idempotency = idempotency.record(principal.tenant, run_id, now)
        try:
            created = await self._commit(batch, commit=commit)
            hit("fork.committed")
        except IdempotencyClaimed as claimed:
            existing = await self.store.get_run(claimed.existing.run_id or "", principal.tenant)
            if existing is None:
                raise NotFound("the run of that idempotency key no longer exists") from claimed
            return Created(existing, claimed.existing)
        if created.status in WAITING and not replay.unsettled(created.state):
            self._arm_timeout(created)
        else:
            self.kick(run_id)
        return Created(created)

    async def _whole_log(self, run_id: str) -> list[dict[str, Any]]:
        docs: list[dict[str, Any]] = []
        while True:
            page = await self.store.read_events(run_id, docs[-1]["sequence"] if docs else -1, 1000)
            docs.extend(e.doc for e in page)
            if len(page) < 1000:
                return docs

    async def handoff_pushed(self, hid: str) -> None:
        """A peer pushed about hand-off ``hid`` here: wake its follower, on this host or, when
        another host of the shared store follows it, there (a hint: its poll is the backstop)."""
        if not self.handoffs.hint(hid) and self.cluster is not None:
            await self.store.announce(hid)

    # resolving interrupts ----------------------------------------------------------------

    async def resolve(
        self,
        principal: Principal,
        run_id: str,
        node_id: str,
        resume_value: Any,
        *,
        interrupt_id: str | None = None,
        extras: list[Extra] | None = None,
        advance: bool = False,
    ) -> RunRow:
        """Resolve the run's pending interrupt at ``node_id``; exactly one resolution wins.

        With ``advance`` the steps that follow and need no waiting are committed with the
        resolution, for a caller that waits for the outcome anyway (as ``create_run``).
        """

        def decide(row: RunRow, batch: Batch) -> None:
            state = row.state
            interrupt = state.get("interrupt")
            if (
                interrupt is None
                or interrupt["nodeId"] != node_id
                or (interrupt_id and interrupt["interruptId"] != interrupt_id)
            ):
                cancelled = state.get("cancelledInterrupt")
                if row.status == "cancelled" and cancelled and cancelled["nodeId"] == node_id:
                    raise Unprocessable(
                        f"run {run_id} was cancelled while {node_id!r} waited", code="interrupt_cancelled"
                    )
                resolved = state.get("resolvedInterrupts", [])
                if any(
                    r["nodeId"] == node_id and (interrupt_id is None or r["interruptId"] == interrupt_id)
                    for r in resolved
                ):
                    raise Conflict(
                        f"the interrupt at {node_id!r} was already resolved", code="interrupt_already_resolved"
                    )
                raise NotFound(
                    f"run {run_id} is not waiting at node {node_id!r}",
                    code="interrupt_not_found",
                    details={"runId": run_id, "nodeId": node_id},
                )
            if peer_subkind(interrupt) is not None:  # a peer's question mirrored here: the answer is the peer's
                projection.forward(batch, interrupt, resume_value, principal.name)
            else:
                resolution_events(batch, interrupt, resume_value, principal.name)
            if advance and batch.state["status"] not in WAITING and row.workflow_id in self.registry:
                self._advance(self.registry.get(row.workflow_id).workflow, batch)

        row, _ = await self._transition(principal.tenant, run_id, decide, extras)
        hit("interrupt.resolved")
        for resolved in row.state.get("resolvedInterrupts", []):
            timer = self._timers.pop(resolved["interruptId"], None)
            if timer is not None:
                timer.cancel()
        if not row.is_terminal and (advance or row.status not in WAITING):
            self.kick(run_id)  # the driver goes on, or arms the deadline of the gate it reached
        return row

    # cancelling ----------------------------------------------------------------------------

    async def cancel(
        self, principal: Principal, run_id: str, reason: str | None = None, *, again_refused: bool = False
    ) -> RunRow:
        """Cancel a run: waiting (and paused) runs end at once, executing ones go through ``cancelling``.

        A run already cancelled answers as it is (OpenWOP v1), or, with ``again_refused``, is
        refused like any other ended run (``409 run_terminal``, v2): then only the cancel that
        ended it succeeds.
        """

        def decide(row: RunRow, batch: Batch) -> None:
            if row.status == "cancelled" and again_refused:
                raise _refuse(row, "it already ended")
            if row.status == "cancelled" or row.status == "cancelling":
                return
            if row.status in TERMINAL:
                raise Conflict(
                    f"run {run_id} already {row.status}", code="run_terminal", details={"runStatus": row.status}
                )
            why = reason or "cancelled"
            inflight = [nid for nid, e in row.state["nodeStates"].items() if e["status"] == "running"]
            if row.status not in WAITING and inflight:
                batch.add(events.node_cancel_requested(inflight[0], why, principal.name))
                return
            interrupt = row.state.get("interrupt")
            if interrupt:
                batch.add(events.node_cancelled(interrupt["nodeId"]))
            batch.add(events.run_cancelled(why, principal.name, duration_ms(row.state)))

        row, _ = await self._transition(principal.tenant, run_id, decide)
        hit("run.cancelled")
        if row.status == "cancelling":
            sleep = self._sleeps.get(run_id)
            if sleep is not None:
                sleep.cancel()
            self.kick(run_id)
        interrupt = row.state.get("cancelledInterrupt")
        if interrupt and interrupt.get("interruptId") in self._timers:
            self._timers.pop(interrupt["interruptId"]).cancel()
        return row

    # pausing -------------------------------------------------------------------------------

    async def pause(
        self,
        principal: Principal,
        run_id: str,
        reason: str | None = None,
        drain_policy: DrainPolicy = "drain-current-node",
    ) -> RunRow:
        """Pause an executing run: no node starts until ``resume`` (or a cancel); of racing pauses one wins.

        ``drain-current-node`` lets the node executing (a delay sleeping) finish and commits its
        completion; ``immediate`` cuts that attempt: no terminal event is recorded for it, and the
        resumed run starts it afresh. The pause is on disk, so a restart, or any host of a shared
        store, leaves the run paused.

        Refused (409) unless the run executes: ``run_terminal`` when it ended, else
        ``run_state_conflict``. A run waiting at an interrupt already runs nothing, and its answer
        and deadline belong to its gate; a run handing a task to another agent cannot hold the
        peer, which works on and may ask a question at any time (and cutting it would send the
        task twice): those are cancelled, or paused once they execute again.
        """

        def decide(row: RunRow, batch: Batch) -> None:
            if row.status not in _PAUSABLE:
                raise _refuse(row, "only an executing run (pending or running) can be paused")
            if in_flight(row.state):
                raise _refuse(row, "a task handed to another agent is in flight, and a pause cannot hold it")
            cut = None
            node_id = executing(row.state)
            if drain_policy == "immediate" and node_id is not None:
                cut = (node_id, row.state["nodeStates"][node_id].get("attempt", 0) + 1)
            batch.add(events.run_paused(reason, drain_policy, cut))

        row, _ = await self._transition(principal.tenant, run_id, decide)
        sleep = self._sleeps.get(run_id)
        if sleep is not None and sleep_ended(row):
            sleep.cancel()  # the attempt was cut: the driver re-reads, and stops
        return row

    async def resume(self, principal: Principal, run_id: str, reason: str | None = None) -> RunRow:
        """Resume a paused run where it stopped; of racing resumes one wins (the others: 409)."""

        def decide(row: RunRow, batch: Batch) -> None:
            if row.status != "paused":
                raise _refuse(row, "only a paused run can be resumed")
            batch.add(events.run_resumed(reason))

        row, _ = await self._transition(principal.tenant, run_id, decide)
        self.kick(run_id)
        return row

    # observing -------------------------------------------------------------------------------

    async def wait_for(self, run_id: str, predicate: Callable[[RunRow], bool], timeout: float) -> RunRow | None:
        """The run as soon as ``predicate`` holds, or as it is when ``timeout`` passes."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        row: RunRow | None = None
        with self.notifier.subscribe(run_id) as wake:
            while True:
                wake.clear()
                row = await self.store.get_run(run_id)
                if row is None or predicate(row):
                    return row
                remaining = deadline - loop.time()
                if remaining <= 0:
                    return row
                await self.notifier.wait(wake, remaining)
