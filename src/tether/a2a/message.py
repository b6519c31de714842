"""The canonical A2A message (0.3's shape), checked strictly, and what its parts mean to a run.

Tether keeps every message in one shape, the v0.3 JSON schema's (``kind`` discriminators
included): 0.3 requests arrive in it, 1.0 requests are translated into it
(:mod:`tether.a2a.v1_0.protojson`). Models have strict types, so ``"5"`` is not a number
and ``"true"`` is not a flag; fields the host does not use are ignored. A failed check
(:func:`parse_params`) becomes InvalidParams whose message names the first bad field by
its path (``params.message.parts.0.text``); what it quotes of the caller's input is
clipped (:func:`tether.a2a.errors.clip`). Task ids and push config ids are at most
:data:`ID_MAX` characters, as REST's run ids are.

A file part is checked here for its shape only (bytes or a URI, never both); its bytes are
decoded, bounded and stored as a blob by :mod:`tether.a2a.files`. A ``blob`` reference a
caller writes into a file part is not a field of the wire, so it is ignored like any other.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator
from pydantic_core import ErrorDetails

from tether.a2a.errors import ECHO_LIMIT, ContentTypeNotSupported, InvalidParams, clip
from tether.run_state import InterruptRecord

__all__ = [
    "ID_MAX",
    "DataPart",
    "FileContent",
    "FilePart",
    "Message",
    "ParamId",
    "StrictModel",
    "TextPart",
    "message_inputs",
    "parse_params",
    "reply_value",
]

M = TypeVar("M", bound=BaseModel)

#: the longest task id (a run id) or push config id accepted: REST's run-id limit, so both surfaces agree
ID_MAX = 128
#: a task id or a push config id as a param
ParamId = Annotated[str, Field(min_length=1, max_length=ID_MAX)]
#: the validation errors a refusal lists (a message with 10,000 bad parts is not answered with 10,000)
_ERRORS_LISTED = 10
#: the longest file URI kept: a reference, not a way around the file limits (a ``data:`` URI is bytes)
URI_MAX = 8192


class StrictModel(BaseModel):
    """A wire model read strictly: ``"5"`` is not a number, unknown fields are ignored."""

    model_config = ConfigDict(strict=True, extra="ignore")


class TextPart(StrictModel):
    kind: Literal["text"]
    text: str
    metadata: dict[str, Any] | None = None


class FileContent(StrictModel):
    """``FileWithBytes`` (``bytes``, base64) or ``FileWithUri``: exactly one of the two."""

    bytes: str | None = None
    uri: str | None = Field(default=None, min_length=1, max_length=URI_MAX)
    name: str | None = Field(default=None, max_length=1024)
    mimeType: str | None = Field(default=None, max_length=255)

    @model_validator(mode="after")
    def _bytes_or_uri(self) -> FileContent:
        if (self.bytes is None) == (self.uri is None):
            raise ValueError("a file holds exactly one of bytes (base64) or uri")
        return self


class FilePart(StrictModel):
    kind: Literal["file"]
    file: FileContent
    metadata: dict[str, Any] | None = None


class DataPart(StrictModel):
    kind: Literal["data"]
    data: dict[str, Any]
    metadata: dict[str, Any] | None = None


Part = Annotated[TextPart | FilePart | DataPart, Field(discriminator="kind")]


class Message(StrictModel):
    kind: Literal["message"]
    role: Literal["user", "agent"]
    messageId: str = Field(min_length=1, max_length=255)
    parts: list[Part]
    taskId: ParamId | None = None
    contextId: str | None = Field(default=None, min_length=1, max_length=255)
    referenceTaskIds: list[ParamId] | None = None
    extensions: list[str] | None = None
    metadata: dict[str, Any] | None = None


def _error_message(error: ErrorDetails) -> str:
    """pydantic's message for one error, with any of the caller's values it quotes clipped.

    Some messages quote the input (a discriminator tag that matches no part kind); the
    quoted value is clipped where it stands, so the rest of the message still says what
    is expected.
    """
    message = error["msg"]
    for value in (error.get("ctx") or {}).values():
        if isinstance(value, str) and len(value) > ECHO_LIMIT:
            message = message.replace(value, clip(value))
    return clip(message, 4 * ECHO_LIMIT)


def parse_params(model: type[M], params: Any, at: str = "params") -> M:
    """``params`` as ``model``, or InvalidParams naming the bad fields (the first ten of them) under ``at``."""
    try:
        return model.model_validate(params)
    except ValidationError as exc:
        found = exc.errors(include_url=False)
        errors = [
            {"path": clip(".".join([at, *(str(p) for p in e["loc"])])), "message": _error_message(e)}
            for e in found[:_ERRORS_LISTED]
        ]
        first = errors[0]
        data: dict[str, Any] = {"errors": errors}
        if len(found) > _ERRORS_LISTED:
            data["errorCount"] = len(found)
        raise InvalidParams(f"{first['path']}: {first['message']}", data=data) from exc


def _refuse_files(message: Message) -> None:
    if any(isinstance(p, FilePart) for p in message.parts):
        raise ContentTypeNotSupported(
            "a reply to a task that waits for input takes text and data parts: send files in the message "
            "that starts a task",
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


def message_inputs(message: Message, stored: dict[str, Any]) -> dict[str, Any]:
    """A new task's workflow inputs: text parts become ``prompt``, data parts merge in, and
    ``message`` is the message itself.

    Text parts are joined with newlines; data parts are merged in order on top, so an
    explicit structured value wins over the text. ``message`` is what the task was started
    with, as ``stored`` holds it (its ``messageId``, ``contextId``, ``metadata`` and parts,
    file parts as references): a workflow routes on it (``inputs.message.messageId`` in an
    edge condition, ``variables.message`` in a port). It is set last, so a data part cannot
    stand in for it.
    """
    inputs: dict[str, Any] = {}
    text = _text(message)
    if text is not None:
        inputs["prompt"] = text
    inputs.update(_data(message))
    inputs["message"] = {
        "messageId": stored["messageId"],
        "contextId": stored["contextId"],
        "metadata": stored.get("metadata") or {},
        "parts": stored["parts"],
    }
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
            f'this gate allows {", ".join(actions)} (the legacy {{"approve": true|false}} works too)',
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
            f" for the questions {', '.join(map(str, ids))}"
            + (" (plain text answers only a single question)" if text is not None else ""),
            data={"questions": ids},
        )
    if data:
        return data
    raise InvalidParams("this task waits for an external event: reply with a data part holding the event")
