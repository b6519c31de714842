"""The tasks a store has read or written lately, kept in memory for ``read_task``.

A store whose every commit passes through this process answers from it directly (SQLite);
a database several hosts share answers a copy only once the database says it is current
(``tether.store.postgres._task_reads``). An entry is written through after its commit is
on disk, never before, so a read from memory is never ahead of the disk; and because
every change of a task record or its history commits with a run event, the run's
``last_sequence`` versions the whole entry. An entry that might be stale is dropped,
never patched from a guess.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from tether.store.base import Commit, RunRow, TaskMessage, TaskRecord

__all__ = ["TaskCache", "TaskEntry"]


@dataclass(frozen=True, slots=True)
class TaskEntry:
    record: TaskRecord
    run: RunRow
    history: tuple[dict[str, Any], ...]


class TaskCache:
    #: recent tasks are what is read again; every entry is an object graph the garbage
    #: collector walks on each full collection, so the cache stays small
    def __init__(self, capacity: int = 1024) -> None:
        self.capacity = capacity
        self._entries: OrderedDict[str, TaskEntry] = OrderedDict()
        #: commits applied so far: a read that saw some commit land meanwhile is not kept
        self.commits = 0

    def get(self, task_id: str) -> TaskEntry | None:
        return self._entries.get(task_id)

    def keep(self, entry: TaskEntry, commits_before: int) -> None:
        """Keep what a read found, unless a commit landed while it read (it may be older)."""
        if commits_before == self.commits:
            self._put(entry)

    def committed(self, commit: Commit) -> None:
        """Apply a commit that is on disk: extend the entry it continues, drop any it does not."""
        self.commits += 1
        run = commit.run
        record = next((e for e in commit.extras if isinstance(e, TaskRecord) and e.task_id == run.run_id), None)
        messages = []
        for extra in commit.extras:
            if isinstance(extra, TaskMessage):
                if extra.task_id == run.run_id:
                    messages.append(extra.message)
                else:
                    self._entries.pop(extra.task_id, None)
        current = self._entries.get(run.run_id)
        if commit.expected_sequence is None:
            if record is not None:
                self._put(TaskEntry(record, run, tuple(messages)))
        elif current is not None and current.run.last_sequence == commit.expected_sequence:
            self._entries[run.run_id] = TaskEntry(record or current.record, run, current.history + tuple(messages))
        else:
            self._entries.pop(run.run_id, None)

    def forget(self, task_id: str) -> None:
        """Drop a task that is gone (purged) or may have changed unseen; a read under way is not kept."""
        self._entries.pop(task_id, None)
        self.commits += 1

    def forget_final(self, task_id: str) -> None:
        """Drop a copy of a task that had ended: a hint about it means it was purged (no commit
        follows a terminal one). Copies of other tasks stay: reads check them against the store."""
        held = self._entries.get(task_id)
        if held is not None and held.run.is_terminal:
            self.forget(task_id)

    def clear(self) -> None:
        """Drop every task (after hints may have been missed)."""
        self._entries.clear()
        self.commits += 1

    def _put(self, entry: TaskEntry) -> None:
        entries = self._entries
        entries[entry.run.run_id] = entry
        entries.move_to_end(entry.run.run_id)
        if len(entries) > self.capacity:
            entries.popitem(last=False)
