"""A Tether host driven in-process, through its whole ASGI stack, with no server and no socket.

``python bench/apps/inproc_load.py SCENARIO COUNT`` starts a host the way ``tether serve``
builds it (``make_server``: the probes, ``/metrics``, the request log and metrics, the A2A
endpoint, at ``--log-level info`` with lines going to ``/dev/null``) on a fresh SQLite data
directory, with the garbage collector tuned as ``tether serve`` tunes it once serving; makes
200 completed tasks, answers 300 warm-up requests of SCENARIO with 32 in flight, then COUNT
more, and stops. It prints nothing it measures: ``bench/instructions.py``
runs it under callgrind at two counts and divides the difference in instructions by the
difference in requests, which cancels start-up and shut-down.

SCENARIO is ``send`` (``message/send``), ``get`` (``tasks/get``), ``send10`` (``SendMessage``)
or ``get10`` (``GetTask``), as in ``bench/wrk/rpc.lua``.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import inspect
import io
import json
import os
import sys
import tempfile
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tether.app import make_server
from tether.settings import Settings

try:
    from tether.ops.logs import configure
except ImportError:  # a build from before the request log (compared with --tether-src)
    import logging

    def configure(level: str, fmt: str, stream: Any) -> None:  # type: ignore[misc]
        logging.basicConfig(level=logging.INFO, stream=stream)


SCENARIOS = ("send", "get", "send10", "get10")
CONCURRENCY = 32
TASKS = 200
WARMUP = 300

App = Callable[..., Any]


async def call(app: App, body: bytes, key: str, version: str | None) -> bytes:
    """One ``POST /v1/a2a`` as uvicorn would hand it to the app; the response body."""
    headers = [
        (b"authorization", b"Bearer " + key.encode()),
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
    ]
    if version:
        headers.append((b"a2a-version", version.encode()))
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/v1/a2a",
        "raw_path": b"/v1/a2a",
        "query_string": b"",
        "root_path": "",
        "headers": headers,
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 8080),
    }
    delivered = False

    async def receive() -> dict[str, Any]:
        nonlocal delivered
        if not delivered:
            delivered = True
            return {"type": "http.request", "body": body, "more_body": False}
        await asyncio.Event().wait()  # never disconnects
        raise AssertionError("unreachable")

    chunks: list[bytes] = []

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.body":
            chunks.append(message.get("body", b""))

    await app(scope, receive, send)
    return b"".join(chunks)


def request(scenario: str, number: int, task_ids: list[str]) -> tuple[bytes, str | None]:
    """The body of request ``number`` of ``scenario`` and the A2A-Version it is sent with."""
    if scenario == "send":
        message = {
            "kind": "message",
            "role": "user",
            "messageId": uuid.uuid4().hex,
            "parts": [{"kind": "text", "text": "hi"}],
        }
        return _rpc(number, "message/send", {"message": message}), None
    if scenario == "send10":
        message = {"role": "ROLE_USER", "messageId": uuid.uuid4().hex, "parts": [{"text": "hi"}]}
        return _rpc(number, "SendMessage", {"message": message}), "1.0"
    task = task_ids[number % len(task_ids)]
    if scenario == "get":
        return _rpc(number, "tasks/get", {"id": task}), None
    return _rpc(number, "GetTask", {"id": task}), "1.0"


def _rpc(number: int, method: str, params: dict[str, Any]) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": number, "method": method, "params": params}).encode()


async def load(app: App, key: str, scenario: str, count: int, task_ids: list[str]) -> None:
    numbers = iter(range(count))

    async def worker() -> None:
        for number in numbers:
            body, version = request(scenario, number, task_ids)
            answer = await call(app, body, key, version)
            if b'"result"' not in answer:
                raise RuntimeError(f"{scenario}: not a result: {answer[:300]!r}")

    await asyncio.gather(*(worker() for _ in range(CONCURRENCY)))


async def main(scenario: str, count: int) -> None:
    data_dir = Path(tempfile.mkdtemp(prefix="tether-inproc-"))
    lines = configure("info", "text", open(os.devnull, "w"))  # noqa: SIM115 - open for the process's life
    if "lines" in inspect.signature(make_server).parameters:
        server, sock, _ = make_server(Settings(data_dir=data_dir, port=0), lines=lines)
    else:  # a build from before the request log (compared with --tether-src)
        server, sock, _ = make_server(Settings(data_dir=data_dir, port=0))
    sock.close()
    app = server.config.app
    lifespan: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    lifespan.put_nowait({"type": "lifespan.startup"})
    started = asyncio.Event()

    async def lifespan_send(message: dict[str, Any]) -> None:
        if message["type"] == "lifespan.startup.failed":
            raise SystemExit(f"start-up failed: {message}")
        if message["type"] == "lifespan.startup.complete":
            started.set()

    with contextlib.redirect_stdout(io.StringIO()) as printed:
        life = asyncio.create_task(
            app({"type": "lifespan", "asgi": {"version": "3.0"}, "state": {}}, lifespan.get, lifespan_send)
        )
        await started.wait()
    # The collector as ``tether serve`` sets it once serving (``tether.app.tune_collector``): start-up's
    # objects frozen, the young generation collected every 50,000 allocations instead of 700. Set
    # here rather than called, so a build compared with --tether-src from before the name gets it too.
    gc.set_threshold(50_000, 20, 100)
    gc.freeze()
    key = printed.getvalue().split("shown once):\n")[1].split()[0]

    made = []
    for number in range(TASKS):
        body, version = request("send", number, [])
        made.append(json.loads(await call(app, body, key, version))["result"]["id"])
    await load(app, key, scenario, WARMUP, made)
    await load(app, key, scenario, count, made)

    lifespan.put_nowait({"type": "lifespan.shutdown"})
    with contextlib.redirect_stdout(io.StringIO()):
        await asyncio.wait_for(life, 30)


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in SCENARIOS:
        raise SystemExit(f"usage: inproc_load.py {{{','.join(SCENARIOS)}}} COUNT")
    asyncio.run(main(sys.argv[1], int(sys.argv[2])))
