"""Hand-offs in flight: each one follows its peer task until the node can finish, across restarts.

A hand-off node (``vendor.tether.a2a-handoff``) does not run inside the run's driver: the
driver records ``node.started`` and parks the run (it stays ``running``, its node in
flight), and the follower here takes over. Its loop, per hand-off:

1. no peer task recorded yet: send the message (its ``messageId`` derives from the node's
   invocation, so a send repeated after a crash finds the same remote task), then record
   the peer's task in the run's log (``a2a.handoff.accepted``) before anything else, and
   ask the peer to push here;
2. an answer owed to the peer (a local principal answered its mirrored question): forward
   it, then record that it was (``a2a.handoff.replied``);
3. read the peer task and apply the reverse projection (``tether.engine.handoff.projection``);
4. wait: for a push hint (or, from a peer that will not push, an event on its task
   stream), a commit to the run (a cancel, an answer), or the next poll, whichever comes
   first. Polls back off to ``poll_max``; a waiting hand-off is a sleeping
   task: no request open, no CPU.

A restart re-reads every hand-off at once (``notice`` on every unfinished run). Transport
errors are retried with backoff until the node's deadline (its ``timeout``, else
``give_up_after`` of failures in a row), then the node fails ``external_call_failed``.
A run cancelled here cancels its peer task.

The follower reaches the engine only through ``contract.EnginePort``: it asks it what the
node calls for (``peer_call``), commits what it learnt (``transition``), has the run driven
on (``kick``), and says when it no longer follows a run (``unfollowed``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from typing import Any, Final

from tether import clock
from tether.engine import effects, events
from tether.engine.batch import Batch
from tether.engine.handoff import projection
from tether.engine.handoff.contract import CallPeer, EnginePort
from tether.engine.handoff.peer import (
    PEER_TERMINAL,
    PeerCall,
    PeerError,
    PeerFile,
    PeerPort,
    PeerRef,
    PeerRefused,
    PeerTask,
    PeerUnavailable,
)
from tether.engine.handoff.record import (
    IN_FLIGHT,
    handoff_id,
    handoff_record,
    in_flight,
    invocation_message_id,
    push_config_key,
    run_trace,
)
from tether.engine.replay import replaying
from tether.failpoints import hit
from tether.run_state import ErrorObject, HandoffRecord
from tether.store.base import RunRow, Store
from tether.types import TERMINAL

__all__ = ["HandoffSettings", "Handoffs"]

log = logging.getLogger("tether.engine.handoff")

_ENDING: Final = TERMINAL | {"cancelling"}
#: seconds a peer's task stream must stay open to count as working (attached to again at once)
_HEALTHY_STREAM: Final = 5.0


@dataclass(frozen=True, slots=True)
class HandoffSettings:
    """How a hand-off follows its peer: poll back-off, and how long transport errors are borne."""

    poll_min: float = 0.5
    poll_max: float = 30.0
    #: failures in a row for this long (seconds) fail the node, when it sets no timeout of its own
    give_up_after: float = 900.0
    #: test seam: awaited between the send and its record, in the ledger and the log (a test kills the host there)
    after_send: Callable[[], Awaitable[None]] | None = None


#: the longest pause before a failed follower is started again
_RETRY_MAX = 60.0


class Handoffs:
    """The followers of the hand-offs in flight on this host, one asyncio task each."""

    def __init__(
        self,
        engine: EnginePort,
        store: Store,
        port: PeerPort | None,
        settings: HandoffSettings | None = None,
    ) -> None:
        """``engine`` is all this sees of the engine (``contract.EnginePort``); ``port`` how it reaches
        peers (without one, a hand-off fails ``a2a_peer_not_configured``)."""
        self._engine = engine
        self._store = store
        self._port = port
        self._settings = settings or HandoffSettings()
        #: every request a hand-off makes of its peer is an attempt at an effect, recorded there first
        self._ledger = effects.EffectLedger(store)
        self._followers: dict[str, asyncio.Task[None]] = {}
        self._wakes: dict[str, asyncio.Event] = {}
        self._by_run: dict[str, set[str]] = {}
        self._subscribed: set[str] = set()
        #: hand-offs whose peer will not push, followed by its task stream as well as by polls
        self._watchers: dict[str, asyncio.Task[None]] = {}
        #: when each hand-off followed here last read its peer task (operators' view; not durable, by design:
        #: a read that changes nothing writes nothing)
        self._last_read: dict[str, str] = {}
        #: the pause before a run whose follower failed unexpectedly is driven again, by run (doubling)
        self._retry_after: dict[str, float] = {}
        self._stopping = False

    # who is followed --------------------------------------------------------------------------

    def notice(self, row: RunRow) -> None:
        """Follow every hand-off of ``row`` that is in flight (at start, when a driver parks a run)."""
        if self._stopping or row.status in TERMINAL or replaying(row.state):
            return  # a replay never reaches a peer: the driver answers its hand-offs from the source's record
        for node_id in in_flight(row.state):
            self._follow(row.run_id, node_id)

    def follows(self, run_id: str) -> bool:
        """Whether a hand-off of ``run_id`` is followed here (so its host keeps the run's lease)."""
        return bool(self._by_run.get(run_id))

    def drop(self, run_id: str) -> None:
        """Another host took ``run_id`` over: stop following its hand-offs here (that host follows them)."""
        for hid in list(self._by_run.get(run_id, ())):
            task = self._followers.get(hid)
            if task is not None:
                task.cancel()

    def committed(self, run_id: str) -> None:
        """A commit to ``run_id``: its followers re-read it now (a cancel, an answer to forward)."""
        for hid in self._by_run.get(run_id, ()):
            self.hint(hid)

    def last_read(self, run_id: str, node_id: str) -> str | None:
        """When this host last read the peer task of that hand-off; None when it does not follow it."""
        return self._last_read.get(handoff_id(run_id, node_id))

    def hint(self, hid: str) -> bool:
        """A push said hand-off ``hid`` changed: its follower reads the peer task now. False if none here."""
        wake = self._wakes.get(hid)
        if wake is None:
            return False
        hit("handoff.hint")
        wake.set()
        return True

    def _follow(self, run_id: str, node_id: str) -> None:
        hid = handoff_id(run_id, node_id)
        task = self._followers.get(hid)
        if task is not None and not task.done():
            self.hint(hid)
            return
        self._wakes[hid] = asyncio.Event()
        self._by_run.setdefault(run_id, set()).add(hid)
        task = asyncio.create_task(self._run(run_id, node_id, hid), name=f"tether-handoff-{hid}")
        self._followers[hid] = task
        task.add_done_callback(lambda done: self._done(run_id, hid, done))

    def _done(self, run_id: str, hid: str, task: asyncio.Task[None]) -> None:
        if self._followers.get(hid) is task:
            del self._followers[hid]
            self._wakes.pop(hid, None)
            self._last_read.pop(hid, None)
            watcher = self._watchers.pop(hid, None)
            if watcher is not None:
                watcher.cancel()
            hids = self._by_run.get(run_id)
            if hids is not None:
                hids.discard(hid)
                if not hids:
                    del self._by_run[run_id]
                    self._engine.unfollowed(run_id)
        if task.cancelled():
            return
        if task.exception() is None:
            self._retry_after.pop(run_id, None)
            return
        # a store that failed mid-read (a dropped connection), or a bug: nothing half-written, so
        # drive the run again, later each time (its driver claims the lease and follows anew),
        # rather than leave the hand-off unwatched until the host restarts
        delay = self._retry_after[run_id] = min(self._retry_after.get(run_id, 0.25) * 2, _RETRY_MAX)
        log.error(
            "hand-off %s: its follower failed; following it again in %.1f s", hid, delay, exc_info=task.exception()
        )
        if not self._stopping:
            asyncio.get_running_loop().call_later(delay, self._engine.kick, run_id)

    async def stop(self, grace: float = 5.0) -> None:
        self._stopping = True
        tasks = [*self._followers.values(), *self._watchers.values()]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=grace)

    # following one ------------------------------------------------------------------------------

    async def _run(self, run_id: str, node_id: str, hid: str) -> None:
        wake = self._wakes[hid]
        pause = self._settings.poll_min
        failing_since: float | None = None
        loop = asyncio.get_running_loop()
        while not self._stopping:
            wake.clear()
            row = await self._store.get_run(run_id)
            if row is None:
                return
            entry = row.state["nodeStates"].get(node_id)
            record = handoff_record(row.state, node_id)
            if entry is None or entry["status"] not in IN_FLIGHT or row.status in _ENDING:
                await self._cancel_peer(row, node_id, record)
                return
            outcome = self._engine.peer_call(row, node_id)
            if outcome is None:  # the workflow changed under the run: nothing to follow
                return
            if replaying(row.state):
                return  # the default-deny guard of this seam: nothing of a replay is sent (the driver settles it)
            if self._port is None:
                await self._fail(run_id, node_id, "a2a_peer_not_configured", "this host has no A2A client")
                return
            try:
                changed = await self._step(row, node_id, hid, outcome, record)
            except PeerRefused as refused:
                await self._fail(run_id, node_id, refused.code, refused.message)
                return
            except PeerUnavailable as unavailable:
                now = loop.time()
                failing_since = now if failing_since is None else failing_since
                if self._past_deadline(entry, outcome, now - failing_since):
                    await self._fail(run_id, node_id, "external_call_failed", unavailable.message)
                    return
                log.info("hand-off %s: peer unavailable (%s); trying again in %.1f s", hid, unavailable, pause)
                await self._wait(wake, pause)
                pause = min(pause * 2, self._settings.poll_max)
                continue
            failing_since = None
            if changed is None:  # the node finished
                return
            if changed:
                pause = self._settings.poll_min
                continue  # act on the new state at once (a reply to forward, a mirror to withdraw)
            if self._past_deadline(entry, outcome, 0.0):
                await self._fail(run_id, node_id, "node_timeout", f"node {node_id!r}: the peer did not finish in time")
                return
            await self._wait(wake, pause)
            pause = min(pause * 2, self._settings.poll_max)

    def _past_deadline(self, entry: Any, outcome: CallPeer, failing_for: float) -> bool:
        if outcome.timeout_ms is not None and "startedAt" in entry:
            elapsed = (clock.now() - clock.parse(entry["startedAt"])).total_seconds()
            if elapsed * 1000 >= outcome.timeout_ms:
                return True
        return outcome.timeout_ms is None and failing_for >= self._settings.give_up_after

    async def _wait(self, wake: asyncio.Event, seconds: float) -> None:
        # asyncio.timeout, not wait_for: on 3.11 wait_for can lose a cancellation that lands as the
        # wake-up does (a push sets it), and a follower being stopped would then go on waiting
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(seconds):
                await wake.wait()

    async def _step(self, row: RunRow, node_id: str, hid: str, outcome: CallPeer, record: HandoffRecord) -> bool | None:
        """One look at the peer; True when the run changed, None when the node is finished."""
        port = self._port
        assert port is not None
        if "taskId" not in record:
            if "negotiated" not in record and await self._negotiate(port, row, node_id, outcome.call):
                return None  # refused: the node failed, the peer was sent nothing
            metadata = {"openwop": {"runId": row.run_id, "nodeId": node_id}}
            message_id = invocation_message_id(row.run_id, node_id)
            call = replace(outcome.call, trace=run_trace(row, node_id), files=await self._with_bytes(row, outcome.call))
            async with self._ledger.attempt(row.tenant, row.run_id, node_id, effects.HANDOFF_SEND, message_id):
                hit("handoff.send.before")
                ref, task = await port.send(call, message_id=message_id, metadata=metadata)
                hit("handoff.send.after")
                self._last_read[hid] = clock.now_iso()
                if self._settings.after_send is not None:
                    await self._settings.after_send()

            def accept(current: RunRow, batch: Batch) -> None:
                if "taskId" not in handoff_record(current.state, node_id):
                    batch.add(events.handoff_accepted(node_id, ref.as_record(), task.state))

            await self._engine.transition(row.run_id, accept)
            await self._subscribe(port, ref, hid, row, node_id)
            return await self._apply(row.run_id, node_id, task, ref)
        ref = PeerRef.from_record(record, run_trace(row, node_id))
        pending = record.get("pendingReply")
        if pending is not None:
            index = int(pending["index"])
            message_id = f"{invocation_message_id(row.run_id, node_id)}-reply-{index}"
            metadata = {"openwop": {"runId": row.run_id, "nodeId": node_id, "decidedBy": pending.get("decidedBy")}}
            seam = effects.HANDOFF_REPLY
            async with self._ledger.attempt(row.tenant, row.run_id, node_id, seam, message_id, ordinal=index):
                await port.reply(ref, message_id=message_id, value=pending["value"], metadata=metadata)

            def replied(current: RunRow, batch: Batch) -> None:
                owed = handoff_record(current.state, node_id).get("pendingReply")
                if owed is not None and owed.get("index") == index:
                    batch.add(events.handoff_replied(node_id, index))

            await self._engine.transition(row.run_id, replied)
        elif hid not in self._subscribed:  # after a restart: ask again (an idempotent config id at the peer)
            await self._subscribe(port, ref, hid, row, node_id)
        task = await port.get(ref)
        hit("handoff.read")
        self._last_read[hid] = clock.now_iso()
        return await self._apply(row.run_id, node_id, task, ref)

    async def _negotiate(self, port: PeerPort, row: RunRow, node_id: str, call: PeerCall) -> bool:
        """Decide the version once per hand-off and record it (``negotiation.decided``); True when refused.

        Recorded in a transition that first looks whether it already is, so a restart (or a
        lost race with another host) never writes it twice; a refusal fails the node with it.
        """
        decision = await port.negotiate(call)
        event = events.handoff_negotiated(
            node_id, decision.payload(clock.now_iso()), list(decision.offered), decision.downgraded
        )

        def record(current: RunRow, batch: Batch) -> None:
            entry = current.state["nodeStates"].get(node_id)
            if entry is None or entry["status"] not in IN_FLIGHT or current.status in TERMINAL:
                return
            if "negotiated" in handoff_record(current.state, node_id):
                return
            batch.add(event)
            if decision.refused:
                batch.add(
                    events.node_failed(node_id, {"code": "interop_version_unsupported", "message": decision.message})
                )

        await self._engine.transition(row.run_id, record)
        if decision.refused:
            log.info("hand-off of run %s node %s refused: %s", row.run_id, node_id, decision.message)
            self._engine.kick(row.run_id)
        return decision.refused

    async def _with_bytes(self, row: RunRow, call: PeerCall) -> tuple[PeerFile, ...]:
        """The call's files, each blob with its bytes: read from the run's own blobs now, for this send only.

        A blob the run does not hold (a reference typed into its data, say) is a final no:
        nothing is sent.
        """
        wanted = [f.blob for f in call.files if f.blob is not None]
        if not wanted:
            return call.files
        found = await self._store.read_blobs(row.run_id, wanted)
        missing = [digest for digest in wanted if digest not in found]
        if missing:
            raise PeerRefused(
                "file_not_found", f"the run holds no file {missing[0]}: only a file of this run can be handed off"
            )
        return tuple(f if f.blob is None else replace(f, data=found[f.blob]) for f in call.files)

    async def _subscribe(self, port: PeerPort, ref: PeerRef, hid: str, row: RunRow, node_id: str) -> None:
        """Ask the peer to push (once per hand-off per process start); a peer that will not is polled."""
        self._subscribed.add(hid)
        try:
            pushed = await port.pushes(ref)
            if pushed:
                seam, key = effects.HANDOFF_PUSH_CONFIG, push_config_key(hid)
                async with self._ledger.attempt(row.tenant, row.run_id, node_id, seam, key):
                    pushed = await port.subscribe(ref, hid)
        except PeerError as failed:
            pushed = False
            log.info("hand-off %s: the peer will not push (%s); polling it", hid, failed)
        if not pushed:
            log.info("hand-off %s: following task %s at %s by its stream and polling", hid, ref.task_id, ref.agent)
            watcher = self._watchers.get(hid)
            if watcher is None or watcher.done():
                self._watchers[hid] = asyncio.create_task(self._watch(port, ref, hid), name=f"tether-watch-{hid}")

    async def _watch(self, port: PeerPort, ref: PeerRef, hid: str) -> None:
        """Follow the peer task's stream, waking the follower on each change, and attach again when it ends.

        A stream ends often (the egress client's time limit cuts every response); attaching
        again costs a connection and one frame, the task as it is, which wakes the follower
        only when it differs from what the last attach said. A peer that cannot stream is left
        to the polls; one whose streams keep failing fast is attached to less and less often.
        """
        loop = asyncio.get_running_loop()
        pause, snapshot = self._settings.poll_min, None
        while not self._stopping:
            opened = loop.time()
            try:
                async with contextlib.aclosing(port.watch(ref)) as frames:
                    first = True
                    async for frame in frames:
                        if not first or frame != snapshot:
                            self.hint(hid)
                        if first:
                            snapshot, first = frame, False
            except PeerRefused as refused:
                log.info("hand-off %s: the peer will not stream (%s); polling it", hid, refused)
                return
            except PeerUnavailable:
                pass
            healthy = loop.time() - opened >= _HEALTHY_STREAM
            pause = self._settings.poll_min if healthy else min(pause * 2, self._settings.poll_max)
            await asyncio.sleep(pause)

    async def _apply(self, run_id: str, node_id: str, task: PeerTask, ref: PeerRef) -> bool | None:
        """Apply the reverse projection; None when the node finished, else whether the run changed."""
        result: dict[str, bool] = {"finished": False}

        def decide(current: RunRow, batch: Batch) -> None:
            entry = current.state["nodeStates"].get(node_id)
            if entry is None or entry["status"] not in IN_FLIGHT or current.status in TERMINAL:
                result["finished"] = True
                return
            if current.status == "cancelling":
                return
            result["finished"] = projection.project(batch, node_id, task, ref)

        before = await self._store.get_run(run_id)
        after = await self._engine.transition(run_id, decide)
        changed = before is None or after.last_sequence != before.last_sequence
        if result["finished"]:
            self._engine.kick(run_id)
            if task.state not in PEER_TERMINAL:
                await self._cancel_peer(after, node_id, handoff_record(after.state, node_id))
            return None
        if changed:
            self._engine.kick(run_id)
        return changed

    async def _fail(self, run_id: str, node_id: str, code: str, message: str) -> None:
        error: ErrorObject = {"code": code, "message": message}

        def decide(current: RunRow, batch: Batch) -> None:
            entry = current.state["nodeStates"].get(node_id)
            if entry is None or entry["status"] not in IN_FLIGHT or current.status in TERMINAL:
                return
            interrupt = current.state.get("interrupt")
            if interrupt and interrupt["nodeId"] == node_id:
                projection.withdraw(batch, interrupt, "unknown")  # nobody can answer a peer that is gone
            batch.add(events.node_failed(node_id, error))

        await self._engine.transition(run_id, decide)
        self._engine.kick(run_id)

    async def _cancel_peer(self, row: RunRow, node_id: str, record: HandoffRecord) -> None:
        """The local run was cancelled (or the node ended otherwise) while the peer task goes on: cancel it."""
        if self._port is None or "taskId" not in record or record.get("peerState") in PEER_TERMINAL:
            return
        if row.status not in ("cancelled", "cancelling"):
            return
        ref = PeerRef.from_record(record, run_trace(row, node_id))
        pause = self._settings.poll_min
        for _ in range(5):
            try:
                await self._port.cancel(ref)
                return
            except PeerRefused as refused:
                log.warning("could not cancel peer task %s at %s: %s", ref.task_id, ref.agent, refused)
                return
            except PeerUnavailable:
                await asyncio.sleep(pause)
                pause = min(pause * 2, self._settings.poll_max)
        log.warning("gave up cancelling peer task %s at %s", ref.task_id, ref.agent)
