"""What a run's own state says of its hand-offs, and the names derived from a run and node.

Pure readers of the snapshot, importing nothing of the engine: the engine, the surfaces
and the metrics ask here which nodes are hand-offs, which are in flight, what the log
holds of each one's peer task and whether an interrupt mirrors a peer's question.
"""

from __future__ import annotations

import hashlib
from typing import Final

from tether.run_state import HandoffRecord, InterruptRecord, RunSnapshot
from tether.store.base import RunRow

__all__ = [
    "HANDOFF_ALIASES",
    "HANDOFF_TYPE",
    "HANDOFF_TYPES",
    "IN_FLIGHT",
    "MIRROR_SUBKINDS",
    "PEER_AUTH",
    "PEER_INPUT",
    "handoff_id",
    "handoff_record",
    "in_flight",
    "invocation_message_id",
    "peer_subkind",
    "push_config_key",
    "run_trace",
    "trace_id",
]

HANDOFF_TYPE = "vendor.tether.a2a-handoff"
#: the names the conformance fixtures give a hand-off node (served only with the test seams on)
HANDOFF_ALIASES = ("core.conformance.a2a-invoke", "core.a2a.invoke")
#: every type id a hand-off node runs under
HANDOFF_TYPES = frozenset({HANDOFF_TYPE, *HANDOFF_ALIASES})

#: the node statuses of a hand-off that still follows its peer (``suspended``: a peer question is mirrored)
IN_FLIGHT: Final = frozenset({"running", "suspended"})

#: what marks an interrupt as a hand-off's mirror of its peer's question
PEER_INPUT: Final = "a2a-peer-input"
PEER_AUTH: Final = "auth"
MIRROR_SUBKINDS: Final = frozenset({PEER_INPUT, PEER_AUTH})


def handoff_id(run_id: str, node_id: str) -> str:
    """The public name of one hand-off (its push URL's path): stable, and revealing neither id."""
    return hashlib.sha256(f"tether:handoff:v1\0{run_id}\0{node_id}".encode()).hexdigest()[:32]


def invocation_message_id(run_id: str, node_id: str) -> str:
    """The outbound ``messageId`` of a node's invocation: the same after any crash, so a peer sees one message.

    A node runs at most once per run (the scheduler never re-enters a finished node), so
    the run and node ids name the invocation.
    """
    return f"tether-{handoff_id(run_id, node_id)}"


def push_config_key(hid: str) -> str:
    """The ``Idempotency-Key`` of hand-off ``hid``'s push-config registration (the config's id is ``hid``):
    the same on every registration, so asking again after a restart is one effect at the peer."""
    return f"tether-{hid}-push"


def trace_id(run_id: str, node_id: str) -> str:
    """The W3C trace id of a hand-off of a run that keeps no trace (created before runs kept one):
    derived like its ``messageId``, the same on any host and after any restart."""
    digest = hashlib.sha256(f"tether:trace:v1\0{run_id}\0{node_id}".encode()).hexdigest()[:32]
    return digest if digest.strip("0") else "1" * 32  # all zeros is an invalid trace id


def run_trace(row: RunRow, node_id: str) -> str:
    """The ``traceparent`` a hand-off's requests continue: the run's own trace, so that the peer's
    work joins it (two Tether hosts show as one trace)."""
    kept = row.state.get("traceparent")
    if kept is not None:
        return kept
    derived = trace_id(row.run_id, node_id)
    return f"00-{derived}-{derived[:16]}-00"


def handoff_record(state: RunSnapshot, node_id: str) -> HandoffRecord:
    """What the run's log holds of a hand-off's peer task: the snapshot's own entry, to read and not change
    (empty before the peer answered)."""
    entry = state["nodeStates"].get(node_id)
    return entry.get("handoff", {}) if entry is not None else {}


def in_flight(state: RunSnapshot) -> list[str]:
    """The hand-off nodes of a run that are started and not finished."""
    return [
        node_id
        for node_id, entry in state["nodeStates"].items()
        if entry.get("typeId") in HANDOFF_TYPES and entry["status"] in IN_FLIGHT
    ]


def peer_subkind(interrupt: InterruptRecord | None) -> str | None:
    """The mirror subkind of ``interrupt`` (approvals carry ``subkind``, clarifications ``contextType``)."""
    if not interrupt:
        return None
    data = interrupt.get("data") or {}
    value = data.get("subkind") if interrupt["kind"] == "approval" else data.get("contextType")
    return value if value in MIRROR_SUBKINDS else None
