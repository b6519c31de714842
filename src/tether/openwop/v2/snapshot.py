"""A run as major 2 shows it: the closed v2 ``RunSnapshot``, made from the same row the v1 snapshot is.

What differs from v1 is the edge only: the run id bound to its tenant, ``owner`` naming
a ``subject`` instead of a principal, an integer ``engineVersion``, the run's era as
``eventLogSchemaVersion`` (2 for a run written before eras were stamped), the interrupt's
ids bound and its token in the ``ow2.`` form. v1-only fields stay on v1.
"""

from __future__ import annotations

from typing import Any

from tether.openwop.snapshot import interrupt_deadline, run_snapshot
from tether.openwop.tokens import TokenSigner
from tether.openwop.v2.eventlog import ENGINE_MAJOR, interrupt_view, legacy_subject
from tether.openwop.v2.ids import bind
from tether.store.base import RunRow
from tether.types import Principal

__all__ = ["FORK_EXTENSION", "INTERRUPT_EXTENSION", "LEGACY_ERA", "era_of", "owner_of", "snapshot"]

#: where a v2 snapshot shows the interrupt its run waits at (``extensions`` is the closed snapshot's open seat)
INTERRUPT_EXTENSION = "tether.interrupt"

#: where a v2 snapshot names a fork's source (lineage is not ancestry: a fork's ancestry parent is null)
FORK_EXTENSION = "tether.fork"

#: the era a run reads as when it carries no stamp: written by a v1-only build
LEGACY_ERA = 2

#: the v2 snapshot's keys that a v1 snapshot also carries, as they are
_SHARED = ("workflowId", "status", "tags", "metadata", "startedAt", "completedAt", "currentNodeId", "variables")


def era_of(row: RunRow) -> int:
    era: int = row.state.get("eventLogSchemaVersion", LEGACY_ERA)
    return era


def owner_of(row: RunRow) -> dict[str, Any]:
    """``owner{tenant, subject}``: the subject recorded when the run started, or OpenWOP's legacy stamp.

    A run started before subjects were recorded gets the legacy subject, computed from what
    its ``run.started`` recorded, so it is the same at every read and never written back.
    """
    owner = row.state.get("owner") or {"tenant": row.tenant}
    return {"tenant": owner["tenant"], "subject": row.state.get("subject") or legacy_subject(owner)}


def snapshot(row: RunRow, signer: TokenSigner, principal: Principal | None) -> dict[str, Any]:
    """The v2 ``RunSnapshot`` of ``row``, as ``principal`` may see it (a token to resolve, or only to inspect)."""
    v1 = run_snapshot(row, signer, None)
    snap: dict[str, Any] = {
        "runId": bind(row.tenant, row.run_id),
        "owner": owner_of(row),
        "eventLogSchemaVersion": era_of(row),
        "engineVersion": ENGINE_MAJOR,
    }
    snap.update((key, v1[key]) for key in _SHARED if key in v1)
    snap["nodeStates"] = v1["nodeStates"]
    snap["inputs"] = row.state.get("inputs", {})
    if "error" in v1:
        snap["error"] = v1["error"]
    interrupt = row.state.get("interrupt")
    if interrupt:
        # the closed v2 snapshot has no seat for the pending interrupt: Tether's extension carries it, with its token
        intent = "resolve" if principal is None or principal.can("approvals:respond") else "inspect"
        token = signer.mint_v2(
            row.run_id,
            interrupt["nodeId"],
            interrupt["interruptId"],
            intent=intent,
            deadline=interrupt_deadline(interrupt),
        )
        kind, data = interrupt_view(interrupt["kind"], interrupt["data"])
        pending: dict[str, Any] = {
            "kind": kind,
            "nodeId": interrupt["nodeId"],
            "interruptId": bind(row.tenant, interrupt["interruptId"]),
            "interruptToken": token,
            "key": interrupt["key"],
            "data": data,
            "requestedAt": interrupt["requestedAt"],
        }
        if interrupt.get("timeoutMs"):
            pending["timeoutMs"] = interrupt["timeoutMs"]
        snap["extensions"] = {INTERRUPT_EXTENSION: pending}
    fork = row.state.get("fork")
    if fork is not None:
        source = bind(row.tenant, fork["sourceRunId"])
        lineage = {"sourceRunId": source, "mode": fork["mode"], "fromSeq": fork["fromSeq"]}
        snap.setdefault("extensions", {})[FORK_EXTENSION] = lineage
    return snap
