"""The storage interface the engine, HTTP layer and CLI depend on, and its records.

A run's event log is the source of truth; the run row is a projection of it that is
written in the same transaction as the events that change it (``Commit``). Writes are
optimistic: a commit names the sequence it expects the run to be at, and loses with
``SequenceConflict`` when someone else appended first.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import orjson

from tether.files import Blob
from tether.run_state import RunSnapshot
from tether.types import TERMINAL, RunStatus


@dataclass(slots=True)
class RunRow:
    """The current projection of one run (``state`` is the folded snapshot)."""

    run_id: str
    tenant: str
    workflow_id: str
    status: RunStatus
    last_sequence: int
    state: RunSnapshot
    created_at: str
    updated_at: str
    #: when something is next due without anyone asking: a delay's wake-up or a gate's deadline
    due_at: str | None = None

    @property
    def is_terminal(self) -> bool:
        return self.status in TERMINAL


@dataclass(slots=True)
class EventRow:
    """One committed RunEventDoc, kept as the JSON bytes that were written."""

    run_id: str
    sequence: int
    doc_json: bytes

    @property
    def doc(self) -> dict[str, Any]:
        value: dict[str, Any] = orjson.loads(self.doc_json)
        return value


@dataclass(slots=True)
class IdempotencyRecord:
    """A claimed (tenant, scope, key) and the response it produced."""

    tenant: str
    scope: str
    key: str
    request_digest: str
    run_id: str | None
    status_code: int
    body: dict[str, Any]
    created_at: str


@dataclass(slots=True)
class KeyRow:
    """An API key as stored: never the raw secret, only its hash."""

    key_id: str
    name: str
    tenant: str
    scopes: list[str]
    secret_hash: str
    created_at: str
    revoked_at: str | None = None


@dataclass(slots=True)
class CredentialRow:
    """A secret this host presents to another agent: sealed, bound to one origin, shown by fingerprint only."""

    name: str
    #: the only origin (``https://host:port``) the secret is ever sent to
    origin: str
    #: the ``Authorization`` scheme it is sent under (e.g. ``Bearer``)
    scheme: str
    secret: bytes
    secret_fingerprint: str
    created_at: str


@dataclass(slots=True)
class WorkflowRow:
    """A workflow definition stored verbatim (seeded fixtures)."""

    workflow_id: str
    definition: dict[str, Any]
    source: str
    updated_at: str


@dataclass(slots=True)
class TaskRecord:
    """The persisted A2ATaskState of an A2A-backed run; upserted with the run's events."""

    task_id: str
    tenant: str
    principal: str
    context_id: str
    record: dict[str, Any]
    updated_at: str
    #: the record's A2A state, kept in a column of its own so tasks can be listed by it
    state: str = ""

    def __post_init__(self) -> None:
        if not self.state:
            self.state = str(self.record.get("state", ""))


@dataclass(slots=True)
class TaskMessage:
    """One A2A message exchanged on a task (its ``history``), in arrival order."""

    task_id: str
    message_id: str
    message: dict[str, Any]
    created_at: str


@dataclass(slots=True)
class BlobRow:
    """A file's bytes as stored: once per content (``digest``, see :mod:`tether.files`).

    The small columns come first: a row's bytes may span many pages, and what follows them
    would be read only after them.
    """

    digest: str
    size: int
    created_at: str
    data: bytes


@dataclass(slots=True)
class RunBlob:
    """A run refers to a blob: what keeps the blob, and what lets the run (only) read it."""

    run_id: str
    digest: str


@dataclass(slots=True)
class Fanout:
    """Enqueue one delivery per matching subscriber, in the transaction that causes it.

    ``kind`` "a2a-push" goes to every push config of ``task_id``; "webhook" to every
    webhook of ``tenant`` subscribed to ``event_type`` (and sharing a tag, when the
    webhook names tags); "callback" to ``url``, the run's own ``callbackUrl``. Because
    the match is made inside the write, a config set or deleted concurrently is either
    wholly in or wholly out.
    """

    kind: str
    tenant: str
    run_id: str
    sequence: int
    #: the delivery body, or how to make it: rendered only when some subscriber matches
    body: bytes | Callable[[], bytes]
    task_id: str | None = None
    event_type: str | None = None
    tags: list[str] = field(default_factory=list)
    final: bool = False
    url: str | None = None  # "callback": the run's own callbackUrl

    def rendered(self) -> bytes:
        return self.body if isinstance(self.body, bytes) else self.body()


