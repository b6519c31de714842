"""A third-party A2A 1.0 peer for hand-off tests: a2a-sdk 1.3.0's stock server over HTTPS, with a scripted executor.

It runs in an environment of its own (``sdk13_requirements.txt`` beside it, made by
``tests/sidecars.py``), since the main test environment pins a2a-sdk 0.3.26::

    <sidecar python> tests/a2a/peers/sdk13_peer.py --certfile cert.pem --keyfile key.pem

It binds 127.0.0.1 on a free port and prints ``peer: serving on https://127.0.0.1:PORT``.
Its card offers A2A 1.0 over JSON-RPC only, and no pushes. What it does with a message is
named by the message (its text, or a data part's ``driftScenario``, as the conformance
fixture sends): ``input-required`` asks a question and completes with the answer it is
given (``input-required-file`` asks it with a file, ``DRAFT``); ``auth-required`` and
``rejected`` stop there; anything else is echoed back as a completed task's artifact, its
files included. ``--record FILE`` appends what it is sent (``serving.py``).
"""

from __future__ import annotations

import random
from typing import Any

from a2a.helpers import get_data_parts, get_message_text, new_task_from_user_message
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types.a2a_pb2 import AgentCapabilities, AgentCard, AgentInterface, AgentSkill, Part
from serving import serve
from starlette.applications import Starlette

SCENARIOS = ("input-required", "input-required-file", "auth-required", "rejected")
QUESTION = "Which colour should it be?"
#: the file the peer asks its question with (the tests know it by the same seed)
DRAFT = random.Random(2026).randbytes(300_000)


class ScriptedExecutor(AgentExecutor):
    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        message = context.message
        assert message is not None
        if context.current_task is None:
            task = new_task_from_user_message(message)
            await event_queue.enqueue_event(task)
            task_id, context_id = task.id, task.context_id
        else:
            task_id, context_id = context.current_task.id, context.current_task.context_id
        updater = TaskUpdater(event_queue, task_id, context_id)
        text = get_message_text(message)
        data = [d for d in get_data_parts(message.parts) if isinstance(d, dict) and d.get("driftScenario") in SCENARIOS]
        scenario = data[0]["driftScenario"] if data else text
        if context.current_task is not None:  # the answer to its question: done, with the answer echoed
            answer = text or str(get_data_parts(message.parts))
            await updater.add_artifact([Part(text=f"answered: {answer}")], name="echo")
            await updater.complete()
        elif scenario == "input-required":
            await updater.requires_input(updater.new_agent_message([Part(text=QUESTION)]))
        elif scenario == "input-required-file":
            draft = Part(raw=DRAFT, filename="draft.bin", media_type="application/octet-stream")
            await updater.requires_input(updater.new_agent_message([Part(text=QUESTION), draft]))
        elif scenario == "auth-required":
            note = "Authorize the calendar (read): https://auth.example/connect"
            await updater.requires_auth(updater.new_agent_message([Part(text=note)]))
        elif scenario == "rejected":
            await updater.reject(updater.new_agent_message([Part(text="I will not do that")]))
        else:
            files = [p for p in message.parts if p.WhichOneof("content") in ("raw", "url")]
            await updater.add_artifact([Part(text=text), *files], name="echo")
            await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        assert context.task_id is not None and context.context_id is not None
        await TaskUpdater(event_queue, context.task_id, context.context_id).cancel()


def agent_card(url: str) -> AgentCard:
    return AgentCard(
        name="sdk13-scripted-peer",
        description="a2a-sdk 1.3.0 peer for Tether's hand-off tests",
        version="1.3.0",
        supported_interfaces=[AgentInterface(url=url, protocol_binding="JSONRPC", protocol_version="1.0")],
        capabilities=AgentCapabilities(streaming=True, push_notifications=False),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[AgentSkill(id="echo", name="Echo", description="Returns the text", tags=["echo"])],
    )


def make_app(url: str, lifespan: Any) -> Any:
    card = agent_card(url + "/")
    handler = DefaultRequestHandler(agent_executor=ScriptedExecutor(), task_store=InMemoryTaskStore(), agent_card=card)
    routes = [*create_agent_card_routes(card), *create_jsonrpc_routes(handler, "/")]
    return Starlette(routes=routes, lifespan=lifespan)


if __name__ == "__main__":
    serve(__doc__.splitlines()[0], make_app)
