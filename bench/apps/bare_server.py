"""The ceiling: a bare ASGI endpoint on the same server stack, answering a fixed JSON-RPC result.

``python bench/apps/bare_server.py`` binds 127.0.0.1 on a free port, runs under uvicorn
with the settings Tether's ``serve`` uses, and prints ``bare: serving on URL`` once ready.
Every ``POST`` (any path) reads the request body and answers the same completed-Task
JSON-RPC response; ``GET`` answers a tiny JSON document. No framework, no routing, no
parsing: no Python host on this machine can answer faster over this stack.
"""

from __future__ import annotations

import argparse
import socket
from collections.abc import Awaitable, Callable
from typing import Any

import uvicorn

RESULT = (
    b'{"jsonrpc":"2.0","id":1,"result":{"kind":"task","id":"bare-task","contextId":"bare-ctx",'
    b'"status":{"state":"completed"},"artifacts":[{"artifactId":"a","parts":[{"kind":"text","text":"hi"}]}]}}'
)
CARD = b'{"name":"bare","version":"0"}'
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]


def make_app(url: str) -> Callable[[dict[str, Any], Receive, Send], Awaitable[None]]:
    async def app(scope: dict[str, Any], receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    print(f"bare: serving on {url}", flush=True)
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        if scope["type"] != "http":
            return
        more = True
        while more:  # read the whole body, as any real endpoint must
            message = await receive()
            more = message.get("more_body", False)
        body = RESULT if scope["method"] == "POST" else CARD
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
            }
        )
        await send({"type": "http.response.body", "body": body})

    return app


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args(argv)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", args.port))
    url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    config = uvicorn.Config(
        make_app(url),
        log_level="warning",
        access_log=False,
        lifespan="on",
        timeout_graceful_shutdown=2,
        # what Tether's serve sets (tether/app.py), so that the stack is the same to the header
        date_header=False,
        server_header=False,
        proxy_headers=False,
    )
    uvicorn.Server(config).run(sockets=[sock])


if __name__ == "__main__":
    main()
