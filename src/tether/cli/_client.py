"""A thin synchronous client for the host's REST API, just enough for the CLI.

It exists so CLI commands see two outcomes only: parsed JSON, or an exception that already
says what went wrong in the host's own words (``HostError``, from the error envelope) or
that the host could not be reached at all (``HostUnreachable``). Kept apart from the
commands so they stay a list of calls, and from the official client so the CLI can show
Tether-specific fields (``interrupt``, ``nextCursor``) without waiting for it to learn them.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Iterator
from types import TracebackType
from typing import Any
from urllib.parse import quote

import httpx

DEFAULT_URL = "http://127.0.0.1:8080"

# The host sends an SSE keep-alive at least every 30 s, so a silent minute means it is gone.
_STREAM_READ_TIMEOUT = 75.0
#: event types after which a run's stream has nothing more to say
TERMINAL_EVENT_TYPES = frozenset({"run.completed", "run.failed", "run.cancelled"})
#: how long ``follow_events`` keeps trying to re-attach before it gives up (a host restart takes seconds)
REATTACH_WINDOW = 60.0
#: the first and the longest pause between two attempts to re-attach
_REATTACH_FIRST_PAUSE = 0.25
_REATTACH_MAX_PAUSE = 5.0

#: told ``(last sequence seen, why the stream was lost)`` before each attempt to re-attach
OnReattach = Callable[[int, str], None]


class HostError(Exception):
    """The host answered with a non-2xx status; carries its error envelope."""

    def __init__(self, status: int, code: str, message: str, details: dict[str, Any] | None = None) -> None:
        super().__init__(f"{message} ({code}, HTTP {status})")
        self.status = status
        self.code = code
        self.message = message
        self.details = details or {}


class HostUnreachable(Exception):
    """No HTTP answer at all: refused connection, DNS failure, timeout, dropped socket."""

    def __init__(self, url: str, reason: str) -> None:
        super().__init__(f"cannot reach {url}: {reason}")
        self.url = url
        self.reason = reason


def segment(value: str) -> str:
    """Quote one path segment, so an odd run id cannot change the route it is sent to."""
    return quote(value, safe="")


def _error_from(response: httpx.Response) -> HostError:
    """Build a HostError from the ``{"error","message","details"}`` envelope, or whatever came back."""
    try:
        body = response.json()
    except ValueError:
        body = None
    if isinstance(body, dict) and isinstance(body.get("error"), str):
        details = body.get("details")
        return HostError(
            response.status_code,
            body["error"],
            str(body.get("message") or body["error"]),
            details if isinstance(details, dict) else None,
        )
    text = response.text.strip().splitlines()[0][:200] if response.text.strip() else ""
    return HostError(response.status_code, "http_error", text or response.reason_phrase or "request failed")


def parse_sse(lines: Iterable[str]) -> Iterator[tuple[str | None, str]]:
    """Split an SSE line stream into ``(event, data)`` frames; comments (keep-alives) are skipped.

    Follows the EventSource rules the host relies on: multiple ``data:`` lines join with
    newlines, one leading space after the colon is dropped, a blank line ends a frame, and
    an unterminated last frame is discarded.
    """
    event: str | None = None
    data: list[str] = []
    for raw in lines:
        line = raw.rstrip("\r")
        if line == "":
            if data:
                yield event, "\n".join(data)
            event, data = None, []
            continue
        if line.startswith(":"):
            continue
        name, _, value = line.partition(":")
        if value.startswith(" "):
            value = value[1:]
        if name == "data":
            data.append(value)
        elif name == "event":
            event = value


class HostClient:
    """``HostClient(url, key)``: GET/POST JSON with a bearer key; use as a context manager."""

    def __init__(
        self, url: str, key: str | None, *, timeout: float = 30.0, transport: httpx.BaseTransport | None = None
    ) -> None:
        self.url = url.rstrip("/")
        headers = {"Accept": "application/json", "User-Agent": "tether-cli"}
        if key:
            headers["Authorization"] = f"Bearer {key}"
        self._http = httpx.Client(base_url=self.url, headers=headers, timeout=timeout, transport=transport)

    def __enter__(self) -> HostClient:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def _send(self, method: str, path: str, *, params: dict[str, Any] | None = None, body: Any = None) -> Any:
        # None, not {}, when there is nothing to add: httpx replaces a path's own query with any params given
        query = {k: v for k, v in (params or {}).items() if v is not None} or None
        try:
            response = self._http.request(method, path, params=query, json=body if method != "GET" else None)
        except httpx.TransportError as exc:
            raise HostUnreachable(self.url, str(exc) or type(exc).__name__) from exc
        if not response.is_success:
            raise _error_from(response)
        if not response.content:
            return None
        try:
            return response.json()
        except ValueError as exc:
            raise HostError(
                response.status_code, "invalid_response", "the host answered with something that is not JSON"
            ) from exc

    def get(self, path: str, params: dict[str, Any] | None = None) -> Any:
        """GET ``path``; ``None``-valued params are left out of the query."""
        return self._send("GET", path, params=params)

    def post(self, path: str, body: Any = None) -> Any:
        """POST ``body`` as JSON (``{}`` when none: the host's bodies are objects)."""
        return self._send("POST", path, body={} if body is None else body)

    def stream_events(
        self, run_id: str, stream_mode: str = "debug", after: int = -1, on_open: Callable[[], None] | None = None
    ) -> Iterator[dict[str, Any]]:
        """Yield a run's events from its SSE stream until the host closes it.

        The host replays the log after ``after`` (from the start: -1), then tails it, and
        closes the stream after the terminal event. ``event: batch`` frames (a JSON array)
        are flattened; frames whose data is not a JSON object are skipped, as the official
        client does. ``on_open`` is called once the host has accepted the stream.
        """
        headers = {"Accept": "text/event-stream", "Cache-Control": "no-cache"}
        if after >= 0:
            headers["Last-Event-ID"] = str(after)
        timeout = httpx.Timeout(30.0, read=_STREAM_READ_TIMEOUT)
        path = f"/v1/runs/{segment(run_id)}/events"
        try:
            with self._http.stream(
                "GET", path, params={"streamMode": stream_mode}, headers=headers, timeout=timeout
            ) as response:
                if not response.is_success:
                    response.read()
                    raise _error_from(response)
                if on_open is not None:
                    on_open()
                for _event, data in parse_sse(response.iter_lines()):
                    try:
                        value = json.loads(data)
                    except ValueError:
                        continue
                    for item in value if isinstance(value, list) else [value]:
                        if isinstance(item, dict):
                            yield item
        except httpx.TransportError as exc:
            raise HostUnreachable(self.url, str(exc) or type(exc).__name__) from exc

    def follow_events(
        self,
        run_id: str,
        stream_mode: str = "debug",
        *,
        on_reattach: OnReattach | None = None,
        window: float = REATTACH_WINDOW,
    ) -> Iterator[dict[str, Any]]:
        """Yield a run's events, live, until its terminal event; a lost stream is re-attached.

        When the connection drops, or the host closes the stream before the run ended (it
        was stopped, or restarted), the stream is opened again with ``Last-Event-ID`` set
        to the last sequence seen: no event is shown twice and none is skipped. It keeps
        trying, pausing longer each time, until ``window`` seconds pass without a stream
        the host accepts, then raises ``HostUnreachable``. An error the host answers with
        (an unknown run, a revoked key) ends it at once, except a 5xx (a proxy in front of
        a host that is coming back).
        """
        last = -1
        pause = _REATTACH_FIRST_PAUSE
        lost_since: float | None = None

        def attached() -> None:
            nonlocal lost_since
            lost_since = None

        while True:
            try:
                for event in self.stream_events(run_id, stream_mode, last, attached):
                    pause = _REATTACH_FIRST_PAUSE  # not on open alone: a stream that ends at once backs off
                    sequence = event.get("sequence")
                    if isinstance(sequence, int):
                        last = max(last, sequence)
                    yield event
                    if event.get("type") in TERMINAL_EVENT_TYPES:
                        return
                reason = "the host closed the stream before the run ended"
            except HostUnreachable as exc:
                reason = exc.reason
            except HostError as exc:
                if exc.status < 500:
                    raise
                reason = f"HTTP {exc.status}: {exc.message}"
            now = time.monotonic()
            lost_since = now if lost_since is None else lost_since
            if now - lost_since > window:
                raise HostUnreachable(self.url, f"{reason}; gave up re-attaching after {window:.0f} s")
            if on_reattach is not None:
                on_reattach(last, reason)
            time.sleep(pause)
            pause = min(pause * 2, _REATTACH_MAX_PAUSE)
