"""Per-destination limits of the outbox: how many sends at once, and when to back off.

A destination is a receiver's host and port (the unit the egress transport pools
connections by). Each one gets its own slots and its own backoff, so a slow or dead
receiver holds only its own slots while every other destination keeps sending: with one
shared semaphore, a receiver that took 10 s to time out held the whole outbox.

Not every failure is the host's. A host that does not answer, or answers that it is
overloaded or unavailable (408, 429, 502, 503, 504), pauses the whole destination. A host
that answers, with an error of the one subscriber's endpoint (500, say), pauses only that
subscriber (a webhook, a push config, a run's callback): the others it serves on the same
host and port keep their pace, and a subscription with its own retry policy keeps its
advertised one instead of inheriting a neighbour's growing pause.
"""

from __future__ import annotations

import asyncio
from urllib.parse import urlsplit

__all__ = ["HOST_FAILURES", "Backoff", "Destination", "Destinations"]

#: the first pause after a destination failed, and the longest
_FIRST_PAUSE = 0.5
_MAX_PAUSE = 30.0
#: how long a delivery is put off when its destination has a full queue already, at first and at most
_FIRST_DEFERRAL = 0.1
_MAX_DEFERRAL = 60.0
#: a destination that keeps answering may queue in memory what it takes this long to send
_QUEUE_SECONDS = 0.5
#: answers that speak for the whole host (its load, its gateway), not for one subscriber's endpoint
HOST_FAILURES = frozenset({408, 429, 502, 503, 504})
#: subscribers paused at once before the oldest pauses are forgotten (a bound, not a policy)
_BACKOFFS_MAX = 100_000


class Backoff:
    """A pause after failures in a row, doubling from half a second to thirty (event-loop only)."""

    __slots__ = ("failures", "paused_until")

    def __init__(self) -> None:
        self.failures = 0
        self.paused_until = 0.0

    def failed(self, now: float) -> None:
        self.failures += 1
        pause = min(_FIRST_PAUSE * 2 ** (self.failures - 1), _MAX_PAUSE)
        self.paused_until = max(self.paused_until, now + pause)


class Destination:
    """One receiver's slots, queue and backoff (event-loop only, no locks)."""

    __slots__ = (
        "_deferral",
        "_deferred_at",
        "_done",
        "_rate",
        "_window",
        "backoff",
        "key",
        "load",
        "put_off",
        "queue_limit",
        "slots",
    )

    def __init__(self, key: str, concurrency: int) -> None:
        self.key = key
        self.slots = asyncio.Semaphore(concurrency)
        #: deliveries handed to this destination and not finished (sending or waiting for a slot)
        self.load = 0
        #: past this load, more deliveries are put off instead of queued in memory (at least;
        #: a destination that answers fast may queue half a second of its rate, see ``limit``)
        self.queue_limit = 4 * concurrency
        #: the host's own pause: it did not answer, or answered for all of itself (``HOST_FAILURES``)
        self.backoff = Backoff()
        self._deferral = _FIRST_DEFERRAL
        self._deferred_at = 0.0
        #: deliveries put off since the queue last had room (their place in the line)
        self.put_off = 0
        #: completions per second, measured over about a second
        self._rate = 0.0
        self._window = 0.0
        self._done = 0

    def busy_until(self, now: float) -> float | None:
        """When to try a new delivery to this destination again, or None to send it now.

        A paused destination (it failed lately) is tried again when its pause ends; a full
        one when its queue has likely moved on. The wait for a full one doubles each second
        it stays full, so a deep backlog of a slow receiver is not read and put off again
        on every pass.
        """
        if self.backoff.paused_until > now:
            return self.backoff.paused_until
        if self.load < self.limit(now):
            self.put_off = 0
            return None
        self.put_off += 1
        if self._rate > 0 and now - self._window < 2.0:
            # a busy but moving receiver: come back about when the queue ahead has gone out
            return now + min(max((self.load + self.put_off) / self._rate, 0.05), _MAX_DEFERRAL)
        if now - self._deferred_at >= 1.0:
            if self._deferred_at:
                self._deferral = min(self._deferral * 2, _MAX_DEFERRAL)
            self._deferred_at = now
        return now + self._deferral

    def limit(self, now: float) -> int:
        """How many deliveries this destination may hold now, sending or waiting for a slot.

        ``queue_limit`` for one whose rate is unknown or stale; one that answers fast may hold
        half a second of its rate. Putting a delivery off costs a store write and a second
        read of the row: with a fixed limit of 64, a receiver taking 1,000 a second had most
        of a backlog read, put off and read again, several times over.
        """
        if self._rate > 0 and now - self._window < 2.0:
            return max(self.queue_limit, int(self._rate * _QUEUE_SECONDS))
        return self.queue_limit

    def succeeded(self, now: float) -> None:
        self._done += 1
        if now - self._window >= 1.0:
            self._rate = self._done / max(now - self._window, 1e-3) if self._window else 0.0
            self._window, self._done = now, 0
        self.backoff = Backoff()
        if self.load < self.queue_limit // 2:
            self._deferral, self._deferred_at = _FIRST_DEFERRAL, 0.0

    def failed(self, now: float) -> None:
        """The host did not answer, or answered for all of itself: pause it, longer each time in a row."""
        self.backoff.failed(now)


class Destinations:
    """Destination state by key, made on first use; subscribers' own pauses beside it."""

    def __init__(self, concurrency: int) -> None:
        self._concurrency = concurrency
        self._by_key: dict[str, Destination] = {}
        #: subscribers paused for their own endpoint's errors, by (kind, target); gone once one succeeds
        self._subscribers: dict[tuple[str, str], Backoff] = {}

    def paused_until(self, subscriber: tuple[str, str], now: float) -> float | None:
        """When ``subscriber`` may be sent to again, if its own pause still holds."""
        backoff = self._subscribers.get(subscriber)
        return backoff.paused_until if backoff is not None and backoff.paused_until > now else None

    def subscriber_failed(self, subscriber: tuple[str, str], now: float) -> None:
        backoff = self._subscribers.get(subscriber)
        if backoff is None:
            if len(self._subscribers) >= _BACKOFFS_MAX:
                self._subscribers.clear()
            backoff = self._subscribers[subscriber] = Backoff()
        backoff.failed(now)

    def subscriber_succeeded(self, subscriber: tuple[str, str]) -> None:
        self._subscribers.pop(subscriber, None)

    def of(self, url: str) -> Destination:
        key = urlsplit(url).netloc.lower()
        found = self._by_key.get(key)
        if found is None:
            found = self._by_key[key] = Destination(key, self._concurrency)
        return found
