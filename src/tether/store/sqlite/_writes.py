"""The store's writes other than commits, as the writer process runs them.

A job reaches the writer process pickled (``_writer``), so each write is a function of this
module, called there as ``write(conn, *args)``, never a closure. A refusal is raised here, as
the caller will see it.

That is all a new write needs to know of the writer process: the store calls
``self._write(_writes.fn, *args)`` (or one of the generic writes below) and ``_writer`` names
no write. Its arguments, result and refusal cross as pickles; one that does not pickle is
refused alone, with StoreUnavailable saying why, and every other write goes on. (A refusal
whose constructor takes more than a message needs a ``__reduce__`` to come back as itself,
as ``IdempotencyClaimed`` has.)
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any

import orjson

from tether.errors import Conflict
from tether.store._records import DELIVERY, WORKFLOW
from tether.store.fanout import push_stream_task
from tether.store.sqlite._commit import forget_webhooks
from tether.store.sqlite._driver import Q, fetch_one

#: what a purge deletes for each run, in this order (the run row last)
_PURGES = (
    Q["purge_run_events"],
    Q["purge_task_messages"],
    Q["purge_tasks"],
    Q["purge_push_configs"],
    Q["purge_deliveries"],
    Q["purge_idempotency"],
    Q["purge_leases"],
    Q["purge_blobs"],
    Q["purge_run_blobs"],
    Q["purge_runs"],
)


def execute(conn: sqlite3.Connection, sql: str, params: Sequence[Any] | dict[str, Any]) -> None:
    conn.execute(sql, params)


def changed(conn: sqlite3.Connection, sql: str, params: Sequence[Any]) -> bool:
    """Run ``sql``; whether it changed a row."""
    return conn.execute(sql, params).rowcount > 0


def insert_unique(conn: sqlite3.Connection, sql: str, params: dict[str, Any], refusal: str, code: str) -> None:
    """Insert with ``sql``; a row that is there already is a Conflict saying ``refusal``."""
    try:
        conn.execute(sql, params)
    except sqlite3.IntegrityError as exc:
        raise Conflict(refusal, code=code) from exc


def put_workflow(conn: sqlite3.Connection, workflow_id: str, definition: bytes, params: dict[str, Any]) -> bool:
    """Store a definition; False when the identical one (``definition``, canonical JSON) was there."""
    existing = fetch_one(conn, WORKFLOW, Q["get_workflow"], (workflow_id,))
    if existing is not None and orjson.dumps(existing.definition, option=orjson.OPT_SORT_KEYS) == definition:
        return False
    conn.execute(Q["upsert_workflow"], params)
    return True


def claim_setting(conn: sqlite3.Connection, name: str, value: str) -> str:
    """Set the setting if it is unset; the value it holds now."""
    conn.execute(Q["claim_setting"], (name, value))
    stored: str = conn.execute(Q["get_setting"], (name,)).fetchone()[0]
    return stored


def purge_runs(conn: sqlite3.Connection, before: str, tenant: str | None, limit: int, dry_run: bool) -> list[str]:
    """The ids of the runs ended before ``before`` (at most ``limit``), deleted with all they own unless ``dry_run``."""
    ids = [row[0] for row in conn.execute(Q["purgeable_runs"], (before, tenant, limit))]
    if ids and not dry_run:
        listed = orjson.dumps(ids).decode()
        for statement in _PURGES:
            conn.execute(statement, (listed,))
    return ids


def put_webhook(conn: sqlite3.Connection, tenant: str, params: dict[str, Any]) -> None:
    conn.execute(Q["insert_webhook"], params)
    forget_webhooks(tenant)


def delete_webhook(conn: sqlite3.Connection, tenant: str, webhook_id: str) -> bool:
    deleted = conn.execute(Q["delete_webhook"], (tenant, webhook_id)).rowcount > 0
    forget_webhooks(tenant)
    return deleted


def record_attempts(conn: sqlite3.Connection, rows: list[tuple[Any, ...]], ids: str) -> None:
    """Store delivery outcomes (``rows``, as ``record_attempt`` binds them; ``ids``, their ids as
    a JSON array), moving each finished stream's head on and dropping the secrets of push
    configs whose final push is done."""
    conn.executemany(Q["record_attempt"], rows)
    conn.execute(Q["promote_heads"], (ids,))
    done = conn.execute(Q["final_pushes_done"], (ids,)).fetchall()
    conn.executemany(Q["discard_push_secrets"], [(push_stream_task(key), target) for key, target in done])


def redeliver(conn: sqlite3.Connection, delivery_id: str, tenant: str | None, now: str) -> bool:
    """Put a dead delivery back in the queue; False when there is no such dead delivery (for ``tenant``)."""
    row = fetch_one(conn, DELIVERY, Q["get_delivery"], (delivery_id,))
    if row is None or row.status != "dead" or (tenant is not None and row.tenant != tenant):
        return False
    conn.execute(Q["record_attempt"], ("pending", 0, now, row.last_error, now, delivery_id))
    conn.execute(Q["redelivered_head"], (delivery_id,))
    return True


def claim_run(conn: sqlite3.Connection, params: dict[str, Any]) -> int | None:
    row = conn.execute(Q["claim_run"], params).fetchone()
    return None if row is None else int(row[0])


def renew_leases(conn: sqlite3.Connection, expires: str, owner: str, now: str) -> list[str]:
    return [r[0] for r in conn.execute(Q["renew_leases"], (expires, owner, now)).fetchall()]


def claim_effect(conn: sqlite3.Connection, params: dict[str, Any]) -> int:
    """Release the effect's unsettled attempts and claim its next one, in the writer's transaction; its number."""
    conn.execute(Q["release_effect_claims"], (params["effect_id"],))
    attempt: int = conn.execute(Q["claim_effect"], params).fetchone()[0]
    return attempt


def purge_effects(conn: sqlite3.Connection, before: str, limit: int) -> int:
    """Delete up to ``limit`` ledger rows older than ``before``; how many went."""
    deleted: int = conn.execute(Q["purge_effects"], (before, limit)).rowcount
    return deleted
