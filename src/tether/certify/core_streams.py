"""``openwop-core-standard``'s long floor files: durable webhook delivery and SSE resumption."""

from __future__ import annotations

import math
import time
from typing import Any

from tether.certify._driver import (
    FOREIGN_RUN_ID,
    NOOP,
    base36,
    code_of,
    created,
    noop_settled,
    poll,
    settled,
    subscribe,
)
from tether.certify.core_standard import PROFILE
from tether.certify.ledger import Check, Failed, Leg
from tether.certify.session import Attempt, WebhookReceiver, enc, project, wait_for


class _Exercise:
    """One leg's scoped receiver path, subscription and run; unregistered and closed when the leg ends."""

    def __init__(self, leg: Leg, drv: Any, receiver: WebhookReceiver, fail_first: float) -> None:
        self.leg, self.drv, self.receiver = leg, drv, receiver
        self.path = receiver.exercise(fail_first)
        self.webhook_id = ""
        self.run_id = ""

    def __enter__(self) -> _Exercise:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.webhook_id:
            self.drv.delete(f"/webhooks/{enc(self.webhook_id)}")
        self.receiver.close(self.path)

    def register(self, events: list[str]) -> None:
        self.webhook_id = _register(self.leg, self.drv, self.receiver.url(self.path), events)

    def run(self, timeout: float = 10.0) -> None:
        self.run_id = created(self.drv, {"workflowId": NOOP})
        settled(self.drv, self.run_id, timeout=timeout)

    def ours(self) -> list[Attempt]:
        return [
            a for a in self.receiver.attempts(self.path) if a.run_id == self.run_id and a.webhook_id == self.webhook_id
        ]


def _bare(value: str) -> str:
    """The part of an id after its tenant."""
    return value.partition("/")[2] if "/" in value else value


def _register(leg: Leg, drv: Any, url: str, events: list[str]) -> str:
    answer = drv.post("/webhooks", json={"url": url, "events": events})
    if answer.status_code == 400 and code_of(answer) == "webhook_url_rejected":
        leg.blocked(f"the host refused the receiver {url} (its egress guard is on): {answer.text[:200]}")
    leg.equal(answer.status_code, 201, "registering a webhook")
    webhook_id: str = answer.json()["webhookId"]
    return webhook_id


def _exhausted(leg: Leg, ex: _Exercise, max_attempts: Any, wait: float) -> list[dict[str, Any]]:
    """A delivery that never succeeds is retried, stops at ``maxAttempts`` and is listed as a dead letter."""
    wait_for(lambda: len(ex.ours()) > 1, timeout=wait, what="a 500 to be retried")
    if isinstance(max_attempts, int):
        wait_for(lambda: len(ex.ours()) >= max_attempts, timeout=wait, what="maxAttempts attempts")

    def listed() -> list[dict[str, Any]] | None:
        page = ex.drv.get(f"/webhooks/{project(ex.webhook_id)}/dead-letters")
        if page.status_code != 200:
            raise Failed(f"the dead-letter read answered {page.status_code}")
        leg.valid("v2/webhook-dead-letter-page", page.json(), "the dead-letter page")
        rows: list[dict[str, Any]] = page.json()["deliveries"]
        return rows if any(row.get("runId") == ex.run_id for row in rows) else None

    rows = wait_for(listed, timeout=1.0, what="the exhausted delivery in the dead-letter read")
    leg.expect(len(ex.ours()) > 1, "a failing delivery is retried")
    if isinstance(max_attempts, int):
        leg.expect(len(ex.ours()) <= max_attempts, f"retries stop at maxAttempts ({max_attempts})")
    return rows


