"""The delivery worker: sends what the outbox holds, at least once, in order per stream.

Rows are written by the transactions that cause them (a task reaching
``input-required``, a run event a webhook subscribed to). This worker sends the head
of each stream when it is due, records every attempt, retries on a jittered ladder
(connection errors, timeouts, 3xx, 408, 429 and 5xx; ``Retry-After`` honoured) and
dead-letters a delivery when the ladder is spent or the receiver refuses it outright.
It sleeps until the next due time or a wake-up: an idle outbox costs nothing.

It is a pipeline, not a loop of batches: a feeder claims due stream heads while there is
room, each delivery is sent as soon as its destination has a free slot (``_destinations``:
per-destination concurrency and backoff, so a slow receiver holds only its own slots),
and a recorder writes outcomes as they come: each write takes every outcome waiting, and
the next one starts while it commits. Batches of 64 that waited for their slowest member,
one write per attempt and a new TLS connection per delivery kept it near 50 deliveries/s.

Traces on, each attempt is a client span in the trace of the run it reports on
(``_traces``), and the request carries that span's ``traceparent``, so the receiver's work
joins the run's trace. Traces off, nothing of this runs.

Order: only a stream's head is ever due, and a head stays claimed (and pending) until its
outcome is written, so a stream has one delivery in flight at a time and a task's
``completed`` never overtakes its ``input-required``. At least once: a delivery is marked
delivered only after the receiver answered 2xx; a crash before that write sends it again,
with the same ``webhook-id``.
"""

from __future__ import annotations

import asyncio
import email.utils
import logging
import random
import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import TYPE_CHECKING, Any, NamedTuple

import httpx
import orjson
from cryptography.exceptions import InvalidTag

from tether import clock, tracing
from tether.egress._destinations import HOST_FAILURES, Destination, Destinations
from tether.egress._traces import DeliveryTraces
from tether.egress.signing import sign_webhook
from tether.egress.transport import EgressClient
from tether.errors import TetherError
from tether.failpoints import hit
from tether.secrets import SecretBox
from tether.store.base import Attempt, DeliveryRow, PushConfigRow, Store, WebhookRow
from tether.store.fanout import push_stream_task

if TYPE_CHECKING:
    from opentelemetry.trace import Span

log = logging.getLogger("tether.outbox")

DEFAULT_SCHEDULE = "5s,30s,2m,10m,1h,4h,12h"
_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
_DELAY = re.compile(r"^(\d+(?:\.\d+)?)(ms|s|m|h)$")
_MAX_RETRY_AFTER = 12 * 3600.0
#: an attempt's outcome as metrics name it, by the status it leaves its delivery in
_OUTCOMES = {"delivered": "delivered", "pending": "retry", "dead": "dead"}


@dataclass(frozen=True, slots=True)
class RetrySchedule:
    """Delays before each retry; after the last one a delivery is dead-lettered."""

    delays: tuple[float, ...]
    #: each delay is drawn within ± this fraction of itself, so retries of many deliveries spread out
    jitter: float = 0.2

    @classmethod
    def parse(cls, text: str) -> RetrySchedule:
        delays = []
        for part in text.split(","):
            match = _DELAY.match(part.strip())
            if match is None:
                raise ValueError(f"bad retry delay {part.strip()!r}: write e.g. 500ms, 5s, 2m or 1h")
            delays.append(float(match.group(1)) * _UNITS[match.group(2)])
        if not delays:
            raise ValueError("the retry schedule needs at least one delay")
        return cls(tuple(delays))

    def delay(self, attempt: int) -> float | None:
        """Seconds to wait after failed attempt number ``attempt`` (1-based), None when spent."""
        if attempt > len(self.delays):
            return None
        return self.delays[attempt - 1] * random.uniform(1 - self.jitter, 1 + self.jitter)


def _retry_after(response: httpx.Response) -> float | None:
    raw = response.headers.get("retry-after")
    if raw is None:
        return None
    if raw.strip().isdigit():
        return min(float(raw.strip()), _MAX_RETRY_AFTER)
    try:
        when = email.utils.parsedate_to_datetime(raw)
    except (TypeError, ValueError):
        return None
    return min(max((when - clock.now()).total_seconds(), 0.0), _MAX_RETRY_AFTER)


#: a push's body and media type for the config it goes to (its stored body is the canonical 0.3 one)
PushBody = Callable[[PushConfigRow, bytes], tuple[bytes, str]]


def as_stored(config: PushConfigRow, body: bytes) -> tuple[bytes, str]:
    return body, "application/json"


