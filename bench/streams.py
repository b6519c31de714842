"""A lean asyncio client for the streaming scenarios: raw HTTP/1.1, timestamps on arrival.

httpx costs tens of microseconds of Python per event; with 1,000 streams receiving the
same event at once that would be the client's own queue, not the host's. Here each stream
is an :class:`asyncio.Protocol` whose ``data_received`` stamps ``time.perf_counter()``
before it does anything else, decodes chunked transfer encoding and splits server-sent
events on blank lines; no JSON is parsed on the hot path.

Scenarios (each returns a JSON-ready dict):

* :func:`stream_latency` — ``message/stream``: request sent → first event, → last event.
* :func:`attach_latency` — ``tasks/resubscribe`` on a waiting task: request → first event.
* :func:`fanout` — N resubscribers on one waiting task; the approval reply is sent at t0
  (the moment the state change is caused) and every stream's next event is stamped.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import socket
import time
import uuid
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar
from urllib.parse import urlsplit

T = TypeVar("T")
_ids = itertools.count(1)


def run(coro: Coroutine[Any, Any, T]) -> T:
    """Run a scenario on uvloop when it is installed (it comes with uvicorn[standard])."""
    try:
        import uvloop
    except ImportError:
        return asyncio.run(coro)
    return uvloop.run(coro)


def percentile(values: list[float], pct: float) -> float:
    """Nearest-rank percentile of ``values`` (which need not be sorted)."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    rank = max(1, min(len(ordered), round(pct / 100 * len(ordered) + 0.4999)))
    return ordered[rank - 1]


def summary_ms(seconds: list[float]) -> dict[str, Any]:
    ms = [s * 1000 for s in seconds]
    if not ms:
        return {"n": 0}
    return {
        "n": len(ms),
        "p50": round(percentile(ms, 50), 3),
        "p99": round(percentile(ms, 99), 3),
        "max": round(max(ms), 3),
        "min": round(min(ms), 3),
    }


class Target:
    """Where the JSON-RPC endpoint is and what to send with every request."""

    def __init__(self, rpc_url: str, headers: dict[str, str]) -> None:
        parts = urlsplit(rpc_url)
        self.host = parts.hostname or "127.0.0.1"
        self.port = parts.port or 80
        self.path = parts.path or "/"
        self.headers = headers

    def request(self, method: str, params: dict[str, Any], *, sse: bool) -> bytes:
        body = json.dumps(
            {"jsonrpc": "2.0", "id": next(_ids), "method": method, "params": params}, separators=(",", ":")
        ).encode()
        lines = [
            f"POST {self.path} HTTP/1.1",
            f"Host: {self.host}:{self.port}",
            "Content-Type: application/json",
            f"Content-Length: {len(body)}",
        ]
        if sse:
            lines.append("Accept: text/event-stream")
        lines += [f"{k}: {v}" for k, v in self.headers.items()]
        return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


class _Http(asyncio.Protocol):
    """One request on its own connection; the response body is decoded as it arrives."""

    def __init__(self, request: bytes) -> None:
        self.request = request
        self.loop = asyncio.get_running_loop()
        self.transport: asyncio.Transport | None = None
        self.sent_at = 0.0
        self.status = 0
        self._buf = bytearray()
        self._head_done = False
        self._chunked = False
        self._remaining: int | None = None  # Content-Length left to read
        self.body = bytearray()
        self.ended = self.loop.create_future()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # uvloop's transports are no asyncio.Transport subclass
        sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sent_at = time.perf_counter()
        self.transport.write(self.request)  # type: ignore[union-attr]

    def data_received(self, data: bytes) -> None:
        now = time.perf_counter()
        self._buf += data
        if not self._head_done:
            end = self._buf.find(b"\r\n\r\n")
            if end < 0:
                return
            head = bytes(self._buf[:end]).decode("latin-1").split("\r\n")
            del self._buf[: end + 4]
            self.status = int(head[0].split()[1])
            for line in head[1:]:
                name, _, value = line.partition(":")
                name, value = name.strip().lower(), value.strip()
                if name == "transfer-encoding" and "chunked" in value.lower():
                    self._chunked = True
                elif name == "content-length":
                    self._remaining = int(value)
            self._head_done = True
        finished = self._decode()
        self.on_body(now)
        if finished:
            self._finish()

    def _decode(self) -> bool:
        """Move decoded body bytes from the buffer to ``body``; True once the response is complete."""
        if self._chunked:
            while True:
                line_end = self._buf.find(b"\r\n")
                if line_end < 0:
                    return False
                size = int(bytes(self._buf[:line_end]).split(b";")[0], 16)
                if size == 0:
                    return True
                if len(self._buf) < line_end + 2 + size + 2:
                    return False
                start = line_end + 2
                self.body += self._buf[start : start + size]
                del self._buf[: start + size + 2]
        self.body += self._buf
        if self._remaining is not None:
            self._remaining -= len(self._buf)
        self._buf.clear()
        return self._remaining is not None and self._remaining <= 0

    def on_body(self, now: float) -> None:
        """Called after every read that decoded body bytes (or none)."""

    def _finish(self) -> None:
        if not self.ended.done():
            self.ended.set_result(None)
        if self.transport is not None:
            self.transport.close()

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.ended.done():
            self.ended.set_result(None)

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()


