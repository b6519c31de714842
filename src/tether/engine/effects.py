"""The effect ledger: every attempt a run makes at an outside effect, under an identity that survives a crash.

An **effect seam** is a place where the engine touches the outside world. ``SEAMS`` lists them
all (``GET /host/effect-seams`` serves them), each with what guards it: what makes a replay,
or a restart after a crash, answer from what was recorded instead of doing it again.

Two kinds of record make up a run's ledger (``Store.list_effects``):

- the attempts the engine makes itself (a hand-off's send, its answer to a peer's question,
  its push-config registration) are claimed here before they are sent and settled after:
  ``EffectLedger.attempt``. The effect's id is derived from what it is (tenant, run, node,
  seam, ordinal), never drawn, so the host that comes back after a SIGKILL between a send
  and its record finds the same effect, claims its next attempt (the unsettled one is
  released) and presents the same provider key again: one effect, two attempts, one key;
- deliveries (webhooks, A2A pushes, run callbacks) are not written here: the outbox row of
  a delivery already is its durable, at-least-once record with a stable id, which is its
  ``Idempotency-Key`` and ``webhook-id`` on every attempt, so the store reads the ledger of
  deliveries from the outbox (one row per delivery, its latest attempt): no write is added
  to the outbox's hot path.

Keying: a delivery is keyed on its business identity (one subscriber, one event: the
delivery itself). A hand-off's requests have no business key of their own, so they are
keyed on the activity recipe (run, node, ordinal), the documented fallback.
"""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Final, Literal

from tether import clock
from tether.failpoints import hit
from tether.store.base import EffectClaim, EffectRecord, Store

__all__ = [
    "ACTIVITY_RECIPE",
    "BUSINESS_IDENTITY",
    "CALLBACK",
    "HANDOFF_PUSH_CONFIG",
    "HANDOFF_REPLY",
    "HANDOFF_SEND",
    "PUSH",
    "RETENTION_DAYS",
    "SEAMS",
    "WEBHOOK",
    "EffectAttempt",
    "EffectLedger",
    "Seam",
    "effect_id",
]

BUSINESS_IDENTITY: Final = "business-identity"
ACTIVITY_RECIPE: Final = "activity-recipe"
#: ledger rows are kept at least this long, whatever the run's own retention window
RETENTION_DAYS: Final = 14

HANDOFF_SEND: Final = "a2a.handoff.send"
HANDOFF_REPLY: Final = "a2a.handoff.reply"
HANDOFF_PUSH_CONFIG: Final = "a2a.handoff.push-config"
WEBHOOK: Final = "openwop.webhook.delivery"
PUSH: Final = "a2a.push.delivery"
CALLBACK: Final = "openwop.callback.delivery"

Kind = Literal["http", "queue", "storage", "provider-sdk", "webhook-fanout"]


@dataclass(frozen=True, slots=True)
class Seam:
    """One row of the effect-seam manifest."""

    seam: str
    kind: Kind
    #: what records the outcome so that a replay (or a restart) does not fire it again
    guarded_by: str
    #: a ``branch`` fork runs the nodes after its fork point anew, so it fires this seam again
    branch_re_fires: bool
    note: str


_HANDOFF_LOG = "tether.engine.handoff (the peer's task is recorded in the run's log, a2a.handoff.accepted"
_OUTBOX = "tether.egress.outbox (a delivery is enqueued by the commit of the event that causes it"

#: every outbound effect path of the engine, in the order the manifest lists them (the first is the one
#: the conformance seam ``effect-seams/fire`` drives without a receiver of the suite's: a run's callback)
SEAMS: Final[tuple[Seam, ...]] = (
    Seam(
        CALLBACK,
        "http",
        f"{_OUTBOX}; fixed history enqueues nothing)",
        True,
        "A run's callbackUrl delivery; Idempotency-Key is the delivery's id.",
    ),
    Seam(
        HANDOFF_SEND,
        "http",
        f"{_HANDOFF_LOG}; the effect ledger)",
        True,
        "A hand-off's SendMessage to its peer; messageId and Idempotency-Key derived from the run and node.",
    ),
    Seam(
        HANDOFF_REPLY,
        "http",
        f"{_HANDOFF_LOG} and a2a.handoff.replied; the effect ledger)",
        True,
        "A local answer to the peer's question, forwarded to it; one key per answer.",
    ),
    Seam(
        HANDOFF_PUSH_CONFIG,
        "http",
        f"{_HANDOFF_LOG}; the effect ledger; a fork never inherits push configs)",
        True,
        "The hand-off's push-config registration at its peer, asked again after each restart.",
    ),
    Seam(
        WEBHOOK,
        "webhook-fanout",
        f"{_OUTBOX}; fixed history enqueues nothing)",
        True,
        "OpenWOP webhook deliveries (v1 and v2); Idempotency-Key and webhook-id are the delivery's id.",
    ),
    Seam(
        PUSH,
        "webhook-fanout",
        f"{_OUTBOX}; fixed history enqueues nothing)",
        True,
        "A2A push notifications to registered push configs; Idempotency-Key is the delivery's id.",
    ),
)


def effect_id(tenant: str, run_id: str, node_id: str, seam: str, ordinal: int = 1) -> str:
    """The opaque id of one effect (``eff_`` and 32 hex digits): the same on every host and after any crash."""
    material = f"tether:effect:v1\0{tenant}\0{run_id}\0{node_id}\0{seam}\0{ordinal}"
    return "eff_" + hashlib.sha256(material.encode()).hexdigest()[:32]


@dataclass(frozen=True, slots=True)
class EffectAttempt:
    """A claimed attempt: the effect, its number, and the key it presents."""

    effect_id: str
    number: int
    provider_key: str


class EffectLedger:
    """Claims and settles the attempts the engine makes itself; reads a run's ledger."""

    def __init__(self, store: Store) -> None:
        self._store = store

    @asynccontextmanager
    async def attempt(
        self,
        tenant: str,
        run_id: str,
        node_id: str,
        seam: str,
        provider_key: str,
        *,
        ordinal: int = 1,
        keying: str = ACTIVITY_RECIPE,
    ) -> AsyncIterator[EffectAttempt]:
        """Claim the next attempt of an effect for the block that sends it; settle it by how the block ends.

        The claim is written before the block runs (before anything leaves the host). A block
        that returns settles it ``completed``; one that raises settles it ``released`` (the
        provider gave no answer, or refused). A host that dies inside, or stops (the block is
        cancelled), leaves it claimed: whether the provider had it is unknown, and the next
        attempt releases it.
        """
        ident = effect_id(tenant, run_id, node_id, seam, ordinal)
        claim = EffectClaim(ident, tenant, run_id, node_id, seam, keying, provider_key, clock.now_iso())
        number = await self._store.claim_effect(claim)
        hit("effects.claimed")
        try:
            yield EffectAttempt(ident, number, provider_key)
        except Exception:
            await self._store.settle_effect(ident, number, "released")
            raise
        await self._store.settle_effect(ident, number, "completed")
        hit("effects.settled")

    async def recorded(self, run_id: str, node_id: str | None = None) -> list[EffectRecord]:
        """The ledger of ``run_id`` (of one node when given), oldest first: what a replay answers from."""
        rows = await self._store.list_effects(run_id)
        return rows if node_id is None else [r for r in rows if r.node_id == node_id]
