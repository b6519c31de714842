"""Task generations (the A2A 1.1 draft, a2a-v1.0-wire §8): a number that moves by exactly one per update.

A task's generation after run event ``s`` is the number of A2A updates (status and
artifact updates, progress reports included) that the run's events ``0..s`` project to
(:func:`tether.a2a.projection.updates`). ``run.started`` makes the task ``working``, so a
task is born at generation 1; every later update adds one, and each stream frame carries
the generation after it. Being a fold of the durable log and nothing else, it is the same
on every host, after every restart and in every replay.

Reading a task's generation folds its log once per host; later reads fold only the events
that arrived since (a bounded cache of snapshots, as :class:`StreamProjections` keeps).
"""

from __future__ import annotations

import copy
from collections import OrderedDict
from dataclasses import dataclass

from tether.a2a.projection import status_view, updates
from tether.caches import holds_copies
from tether.engine.state import apply, initial_snapshot
from tether.run_state import RunSnapshot
from tether.store.base import RunRow, Store

__all__ = ["Folded", "Generations", "fold"]

_PAGE = 500


@dataclass(frozen=True, slots=True)
class Folded:
    """A run's log folded up to ``sequence``: its snapshot then, and its task's generation then."""

    sequence: int
    state: RunSnapshot
    generation: int


async def fold(store: Store, row: RunRow, until: int, start: Folded | None = None) -> Folded:
    """Fold the run's events after ``start`` (from the beginning when None) up to ``until``.

    ``start.state`` is never changed: the fold works on a copy.
    """
    if start is None:
        state = initial_snapshot(row.run_id, row.workflow_id, row.created_at)
        last, generation = -1, 0
    else:
        state, last, generation = copy.deepcopy(start.state), start.sequence, start.generation
    while last < until:
        events = await store.read_events(row.run_id, last, _PAGE)
        for event in events:
            if event.sequence > until:
                return Folded(last, state, generation)
            before = status_view(state)
            doc = event.doc
            apply(state, doc)
            generation += len(updates(row.run_id, "", doc, before, state, final_on_input_required=False))
            last = event.sequence
        if len(events) < _PAGE:
            break
    return Folded(last, state, generation)


@holds_copies("_kept")
class Generations:
    """The generation of each task this host reads, kept folded as far as it has read."""

    def __init__(self, store: Store, capacity: int = 4096) -> None:
        self.store = store
        self.capacity = capacity
        self._kept: OrderedDict[str, Folded] = OrderedDict()

    async def at(self, row: RunRow, sequence: int | None = None) -> int:
        """The task's generation after run event ``sequence`` (default: the row's last)."""
        until = row.last_sequence if sequence is None else sequence
        kept = self._kept.get(row.run_id)
        start = kept if kept is not None and kept.sequence <= until else None
        if start is not None and start.sequence == until:
            self._kept.move_to_end(row.run_id)
            return start.generation
        folded = await fold(self.store, row, until, start)
        if kept is None or folded.sequence >= kept.sequence:
            self._kept[row.run_id] = folded
            self._kept.move_to_end(row.run_id)
            if len(self._kept) > self.capacity:
                self._kept.popitem(last=False)
        return folded.generation
