"""A2A streams (``message/stream``, ``tasks/resubscribe``) read from the run's event log.

A stream is "the run's events after sequence N", read from the store and projected to
A2A events as it goes; the notifier only says when to read again. So a stream misses
nothing across a host restart, any number of observers see the same events in the
same order, and reading never executes anything. Each SSE frame carries the run
sequence it came from as ``id:``, on the last frame a run event produced, so a
reconnect with ``Last-Event-ID`` resumes after whole run events: no gap, no duplicate.
"""

from __future__ import annotations

import copy
import logging
import re
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable
from contextlib import aclosing
from dataclasses import dataclass
from typing import Any

import orjson

from tether.a2a.errors import A2AError, InternalError, InvalidParams, a2a_error_from
from tether.a2a.files import FileBytes, has_files
from tether.a2a.generations import Generations, fold
from tether.a2a.projection import (
    INTERRUPTED,
    TERMINAL,
    status_view,
    task,
    task_state,
    updates,
)
from tether.a2a.surface import A2ASurface
from tether.caches import holds_copies
from tether.engine.state import apply
from tether.errors import TetherError
from tether.ids import new_id
from tether.run_state import RunSnapshot
from tether.store.base import RunRow

__all__ = [
    "Frame",
    "Framing",
    "SSE_HEADERS",
    "StreamProjections",
    "error_stream",
    "parse_after",
    "replay",
    "sse",
    "task_first",
]

log = logging.getLogger("tether.a2a")

#: (A2A event, SSE id) — a None event is a keep-alive; the id is set on the last frame of a run event.
#: An event may come encoded already (shared by every stream of its run).
Frame = tuple[dict[str, Any] | orjson.Fragment | None, int | None]
#: a canonical (0.3-shaped) Task or update as one version's stream frame, given its generation
#: (None where the version has no generations)
Render = Callable[[dict[str, Any], int | None], dict[str, Any]]


def _as_is(doc: dict[str, Any], generation: int | None) -> dict[str, Any]:
    return doc


SSE_HEADERS = {"Cache-Control": "no-store", "X-Accel-Buffering": "no"}
_PAGE = 500


#: a sequence as ``Last-Event-ID`` writes it (ASCII digits only: ``int`` takes other scripts' digits)
_SEQUENCE_TEXT = re.compile("-1|[0-9]{1,19}")


def parse_after(header: str | None, metadata: dict[str, Any] | None, row: RunRow) -> int | None:
    """The sequence a re-attaching client saw last: ``Last-Event-ID``, else ``metadata.lastSequence``.

    None when the client names none (it gets the current Task first). A sequence the
    run has not reached is refused: it was never sent, so resuming after it would skip.
    """
    raw: Any = None
    source = ""
    if header is not None and header.strip():
        raw, source = header.strip(), "the Last-Event-ID header"
        if not _SEQUENCE_TEXT.fullmatch(raw):
            raise InvalidParams(f"{source} must be the sequence number of an event the stream sent")
        raw = int(raw)
    elif metadata and "lastSequence" in metadata:
        raw, source = metadata["lastSequence"], "params.metadata.lastSequence"
    else:
        return None
    if not isinstance(raw, int) or isinstance(raw, bool) or raw < -1:
        raise InvalidParams(f"{source} must be an integer sequence number (-1 replays from the start)")
    if raw > row.last_sequence:
        raise InvalidParams(
            f"sequence {raw} was never sent: the task's last event is {row.last_sequence}",
            data={"lastSequence": row.last_sequence},
        )
    return raw


def _after(generation: int | None, steps: int) -> int | None:
    return None if generation is None else generation + steps


@holds_copies("_kept")
class StreamProjections:
    """The A2A events each run event produced, shared by every stream of the run.

    Every stream of a run folds the same events from the same snapshots, so what one run
    event produces (for streams that do, or do not, end at input-required) is projected
    and encoded once, by the first stream to reach it, and reused by the others with the
    snapshot after it. A kept snapshot is never changed: a stream that goes past what is
    kept copies it first. Events that carry file bytes are encoded for each stream and not
    kept (the bytes are :class:`~tether.a2a.files.FileBytes`' to keep).
    """

    def __init__(
        self,
        render_task: Render = _as_is,
        render_event: Render = _as_is,
        generations: Generations | None = None,
        capacity: int = 1024,
    ) -> None:
        #: one version's frames: the Task a stream starts with, and each update
        self.render_task = render_task
        self.render_event = render_event
        #: set for a version whose frames carry task generations
        self.generations = generations
        self.capacity = capacity
        self._kept: OrderedDict[tuple[str, int, bool], tuple[list[tuple[bool, orjson.Fragment]], RunSnapshot]] = (
            OrderedDict()
        )

    def get(
        self, task_id: str, sequence: int, final_on_input_required: bool
    ) -> tuple[list[tuple[bool, orjson.Fragment]], RunSnapshot] | None:
        return self._kept.get((task_id, sequence, final_on_input_required))

    def keep(
        self,
        task_id: str,
        sequence: int,
        final_on_input_required: bool,
        produced: list[dict[str, Any]],
        state: RunSnapshot,
        generation: int | None,
        *,
        remember: bool = True,
    ) -> tuple[list[tuple[bool, orjson.Fragment]], RunSnapshot]:
        """Encode what one run event produced; ``generation`` is the task's before it (None: untracked).

        ``remember``: keep the encoding for the run's other streams."""
        kept = (
            [
                (
                    bool(item.get("final")),
                    orjson.Fragment(
                        orjson.dumps(self.render_event(item, None if generation is None else generation + i))
                    ),
                )
                for i, item in enumerate(produced, 1)
            ],
            state,
        )
        if not remember:
            return kept
        self._kept[(task_id, sequence, final_on_input_required)] = kept
        if len(self._kept) > self.capacity:
            self._kept.popitem(last=False)
        return kept