class SseStream(_Http):
    """A streaming response split into events; ``events`` holds (arrival time, event bytes)."""

    def __init__(self, request: bytes) -> None:
        super().__init__(request)
        self.events: list[tuple[float, bytes]] = []
        self._waiters: list[tuple[int, asyncio.Future[None]]] = []

    def on_body(self, now: float) -> None:
        if b"\n\n" not in self.body and b"\r\n\r\n" not in self.body:
            return
        text = bytes(self.body).replace(b"\r\n", b"\n")
        *complete, rest = text.split(b"\n\n")
        self.body = bytearray(rest)
        for block in complete:
            if b"data:" in block:  # comments and keep-alives carry no data line
                self.events.append((now, block))
        if self._waiters:
            still = []
            for count, future in self._waiters:
                if len(self.events) >= count and not future.done():
                    future.set_result(None)
                elif not future.done():
                    still.append((count, future))
            self._waiters = still

    def _finish(self) -> None:
        super()._finish()
        for _, future in self._waiters:
            if not future.done():
                future.set_result(None)

    def connection_lost(self, exc: Exception | None) -> None:
        super().connection_lost(exc)
        self._finish()

    async def wait_events(self, count: int, timeout: float) -> bool:
        """True once ``count`` events have arrived; False if the stream ended or timed out first."""
        if len(self.events) >= count:
            return True
        if self.ended.done():
            return False
        future: asyncio.Future[None] = self.loop.create_future()
        self._waiters.append((count, future))
        try:
            await asyncio.wait_for(future, timeout)
        except TimeoutError:
            return False
        return len(self.events) >= count

    def event_json(self, index: int) -> dict[str, Any]:
        block = self.events[index][1]
        data = b"\n".join(line[5:].strip() for line in block.split(b"\n") if line.startswith(b"data:"))
        result: dict[str, Any] = json.loads(data)
        return result


async def _open(target: Target, protocol: Callable[[], _Http]) -> Any:
    loop = asyncio.get_running_loop()
    _, proto = await loop.create_connection(protocol, target.host, target.port)
    return proto


def user_message(
    text: str, *, task_id: str | None = None, data: dict[str, Any] | None = None, skill: str | None = None
) -> dict[str, Any]:
    parts: list[dict[str, Any]] = (
        [{"kind": "data", "data": data}] if data is not None else [{"kind": "text", "text": text}]
    )
    message: dict[str, Any] = {"kind": "message", "role": "user", "messageId": f"bench-{uuid.uuid4()}", "parts": parts}
    if task_id is not None:
        message["taskId"] = task_id
    if skill is not None:
        message["metadata"] = {"skillId": skill}
    return message


async def rpc(target: Target, method: str, params: dict[str, Any], timeout: float = 30.0) -> dict[str, Any]:
    """One plain JSON-RPC call over a fresh connection (setup and replies, not measured)."""
    proto: _Http = await _open(target, lambda: _Http(target.request(method, params, sse=False)))
    await asyncio.wait_for(proto.ended, timeout)
    if proto.status != 200:
        raise RuntimeError(f"{method}: HTTP {proto.status}: {bytes(proto.body)[:300]!r}")
    answer: dict[str, Any] = json.loads(bytes(proto.body))
    if "error" in answer:
        raise RuntimeError(f"{method}: {answer['error']}")
    return answer


# --- message/stream -------------------------------------------------------------------------


