"""A2A push notifications: configs per task, and the pushes a task's transitions cause.

A config's URL passes the egress guard (both arms, every resolved address) before
anything is stored; its token and credentials are sealed with the host key and never
echoed. :func:`push_projector` turns a commit that moves a task to ``input-required``
or a terminal state into an outbox fan-out in the same transaction, so a push can be
late but never lost, and never sent for a state that was not committed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson
from pydantic import BaseModel, ConfigDict, Field

from tether import clock
from tether.a2a.errors import InvalidParams
from tether.a2a.projection import INTERRUPTED, TERMINAL, status_view, task
from tether.a2a.surface import A2ASurface
from tether.a2a.tasks import A2A_TRANSPORT, context_of
from tether.egress.guard import EgressRefused
from tether.engine.driver import Projector
from tether.ids import new_id
from tether.store.base import Extra, Fanout, PushConfigRow, RunRow

__all__ = [
    "PUSH_STATES",
    "PushAuthentication",
    "PushConfigInput",
    "push_projector",
    "push_record",
    "seal_config",
    "check_push_url",
    "config_view",
]

#: the task states a push is sent for (RFC 0100 §4: the four, and auth-required/rejected if produced)
PUSH_STATES = INTERRUPTED | TERMINAL


class PushAuthentication(BaseModel):
    model_config = ConfigDict(strict=True, extra="ignore")

    schemes: list[str] = Field(min_length=1, max_length=8)
    credentials: str | None = Field(default=None, max_length=4096)


class PushConfigInput(BaseModel):
    """A ``PushNotificationConfig`` as a caller sends it."""

    model_config = ConfigDict(strict=True, extra="ignore")

    url: str = Field(min_length=1, max_length=2048)
    id: str | None = Field(default=None, min_length=1, max_length=128, pattern=r"^[A-Za-z0-9._:-]+$")
    token: str | None = Field(default=None, min_length=1, max_length=4096)
    authentication: PushAuthentication | None = None


async def check_push_url(a2a: A2ASurface, url: str) -> None:
    """Refuse a push URL the egress guard refuses (scheme arm, then every address)."""
    try:
        await a2a.guard.resolve_and_check(url)
    except EgressRefused as refused:
        raise InvalidParams(
            f"pushNotificationConfig.url refused: {refused.message}", data={"arm": refused.arm, "url": url}
        ) from refused


def seal_config(a2a: A2ASurface, task_id: str, tenant: str, config: PushConfigInput, version: str) -> PushConfigRow:
    """The row to store: secrets sealed, only a salted fingerprint of the token in clear.

    ``version``: the A2A version it was registered in; its pushes are sent in that version's shape.
    """
    box = a2a.box
    config_id = config.id or new_id("pnc_")
    auth = config.authentication
    return PushConfigRow(
        task_id=task_id,
        config_id=config_id,
        tenant=tenant,
        url=config.url,
        token_fingerprint=box.fingerprint(config.token) if config.token else None,
        token_secret=box.seal(config.token, context=f"push-token:{config_id}") if config.token else None,
        auth_schemes=list(auth.schemes) if auth else [],
        auth_secret=box.seal(auth.credentials, context=f"push-auth:{config_id}") if auth and auth.credentials else None,
        created_at=clock.now_iso(),
        version=version,
    )


def config_view(row: PushConfigRow) -> dict[str, Any]:
    """A ``TaskPushNotificationConfig`` as get/list answer it: never a token or credential."""
    config: dict[str, Any] = {"id": row.config_id, "url": row.url}
    if row.auth_schemes:
        config["authentication"] = {"schemes": list(row.auth_schemes)}
    return {"taskId": row.task_id, "pushNotificationConfig": config}


def push_record(record: Mapping[str, Any], configs: list[PushConfigRow]) -> dict[str, Any]:
    """The A2ATaskState with ``pushConfig`` (the first config: url and fingerprint only)."""
    out = dict(record)
    if configs:
        first = configs[0]
        out["pushConfig"] = {
            "url": first.url,
            **({"tokenFingerprint": first.token_fingerprint} if first.token_fingerprint else {}),
        }
    return out


def _moment(row: RunRow) -> tuple[str, str | None]:
    state = status_view(row.state)[0]
    interrupt = row.state.get("interrupt")
    return state, interrupt["interruptId"] if interrupt else None


def push_projector(body_mode: str) -> Projector:
    """The projector that enqueues a push when a task reaches a state worth telling.

    ``body_mode`` "status" sends a TaskStatusUpdateEvent (RFC 0100 §4), "task" the full
    Task (the A2A v0.3 example); either way it holds the projected state and artifact
    references only, never run inputs or history.
    """

    def project(before: RunRow | None, after: RunRow, events: list[dict[str, Any]]) -> list[Extra]:
        if after.state.get("transport") != A2A_TRANSPORT or not events:
            return []
        state, interrupt_id = _moment(after)
        if state not in PUSH_STATES:
            return []
        if before is not None and _moment(before) == (state, interrupt_id):
            return []
        context_id = context_of(after)

        def render() -> bytes:  # only when the task has a push config
            full = task(after, context_id, [])
            if body_mode == "task":
                if "artifacts" in full:  # references only: a push carries no run content
                    full["artifacts"] = [
                        {k: a[k] for k in ("artifactId", "name", "description") if k in a} | {"parts": []}
                        for a in full["artifacts"]
                    ]
                return orjson.dumps(full)
            return orjson.dumps(
                {
                    "kind": "status-update",
                    "taskId": after.run_id,
                    "contextId": context_id,
                    "status": full["status"],
                    "final": state in TERMINAL,
                    "metadata": full["metadata"],
                }
            )

        return [
            Fanout(
                kind="a2a-push",
                tenant=after.tenant,
                run_id=after.run_id,
                sequence=after.last_sequence,
                body=render,
                task_id=after.run_id,
                final=state in TERMINAL,
            )
        ]

    return project
