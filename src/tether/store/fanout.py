"""Who a fan-out reaches: the one matching rule both stores apply inside their write.

Each backend reads the candidates (a task's push configs, a tenant's webhooks) in its
own transaction and asks ``targets`` which of them get a delivery, and on which stream
(deliveries of one stream go out in order). The outbox worker reads a push's task back
from its stream key (``push_stream_task``), so the key's format is written and read here
only: that is why this module is public.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

from tether.store.base import Fanout, WebhookRow

__all__ = ["Target", "push_stream_task", "targets"]


class Target(NamedTuple):
    """One delivery a fan-out makes: to whom, on which ordered stream, at which URL."""

    target_id: str
    stream_key: str
    url: str


def push_stream_task(stream_key: str) -> str:
    """The task of a push stream key (``push:<task id>:<config id>``)."""
    return stream_key.split(":")[1]


def targets(fanout: Fanout, push_configs: Iterable[tuple[str, str]], webhooks: Iterable[WebhookRow]) -> list[Target]:
    """The deliveries ``fanout`` makes, given the task's push configs as (config id, url)
    (read for "a2a-push") and the tenant's webhooks (read for "webhook")."""
    if fanout.kind == "a2a-push" and fanout.task_id is not None:
        return [Target(config_id, f"push:{fanout.task_id}:{config_id}", url) for config_id, url in push_configs]
    if fanout.kind == "webhook":
        return [
            Target(hook.webhook_id, f"webhook:{hook.webhook_id}:{fanout.run_id}", hook.url)
            for hook in webhooks
            if fanout.event_type in hook.events and (not hook.tags or set(hook.tags) & set(fanout.tags))
        ]
    if fanout.kind == "callback" and fanout.url:
        return [Target(fanout.run_id, f"callback:{fanout.run_id}", fanout.url)]
    raise ValueError(f"unknown fan-out kind {fanout.kind!r}")
