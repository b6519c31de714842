"""Forks: a new run that inherits a source run's log up to a point, and replays or branches from there.

A fork copies the source's events with ``sequence < fromSeq`` (the inherited prefix, fixed
history; a fork from 0 starts with the source's own ``run.started``, the start re-made from
the same request) and then executes like any run, in the same engine and store. What it
knows of its source is written once, with it, in its snapshot (``fork``).

In ``replay`` mode nothing the source did outside the run is done again. A node that
touches the outside world (a hand-off: its send, its push-config registration, its reads of
the peer) or waits for a person is answered from the source's record instead: the events
of the source's first execution of that node, from its ``node.started`` through its
``node.completed`` or ``node.failed``, are written into the fork as they were (the peer's
cached answer, the recorded interrupt resolution). Tether executes a node at most once per
run, so the record the rule ``(sourceRunId, nodeId, n)`` names is always ``n = 1``, and it
is taken when the fork is created, so a source purged later cannot change a fork. An
effecting node the source never finished fails closed with ``replay_source_missing``
(never an empty success); a gate the source never had answered asks again. Pure nodes
re-execute live. A replay fork fans nothing out (no webhook, no A2A push, no callback),
and no fork inherits its source's callback or push configs; a ``branch`` executes its own
nodes, effects included, from ``fromSeq`` on, and its own new events fan out as any run's.

Everything here is pure: the engine reads the source and commits what these functions say.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from typing import Any, Final, Literal, cast

import orjson

from tether.engine.batch import Batch
from tether.engine.events import EventType, NewEvent
from tether.engine.handoff.record import HANDOFF_TYPES
from tether.errors import Unprocessable
from tether.files import digest_of, file_parts
from tether.ids import new_id
from tether.run_state import ErrorObject, ForkRecord, RecordedEvent, RunSnapshot

__all__ = [
    "EFFECT_TYPES",
    "MODES",
    "REPLAY_SOURCE_MISSING",
    "ForkMode",
    "answer",
    "blob_digests",
    "check_fork_point",
    "effecting",
    "expected",
    "fork_record",
    "forked",
    "inherited",
    "noted",
    "recorded",
    "replaying",
    "source_missing",
    "unsettled",
]

ForkMode = Literal["replay", "branch"]
MODES: Final[tuple[ForkMode, ...]] = ("replay", "branch")
#: the ``node.failed`` code of an effecting node a replay has no recorded outcome for
REPLAY_SOURCE_MISSING: Final = "replay_source_missing"

_TERMINAL_NODE: Final = frozenset({"node.completed", "node.failed"})
_TERMINAL_RUN: Final = frozenset({"run.completed", "run.failed", "run.cancelled"})
#: events of a recorded execution a replay does not write again (a cancel's mark belongs to the source)
_NOT_REPLAYED: Final = frozenset({"node.started", "node.cancelled"})
_IN_FLIGHT: Final = frozenset({"running", "suspended"})
#: the node types that act outside the run, which a replay never executes (their handlers are not even called):
#: every effect seam a node can reach. Today the hand-off (its send, push-config registration and peer reads);
#: a node type that calls out (HTTP, mail...) belongs here the day it is added
EFFECT_TYPES: Final[frozenset[str]] = HANDOFF_TYPES


def effecting(type_id: str | None) -> bool:
    """Whether a node of this type acts outside the run, so a replay answers it from the record instead."""
    return type_id in EFFECT_TYPES


def fork_record(state: RunSnapshot) -> ForkRecord | None:
    return state.get("fork")


def forked(state: RunSnapshot) -> bool:
    return "fork" in state


def replaying(state: RunSnapshot) -> bool:
    """Whether the run is a ``replay`` fork: read from the run, never from an event's type."""
    fork = state.get("fork")
    return fork is not None and fork["mode"] == "replay"


def check_fork_point(docs: list[dict[str, Any]], from_seq: int, mode: ForkMode) -> None:
    """Refuse a fork point the source's log does not have, or one a fork could not go on from (422).

    Raises
    ------
    Unprocessable
        ``fork_point_invalid``: no event has that sequence; the prefix would hold the source's
        terminal event; or (a branch) a hand-off is in flight there, half-done with a peer.
    """
    last = docs[-1]["sequence"] if docs else -1
    details = {"fromSeq": from_seq, "lastSequence": last}
    if not any(d["sequence"] == from_seq for d in docs):
        raise Unprocessable(
            f"fromSeq {from_seq} is not in the source run's log (its sequences are 0 to {last})",
            code="fork_point_invalid",
            details=details,
        )
    prefix = [d for d in docs if d["sequence"] < from_seq]
    if any(d["type"] in _TERMINAL_RUN for d in prefix):
        raise Unprocessable(
            f"fromSeq {from_seq} is past the source run's end: the fork would inherit its terminal event",
            code="fork_point_invalid",
            details=details,
        )
    if mode == "branch":
        for node_id in _open_effects(prefix):
            raise Unprocessable(
                f"at fromSeq {from_seq} hand-off {node_id!r} is in flight with its peer: branch at its node.started "
                "or after its outcome",
                code="fork_point_invalid",
                details={**details, "nodeId": node_id},
            )


def _open_effects(prefix: Iterable[Mapping[str, Any]]) -> list[str]:
    started: dict[str, bool] = {}
    for doc in prefix:
        node = doc.get("nodeId")
        if node is None:
            continue
        if doc["type"] == "node.started":
            started[node] = effecting((doc.get("payload") or {}).get("typeId"))
        elif doc["type"] in _TERMINAL_NODE:
            started.pop(node, None)
    return [node for node, effect in started.items() if effect]


