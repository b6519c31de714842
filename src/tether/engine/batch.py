"""A transition being decided: events numbered from a snapshot, folded as they are added.

A ``Batch`` is what the engine commits: the new events, the snapshot they fold into,
when the run next needs attention, the execution-lease fence it was decided under, and
the bytes of the files its events are the first to refer to.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import orjson

from tether import clock
from tether.engine.events import ENGINE_VERSION, NewEvent
from tether.engine.handoff.record import HANDOFF_TYPES
from tether.engine.state import apply, evolve
from tether.files import Blob
from tether.ids import new_id
from tether.run_state import RunSnapshot
from tether.store.base import Commit, EventRow, IdempotencyRecord, RunRow

__all__ = ["ENGINE_VERSION", "Batch", "due_at", "duration_ms", "ms", "new_event"]


def new_event(run_id: str, sequence: int, event: NewEvent, at: str | None = None) -> dict[str, Any]:
    """The RunEventDoc of ``event`` at ``sequence``: its envelope, stamped now unless ``at``."""
    doc: dict[str, Any] = {
        "eventId": new_id("evt_"),
        "runId": run_id,
        "type": event.type,
        "payload": event.payload,
        "timestamp": at or clock.now_iso(),
        "sequence": sequence,
        "schemaVersion": 1,
        "engineVersion": ENGINE_VERSION,
    }
    if event.node_id is not None:
        doc["nodeId"] = event.node_id
    return doc


class Batch:
    """Events decided on one snapshot, numbered from its sequence, folded as they are added."""

    def __init__(self, row: RunRow, fence: tuple[str, int] | None = None, *, owned: bool = False) -> None:
        """``owned``: the row's snapshot belongs to this batch alone (a run being created), so it is not copied."""
        self.row = row
        self.fence = fence
        self.docs: list[dict[str, Any]] = []
        #: file bytes the events refer to, committed with them
        self.blobs: list[Blob] = []
        self.state = row.state  # the row's own snapshot until the first event: then a copy
        self._copied = owned

    def add(self, event: NewEvent, at: str | None = None) -> None:
        """Number ``event`` after those already added and fold it into this batch's snapshot."""
        doc = new_event(self.row.run_id, self.row.last_sequence + 1 + len(self.docs), event, at)
        if self._copied:
            apply(self.state, doc)  # this batch's own snapshot
        else:
            self.state = evolve(self.state, [doc])  # copy once; the row read stays untouched
            self._copied = True
        self.docs.append(doc)

    def commit(self, idempotency: IdempotencyRecord | None = None, *, new: bool = False) -> Commit:
        now = clock.now_iso()
        run = RunRow(
            run_id=self.row.run_id,
            tenant=self.row.tenant,
            workflow_id=self.row.workflow_id,
            status=self.state["status"],
            last_sequence=self.row.last_sequence + len(self.docs),
            state=self.state,
            created_at=self.row.created_at,
            updated_at=now,
            due_at=due_at(self.state),
        )
        events = [EventRow(self.row.run_id, d["sequence"], orjson.dumps(d)) for d in self.docs]
        return Commit(
            run=run,
            events=events,
            expected_sequence=None if new else self.row.last_sequence,
            idempotency=idempotency,
            fence=self.fence,
            blobs=self.blobs,
        )


def due_at(state: RunSnapshot) -> str | None:
    """When the run next needs attention unasked: its gate's deadline or its delay's wake-up."""
    interrupt = state.get("interrupt")
    if interrupt:
        asker = state["nodeStates"].get(interrupt["nodeId"])
        if asker is not None and asker.get("typeId") in HANDOFF_TYPES and asker["status"] == "suspended":
            # a peer's question mirrored here: its hand-off's follower needs a host at once (on a shared
            # store, a host that finds it without a live lease takes it over; see ``engine.cluster``)
            return str(interrupt["requestedAt"])
        timeout = interrupt.get("timeoutMs")
        if timeout:
            return clock.iso(clock.parse(interrupt["requestedAt"]) + ms(timeout))
        return None
    wakes = [e["wakeAt"] for e in state["nodeStates"].values() if e["status"] == "running" and "wakeAt" in e]
    return min(wakes) if wakes else None


def ms(value: int | float) -> timedelta:
    return timedelta(milliseconds=value)


def duration_ms(state: RunSnapshot) -> int:
    """Milliseconds since the run started, for the ``durationMs`` of run events."""
    started = state.get("startedAt") or state["createdAt"]
    if not started:
        return 0
    return max(int((clock.now() - clock.parse(started)).total_seconds() * 1000), 0)
