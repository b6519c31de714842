"""The reference: a2a-sdk 0.3.26's stock Starlette app and DefaultRequestHandler, echoing.

Run as its own process by the harness::

    python bench/apps/sdk_server.py --store memory
    python bench/apps/sdk_server.py --store sqlite --db /tmp/x/sdk.db

It binds 127.0.0.1 on a free port (or ``--port``), runs under uvicorn with the same
settings Tether's ``serve`` uses (uvloop + httptools when installed, no access log) and
prints ``sdk: serving on http://127.0.0.1:PORT`` once the app's lifespan has started.
The JSON-RPC endpoint is the SDK's default, ``POST /``; the card is at
``/.well-known/agent-card.json``. The executor does the least an A2A agent can: it
enqueues one completed Task whose artifact is the user's text.
"""

from __future__ import annotations

import argparse
import contextlib
import socket
from collections.abc import AsyncIterator
from typing import Any

import uvicorn
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.apps import A2AStarletteApplication
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.tasks import InMemoryTaskStore, TaskStore
from a2a.types import AgentCapabilities, AgentCard, AgentSkill, Task, TaskState, TaskStatus
from a2a.utils import get_message_text, new_text_artifact


class EchoExecutor(AgentExecutor):
    """Answers every message with a completed Task carrying the message's text."""

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        message = context.message
        assert message is not None and context.task_id is not None and context.context_id is not None
        text = get_message_text(message)
        await event_queue.enqueue_event(
            Task(
                id=context.task_id,
                context_id=context.context_id,
                status=TaskStatus(state=TaskState.completed),
                history=[message],
                artifacts=[new_text_artifact(name="outputs", text=text)],
            )
        )

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        raise NotImplementedError("echo tasks complete at once")


def agent_card(url: str) -> AgentCard:
    return AgentCard(
        name="sdk-echo",
        description="a2a-sdk reference server for Tether's benchmarks",
        url=url,
        version="0.3.26",
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        capabilities=AgentCapabilities(streaming=True),
        skills=[AgentSkill(id="echo", name="Echo", description="Returns the text", tags=["echo"])],
    )


def task_store(kind: str, db: str | None) -> TaskStore:
    """``memory``: InMemoryTaskStore. ``sqlite``: DatabaseTaskStore on aiosqlite, SQLite's defaults."""
    if kind == "memory":
        return InMemoryTaskStore()
    from a2a.server.tasks import DatabaseTaskStore
    from sqlalchemy.ext.asyncio import create_async_engine

    return DatabaseTaskStore(create_async_engine(f"sqlite+aiosqlite:///{db}"))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", choices=["memory", "sqlite"], default="memory")
    parser.add_argument("--db", help="SQLite file for --store sqlite")
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args(argv)

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", args.port))
    url = f"http://127.0.0.1:{sock.getsockname()[1]}"

    if args.store == "sqlite" and not args.db:
        parser.error("--store sqlite needs --db")
    store = task_store(args.store, args.db)

    @contextlib.asynccontextmanager
    async def lifespan(app: Any) -> AsyncIterator[None]:
        initialize = getattr(store, "initialize", None)
        if initialize is not None:
            await initialize()  # DatabaseTaskStore creates its table here
        print(f"sdk: store={args.store}; serving on {url}", flush=True)
        yield

    handler = DefaultRequestHandler(agent_executor=EchoExecutor(), task_store=store)
    app = A2AStarletteApplication(agent_card=agent_card(url + "/"), http_handler=handler).build(lifespan=lifespan)
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on", timeout_graceful_shutdown=2)
    uvicorn.Server(config).run(sockets=[sock])


if __name__ == "__main__":
    main()