def inherited(docs: list[dict[str, Any]], from_seq: int, run_id: str) -> list[dict[str, Any]]:
    """The fork's first events: the source's below ``fromSeq`` (at least its ``run.started``), as they were,
    each under the fork's run id and a fresh event id."""
    prefix = [d for d in docs if d["sequence"] < max(from_seq, 1)]
    return [{**d, "runId": run_id, "eventId": new_id("evt_")} for d in prefix]


def recorded(docs: list[dict[str, Any]], from_seq: int) -> dict[str, list[RecordedEvent]]:
    """The source's record a replay answers from: for each effecting or asking node whose first execution
    the source finished at or after ``fromSeq``, that execution's events from ``fromSeq`` on."""
    open_: dict[str, tuple[str | None, list[dict[str, Any]]]] = {}
    done: set[str] = set()
    out: dict[str, list[RecordedEvent]] = {}
    for doc in docs:
        node = doc.get("nodeId")
        if node is None or node in done:
            continue
        if doc["type"] == "node.started":
            if node not in open_:
                open_[node] = ((doc.get("payload") or {}).get("typeId"), [])
            continue
        if node not in open_:
            continue
        type_id, window = open_[node]
        window.append(doc)
        if doc["type"] not in _TERMINAL_NODE:
            continue
        del open_[node]
        done.add(node)
        asks = any(d["type"] == "node.suspended" for d in window)
        if doc["sequence"] >= from_seq and (effecting(type_id) or asks):
            out[node] = [
                {"type": d["type"], "payload": d.get("payload") or {}, "nodeId": node}
                for d in window
                if d["sequence"] >= from_seq and d["type"] not in _NOT_REPLAYED
            ]
    return out


def blob_digests(events: Iterable[Mapping[str, Any]]) -> set[str]:
    """The blobs the payloads of ``events`` refer to: a fork keeps them, so its files read as its source's."""
    return {digest for e in events for part in file_parts(e.get("payload")) if (digest := digest_of(part)) is not None}


#: payload keys a re-execution cannot reproduce (clocks): left out when a replay is compared with its source
_UNCOMPARED: Final = frozenset({"durationMs", "wakeAt"})


def _fingerprint(doc: Mapping[str, Any]) -> str:
    payload = {k: v for k, v in (doc.get("payload") or {}).items() if k not in _UNCOMPARED}
    body = orjson.dumps([doc["type"], doc.get("nodeId"), payload], option=orjson.OPT_SORT_KEYS)
    return hashlib.sha256(body).hexdigest()[:16]


def expected(docs: list[dict[str, Any]], from_seq: int) -> list[list[str]]:
    """What a replay should write from ``fromSeq`` on, to tell when it does not: each source event's id and print."""
    return [[d["eventId"], _fingerprint(d)] for d in docs if d["sequence"] >= max(from_seq, 1)]


def noted(batch: Batch) -> Batch:
    """``batch``, or, when it is the first of a replay to differ from its source, the same events with
    ``replay.diverged`` before the first that differs (the replay goes on: divergence is reported, not refused)."""
    fork = batch.state.get("fork")
    if fork is None or fork["mode"] != "replay" or "divergedAt" in fork or "expected" not in fork:
        return batch
    start, wanted = max(fork["fromSeq"], 1), fork["expected"]
    index = next(
        (
            i
            for i, d in enumerate(batch.docs)
            if d["sequence"] >= start
            and (d["sequence"] - start >= len(wanted) or wanted[d["sequence"] - start][1] != _fingerprint(d))
        ),
        None,
    )
    if index is None:
        return batch
    doc = batch.docs[index]
    at = doc["sequence"] - start
    again = Batch(batch.row, batch.fence)
    again.blobs = batch.blobs
    for earlier in batch.docs[:index]:
        again.add(_as_new(earlier), at=earlier["timestamp"])
    payload: dict[str, Any] = {
        "sourceRunId": fork["sourceRunId"],
        "atSequence": doc["sequence"],
        "divergenceKind": "extra" if at >= len(wanted) else "output",
        "divergencePoint": doc["type"],
    }
    if at < len(wanted):
        payload["originalEventId"] = wanted[at][0]
    again.add(NewEvent(cast(EventType, "replay.diverged"), cast(Any, payload), None))
    again.state["fork"]["divergedAt"] = doc["sequence"]  # the batch's own copy of the snapshot
    for later in batch.docs[index:]:
        again.add(_as_new(later), at=later["timestamp"])
    return again


def _as_new(doc: Mapping[str, Any]) -> NewEvent:
    return NewEvent(cast(EventType, doc["type"]), cast(Any, doc["payload"]), doc.get("nodeId"))


def answer(batch: Batch, node_id: str) -> bool:
    """Write the source's recorded execution of ``node_id`` into the replay; False when there is none."""
    fork = batch.state.get("fork")
    window = (fork or {}).get("recorded", {}).get(node_id) if fork is not None else None
    if not window:
        return False
    for event in window:
        batch.add(NewEvent(cast(EventType, event["type"]), cast(Any, event["payload"]), node_id))
    return True


def source_missing(node_id: str, source_run_id: str) -> ErrorObject:
    return {
        "code": REPLAY_SOURCE_MISSING,
        "message": f"node {node_id!r} acts outside the run and run {source_run_id} recorded no outcome of it to "
        "replay: it is not executed",
    }


def unsettled(state: RunSnapshot) -> list[str]:
    """The nodes of a replay the inherited prefix left in flight that the record settles (or, for a hand-off
    it has no outcome of, fails closed): a replay never follows a peer."""
    fork = state.get("fork")
    if fork is None or fork["mode"] != "replay":
        return []
    record = fork.get("recorded", {})
    return [
        node_id
        for node_id, entry in state["nodeStates"].items()
        if entry["status"] in _IN_FLIGHT and (node_id in record or effecting(entry.get("typeId")))
    ]