async def stream_latency(target: Target, count: int, warmup: int) -> dict[str, Any]:
    """``message/stream`` one at a time: request sent → first event, and → the last event."""
    first: list[float] = []
    complete: list[float] = []
    failures = 0
    events_per_stream = 0
    for i in range(warmup + count):
        request = target.request("message/stream", {"message": user_message("hello bench")}, sse=True)
        t0 = time.perf_counter()
        stream: SseStream = await _open(target, lambda request=request: SseStream(request))
        try:
            await asyncio.wait_for(stream.ended, 30)
        except TimeoutError:
            stream.close()
        ok = (
            stream.status == 200
            and bool(stream.events)
            and b'"error":' not in stream.events[-1][1]
            and b"completed" in stream.events[-1][1]
        )
        if i < warmup:
            continue
        if not ok:
            failures += 1
            continue
        first.append(stream.events[0][0] - t0)
        complete.append(stream.events[-1][0] - t0)
        events_per_stream = len(stream.events)
    return {
        "streams": count,
        "failed": failures,
        "events_per_stream": events_per_stream,
        "first_event_ms": summary_ms(first),
        "complete_ms": summary_ms(complete),
    }


# --- tasks/resubscribe ----------------------------------------------------------------------


async def attach_latency(target: Target, task_id: str, count: int, warmup: int) -> dict[str, Any]:
    """``tasks/resubscribe`` on a waiting task, one at a time: request sent → first event."""
    latencies: list[float] = []
    failures = 0
    for i in range(warmup + count):
        request = target.request("tasks/resubscribe", {"id": task_id}, sse=True)
        t0 = time.perf_counter()
        stream: SseStream = await _open(target, lambda request=request: SseStream(request))
        got = await stream.wait_events(1, 10)
        stream.close()
        if i < warmup:
            continue
        if not got or stream.status != 200:
            failures += 1
            continue
        latencies.append(stream.events[0][0] - t0)
    return {"attaches": count, "failed": failures, "attach_ms": summary_ms(latencies)}


async def fanout(
    target: Target,
    task_id: str,
    streams: int,
    reply: dict[str, Any],
    *,
    on_attached: Callable[[], None] | None = None,
    host_cpu: Callable[[], float | None] | None = None,
    batch: int = 100,
    timeout: float = 60.0,
) -> dict[str, Any]:
    """``streams`` resubscribers on one task; the reply that changes its state is sent at t0.

    Every stream must first receive its initial event (the task as it stands). Then the
    reply (``message/send`` answering the approval gate) is written at t0, and each
    stream's next event is stamped on arrival: latency = arrival − t0.
    """
    request = target.request("tasks/resubscribe", {"id": task_id}, sse=True)
    opened: list[SseStream] = []
    for start in range(0, streams, batch):
        opened += await asyncio.gather(
            *(_open(target, lambda: SseStream(request)) for _ in range(start, min(streams, start + batch)))
        )
    attached = await asyncio.gather(*(s.wait_events(1, timeout) for s in opened))
    if not all(attached):
        for s in opened:
            s.close()
        raise RuntimeError(f"only {sum(attached)} of {streams} resubscribers received the task's first event")
    if on_attached is not None:
        on_attached()
    reply_request = target.request("message/send", reply, sse=False)
    loop = asyncio.get_running_loop()
    cpu0 = time.process_time()
    host0 = host_cpu() if host_cpu else None
    t0 = time.perf_counter()
    _, answer = await loop.create_connection(lambda: _Http(reply_request), target.host, target.port)
    delivered = await asyncio.gather(*(s.wait_events(2, timeout) for s in opened))
    window = time.perf_counter() - t0
    client_cpu = time.process_time() - cpu0
    host1 = host_cpu() if host_cpu else None
    await asyncio.wait_for(answer.ended, timeout)
    latencies = [s.events[1][0] - t0 for s, ok in zip(opened, delivered, strict=True) if ok]
    kinds = {s.event_json(1)["result"].get("kind") for s, ok in zip(opened[:5], delivered[:5], strict=True) if ok}
    for s in opened:
        s.close()
    return {
        "streams": streams,
        "delivered": sum(delivered),
        "reply_status": answer.status,
        "next_event_kinds": sorted(k for k in kinds if k),
        "delivery_ms": summary_ms(latencies),
        "latencies_s": latencies,
        # how busy each side was from t0 to the last delivery (100 % = one core)
        "window_ms": round(window * 1000, 1),
        "client_cpu_pct": round(100 * client_cpu / window, 1) if window > 0 else None,
        "host_cpu_pct": round(100 * (host1 - host0) / window, 1)
        if host0 is not None and host1 is not None and window > 0
        else None,
    }
