"""Records to rows and back: how each record type sits in its PostgreSQL table."""

from __future__ import annotations

from typing import Any

import orjson

from tether.store.base import DeliveryRow, IdempotencyRecord, KeyRow, PushConfigRow, RunRow, TaskRecord, WebhookRow

Row = Any  # an asyncpg.Record: indexable by position, like the SQLite store's tuples


def json_text(value: Any) -> str:
    """JSONB parameters travel as text."""
    return orjson.dumps(value).decode()


def run_row(row: Row) -> RunRow:
    return RunRow(row[0], row[1], row[2], row[3], row[4], orjson.loads(row[5]), row[6], row[7], row[8])


def idempotency_row(row: Row) -> IdempotencyRecord:
    return IdempotencyRecord(row[0], row[1], row[2], row[3], row[4], row[5], orjson.loads(row[6]), row[7])


def idempotency_params(claim: IdempotencyRecord) -> tuple[Any, ...]:
    return (
        claim.tenant, claim.scope, claim.key, claim.request_digest, claim.run_id, claim.status_code,
        orjson.dumps(claim.body), claim.created_at,
    )


def key_row(row: Row) -> KeyRow:
    return KeyRow(row[0], row[1], row[2], orjson.loads(row[3]), row[4], row[5], row[6])


def task_row(row: Row) -> TaskRecord:
    return TaskRecord(row[0], row[1], row[2], row[3], orjson.loads(row[4]), row[5])


def task_params(task: TaskRecord) -> tuple[Any, ...]:
    return (task.task_id, task.tenant, task.principal, task.context_id, orjson.dumps(task.record), task.updated_at)


def push_row(row: Row) -> PushConfigRow:
    return PushConfigRow(row[0], row[1], row[2], row[3], row[4], row[5], orjson.loads(row[6]), row[7], row[8])


def push_params(row: PushConfigRow) -> tuple[Any, ...]:
    return (
        row.task_id, row.config_id, row.tenant, row.url, row.token_fingerprint, row.token_secret,
        json_text(row.auth_schemes), row.auth_secret, row.created_at,
    )


def webhook_row(row: Row) -> WebhookRow:
    return WebhookRow(row[0], row[1], row[2], orjson.loads(row[3]), orjson.loads(row[4]), bytes(row[5]), row[6], row[7])


def webhook_params(row: WebhookRow) -> tuple[Any, ...]:
    return (
        row.webhook_id, row.tenant, row.url, json_text(row.events), json_text(row.tags), row.secret,
        row.secret_fingerprint, row.created_at,
    )


def delivery_row(row: Row) -> DeliveryRow:
    return DeliveryRow(
        row[0], row[1], row[2], row[3], row[4], row[5], row[6], row[7], bytes(row[8]), bool(row[9]),
        row[10], row[11], row[12], row[13], row[14], row[15],
    )