@dataclass(frozen=True, slots=True)
class WebhookDelivery:
    """A webhook delivery as the major its subscription was registered under sends it."""

    body: bytes
    #: the subscription id as its receiver knows it (``X-openwop-Webhook-Id``)
    webhook_id: str
    #: the event type as that major names it (``X-openwop-Event-Type``)
    event_type: str
    #: 2 also sends the ``OpenWOP-*`` twin of every ``X-openwop-*`` header
    major: int = 1
    #: the subscription's own retry ladder (its major's advertised policy), on which every failed
    #: attempt is retried; None: the host's ladder, on which a receiver's refusal (4xx) is final
    schedule: RetrySchedule | None = None


#: a webhook delivery for the subscription it goes to (its stored body is major 1's)
WebhookBody = Callable[[WebhookRow, bytes], WebhookDelivery]


def webhook_as_stored(hook: WebhookRow, body: bytes) -> WebhookDelivery:
    event: dict[str, Any] = orjson.loads(body).get("event", {})
    return WebhookDelivery(body, hook.webhook_id, str(event.get("type", "")))


@dataclass(frozen=True, slots=True)
class _Outcome:
    delivered: bool
    retryable: bool
    error: str | None = None
    retry_after: float | None = None
    #: the receiver did not answer, or answered 408, 429 or 5xx: its destination backs off
    receiver_failed: bool = False
    #: the HTTP status the receiver answered with (None: no answer, or never sent)
    status: int | None = None
    #: the ladder a failed attempt is retried on, when its subscription has its own
    schedule: RetrySchedule | None = None


class _Prepared(NamedTuple):
    """One attempt's headers and body, and the retry ladder of its subscription if it has its own."""

    headers: dict[str, str]
    body: bytes
    schedule: RetrySchedule | None = None


#: deliveries claimed at most per store read
_FETCH = 256

#: a delivery whose subscription was not read with its batch: ``_prepare`` reads it
_UNREAD = object()
#: what a delivery is sent for: its push configs (by task) or its webhook, as read when it was claimed
_Subscription = list[PushConfigRow] | WebhookRow | None
#: the key a subscription is read by: ("a2a-push", task id) or ("webhook", webhook id)
_Key = tuple[str, str]


def _subscription_key(row: DeliveryRow) -> _Key | None:
    if row.kind == "a2a-push":
        return row.kind, push_stream_task(row.stream_key)
    if row.kind == "webhook":
        return row.kind, row.target_id
    return None


#: outcomes written at most per store write
_RECORD = 1024