@dataclass(slots=True)
class PushConfigRow:
    """An A2A push config; its token and credentials are sealed secrets, held by id."""

    task_id: str
    config_id: str
    tenant: str
    url: str
    token_fingerprint: str | None
    token_secret: bytes | None
    auth_schemes: list[str]
    auth_secret: bytes | None
    created_at: str
    #: the A2A version it was registered in ("0.3" or "1.0"): its pushes are that version's shape
    version: str = "0.3"


@dataclass(slots=True)
class WebhookRow:
    webhook_id: str
    tenant: str
    url: str
    events: list[str]
    tags: list[str]
    secret: bytes
    secret_fingerprint: str
    created_at: str
    #: the OpenWOP major it was registered under: its deliveries are rendered and retried in that major's terms
    major: int = 1


@dataclass(slots=True)
class DeliveryRow:
    """One outbound delivery and where it stands."""

    delivery_id: str
    tenant: str
    kind: str
    target_id: str
    stream_key: str
    run_id: str
    sequence: int
    url: str
    body: bytes
    final: bool
    status: str
    attempts: int
    next_attempt_at: str
    last_error: str | None
    created_at: str
    updated_at: str


@dataclass(frozen=True, slots=True)
class Attempt:
    """What one attempt at a delivery came to, as the outbox records it.

    ``status`` is "delivered", "dead", or "pending" with the ``next_attempt_at`` of its
    retry; a delivery put off without being sent (its destination is saturated or backing
    off) is "pending" with its ``attempts`` and ``last_error`` unchanged.
    """

    delivery_id: str
    status: str
    attempts: int
    next_attempt_at: str
    last_error: str | None
    now: str


@dataclass(frozen=True, slots=True)
class EffectClaim:
    """One attempt at an outside effect, claimed before it is sent (``Store.claim_effect``).

    ``effect_id`` is derived from what the effect is, so an attempt made again after a crash
    claims the next attempt of the same effect; ``provider_key`` is what every attempt
    presents to the provider as its ``Idempotency-Key``.
    """

    effect_id: str
    tenant: str
    run_id: str
    node_id: str
    #: the effect-seam manifest row it goes through (``tether.engine.effects.SEAMS``)
    seam: str
    #: "business-identity" or "activity-recipe"
    keying: str
    provider_key: str
    at: str
    invocation_id: str | None = None


@dataclass(frozen=True, slots=True)
class EffectRecord:
    """One attempt in a run's effect ledger, as ``Store.list_effects`` reads it (no content)."""

    effect_id: str
    attempt: int
    node_id: str
    seam: str
    keying: str
    provider_key: str
    invocation_id: str | None
    #: "claimed", "completed", "released" or "escaped"
    state: str
    at: str


Extra = TaskRecord | TaskMessage | Fanout | PushConfigRow


@dataclass(slots=True)
class Commit:
    """Everything one state transition writes, atomically.

    ``expected_sequence`` is the run's ``last_sequence`` the transition was decided on;
    ``None`` creates the run. ``idempotency`` claims a key in the same transaction, so a
    duplicate request can never create a second run.
    """

    run: RunRow
    events: list[EventRow]
    expected_sequence: int | None
    idempotency: IdempotencyRecord | None = None
    extras: list[Extra] = field(default_factory=list)
    #: (owner, epoch) of the execution lease this write is made under; a lost lease refuses it
    fence: tuple[str, int] | None = None
    #: the bytes of file parts this commit's events or messages refer to: stored (once per content)
    #: and linked to the run in the same transaction, so an acknowledged file is never lost
    blobs: list[Blob] = field(default_factory=list)


class LeaseLost(Exception):
    """A fenced write came from a host whose execution lease was taken over: stop driving."""


class IdempotencyClaimed(Exception):
    """The idempotency key of a commit was claimed before; nothing was written."""

    def __init__(self, existing: IdempotencyRecord) -> None:
        super().__init__(f"idempotency key {existing.scope}:{existing.key} already claimed")
        self.existing = existing

    def __reduce__(self) -> tuple[Any, ...]:
        return type(self), (self.existing,)  # pickled by its record (SQLite's writer process sends it back)


