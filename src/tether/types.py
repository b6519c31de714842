"""The kinds every layer shares: who is asking, and the vocabularies of run statuses and delivery kinds.

Nothing here imports from the rest of Tether, so the store, the engine and both HTTP
surfaces can all depend on it without depending on each other.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal, get_args

__all__ = [
    "ACTIVE",
    "DELIVERY_KINDS",
    "INT32_MAX",
    "INT64_MAX",
    "RUN_STATUSES",
    "TERMINAL",
    "WAITING",
    "DeliveryKind",
    "Principal",
    "RunStatus",
]

#: the largest integer the stores hold (SQLite's INTEGER and PostgreSQL's BIGINT are signed 64-bit):
#: no sequence, generation or count the API takes may exceed it, or the store refuses it mid-request
INT64_MAX: Final = 2**63 - 1
#: the largest ProtoJSON ``int32``, the A2A type of ``historyLength`` and ``pageSize``
INT32_MAX: Final = 2**31 - 1

#: The ten statuses of an OpenWOP run (``run-snapshot.schema.json``). The SQL that filters
#: by status is checked against these sets by a test, so a new status cannot be missed there.
RunStatus = Literal[
    "pending",
    "running",
    "paused",
    "waiting-approval",
    "waiting-input",
    "waiting-external",
    "completed",
    "failed",
    "cancelling",
    "cancelled",
]
RUN_STATUSES: Final[tuple[RunStatus, ...]] = get_args(RunStatus)

#: statuses that absorb: nothing changes a run any more
TERMINAL: Final[frozenset[RunStatus]] = frozenset({"completed", "failed", "cancelled"})
#: statuses in which a run waits at an interrupt for someone to answer
WAITING: Final[frozenset[RunStatus]] = frozenset({"waiting-approval", "waiting-input", "waiting-external"})
#: statuses of a run that is not over: a restart resumes every one of them
ACTIVE: Final[frozenset[RunStatus]] = frozenset(status for status in RUN_STATUSES if status not in TERMINAL)

#: what an outbound delivery carries: an OpenWOP webhook, an A2A push, a run's ``callbackUrl`` announcement
DeliveryKind = Literal["webhook", "a2a-push", "callback"]
DELIVERY_KINDS: Final[tuple[DeliveryKind, ...]] = get_args(DeliveryKind)


@dataclass(frozen=True, slots=True)
class Principal:
    """Who is asking: the tenant that owns what they create, and an opaque name."""

    tenant: str
    name: str
    scopes: frozenset[str] = frozenset()
    #: the public id of the API key that authenticated the call (``tk_<key id>_…``), None for other callers
    key_id: str | None = None
    #: a keyless caller of a public agent
    anonymous: bool = False

    def can(self, scope: str) -> bool:
        return scope in self.scopes

    def subject(self) -> dict[str, str]:
        """The OpenWOP v2 Subject of this caller (``subject.schema.json``), recorded on the runs it starts.

        A key is named by its public id, never its name (which a person chose and may be PII).
        """
        if self.key_id is not None:
            return {
                "issuer": "urn:tether:api-key",
                "subjectId": self.key_id,
                "tenant": self.tenant,
                "lane": "api-key",
                "kind": "user",
            }
        if self.anonymous:
            return {
                "issuer": "urn:tether:anonymous",
                "subjectId": self.name,
                "tenant": self.tenant,
                "lane": "anonymous",
                "kind": "anonymous",
            }
        return {
            "issuer": "urn:tether:principal",
            "subjectId": self.name,
            "tenant": self.tenant,
            "lane": "api-key",
            "kind": "user",
        }
