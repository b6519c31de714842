"""What the scripted peers in this folder share: their command line, socket, HTTPS server, and ``--record``.

It needs only the standard library and uvicorn, so it runs in any peer's environment
(the main one, or a sidecar's).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import socket
from collections.abc import AsyncIterator, Callable
from typing import Any

import uvicorn

#: makes a peer's ASGI app from its URL and the lifespan that announces it
AppFactory = Callable[[str, Callable[[Any], contextlib.AbstractAsyncContextManager[None]]], Any]


def serve(description: str, make_app: AppFactory, argv: list[str] | None = None) -> None:
    """Bind 127.0.0.1 on a free port, print ``peer: serving on https://…`` once up, and serve HTTPS until killed."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--certfile", required=True)
    parser.add_argument("--keyfile", required=True)
    parser.add_argument("--record", help="append each POST's traceparent and body to this file (JSON lines)")
    args = parser.parse_args(argv)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    url = f"https://127.0.0.1:{sock.getsockname()[1]}"

    @contextlib.asynccontextmanager
    async def lifespan(app: Any) -> AsyncIterator[None]:
        print(f"peer: serving on {url}", flush=True)
        yield

    app = make_app(url, lifespan)
    config = uvicorn.Config(
        recording(app, args.record) if args.record else app,
        log_level="warning",
        access_log=False,
        lifespan="on",
        timeout_graceful_shutdown=2,
        ssl_certfile=args.certfile,
        ssl_keyfile=args.keyfile,
    )
    uvicorn.Server(config).run(sockets=[sock])


def recording(app: Any, path: str) -> Any:
    """Wrap ``app``: every POST's ``traceparent`` and body are appended to ``path`` before the app sees them."""

    async def recorded(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await app(scope, receive, send)
            return
        chunks, more = [], True
        while more:
            message = await receive()
            chunks.append(message.get("body", b""))
            more = message.get("more_body", False)
        body = b"".join(chunks)
        trace = next((v.decode("latin-1") for k, v in scope["headers"] if k == b"traceparent"), None)
        with open(path, "a") as out:
            out.write(json.dumps({"traceparent": trace, "body": json.loads(body or b"null")}) + "\n")
        replayed = False

        async def replay() -> Any:
            nonlocal replayed
            if replayed:
                return await receive()
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}

        await app(scope, replay, send)

    return recorded