class Store(Protocol):
    """What every storage backend provides. Each call is its own transaction."""

    #: told how many writes each durable transaction (SQLite) or grouped statement of commits
    #: (PostgreSQL) carried; None tells nobody
    on_group: Callable[[int], None] | None

    #: several hosts share this store: runs are driven under leases, deliveries claimed,
    #: and commits announced to the other hosts
    shared: bool

    async def open(self) -> None: ...

    async def close(self) -> None: ...

    async def commit(self, commit: Commit) -> int:
        """Write a transition; returns how many deliveries it enqueued.

        Raises SequenceConflict or IdempotencyClaimed, and then writes nothing.
        """
        ...

    async def get_run(self, run_id: str, tenant: str | None = None) -> RunRow | None: ...

    async def list_runs(
        self,
        tenant: str,
        *,
        status: str | None = None,
        workflow_id: str | None = None,
        limit: int = 50,
        before: str | None = None,
    ) -> list[RunRow]: ...

    async def active_runs(self) -> list[RunRow]:
        """Every non-terminal run, for recovery at start."""
        ...

    async def read_events(self, run_id: str, after: int = -1, limit: int = 1000) -> list[EventRow]: ...

    async def get_idempotency(self, tenant: str, scope: str, key: str) -> IdempotencyRecord | None: ...

    async def insert_key(self, key: KeyRow) -> None: ...

    async def get_key(self, key_id: str) -> KeyRow | None: ...

    async def list_keys(self) -> list[KeyRow]: ...

    async def revoke_key(self, name: str, revoked_at: str) -> bool: ...

    async def insert_credential(self, row: CredentialRow) -> None:
        """Store an outbound credential; raises Conflict when one of that name exists."""
        ...

    async def get_credential(self, name: str) -> CredentialRow | None: ...

    async def list_credentials(self) -> list[CredentialRow]: ...

    async def delete_credential(self, name: str) -> bool: ...

    async def put_workflow(self, row: WorkflowRow) -> bool:
        """Store a definition; returns False when the identical one was already there."""
        ...

    async def list_workflows(self) -> list[WorkflowRow]: ...

    async def claim_setting(self, name: str, value: str) -> str:
        """Store ``name = value`` unless the setting exists; returns the stored value."""
        ...

    async def settings_under(self, prefix: str) -> dict[str, str]:
        """Every setting whose name starts with ``prefix`` (settings are written once, by ``claim_setting``)."""
        ...

    async def get_task(self, task_id: str, tenant: str | None = None) -> TaskRecord | None: ...

    async def list_task_messages(self, task_id: str) -> list[dict[str, Any]]: ...

    async def list_tasks(
        self,
        tenant: str,
        *,
        context_id: str | None = None,
        state: str | None = None,
        updated_after: str | None = None,
        after: tuple[str, str] | None = None,
        limit: int = 50,
    ) -> tuple[list[TaskRecord], int]:
        """A tenant's task records, most recently updated first, and how many match in all.

        ``after`` is the (updated_at, task_id) of the last record of the previous page.
        """
        ...

    async def read_task(
        self, task_id: str, tenant: str, *, history: bool = False
    ) -> tuple[TaskRecord, RunRow, list[dict[str, Any]] | None] | None:
        """A task's record, its run and (with ``history``) its messages, read in one go."""
        ...

    # file bytes

    async def read_blobs(self, run_id: str, digests: Sequence[str]) -> dict[str, bytes]:
        """The bytes of those of ``digests`` that run ``run_id`` refers to, by digest.

        Only a run's own blobs are read: a reference that found its way into a run's data
        without the run's commit linking it (typed into a data part, say) reads as missing.
        """
        ...

    # retention

    async def purge_runs(
        self, before: str, limit: int, *, tenant: str | None = None, dry_run: bool = False
    ) -> list[str]:
        """Delete up to ``limit`` runs that ended before ``before`` (ISO UTC), oldest first, with
        everything kept for them (events, task record, history, push configs, deliveries, the
        idempotency claims that started them, the lease, the file bytes no other run refers to);
        their ids.

        A run that has not ended, still has a delivery pending, or has a dead letter that died
        at or after ``before`` (it stays readable that long), is never taken. ``tenant``
        limits it to that tenant's runs; ``dry_run`` only says which runs would go. Two hosts
        purging one database at once never take the same run.
        """
        ...

    # push configs, webhooks and the outbox

    async def put_push_config(self, row: PushConfigRow) -> None: ...

    async def list_push_configs(self, task_id: str) -> list[PushConfigRow]: ...

    async def delete_push_config(self, task_id: str, config_id: str) -> bool: ...

    async def put_webhook(self, row: WebhookRow) -> None: ...

    async def get_webhook(self, webhook_id: str) -> WebhookRow | None: ...

    async def delete_webhook(self, tenant: str, webhook_id: str) -> bool: ...

    async def due_deliveries(
        self, now: str, limit: int, *, owner: str = "local", claim_seconds: float = 60.0
    ) -> list[DeliveryRow]:
        """Deliveries whose time has come and that head their stream (order per stream).

        They are also claimed for ``owner`` for ``claim_seconds`` (on a shared store in the
        same statement, FOR UPDATE SKIP LOCKED, so each attempt is made by one host; on a
        host's own store in its memory), so that a worker that sends many at once is not
        handed a delivery it is sending already; recording the attempt ends the claim.
        """
        ...

    async def release_claims(self, owner: str) -> None:
        """Drop the delivery claims ``owner`` holds: a host that starts again under its stable
        name sends what its previous life was sending at once, not when those claims lapse."""
        ...

    async def next_delivery_at(self) -> str | None:
        """The earliest time a stream head this host does not hold a claim on becomes due
        (on a shared store, or another host's claim lapses)."""
        ...

    async def record_attempts(self, attempts: Sequence[Attempt]) -> None:
        """Store the outcomes of many attempts in one write, ending their claims.

        A delivery that is done (delivered or dead) hands its stream to the next pending
        delivery of the stream; a final push that is done discards its config's secrets.
        One write per batch, not per attempt: that is what lets the outbox keep up.
        """
        ...

    async def record_attempt(
        self, delivery_id: str, *, status: str, attempts: int, next_attempt_at: str, last_error: str | None, now: str
    ) -> None:
        """``record_attempts`` for one attempt."""
        ...

    async def list_deliveries(
        self, tenant: str | None, status: str | None, limit: int = 100, kind: str | None = None
    ) -> list[DeliveryRow]:
        """Newest first; of one tenant, status and kind (``webhook``, ``a2a-push``, ``callback``) if given."""
        ...

    async def redeliver(self, delivery_id: str, tenant: str | None, now: str) -> bool: ...

    async def dead_letters(
        self, tenant: str, target_id: str, limit: int, before: str | None = None
    ) -> list[DeliveryRow]:
        """The dead deliveries of one subscriber of ``tenant`` (a webhook's id), newest first; with
        ``before`` (a delivery id), only those older than it (the next page)."""
        ...

    # the effect ledger

    async def claim_effect(self, claim: EffectClaim) -> int:
        """Claim the next attempt of ``claim.effect_id`` (insert-if-absent of its number); its number.

        An attempt of the effect still claimed (never settled: its host died between the
        send and the record) is released first, in the same transaction.
        """
        ...

    async def settle_effect(self, effect_id: str, attempt: int, state: str) -> None:
        """Record a claimed attempt's outcome ("completed" or "released"); a settled one stays as it is."""
        ...

    async def list_effects(self, run_id: str) -> list[EffectRecord]:
        """Run ``run_id``'s ledger, oldest first: the attempts claimed through ``claim_effect``, and each
        delivery the run caused that was attempted, read from its outbox row (its latest attempt)."""
        ...

    async def purge_effects(self, before: str, limit: int) -> int:
        """Delete up to ``limit`` ledger rows claimed before ``before`` (ISO UTC); how many went."""
        ...

    # several hosts (meaningful when ``shared``)

    async def claim_run(self, run_id: str, owner: str, ttl: float) -> int | None:
        """Take the execution lease of a run, or keep it.

        Granted when nobody holds a live lease or ``owner`` already does; the epoch goes
        up whenever the holder changes. Returns the epoch, or None when another host
        holds a live lease.
        """
        ...

    async def renew_leases(self, owner: str, ttl: float) -> list[str]:
        """Extend every live lease ``owner`` holds; returns the run ids it still holds."""
        ...

    async def release_run(self, run_id: str, owner: str) -> None: ...

    async def orphaned_runs(self, now: str, limit: int) -> list[str]:
        """Runs that need a host and have no live lease: executing ones, and waiting
        ones whose ``due_at`` has passed (a gate deadline)."""
        ...

    async def announce(self, run_id: str) -> None:
        """Hint the other hosts that ``run_id`` changed (after the commit, never in it)."""
        ...

    def on_announce(self, callback: Callable[[str], None]) -> None:
        """Call ``callback(run_id)`` for each hint another host sends."""
        ...

    def on_hints_missed(self, callback: Callable[[], None]) -> None:
        """Call ``callback()`` whenever hints of other hosts may have been missed (listening
        started, or started again after a lost connection)."""
        ...
