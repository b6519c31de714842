"""``GET /healthz`` (the process is alive) and ``GET /readyz`` (send it traffic), in front of the app.

Both are answered before routing and authentication, so a load balancer or a kubelet
probes them with no key, and ``/healthz`` never touches the store: a host whose database
is down is alive (restarting it would not help) but not ready. ``/readyz`` is 200 only
while every check passes: start-up finished (the store is open and migrated), the store
answers a write-path round trip within ``timeout`` (on SQLite: through the writer
thread), the lease loops run (several hosts), and the host is not shutting down. On
graceful shutdown ``draining`` turns it 503 first, while the host still serves, so the
balancer stops sending before streams close. A 503 names the check that failed.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Final

import orjson
from starlette.types import ASGIApp, Receive, Scope, Send

from tether.http.middleware import http_date

__all__ = ["Check", "HealthEndpoints", "Readiness"]

#: a readiness check: None when it passes, else what is wrong
Check = Callable[[], Awaitable[str | None]]

_PATHS: Final = ("/healthz", "/readyz")
_ALLOWED: Final = (b"GET", b"HEAD")


class Readiness:
    """Whether this host should receive traffic, and if not, why."""

    def __init__(self, timeout: float = 2.0) -> None:
        self.timeout = timeout
        self._checks: Sequence[tuple[str, Check]] = ()
        self._started = False
        self._draining = False

    def started(self, checks: Sequence[tuple[str, Check]]) -> None:
        """Start-up finished (store open and migrated, loops running); ``checks`` say if it still holds."""
        self._checks = tuple(checks)
        self._started = True

    def draining(self) -> None:
        """Shutdown began: refuse readiness from now on (the host still serves what reaches it)."""
        self._draining = True

    async def check(self) -> tuple[str | None, dict[str, str]]:
        """The first failing check's name (None when ready) and every check's outcome."""
        if self._draining:
            return "shutdown", {"shutdown": "the host is shutting down"}
        if not self._started:
            return "startup", {"startup": "the host has not finished starting"}
        outcomes: dict[str, str] = {}
        failing = None
        for name, check in self._checks:
            try:
                problem = await asyncio.wait_for(check(), self.timeout)
            except TimeoutError:
                problem = f"no answer within {self.timeout:g} s"
            except Exception as exc:  # noqa: BLE001 - a probe reports, it never raises
                problem = str(exc) or type(exc).__name__
            outcomes[name] = "ok" if problem is None else problem
            if problem is not None and failing is None:
                failing = name
        return failing, outcomes


class HealthEndpoints:
    """Answers the two probe paths itself and passes everything else to ``app``."""

    def __init__(self, app: ASGIApp, readiness: Readiness) -> None:
        self.app = app
        self.readiness = readiness

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] not in _PATHS:
            await self.app(scope, receive, send)
            return
        if scope["method"].encode() not in _ALLOWED:
            refusal = {"error": "method_not_allowed", "message": f"{scope['method']} is not allowed on {scope['path']}"}
            await _answer(send, 405, refusal, scope, [(b"allow", b"GET, HEAD")])
            return
        if scope["path"] == "/healthz":
            await _answer(send, 200, {"status": "alive"}, scope)
            return
        failing, checks = await self.readiness.check()
        if failing is None:
            await _answer(send, 200, {"status": "ready", "checks": checks}, scope)
        else:
            body: dict[str, object] = {
                "status": "unavailable",
                "failing": failing,
                "message": checks[failing],
                "checks": checks,
            }
            await _answer(send, 503, body, scope)


async def _answer(
    send: Send, status: int, body: object, scope: Scope, extra: list[tuple[bytes, bytes]] | None = None
) -> None:
    raw = orjson.dumps(body)
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(raw)).encode()),
        (b"cache-control", b"no-store"),
        (b"date", http_date()),
        *(extra or []),
    ]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": b"" if scope["method"] == "HEAD" else raw})
