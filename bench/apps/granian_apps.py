"""App factories for granian: Tether and the bare ceiling, served by granian instead of uvicorn.

The harness starts them with granian's own command line, the way an operator would:

    python -m granian --interface asgi --factory --working-dir bench/apps granian_apps:tether

granian binds the socket itself and says where in ``GRANIAN_HOST`` and ``GRANIAN_PORT``
(the harness sets both; granian reads them as its ``--host`` and ``--port``), so the
factories read the same two variables to know the URL they announce. ``tether`` takes the
rest of its ``tether serve`` options from ``TETHER_SERVE_ARGS`` (a JSON list), builds the
same ASGI app ``tether serve`` runs under uvicorn (``tether.app.host_app``), and tunes the
collector once start-up completes, as ``tether serve`` does. What granian cannot be given
is the shutdown ``tether serve`` adds to uvicorn (readiness turned 503, open streams
ended): docs/benchmarks.md says what that changes.
"""

from __future__ import annotations

import json
import os
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from bare_server import make_app

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]


def _url() -> str:
    return f"http://{os.environ['GRANIAN_HOST']}:{os.environ['GRANIAN_PORT']}"


def bare() -> App:
    """The bare ceiling of ``bare_server.py``, unchanged, on granian."""
    return make_app(_url())


def tether() -> App:
    """``tether serve $TETHER_SERVE_ARGS`` on granian: the same settings, logging and app."""
    from tether.app import host_app, tune_collector
    from tether.cli.serve import serve_settings
    from tether.ops.logs import configure as configure_logging

    args = [*json.loads(os.environ.get("TETHER_SERVE_ARGS", "[]"))]
    args += ["--host", os.environ["GRANIAN_HOST"], "--port", os.environ["GRANIAN_PORT"]]
    settings = serve_settings(args)
    lines = configure_logging(settings.log_level, settings.log_format)
    guard, _ = host_app(settings, lines)

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "lifespan":
            return await guard(scope, receive, send)

        async def started(message: Message) -> None:
            await send(message)
            if message["type"] == "lifespan.startup.complete":
                tune_collector()

        await guard(scope, receive, started)

    return app
