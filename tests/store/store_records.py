"""Builders for the records the store tests write, and a few commits they repeat."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson

from tether.ids import new_id
from tether.store.base import (
    Commit,
    EventRow,
    Extra,
    Fanout,
    IdempotencyRecord,
    PushConfigRow,
    RunRow,
    Store,
    WebhookRow,
)

BASE = datetime(2026, 11, 30, 12, 0, 0, tzinfo=UTC)
TENANT = "acme"


def at(seconds: float = 0.0) -> str:
    """An ISO-8601 time ``seconds`` after the tests' fixed now, as the host writes times."""
    moment = BASE + timedelta(seconds=seconds)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


NOW = at(0)


def run_row(
    run_id: str,
    *,
    tenant: str = TENANT,
    workflow_id: str = "wf",
    status: str = "running",
    last_sequence: int = 0,
    due_at: str | None = None,
    updated_at: str = NOW,
) -> RunRow:
    state = {"runId": run_id, "status": status, "sequence": last_sequence, "note": "é ✓"}
    return RunRow(run_id, tenant, workflow_id, status, last_sequence, state, NOW, updated_at, due_at)


def event(run_id: str, sequence: int) -> EventRow:
    return EventRow(run_id, sequence, orjson.dumps({"runId": run_id, "sequence": sequence, "type": "test.event"}))


async def create_run(
    store: Store,
    run_id: str | None = None,
    *,
    extras: Sequence[Extra] = (),
    idempotency: IdempotencyRecord | None = None,
    fence: tuple[str, int] | None = None,
    **fields: Any,
) -> RunRow:
    """Commit a new run at sequence 0 with one event."""
    run = run_row(run_id or new_id("run_"), **fields)
    await store.commit(Commit(run, [event(run.run_id, 0)], None, idempotency, list(extras), fence))
    return run


async def advance(
    store: Store,
    run: RunRow,
    *,
    status: str | None = None,
    due_at: str | None = None,
    extras: Sequence[Extra] = (),
    fence: tuple[str, int] | None = None,
) -> tuple[RunRow, int]:
    """Commit the run's next event (CAS on its current sequence); returns it and the deliveries enqueued."""
    sequence = run.last_sequence + 1
    moved = run_row(
        run.run_id,
        tenant=run.tenant,
        workflow_id=run.workflow_id,
        status=status or run.status,
        last_sequence=sequence,
        due_at=due_at,
        updated_at=run.updated_at,
    )
    enqueued = await store.commit(
        Commit(moved, [event(run.run_id, sequence)], run.last_sequence, None, list(extras), fence)
    )
    return moved, enqueued


def claim(key: str, run_id: str, *, tenant: str = TENANT) -> IdempotencyRecord:
    return IdempotencyRecord(tenant, "runs.create", key, "sha256:digest", run_id, 201, {"runId": run_id}, NOW)


def push_config(
    task_id: str, config_id: str, *, url: str = "https://hooks.example/push", tenant: str = TENANT
) -> PushConfigRow:
    return PushConfigRow(task_id, config_id, tenant, url, "fp:token", b"sealed-token", ["Bearer"], b"sealed-auth", NOW)


def webhook(
    webhook_id: str, *, events: list[str], tags: list[str] | None = None, tenant: str = TENANT, major: int = 1
) -> WebhookRow:
    return WebhookRow(
        webhook_id,
        tenant,
        f"https://hooks.example/{webhook_id}",
        events,
        tags or [],
        b"sealed-secret",
        "fp:secret",
        NOW,
        major,
    )


def push_fanout(run_id: str, task_id: str, *, sequence: int = 0, final: bool = False, tenant: str = TENANT) -> Fanout:
    body = orjson.dumps({"taskId": task_id, "sequence": sequence})
    return Fanout("a2a-push", tenant, run_id, sequence, body, task_id=task_id, final=final)


def callback_fanout(
    run_id: str, *, sequence: int = 0, tenant: str = TENANT, url: str = "https://caller.example/cb"
) -> Fanout:
    return Fanout("callback", tenant, run_id, sequence, orjson.dumps({"runId": run_id, "sequence": sequence}), url=url)


async def wait_until(
    predicate: Callable[[], Any], *, timeout: float = 5.0, interval: float = 0.02, what: str = "condition"
) -> None:
    """Poll ``predicate`` (sync or async) until it is truthy; fail after ``timeout`` seconds."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        value = predicate()
        if asyncio.iscoroutine(value):
            value = await value
        if value:
            return
        if loop.time() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        await asyncio.sleep(interval)
