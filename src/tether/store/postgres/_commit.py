"""The parts of a commit beyond the run row and its events, inside the commit's transaction.

Each refusal (a claimed key, a message already recorded) raises, and the caller's
transaction then rolls back whole: a refused commit writes nothing.
"""

from __future__ import annotations

from tether.errors import Conflict, StoreUnavailable
from tether.files import Blob
from tether.ids import new_id
from tether.store._records import IDEMPOTENCY, MESSAGE, PUSH_CONFIG, TASK, WEBHOOK
from tether.store.base import (
    Extra,
    Fanout,
    IdempotencyClaimed,
    IdempotencyRecord,
    PushConfigRow,
    TaskMessage,
    TaskRecord,
    WebhookRow,
)
from tether.store.fanout import targets as fanout_targets
from tether.store.postgres._driver import Q, as_record, as_records, asyncpg

#: each tenant's webhooks as one transaction read them: a commit's fan-outs read them once
Webhooks = dict[str, list[WebhookRow]]


async def claim_idempotency(conn: asyncpg.Connection, claim: IdempotencyRecord) -> None:
    """Claim the key, or raise IdempotencyClaimed with the record that holds it.

    A concurrent claim of the same key waits on the primary key until the first one
    commits; it then finds the row (read committed sees it) and loses.
    """
    if await conn.fetchval(Q["claim_idempotency"], *IDEMPOTENCY.values(claim)) is not None:
        return
    row = await conn.fetchrow(Q["get_idempotency"], claim.tenant, claim.scope, claim.key)
    existing = as_record(IDEMPOTENCY, "get_idempotency", row)
    if existing is None:  # DO NOTHING only yields to a committed claim, and claims are never deleted
        raise StoreUnavailable(f"idempotency key {claim.scope}:{claim.key} is claimed but unreadable")
    raise IdempotencyClaimed(existing)


async def write_blobs(conn: asyncpg.Connection, run_id: str, blobs: list[Blob], now: str) -> None:
    """Store a commit's file bytes and link them to its run (each content once: a statement
    that updated the same row twice would fail)."""
    unique = {blob.digest: blob for blob in blobs}
    await conn.execute(
        Q["insert_blobs"],
        list(unique),
        [blob.size for blob in unique.values()],
        [blob.data for blob in unique.values()],
        now,
        run_id,
    )


async def write_extra(conn: asyncpg.Connection, extra: Extra, now: str, webhooks: Webhooks) -> int:
    """Write one extra of a commit; returns how many deliveries it enqueued."""
    if isinstance(extra, TaskRecord):
        await conn.execute(Q["upsert_task"], *TASK.values(extra))
    elif isinstance(extra, TaskMessage):
        if await conn.fetchval(Q["insert_task_message"], *MESSAGE.values(extra)) is None:
            raise Conflict(
                f"message {extra.message_id!r} is already in the history of task {extra.task_id!r}",
                code="message_already_recorded",
            )
    elif isinstance(extra, PushConfigRow):
        await conn.execute(Q["upsert_push_config"], *PUSH_CONFIG.values(extra))
    elif isinstance(extra, Fanout):
        return await fan_out(conn, extra, now, webhooks)
    else:
        raise TypeError(f"unknown commit extra {type(extra).__name__}")
    return 0


async def fan_out(conn: asyncpg.Connection, fanout: Fanout, now: str, webhooks: Webhooks) -> int:
    """Insert one outbox row per subscriber that matches (inside the caller's transaction).

    ``webhooks``: the tenants' webhooks this transaction has read so far (a commit fans out
    to webhooks once per event type, and read them as often before).
    """
    configs: list[tuple[str, str]] = []
    if fanout.kind == "a2a-push":
        rows = await conn.fetch(Q["list_push_configs"], fanout.task_id)
        configs = [(config.config_id, config.url) for config in as_records(PUSH_CONFIG, "list_push_configs", rows)]
    hooks: list[WebhookRow] = []
    if fanout.kind == "webhook":
        if fanout.tenant not in webhooks:
            rows = await conn.fetch(Q["tenant_webhooks"], fanout.tenant)
            webhooks[fanout.tenant] = as_records(WEBHOOK, "tenant_webhooks", rows)
        hooks = webhooks[fanout.tenant]
    found = fanout_targets(fanout, configs, hooks)
    if found:
        await conn.execute(
            Q["insert_deliveries"],
            [new_id("dlv_") for _ in found],
            [t.target_id for t in found],
            [t.stream_key for t in found],
            [t.url for t in found],
            fanout.tenant,
            fanout.kind,
            fanout.run_id,
            fanout.sequence,
            fanout.rendered(),
            fanout.final,
            now,
        )
    return len(found)