class OutboxWorker:
    """Owns the outbox's sending side for one process.

    Parameters:
        concurrency: deliveries at once to one destination (host and port), each from its send
            until its outcome is written. A crash re-sends those of them the receiver had
            answered, so it also bounds what one receiver gets again.
        capacity: deliveries held at once, all destinations together (sending, waiting for a
            slot, or waiting for their outcome to be written).
        owner: this host's name in delivery claims (several hosts on one PostgreSQL).
        fallback: on a shared store, look at least this often (other hosts enqueue too).
        claim_seconds: how long a claimed delivery is this host's; past it another host may
            send it (at least once), so it is well above the longest exchange.
        recording: outcome writes in flight at once (None: no bound). An outcome waits only
            for a free write, never for the writes before it to commit: a receipt (the
            receiver's 2xx) the store does not have yet when the host dies is sent again.
    """

    def __init__(
        self,
        store: Store,
        client: httpx.AsyncClient,
        box: SecretBox,
        schedule: RetrySchedule,
        *,
        concurrency: int = 16,
        capacity: int = 512,
        owner: str = "local",
        fallback: float | None = None,
        claim_seconds: float = 60.0,
        recording: int | None = None,
        push_body: PushBody = as_stored,
        webhook_body: WebhookBody = webhook_as_stored,
    ) -> None:
        self.owner = owner
        #: told ``(kind, outcome)`` of each delivery attempt sent: delivered, retry or dead (metrics)
        self.on_attempt: Callable[[str, str], None] | None = None
        #: renders a push in the version its config was registered in (given by the composition root)
        self.push_body = push_body
        #: renders a webhook delivery in the major its subscription was registered under
        self.webhook_body = webhook_body
        self.fallback = fallback
        self.store = store
        self.client = client
        self.box = box
        self.schedule = schedule
        self._capacity = capacity
        self._claim_seconds = claim_seconds
        self._recording = recording
        self._destinations = Destinations(concurrency)
        self._wake = asyncio.Event()
        #: claimed deliveries whose outcome is not written yet
        self._held: set[str] = set()
        self._outcomes: asyncio.Queue[Attempt] = asyncio.Queue()
        #: each sent delivery's slot waits on its future until the outcome is written
        self._written: dict[str, asyncio.Future[None]] = {}
        self._sending: set[asyncio.Task[None]] = set()
        #: traces on: the client span of each attempt
        self._traces = DeliveryTraces(store)

    def wake(self) -> None:
        """Something was enqueued: look now instead of at the next due time."""
        self._wake.set()

    async def run(self) -> None:
        """Deliver until cancelled; a failing store read or write is logged and retried, never fatal."""
        recorder = asyncio.create_task(self._record(), name="tether-outbox-recorder")
        released = False
        try:
            while True:
                try:
                    if not released:
                        await self.store.release_claims(self.owner)
                        released = True
                    await self._feed()
                except asyncio.CancelledError:
                    raise
                except Exception:
                    log.exception("the outbox worker failed a cycle; retrying in 1 s")
                    await asyncio.sleep(1.0)
        finally:
            for task in list(self._sending):
                task.cancel()
            await asyncio.gather(*self._sending, return_exceptions=True)
            recorder.cancel()
            await asyncio.gather(recorder, return_exceptions=True)

    async def _feed(self) -> None:
        """Claim due heads while there is room; sleep until the next due time, a wake-up or room."""
        while True:
            self._wake.clear()
            room = min(self._capacity - len(self._held), _FETCH)
            if room > 0:
                due = await self.store.due_deliveries(
                    clock.now_iso(), room, owner=self.owner, claim_seconds=self._claim_seconds
                )
                if due:
                    hit("outbox.claimed")
                subscriptions = await self._subscriptions(due)
                for row in due:
                    key = _subscription_key(row)
                    self._dispatch(row, subscriptions[key] if key in subscriptions else _UNREAD)
                if len(due) == room:
                    continue
                next_at = await self.store.next_delivery_at()
                timeout = None if next_at is None else max((clock.parse(next_at) - clock.now()).total_seconds(), 0.0)
            else:
                timeout = None  # full: the recorder wakes us when outcomes are written
            if self.fallback is not None:
                timeout = self.fallback if timeout is None else min(timeout, self.fallback)
            try:
                # asyncio.timeout, not wait_for: on 3.11 wait_for can swallow a cancellation that lands as
                # the wake-up does (the recorder sets it often), and then the worker never stops
                async with asyncio.timeout(timeout):
                    await self._wake.wait()
            except TimeoutError:
                pass

    async def _subscriptions(self, due: list[DeliveryRow]) -> dict[_Key, _Subscription]:
        """The push configs and webhooks of a claimed batch, each read once (not once per delivery).

        Ten webhooks watching every run make ten reads per batch of 256, not 256. A row whose
        read failed is left out: it reads its own when it is sent, as it would have anyway.
        """
        keys = {key for row in due if (key := _subscription_key(row)) is not None}
        if not keys:
            return {}
        ordered = list(keys)

        async def read(key: _Key) -> _Subscription:
            if key[0] == "a2a-push":
                return await self.store.list_push_configs(key[1])
            return await self.store.get_webhook(key[1])

        found = await asyncio.gather(*(read(key) for key in ordered), return_exceptions=True)
        return {key: value for key, value in zip(ordered, found, strict=True) if not isinstance(value, BaseException)}

    def _dispatch(self, row: DeliveryRow, subscription: _Subscription | object) -> None:
        """Send ``row`` when its destination has a slot, or put it off while that one is busy."""
        self._held.add(row.delivery_id)
        destination = self._destinations.of(row.url)
        now_mono = asyncio.get_running_loop().time()
        later = self._destinations.paused_until((row.kind, row.target_id), now_mono) or destination.busy_until(now_mono)
        if later is not None:
            wait = later - asyncio.get_running_loop().time()
            now = clock.now()
            self._outcomes.put_nowait(
                Attempt(
                    row.delivery_id,
                    "pending",
                    row.attempts,
                    clock.iso(now + timedelta(seconds=wait)),
                    row.last_error,
                    clock.iso(now),
                )
            )
            return
        destination.load += 1
        task = asyncio.create_task(self._deliver(row, destination, subscription))
        self._sending.add(task)
        task.add_done_callback(self._sending.discard)

    async def _deliver(self, row: DeliveryRow, destination: Destination, subscription: _Subscription | object) -> None:
        span = None
        try:
            async with destination.slots:
                if tracing.tracer() is not None:
                    span = await self._traces.start(row)
                outcome = await self._send(row, subscription, span)
                attempt = self._attempted(row, destination, outcome)
                # the slot is let go once the outcome is on disk, not when the answer came: a
                # receipt still in memory is sent again after a crash, so what one destination
                # can get again stays bounded by its slots however slowly the store commits
                written = asyncio.get_running_loop().create_future()
                self._written[attempt.delivery_id] = written
                self._outcomes.put_nowait(attempt)
                await written
        except BaseException:
            if span is not None:
                span.end()
            raise
        finally:
            destination.load -= 1
        if self.on_attempt is not None:
            self.on_attempt(row.kind, _OUTCOMES[attempt.status])
        if span is not None:
            self._traces.finish(span, _OUTCOMES[attempt.status], outcome.status)

    def _attempted(self, row: DeliveryRow, destination: Destination, outcome: _Outcome) -> Attempt:
        """What ``outcome`` tells the destination's and the subscriber's back-off, and the attempt to write."""
        now = asyncio.get_running_loop().time()
        if outcome.delivered:
            destination.succeeded(now)
            self._destinations.subscriber_succeeded((row.kind, row.target_id))
        elif outcome.receiver_failed:
            if outcome.status is None or outcome.status in HOST_FAILURES:
                destination.failed(now)
            else:  # the host answered, for this subscriber's endpoint: only it waits
                self._destinations.subscriber_failed((row.kind, row.target_id), now)
        return self._attempt(row, outcome)

    def _attempt(self, row: DeliveryRow, outcome: _Outcome) -> Attempt:
        attempts = row.attempts + 1
        now = clock.now()
        if outcome.delivered:
            status, next_at = "delivered", now
        else:
            delay = (outcome.schedule or self.schedule).delay(attempts) if outcome.retryable else None
            if delay is not None and outcome.retry_after is not None:
                delay = max(delay, outcome.retry_after)
            status, next_at = ("pending", now + timedelta(seconds=delay)) if delay is not None else ("dead", now)
            log.warning(
                "delivery %s attempt %d to %s failed: %s (%s)",
                row.delivery_id,
                attempts,
                row.url,
                outcome.error,
                status,
            )
        return Attempt(row.delivery_id, status, attempts, clock.iso(next_at), outcome.error, clock.iso(now))

    async def _record(self) -> None:
        """Write outcomes as they come: each write takes every outcome waiting and starts at
        once (or when a write is free, if ``recording`` bounds them), while others commit.

        One write at a time made each outcome wait for the write before it to commit, then for
        its own: under load, receipts spent most of their unwritten time in this queue, and a
        crash sent them all again.
        """
        free = asyncio.Semaphore(self._recording) if self._recording is not None else None
        writes: set[asyncio.Task[None]] = set()
        try:
            while True:
                first = await self._outcomes.get()
                if free is not None:
                    await free.acquire()
                batch = [first]
                while len(batch) < _RECORD and not self._outcomes.empty():
                    batch.append(self._outcomes.get_nowait())
                write = asyncio.create_task(self._write(batch, free))
                writes.add(write)
                write.add_done_callback(writes.discard)
        finally:
            for write in writes:
                write.cancel()
            await asyncio.gather(*writes, return_exceptions=True)

    async def _write(self, batch: list[Attempt], free: asyncio.Semaphore | None) -> None:
        """One store write of ``batch``, retried until it is written; then its deliveries are let go."""
        try:
            while True:
                try:
                    hit("outbox.receipt.before")
                    await self.store.record_attempts(batch)
                    hit("outbox.receipt.after")
                    break
                except asyncio.CancelledError:
                    raise
                except Exception:
                    log.exception("the outbox could not record %d attempts; retrying in 1 s", len(batch))
                    await asyncio.sleep(1.0)
        finally:
            if free is not None:
                free.release()
        for attempt in batch:
            self._held.discard(attempt.delivery_id)
            written = self._written.pop(attempt.delivery_id, None)
            if written is not None and not written.done():
                written.set_result(None)
        self._wake.set()

    async def _send(
        self, row: DeliveryRow, subscription: _Subscription | object = _UNREAD, span: Span | None = None
    ) -> _Outcome:
        """One attempt; ``span`` (traces on) is the attempt's client span, whose ``traceparent`` it sends."""
        try:
            prepared = await self._prepare(row, subscription)
        except LookupError as exc:  # it can never be sent: dead at once
            return _Outcome(False, False, str(exc))
        except InvalidTag:
            return _Outcome(
                False,
                False,
                "its secret was sealed with another host key: every host of one database needs the same "
                "--secret-key-file",
            )
        if prepared is None:
            return _Outcome(False, False, "its subscription no longer exists")
        headers, body, schedule = prepared
        if span is not None:
            headers["traceparent"] = tracing.span_traceparent(span)
        hit("outbox.send.before")
        outcome = await self._post(row.url, body, headers)
        if outcome.delivered and row.kind == "a2a-push":
            hit("outbox.push.answered")
        elif outcome.delivered:
            hit("outbox.webhook.answered")
        if schedule is not None and not outcome.delivered:
            # a subscription with a ladder of its own (OpenWOP v2) retries every failed attempt on it, refusals too
            outcome = replace(outcome, retryable=True, schedule=schedule)
        return outcome

    async def _post(self, url: str, body: bytes, headers: dict[str, str]) -> _Outcome:
        """Send one attempt and judge the answer: 2xx delivered; 3xx, 408, 429, 5xx and no answer retried."""
        try:
            if isinstance(self.client, EgressClient):  # the host's client; tests may hand in a plain one
                response = await self.client.deliver(url, body, headers)
            else:
                response = await self.client.post(url, content=body, headers=headers)
        except TetherError as exc:  # the egress guard refused the target at delivery time
            return _Outcome(False, True, f"refused by the egress guard: {exc.message}")
        except httpx.TimeoutException:
            return _Outcome(False, True, "timed out", receiver_failed=True)
        except httpx.HTTPError as exc:
            return _Outcome(False, True, f"{type(exc).__name__}: {exc}", receiver_failed=True)
        status = response.status_code
        if 200 <= status < 300:
            return _Outcome(True, False, status=status)
        if 300 <= status < 400:
            return _Outcome(False, True, f"HTTP {status}: redirects are never followed", status=status)
        if status in (408, 429) or status >= 500:
            return _Outcome(False, True, f"HTTP {status}", _retry_after(response), receiver_failed=True, status=status)
        return _Outcome(False, False, f"HTTP {status}: the receiver refused the delivery", status=status)

    async def _prepare(self, row: DeliveryRow, subscription: _Subscription | object = _UNREAD) -> _Prepared | None:
        """Headers and body of one attempt; secrets are opened here and nowhere else.

        ``subscription`` is the row's push configs or webhook as read when it was claimed, or
        ``_UNREAD``: then it is read now.
        """
        # the delivery is the effect: its id is its key on every attempt (Idempotency-Key, and webhook-id for webhooks)
        headers = {
            "Content-Type": "application/json",
            "webhook-id": row.delivery_id,
            "Idempotency-Key": row.delivery_id,
            "User-Agent": "tether-outbox/1",
        }
        if row.kind == "a2a-push":
            configs = subscription if isinstance(subscription, list) else None
            if subscription is _UNREAD:
                configs = await self.store.list_push_configs(push_stream_task(row.stream_key))
            config = next((c for c in configs or () if c.config_id == row.target_id), None)
            if config is None:
                return None
            if config.token_secret is not None:
                headers["X-A2A-Notification-Token"] = self.box.open(
                    config.token_secret, context=f"push-token:{config.config_id}"
                )
            if config.auth_secret is not None and config.auth_schemes:
                credentials = self.box.open(config.auth_secret, context=f"push-auth:{config.config_id}")
                headers["Authorization"] = f"{config.auth_schemes[0]} {credentials}"
            body, headers["Content-Type"] = self.push_body(config, row.body)
            return _Prepared(headers, body)
        if row.kind == "webhook":
            hook = subscription if isinstance(subscription, WebhookRow) else None
            if subscription is _UNREAD:
                hook = await self.store.get_webhook(row.target_id)
            if hook is None:
                return None
            secret = self.box.open(hook.secret, context=f"webhook:{hook.webhook_id}")
            try:
                delivery = self.webhook_body(hook, row.body)
            except TetherError as exc:  # its event has no rendering in the subscription's major (payload_unprojectable)
                raise LookupError(f"{exc.code}: {exc.message}") from exc
            headers.update(
                sign_webhook(
                    secret,
                    delivery.body,
                    webhook_id=delivery.webhook_id,
                    event_type=delivery.event_type,
                    major=delivery.major,
                )
            )
            headers["User-Agent"] = "openwop-webhook-dispatcher/tether"
            return _Prepared(headers, delivery.body, delivery.schedule)
        if row.kind == "callback":
            return _Prepared(headers, row.body)
        raise LookupError(f"unknown delivery kind {row.kind!r}")