async def _follow(
    a2a: A2ASurface,
    projections: StreamProjections,
    files: FileBytes,
    task_id: str,
    context_id: str,
    after: int,
    state: RunSnapshot,
    *,
    own: bool,
    final_on_input_required: bool,
    generation: int | None = None,
) -> AsyncIterator[list[Frame]]:
    """The A2A events of the run events after ``after``, live, until a final one.

    They come a read at a time, so that a stream writes everything one commit produced
    at once. ``state`` is the snapshot at ``after``; ``own``: the stream may change it
    (otherwise it is copied before the first change). ``generation``: the task's at
    ``after``, for a version whose frames carry it.
    """
    follower = a2a.logs.follow(task_id, after, a2a.settings.keepalive_seconds)
    async with aclosing(follower.pages()) as pages:  # leaving early unsubscribes at once
        async for page in pages:
            if page is None:
                yield [(None, None)]
                continue
            frames: list[Frame] = []
            for event in page:
                kept = projections.get(task_id, event.sequence, final_on_input_required)
                if kept is None:
                    if not own:
                        state = copy.deepcopy(state)
                    doc = event.doc
                    before = status_view(state)
                    apply(state, doc)
                    produced = updates(
                        task_id, context_id, doc, before, state, final_on_input_required=final_on_input_required
                    )
                    remember = not any(has_files(item) for item in produced)
                    if not remember:
                        produced = [await files.inline(task_id, item) for item in produced]
                    kept = projections.keep(
                        task_id,
                        event.sequence,
                        final_on_input_required,
                        produced,
                        state,
                        generation,
                        remember=remember,
                    )
                encoded, state = kept
                if generation is not None:
                    generation += len(encoded)
                own = False
                frames += [
                    (item, event.sequence if index == len(encoded) - 1 else None)
                    for index, (_, item) in enumerate(encoded)
                ]
                if encoded and encoded[-1][0]:  # final
                    yield frames
                    return
            if frames:
                yield frames
                follower.wrote()


async def task_first(
    a2a: A2ASurface,
    projections: StreamProjections,
    files: FileBytes,
    row: RunRow,
    context_id: str,
    history: list[dict[str, Any]],
    history_length: int | None,
    *,
    final_on_input_required: bool,
) -> AsyncIterator[list[Frame]]:
    """The Task as it is at ``row``, then its updates after that sequence.

    Ends after the Task alone when it is already terminal (or input-required on a
    stream that ends there).
    """
    generation = await projections.generations.at(row) if projections.generations is not None else None
    current = await files.inline(row.run_id, task(row, context_id, history, history_length))
    first = projections.render_task(current, generation)
    yield [(first, row.last_sequence)]
    state_now = task_state(row.status)
    if state_now in TERMINAL or (state_now in INTERRUPTED and final_on_input_required):
        return
    async for frames in _follow(
        a2a,
        projections,
        files,
        row.run_id,
        context_id,
        row.last_sequence,
        row.state,
        own=False,
        final_on_input_required=final_on_input_required,
        generation=generation,
    ):
        yield frames


async def replay(
    a2a: A2ASurface, projections: StreamProjections, files: FileBytes, row: RunRow, context_id: str, after: int
) -> AsyncIterator[list[Frame]]:
    """Exactly the updates of the run events after ``after`` (no Task first), then live ones.

    ``after`` must be a sequence the run has reached (see :func:`parse_after`).
    """
    folded = await fold(a2a.store, row, after)
    generation = folded.generation if projections.generations is not None else None
    async for frames in _follow(
        a2a,
        projections,
        files,
        row.run_id,
        context_id,
        after,
        folded.state,
        own=True,
        final_on_input_required=False,
        generation=generation,
    ):
        yield frames


@dataclass(frozen=True, slots=True)
class Framing:
    """How one binding writes a frame's ``data:`` and a mid-stream error's."""

    data: Callable[[dict[str, Any] | orjson.Fragment], bytes]
    error: Callable[[A2AError], bytes]


def _frame_bytes(framing: Framing, payload: dict[str, Any] | orjson.Fragment | None, sequence: int | None) -> bytes:
    if payload is None:
        return b": keepalive\n\n"
    prefix = b"id: %d\n" % sequence if sequence is not None else b""
    return prefix + b"data: " + framing.data(payload) + b"\n\n"


async def sse(framing: Framing, batches: AsyncIterator[list[Frame]]) -> AsyncIterator[bytes]:
    """SSE bytes, a chunk per batch, ``id:`` the run sequence a frame came from.

    A failure after the stream began is sent as one error event, then the stream ends.
    """
    try:
        async for frames in batches:
            yield b"".join([_frame_bytes(framing, payload, sequence) for payload, sequence in frames])
    except A2AError as exc:
        yield b"data: " + framing.error(exc) + b"\n\n"
    except TetherError as exc:
        yield b"data: " + framing.error(a2a_error_from(exc)) + b"\n\n"
    except Exception:
        correlation = new_id("err_")
        log.exception("A2A stream failed [%s]", correlation)
        yield b"data: " + framing.error(InternalError(f"the stream failed (correlation id {correlation})")) + b"\n\n"


async def error_stream(framing: Framing, error: A2AError) -> AsyncIterator[bytes]:
    """A stream method refused before it began: one error event, as v0.3 clients expect."""
    yield b"data: " + framing.error(error) + b"\n\n"
