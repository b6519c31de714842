"""The durable task record: projected in the run's own transaction, read back per tenant.

:func:`project_task_record` is one of the engine's projectors (given it by ``tether.app``). For every commit of
an A2A-backed run (``transport == "a2a"``) it returns the run's A2ATaskState whenever
what the record says changes, so the record and the events that changed it are one
write: a crash can never leave a stale ``working`` behind a run paused at a gate.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from tether.a2a.capabilities import TRANSPORT
from tether.a2a.errors import TaskNotFound, clip, quote
from tether.a2a.files import FileBytes, has_files
from tether.a2a.projection import task, task_record
from tether.caches import holds_copies
from tether.store.base import Extra, RunRow, Store, TaskRecord

__all__ = [
    "A2A_TRANSPORT",
    "EncodedTasks",
    "LiveTask",
    "a2a_metadata",
    "context_of",
    "load_task",
    "project_task_record",
]

A2A_TRANSPORT = TRANSPORT


def a2a_metadata(
    context_id: str, message_id: str | None, skill_id: str, steps: dict[str, str] | None = None
) -> dict[str, Any]:
    """The run ``metadata`` of an A2A-backed run: where the projections find its context and its steps.

    ``steps`` (node id → name, in the workflow's order) lets a multi-step task report which
    step started or finished; it is written once, in ``run.started``, so every host and every
    replay projects the same progress.
    """
    a2a: dict[str, Any] = {"contextId": context_id, "skillId": skill_id}
    if message_id is not None:
        a2a["messageId"] = message_id
    if steps is not None and len(steps) > 1:
        a2a["steps"] = steps
    return {"a2a": a2a}


def context_of(row: RunRow) -> str:
    """The contextId recorded when the run was started (the run id if none was)."""
    meta = row.state.get("metadata", {}).get("a2a", {})
    context = meta.get("contextId") if isinstance(meta, Mapping) else None
    return context if isinstance(context, str) and context else row.run_id


def _view(row: RunRow) -> dict[str, Any]:
    record = task_record(row.run_id, context_of(row), row.state, "")
    del record["updatedAt"]
    return record


def project_task_record(before: RunRow | None, after: RunRow, events: list[dict[str, Any]]) -> list[Extra]:
    """The A2ATaskState to upsert with this commit, if the record changes (pure)."""
    if after.state.get("transport") != A2A_TRANSPORT:
        return []
    if before is not None and before.state.get("transport") == A2A_TRANSPORT and _view(before) == _view(after):
        return []
    owner = after.state.get("owner")
    context = context_of(after)
    return [
        TaskRecord(
            task_id=after.run_id,
            tenant=after.tenant,
            principal=owner.get("principal", "") if owner else "",
            context_id=context,
            record=task_record(after.run_id, context, after.state, after.updated_at),
            updated_at=after.updated_at,
        )
    ]


@dataclass(frozen=True, slots=True)
class LiveTask:
    """A task the caller may see: its durable record, its run as it is now, its history if read."""

    record: TaskRecord
    run: RunRow
    history: list[dict[str, Any]] | None = None

    @property
    def context_id(self) -> str:
        return self.record.context_id


async def load_task(store: Store, task_id: str, tenant: str, *, history: bool = False) -> LiveTask:
    """The task ``task_id`` of ``tenant`` (one store read); another tenant's reads like a missing one."""
    found = await store.read_task(task_id, tenant, history=history)
    if found is None:
        raise TaskNotFound(
            f"task {quote(task_id)} not found: no task with that id is visible to this caller",
            data={"taskId": clip(task_id)},
        )
    return LiveTask(*found)


@holds_copies("_kept")
class EncodedTasks:
    """Tasks as JSON, kept while their run stays at one sequence: a repeated ``tasks/get`` encodes nothing.

    A Task is a pure function of its run and history, and both change only in a commit
    that moves the run's ``last_sequence``, so (sequence, historyLength) versions it. A Task
    that holds file bytes is encoded every time and not kept (its bytes are ``files``' to keep).
    """

    def __init__(
        self,
        files: FileBytes,
        render: Callable[[dict[str, Any], int | None], dict[str, Any]] | None = None,
        capacity: int = 4096,
    ) -> None:
        self.files = files
        #: the version's shape of a canonical Task (None: the canonical shape itself)
        self.render = render
        self.capacity = capacity
        self._kept: OrderedDict[str, tuple[tuple[int, int | None], orjson.Fragment]] = OrderedDict()

    async def encode(
        self, live: LiveTask, history_length: int | None, generation: int | None = None
    ) -> orjson.Fragment:
        """The Task as JSON; ``generation`` (a function of the run's sequence too) for versions that show it."""
        version = (live.run.last_sequence, history_length)
        kept = self._kept.get(live.run.run_id)
        if kept is not None and kept[0] == version:
            return kept[1]
        doc = task(live.run, live.context_id, live.history or [], history_length)
        if has_files(doc):
            doc = await self.files.inline(live.run.run_id, doc)
            return orjson.Fragment(orjson.dumps(self.render(doc, generation) if self.render is not None else doc))
        fragment = orjson.Fragment(orjson.dumps(self.render(doc, generation) if self.render is not None else doc))
        self._kept[live.run.run_id] = (version, fragment)
        self._kept.move_to_end(live.run.run_id)
        if len(self._kept) > self.capacity:
            self._kept.popitem(last=False)
        return fragment
