"""A third-party A2A peer for hand-off tests: a2a-sdk 0.3.26's stock server over HTTPS, with a scripted executor.

Run as its own process::

    python tests/a2a/peers/sdk03_peer.py --certfile cert.pem --keyfile key.pem

It binds 127.0.0.1 on a free port and prints ``peer: serving on https://127.0.0.1:PORT``.
What it does with a message is named by the message (its text, or a data part's
``driftScenario``, as the conformance fixture sends): ``input-required`` asks a question and
completes with the answer it is given (``input-required-file`` asks it with a file,
``DRAFT``); ``auth-required`` and ``rejected`` stop there; anything else is echoed back as
a completed task's artifact, its files included. With ``--record FILE`` it
appends one JSON line per POST it receives (its ``traceparent`` header and its body), for
tests of what callers send.
"""

from __future__ import annotations

import base64
import random
from typing import Any

from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.apps import A2AStarletteApplication
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.tasks import InMemoryTaskStore
from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentSkill,
    Artifact,
    DataPart,
    FilePart,
    FileWithBytes,
    Message,
    Part,
    Role,
    Task,
    TaskState,
    TaskStatus,
    TextPart,
)
from a2a.utils import get_message_text
from serving import serve

SCENARIOS = ("input-required", "input-required-file", "auth-required", "rejected")
QUESTION = "Which colour should it be?"
#: the file the peer asks its question with (the tests know it by the same seed)
DRAFT = random.Random(2026).randbytes(300_000)


def scenario_of(message: Message) -> str:
    for part in message.parts:
        if isinstance(part.root, DataPart) and part.root.data.get("driftScenario") in SCENARIOS:
            return str(part.root.data["driftScenario"])
    text = get_message_text(message).strip()
    return text if text in SCENARIOS else "echo"


def said(text: str, context_id: str, task_id: str, *files: Part) -> Message:
    return Message(
        role=Role.agent,
        message_id=f"{task_id}-{len(text)}",
        context_id=context_id,
        task_id=task_id,
        parts=[Part(root=TextPart(text=text)), *files],
    )


def draft() -> Part:
    data = base64.b64encode(DRAFT).decode()
    return Part(root=FilePart(file=FileWithBytes(bytes=data, name="draft.bin", mime_type="application/octet-stream")))


class ScriptedExecutor(AgentExecutor):
    """Answers as the message asks (see the module docstring); a reply to its question completes the task."""

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        message = context.message
        assert message is not None and context.task_id is not None and context.context_id is not None
        task_id, context_id = context.task_id, context.context_id
        current = context.current_task
        if current is not None and current.status.state == TaskState.input_required:  # the answer to our question
            answer = [p.root.data for p in message.parts if isinstance(p.root, DataPart)]
            text = str(answer[0]) if answer else get_message_text(message)
            await event_queue.enqueue_event(self._task(task_id, context_id, TaskState.completed, artifact=[text]))
            return
        scenario = scenario_of(message)
        files: list[Part] = []
        if scenario in ("input-required", "input-required-file"):
            state, note = TaskState.input_required, QUESTION
            files = [draft()] if scenario == "input-required-file" else []
        elif scenario == "auth-required":
            state, note = TaskState.auth_required, "Authorize the calendar (read): https://auth.example/connect"
        elif scenario == "rejected":
            state, note = TaskState.rejected, "I will not do that"
        else:
            echoed = [get_message_text(message), *(p for p in message.parts if isinstance(p.root, FilePart))]
            await event_queue.enqueue_event(self._task(task_id, context_id, TaskState.completed, artifact=echoed))
            return
        await event_queue.enqueue_event(self._task(task_id, context_id, state, note=note, files=files))

    @staticmethod
    def _task(
        task_id: str,
        context_id: str,
        state: TaskState,
        *,
        note: str | None = None,
        files: list[Part] | None = None,
        artifact: list[str | Part] | None = None,
    ) -> Task:
        """The task as it is now; ``artifact``: the echo's parts (a string is a text part)."""
        parts = [Part(root=TextPart(text=p)) if isinstance(p, str) else p for p in artifact or ()]
        return Task(
            id=task_id,
            context_id=context_id,
            status=TaskStatus(state=state, message=said(note, context_id, task_id, *(files or [])) if note else None),
            artifacts=[Artifact(artifact_id=f"{task_id}-echo", name="echo", parts=parts)] if artifact else None,
        )

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        assert context.task_id is not None and context.context_id is not None
        await event_queue.enqueue_event(self._task(context.task_id, context.context_id, TaskState.canceled))


def agent_card(url: str) -> AgentCard:
    return AgentCard(
        name="sdk03-scripted-peer",
        description="a2a-sdk 0.3.26 peer for Tether's hand-off tests",
        url=url,
        version="0.3.26",
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        capabilities=AgentCapabilities(streaming=True),
        skills=[AgentSkill(id="echo", name="Echo", description="Returns the text", tags=["echo"])],
    )


def make_app(url: str, lifespan: Any) -> Any:
    handler = DefaultRequestHandler(agent_executor=ScriptedExecutor(), task_store=InMemoryTaskStore())
    return A2AStarletteApplication(agent_card=agent_card(url + "/"), http_handler=handler).build(lifespan=lifespan)


if __name__ == "__main__":
    serve(__doc__.splitlines()[0], make_app)