def webhook_durable_delivery(leg: Leg) -> None:
    """A 500 is retried with widening gaps; a delivery that never lands is dead-lettered and readable (without body,
    headers or secret); an unregistered subscription reads 404; every subscribed event of a run arrives."""
    doc = leg.session.discovery()
    family = doc.get("webhooks")
    if not isinstance(family, dict):
        leg.inapplicable("the webhooks family is not advertised")
    receiver = leg.session.receiver
    if receiver is None:
        leg.blocked("no webhook receiver the host can reach was given (--receiver-listen, --receiver-url)")
    policy = family.get("retryPolicy") or {}
    max_attempts = policy.get("maxAttempts")
    fail_first = 2 if not isinstance(max_attempts, int) else max(1, min(2, max_attempts - 1))
    wait = 90.0 if policy.get("backoff") in ("exponential", "fixed") else 20.0
    leg.expect(family.get("deadLetter"), "the deadLetter facet is advertised")
    with leg.session.client(leg.session.key) as drv:
        with _Exercise(leg, drv, receiver, fail_first) as first:
            first.register(["run.completed"])
            first.run()
            wait_for(lambda: any(a.status == 204 for a in first.ours()), timeout=wait, what="the retry to land")
            attempts = first.ours()
            leg.expect(len(attempts) > 1, "a 500 is retried")
            by_key: dict[str, list[float]] = {}
            for attempt in attempts:
                by_key.setdefault(attempt.key, []).append(attempt.at)
            for times in by_key.values():
                gaps = [b - a for a, b in zip(times, times[1:])]
                leg.expect(all(g > 0 for g in gaps), f"retries are spaced: {gaps}")
                if policy.get("backoff") == "exponential" and len(times) >= 3:
                    leg.expect(gaps[1] - gaps[0] >= 0.25 * gaps[0], f"exponential gaps widen: {gaps}")
            leg.equal(drv.delete(f"/webhooks/{enc(first.webhook_id)}").status_code, 204, "unregistering")
            first.webhook_id = ""
        with _Exercise(leg, drv, receiver, math.inf) as never:
            never.register(["run.completed"])
            never.run()
            rows = _exhausted(leg, never, max_attempts, wait)
            leg.expect(rows, "the exhausted delivery is listed")
            leg.expect(all(not {"body", "headers", "secret"} & set(row) for row in rows), "dead letters hold no body")
        webhook_id = _register(leg, drv, "https://subscriber.invalid/hook", ["run.completed"])
        leg.expect("/" in webhook_id, f"{webhook_id!r} is tenant-bound")
        live = drv.get(f"/webhooks/{project(webhook_id)}/dead-letters")
        leg.equal(drv.delete(f"/webhooks/{enc(webhook_id)}").status_code, 204, "unregistering")
        leg.equal(live.status_code, 200, "the dead-letter read of an unreachable subscription")
        leg.valid("v2/webhook-dead-letter-page", live.json(), "the dead-letter page")
        after = drv.get(f"/webhooks/{project(webhook_id)}/dead-letters")
        never_id = f"{webhook_id.partition('/')[0]}/never-{base36(time.time_ns() // 1_000_000)}0123abcd"
        unknown = drv.get(f"/webhooks/{project(never_id)}/dead-letters")
        leg.equal((after.status_code, code_of(after)), (404, "not_found"), "an unregistered subscription's read")
        leg.equal((after.status_code, code_of(after)), (unknown.status_code, code_of(unknown)), "as an unknown one")
        wanted_types = ["run.started", "node.started", "node.completed", "run.completed"]
        with _Exercise(leg, drv, receiver, 0) as healthy:
            healthy.register(wanted_types)
            healthy.run(timeout=30.0)
            want = {e["sequence"] for e in poll(drv, healthy.run_id)["events"] if e["type"] in wanted_types}
            leg.expect(want, "the run logged subscribed events")
            path, run_id, webhook_id = healthy.path, _bare(healthy.run_id), _bare(healthy.webhook_id)

            def delivered() -> set[int | None]:
                return {
                    a.sequence
                    for a in receiver.attempts(path)
                    if a.run_id and _bare(a.run_id) == run_id and _bare(a.webhook_id) == webhook_id
                }

            wait_for(
                lambda: not want - delivered(),
                timeout=wait,
                what="every subscribed event delivered",
            )


