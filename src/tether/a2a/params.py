"""The params of each A2A method, checked strictly, and what a message's parts mean.

Models follow the v0.3 JSON schema (``kind`` discriminators included) with strict
types, so ``"5"`` is not a history length and ``"true"`` is not ``blocking``. Fields
the host does not use are ignored. A failed check becomes InvalidParams whose message
names the first bad field by its path (``params.message.parts.0.text``).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from tether.a2a.jsonrpc import ContentTypeNotSupported, InvalidParams
from tether.run_state import InterruptRecord

__all__ = [
    "DataPart",
    "FilePart",
    "Message",
    "SendConfiguration",
    "SendParams",
    "TaskIdParams",
    "TaskQueryParams",
    "TextPart",
    "message_inputs",
    "parse_params",
    "reply_value",
]

M = TypeVar("M", bound=BaseModel)


class _Strict(BaseModel):
    model_config = ConfigDict(strict=True, extra="ignore")


class TextPart(_Strict):
    kind: Literal["text"]
    text: str
    metadata: dict[str, Any] | None = None


class FilePart(_Strict):
    kind: Literal["file"]
    file: dict[str, Any]
    metadata: dict[str, Any] | None = None


class DataPart(_Strict):
    kind: Literal["data"]
    data: dict[str, Any]
    metadata: dict[str, Any] | None = None


Part = Annotated[TextPart | FilePart | DataPart, Field(discriminator="kind")]


class Message(_Strict):
    kind: Literal["message"]
    role: Literal["user", "agent"]
    messageId: str = Field(min_length=1, max_length=255)
    parts: list[Part]
    taskId: str | None = Field(default=None, min_length=1)
    contextId: str | None = Field(default=None, min_length=1, max_length=255)
    referenceTaskIds: list[str] | None = None
    extensions: list[str] | None = None
    metadata: dict[str, Any] | None = None


class SendConfiguration(_Strict):
    acceptedOutputModes: list[str] | None = None
    historyLength: int | None = Field(default=None, ge=0)
    pushNotificationConfig: dict[str, Any] | None = None
    blocking: bool | None = None


class SendParams(_Strict):
    message: Message
    configuration: SendConfiguration | None = None
    metadata: dict[str, Any] | None = None


class TaskIdParams(_Strict):
    id: str = Field(min_length=1)
    metadata: dict[str, Any] | None = None


class TaskQueryParams(TaskIdParams):
    historyLength: int | None = Field(default=None, ge=0)


class SetPushParams(_Strict):
    taskId: str = Field(min_length=1)
    pushNotificationConfig: dict[str, Any]


class GetPushParams(TaskIdParams):
    pushNotificationConfigId: str | None = Field(default=None, min_length=1)


class DeletePushParams(TaskIdParams):
    pushNotificationConfigId: str = Field(min_length=1)


def parse_params(model: type[M], params: dict[str, Any]) -> M:
    """``params`` as ``model``, or InvalidParams naming every bad field."""
    try:
        return model.model_validate(params)
    except ValidationError as exc:
        errors = [{"path": ".".join(["params", *(str(p) for p in e["loc"])]), "message": e["msg"]} for e in exc.errors()]
        first = errors[0]
        raise InvalidParams(f"{first['path']}: {first['message']}", data={"errors": errors}) from exc


def _refuse_files(message: Message) -> None:
    if any(isinstance(p, FilePart) for p in message.parts):
        raise ContentTypeNotSupported(
            "file parts are not accepted by this agent: send the content as text or data parts",
            data={"accepted": ["text", "data"]},
        )


def _text(message: Message) -> str | None:
    texts = [p.text for p in message.parts if isinstance(p, TextPart)]
    return "\n".join(texts) if texts else None


def _data(message: Message) -> dict[str, Any]:
    merged: dict[str, Any] = {}
    for part in message.parts:
        if isinstance(part, DataPart):
            merged.update(part.data)
    return merged


def message_inputs(message: Message) -> dict[str, Any]:
    """A new task's workflow inputs: text parts become ``prompt``, data parts merge in.

    Text parts are joined with newlines; data parts are merged in order on top, so an
    explicit structured value wins over the text.
    """
    _refuse_files(message)
    inputs: dict[str, Any] = {}
    text = _text(message)
    if text is not None:
        inputs["prompt"] = text
    inputs.update(_data(message))
    return inputs


def reply_value(message: Message, interrupt: InterruptRecord) -> Any:
    """The resume value a reply carries for the task's pending ``interrupt``.

    Approvals take a data part in the five-action vocabulary (or the legacy
    ``{approve: bool}``), or ``metadata.openwop.action``. Clarifications take a data
    part ``{answers: ...}``, or plain text when exactly one question is open. The engine
    checks the value itself, so a wrong one comes back as its InvalidInput.
    """
    _refuse_files(message)
    data = _data(message)
    text = _text(message)
    kind = interrupt["kind"]
    if kind == "approval":
        if data:
            return data
        action = ((message.metadata or {}).get("openwop") or {}).get("action")
        if isinstance(action, dict):
            return action
        if isinstance(action, str):
            return {"action": action}
        actions = (interrupt.get("data") or {}).get("actions", [])
        raise InvalidParams(
            'an approval reply needs a data part such as {"action": "accept"}; '
            f"this gate allows {', '.join(actions)} (the legacy {{\"approve\": true|false}} works too)",
            data={"allowedActions": actions},
        )
    if kind == "clarification":
        if data:
            return data
        questions = (interrupt.get("data") or {}).get("questions", [])
        if text is not None and len(questions) == 1:
            return {"answers": {questions[0]["id"]: text}}
        ids = [q.get("id") for q in questions]
        raise InvalidParams(
            'a clarification reply needs a data part {"answers": {"<question id>": <answer>}}'
            f" for the questions {', '.join(map(str, ids))}" + (" (plain text answers only a single question)" if text is not None else ""),
            data={"questions": ids},
        )
    if data:
        return data
    raise InvalidParams("this task waits for an external event: reply with a data part holding the event")