def sse_last_event_id(leg: Leg) -> None:
    """Numeric rising ids, server close; ``Last-Event-ID`` resumes exclusively; the last id yields nothing; a bogus
    mode names ``values``, whose stream opens with ``state.snapshot``."""
    session, key = leg.session, leg.session.key
    with session.client(key) as drv:
        run_id = noop_settled(drv)
        path = f"/runs/{enc(run_id)}/events?streamMode=debug"
        full = subscribe(session, key, path)
        leg.expect(full.status == 200 and full.frames and full.closed_by == "server", "the stream is served and closed")
        ids = full.ids
        leg.equal(len(ids), len(full.frames), "every frame carries an integer id")
        leg.expect(ids == sorted(ids) and len(set(ids)) == len(ids), "ids rise strictly")
        resumed = subscribe(session, key, path, last_event_id=str(ids[0]))
        leg.equal(resumed.status, 200, "the resumed stream")
        leg.equal(resumed.ids, [i for i in ids if i > ids[0]], "Last-Event-ID resumes after it")
        tail = subscribe(session, key, path, last_event_id=str(ids[-1]))
        leg.expect(
            tail.status == 200 and tail.frames == [] and tail.closed_by == "server", "the last id yields nothing"
        )
        bogus = drv.get(f"/runs/{enc(run_id)}/events?streamMode=bogus", headers={"Accept": "text/event-stream"})
        supported = (bogus.json().get("details") or {}).get("supported") or []
        if "values" not in supported:
            leg.inapplicable("leg 4 needs the values mode")
        values = subscribe(session, key, f"/runs/{enc(run_id)}/events?streamMode=values", last_event_id=str(ids[0]))
        leg.equal(values.status, 200, "the values stream")
        leg.expect(values.frames and values.frames[0].get("event") == "state.snapshot", "values opens with a snapshot")


def sse_last_event_id_cursor(leg: Leg) -> None:
    """``Last-Event-ID`` past the log: 200, nothing; ``abc``: 400 or accepted; an unknown, a forged foreign and tenant
    B's run are refused the same with a cursor as without (the header is read after authorization)."""
    session, key = leg.session, leg.session.key
    if session.tenant_b_key is None:
        leg.blocked("no second tenant's key (--tenant-b-key)")
    with session.client(key) as drv:

        def answer(path: str, last: str | None = None) -> tuple[int, Any]:
            probe = subscribe(session, key, path, timeout=5.0, last_event_id=last)
            if probe.status == 200:
                return 200, None
            headers = {"Accept": "text/event-stream", **({"Last-Event-ID": last} if last is not None else {})}
            return probe.status, code_of(drv.get(path, headers=headers))

        run_id = noop_settled(drv)
        path = f"/runs/{enc(run_id)}/events?streamMode=debug"
        full = subscribe(session, key, path)
        if full.status != 200 or not full.ids:
            leg.blocked("no numbered frames")
        past = subscribe(session, key, path, last_event_id=str(max(full.ids) + 1000))
        leg.expect(past.status == 200 and past.frames == [] and past.closed_by == "server", "a cursor past the log")
        status, code = answer(path, "abc")
        leg.expect(status == 200 or (status, code) == (400, "validation_error"), "a malformed cursor")
        unknown = f"{run_id.partition('/')[0]}/openwopconformanceunknown{base36(time.time_ns() // 1_000_000)}"
        with session.client(session.tenant_b_key) as b:
            theirs = noop_settled(b)
        if theirs.partition("/")[0] == run_id.partition("/")[0]:
            leg.blocked("tenant B's key acts for the same tenant")
        for other, cursors in ((unknown, ["0"]), (FOREIGN_RUN_ID, ["0"]), (theirs, ["0", "1000"])):
            other_path = f"/runs/{enc(other)}/events?streamMode=debug"
            without = answer(other_path)
            leg.expect(without[0] != 200, f"{other} is refused")
            for cursor in cursors:
                leg.equal(answer(other_path, cursor), without, f"{other} with Last-Event-ID {cursor}")


CHECKS = (
    Check("v2-webhook-durable-delivery", PROFILE, webhook_durable_delivery),
    Check("v2-sse-last-event-id", PROFILE, sse_last_event_id),
    Check("v2-sse-last-event-id-cursor", PROFILE, sse_last_event_id_cursor),
)
