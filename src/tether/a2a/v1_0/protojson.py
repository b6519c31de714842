"""A2A 1.0's ProtoJSON, both ways: requests into the canonical shapes the service takes, answers out of them.

Tether keeps every A2A object in one canonical form, the v0.3 JSON shape: it is what the
store holds as task history and what :mod:`tether.a2a.projection` builds (a file's bytes
excepted: kept as a blob reference, they are put back as 0.3 ``file.bytes`` by
:mod:`tether.a2a.files` before anything is rendered here). This module only translates
(a2a-v1.0-wire §3.2–§3.3):

- names: output lowerCamelCase; input camelCase *or* proto snake_case, as ProtoJSON parsers must;
- enums by name: ``TASK_STATE_*``, ``ROLE_*`` (proto numbers are read too);
- member-discriminated oneofs, never ``kind``: a Part is ``{text}``, ``{raw}``, ``{url}`` or ``{data}``;
  a send result ``{task}``/``{message}``; a stream frame ``{task}``, ``{statusUpdate}`` or ``{artifactUpdate}``;
- defaults omitted: no empty ``history``/``artifacts``, no ``final``;
- ``Part.data`` is any JSON: a non-object travels in the canonical form as ``{"value": …}``
  marked ``metadata.data_part_compat``, which is how a 0.3 reader sees it too.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from types import MappingProxyType
from typing import Annotated, Any

import orjson
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, model_validator
from pydantic.alias_generators import to_camel

from tether import clock
from tether.a2a.errors import InvalidParams
from tether.a2a.message import ID_MAX, Message, parse_params
from tether.a2a.push import PushAuthentication, PushConfigInput
from tether.a2a.v1_0.bound import BOUND_VERSION, bound_push
from tether.store.base import PushConfigRow
from tether.types import INT32_MAX, INT64_MAX

__all__ = [
    "STATE_NAMES",
    "artifact",
    "canonical_message",
    "canonical_push",
    "event",
    "frame_task",
    "generation_of",
    "message",
    "push_body",
    "state_of",
    "status",
    "task",
]

#: canonical (0.3) TaskState → the 1.0 enum name
STATE_NAMES: Mapping[str, str] = MappingProxyType(
    {
        "submitted": "TASK_STATE_SUBMITTED",
        "working": "TASK_STATE_WORKING",
        "completed": "TASK_STATE_COMPLETED",
        "failed": "TASK_STATE_FAILED",
        "canceled": "TASK_STATE_CANCELED",
        "input-required": "TASK_STATE_INPUT_REQUIRED",
        "rejected": "TASK_STATE_REJECTED",
        "auth-required": "TASK_STATE_AUTH_REQUIRED",
        "unknown": "TASK_STATE_UNSPECIFIED",
    }
)
_STATE_NUMBERS = {
    0: "TASK_STATE_UNSPECIFIED",
    1: "TASK_STATE_SUBMITTED",
    2: "TASK_STATE_WORKING",
    3: "TASK_STATE_COMPLETED",
    4: "TASK_STATE_FAILED",
    5: "TASK_STATE_CANCELED",
    6: "TASK_STATE_INPUT_REQUIRED",
    7: "TASK_STATE_REJECTED",
    8: "TASK_STATE_AUTH_REQUIRED",
}
_CANONICAL_STATES = {name: state for state, name in STATE_NAMES.items()}
_ROLES = {"user": "ROLE_USER", "agent": "ROLE_AGENT"}
_ROLE_INPUT = {"ROLE_USER": "user", "ROLE_AGENT": "agent", 1: "user", 2: "agent"}
#: marks a canonical data part that wraps a non-object value (a2a-sdk's compat spelling)
_WRAPPED = "data_part_compat"


# -- rendering: canonical → ProtoJSON ---------------------------------------------------------


def part(doc: Mapping[str, Any]) -> dict[str, Any]:
    kind = doc.get("kind")
    meta = doc.get("metadata")
    out: dict[str, Any]
    if kind == "text":
        out = {"text": doc["text"]}
    elif kind == "data":
        data = doc.get("data")
        if meta and _WRAPPED in meta:
            if meta[_WRAPPED] and isinstance(data, dict) and "value" in data:
                data = data["value"]
            meta = {key: value for key, value in meta.items() if key != _WRAPPED}
        out = {"data": data}
    else:
        file = doc.get("file") or {}
        out = {"raw": file["bytes"]} if "bytes" in file else {"url": file.get("uri", "")}
        if file.get("name"):
            out["filename"] = file["name"]
        if file.get("mimeType"):
            out["mediaType"] = file["mimeType"]
    if meta:
        out["metadata"] = meta
    return out


def _copy_set(out: dict[str, Any], doc: Mapping[str, Any], keys: tuple[str, ...]) -> None:
    """``doc``'s ``keys`` that hold something (proto leaves defaults out), into ``out``."""
    for key in keys:
        value = doc.get(key)
        if value:
            out[key] = value


def message(doc: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"messageId": doc["messageId"]}
    _copy_set(out, doc, ("contextId", "taskId"))
    out["role"] = _ROLES.get(doc.get("role", "agent"), "ROLE_AGENT")
    out["parts"] = [part(p) for p in doc.get("parts", ())]
    _copy_set(out, doc, ("metadata", "extensions", "referenceTaskIds"))
    return out


def status(doc: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"state": STATE_NAMES.get(doc["state"], "TASK_STATE_UNSPECIFIED")}
    said = doc.get("message")
    if said:
        out["message"] = message(said)
    _copy_set(out, doc, ("timestamp",))
    return out


def artifact(doc: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"artifactId": doc["artifactId"]}
    _copy_set(out, doc, ("name", "description"))
    out["parts"] = [part(p) for p in doc.get("parts", ())]
    _copy_set(out, doc, ("metadata", "extensions"))
    return out


def task(doc: Mapping[str, Any], generation: int | None = None, *, include_artifacts: bool = True) -> dict[str, Any]:
    """A Task: only proto fields, empty lists left out; ``generation`` only for a 1.1 caller (int64: a string)."""
    out: dict[str, Any] = {"id": doc["id"], "contextId": doc["contextId"], "status": status(doc["status"])}
    artifacts = doc.get("artifacts") if include_artifacts else None
    if artifacts:
        out["artifacts"] = [artifact(a) for a in artifacts]
    history = doc.get("history")
    if history:
        out["history"] = [message(m) for m in history]
    _copy_set(out, doc, ("metadata",))
    if generation is not None:
        out["generation"] = str(generation)
    return out


def frame_task(doc: Mapping[str, Any], generation: int | None = None) -> dict[str, Any]:
    """A Task as a StreamResponse (a stream's first frame, a SendMessage result)."""
    return {"task": task(doc, generation)}


def event(doc: Mapping[str, Any], generation: int | None = None) -> dict[str, Any]:
    """A canonical status or artifact update as a StreamResponse (``final`` has no 1.0 field)."""
    body: dict[str, Any] = {"taskId": doc["taskId"], "contextId": doc["contextId"]}
    if generation is not None:
        body["generation"] = str(generation)
    if doc.get("kind") == "artifact-update":
        body["artifact"] = artifact(doc["artifact"])
        if doc.get("append"):
            body["append"] = True
        if doc.get("lastChunk"):
            body["lastChunk"] = True
        if doc.get("metadata"):
            body["metadata"] = doc["metadata"]
        return {"artifactUpdate": body}
    body["status"] = status(doc["status"])
    if doc.get("metadata"):
        body["metadata"] = doc["metadata"]
    return {"statusUpdate": body}


# -- parsing: ProtoJSON → canonical -----------------------------------------------------------


class Proto(BaseModel):
    """A ProtoJSON message: camelCase or snake_case names, unknown fields ignored."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="ignore", strict=True)


_Id = Annotated[str, Field(min_length=1, max_length=ID_MAX)]
_UNSET: Any = object()


class Part(Proto):
    text: str | None = None
    raw: str | None = None
    url: str | None = None
    data: Any = _UNSET
    metadata: dict[str, Any] | None = None
    filename: str | None = None
    media_type: str | None = None

    @model_validator(mode="after")
    def _one_member(self) -> Part:
        members = [n for n in ("text", "raw", "url") if getattr(self, n) is not None]
        if self.data is not _UNSET:
            members.append("data")
        if len(members) != 1:
            found = ", ".join(members) or "none"
            raise ValueError(f"a part holds exactly one of text, raw, url or data (found {found})")
        return self


class ProtoMessage(Proto):
    message_id: str = Field(min_length=1, max_length=255)
    context_id: str | None = Field(default=None, min_length=1, max_length=255)
    task_id: _Id | None = None
    role: str | int
    parts: list[Part] = Field(min_length=1)
    metadata: dict[str, Any] | None = None
    extensions: list[str] | None = None
    reference_task_ids: list[_Id] | None = None

    @model_validator(mode="after")
    def _known_role(self) -> ProtoMessage:
        if self.role not in _ROLE_INPUT:
            raise ValueError("role must be ROLE_USER or ROLE_AGENT")
        return self


class ProtoAuthentication(Proto):
    scheme: str = Field(min_length=1, max_length=64)
    credentials: str | None = Field(default=None, max_length=4096)


class ProtoPushConfig(Proto):
    """A ``TaskPushNotificationConfig``: flat, ``authentication.scheme`` singular."""

    tenant: str | None = None
    id: str | None = Field(default=None, max_length=128)
    task_id: str | None = Field(default=None, max_length=ID_MAX)
    url: str = Field(min_length=1, max_length=2048)
    token: str | None = Field(default=None, max_length=4096)
    authentication: ProtoAuthentication | None = None


class SendConfiguration(Proto):
    accepted_output_modes: list[str] | None = None
    task_push_notification_config: ProtoPushConfig | None = None
    history_length: int | None = None
    return_immediately: bool | None = None


class SendMessageRequest(Proto):
    tenant: str | None = None
    #: checked by :func:`canonical_message`, once (``Any``: not copied as a dict first)
    message: Any
    configuration: SendConfiguration | None = None
    metadata: dict[str, Any] | None = None


class GetTaskRequest(Proto):
    tenant: str | None = None
    id: _Id
    history_length: int | None = None


#: a ProtoJSON Timestamp, held as the stored stamp it is compared with (:func:`tether.clock.stamp_bound`)
Timestamp = Annotated[str, AfterValidator(clock.stamp_bound)]


class ListTasksRequest(Proto):
    tenant: str | None = None
    context_id: str | None = Field(default=None, max_length=255)
    status: str | int | None = None
    page_size: int | None = None
    page_token: str | None = Field(default=None, max_length=1024)
    history_length: int | None = None
    status_timestamp_after: Timestamp | None = Field(default=None, max_length=64)
    include_artifacts: bool | None = None


class TaskIdRequest(Proto):
    """``CancelTask`` and ``SubscribeToTask``."""

    tenant: str | None = None
    id: _Id
    metadata: dict[str, Any] | None = None


class PushConfigRequest(Proto):
    """``Get`` and ``DeleteTaskPushNotificationConfig``."""

    tenant: str | None = None
    task_id: _Id
    id: _Id


class ListPushConfigsRequest(Proto):
    tenant: str | None = None
    task_id: _Id
    page_size: int | None = Field(default=None, ge=0, le=INT32_MAX)
    page_token: str | None = None


def state_of(value: str | int | None) -> str | None:
    """The canonical state a ``status`` filter names (None: no filter); InvalidParams for an unknown one."""
    name = _STATE_NUMBERS.get(value) if isinstance(value, int) else value
    if name is None or name == "TASK_STATE_UNSPECIFIED":
        return None
    if name not in _CANONICAL_STATES:
        raise InvalidParams(
            f"status {value!r} is not a TaskState: use one of {', '.join(sorted(_CANONICAL_STATES))}",
            data={"errors": [{"path": "params.status", "message": "not a TaskState name"}]},
        )
    return _CANONICAL_STATES[name]


#: an int64 written as a string, as ProtoJSON writes one (ASCII digits only: ``str.isdigit`` takes others)
_INT64_TEXT = re.compile("[0-9]{1,19}")


def generation_of(params: Mapping[str, Any], *path: str) -> int | None:
    """A 1.1 int64 generation at ``path`` in raw params (camelCase or snake_case; a string or a number).

    Raises
    ------
    InvalidParams
        For a value that is not a whole number of at least 0.
    """
    value: Any = params
    for name in path:
        if not isinstance(value, Mapping):
            return None
        snake = "".join("_" + c.lower() if c.isupper() else c for c in name)
        value = value.get(name, value.get(snake))
    if value is None:
        return None
    if isinstance(value, str) and _INT64_TEXT.fullmatch(value):
        value = int(value)
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= INT64_MAX:
        return value
    field = ".".join(path)
    raise InvalidParams(
        f"{field} must be a generation (a whole number from 0 to {INT64_MAX}, as a string or a number), "
        f"not {value!r:.40}",
        data={"errors": [{"path": f"params.{field}", "message": "not a generation"}]},
    )


def history_length(value: int | None, field: str = "historyLength") -> int | None:
    """A ``historyLength``: unset keeps the default, 0 none, N the newest N; negative or past int32 is refused."""
    if value is not None and not 0 <= value <= INT32_MAX:
        raise InvalidParams(
            f"{field} must be 0 to {INT32_MAX} (0 leaves history out), not {value}",
            data={"errors": [{"path": f"params.{field}", "message": f"must be 0 to {INT32_MAX}"}]},
        )
    return value


#: the camelCase names a message or a part may have; a name outside them (snake_case, unknown) takes the long way
_MESSAGE_NAMES = frozenset(
    {"messageId", "contextId", "taskId", "role", "parts", "metadata", "extensions", "referenceTaskIds"}
)
_PART_NAMES = frozenset({"text", "raw", "url", "data", "metadata", "filename", "mediaType"})
_FILE_MEMBERS = (("raw", "bytes"), ("url", "uri"))


def _str_or_none(value: Any) -> bool:
    return value is None or isinstance(value, str)


def _plain_part(doc: Any) -> dict[str, Any] | None:
    """A camelCase 1.0 part in the canonical shape; None unless it plainly is one (one member, right types).

    Checks only what the canonical model cannot: a file part's fields (canonical keeps
    ``file`` as any object) and ``metadata`` before it is copied. Types the canonical
    model checks (``text``) are left to it.
    """
    if not isinstance(doc, dict) or not doc.keys() <= _PART_NAMES:
        return None
    metadata = doc.get("metadata")
    if not (metadata is None or isinstance(metadata, dict)):
        return None
    members = [name for name in ("text", "raw", "url") if doc.get(name) is not None]
    if "data" in doc:
        members.append("data")
    if len(members) != 1:
        return None
    meta = dict(metadata or {})
    out: dict[str, Any]
    if members[0] == "text":
        out = {"kind": "text", "text": doc["text"]}
    elif members[0] == "data":
        data = doc["data"]
        if isinstance(data, dict):
            out = {"kind": "data", "data": data}
        else:
            out = {"kind": "data", "data": {"value": data}}
            meta[_WRAPPED] = True
    else:
        name, media_type = doc.get("filename"), doc.get("mediaType")
        if not (_str_or_none(name) and _str_or_none(media_type)):
            return None
        file = {canonical: doc[member] for member, canonical in _FILE_MEMBERS if doc.get(member) is not None}
        if not all(isinstance(value, str) for value in file.values()):
            return None
        if name:
            file["name"] = name
        if media_type:
            file["mimeType"] = media_type
        out = {"kind": "file", "file": file}
    if meta:
        out["metadata"] = meta
    return out


def _canonical_part(checked: Part) -> dict[str, Any]:
    """A part already checked as ProtoJSON, in the canonical shape."""
    out = _plain_part(checked.model_dump(by_alias=True, exclude_unset=True))
    if out is None:  # a checked Part always dumps to the plain shape
        raise AssertionError("a checked 1.0 part did not map to the canonical shape")
    return out


def _plain_message(doc: Any) -> dict[str, Any] | None:
    """A camelCase 1.0 message in the canonical (0.3) shape; None unless it plainly is one.

    What both shapes check alike (ids, lengths, lists of strings, ``metadata`` an object)
    is left to the canonical model that validates the result.
    """
    if not isinstance(doc, dict) or not doc.keys() <= _MESSAGE_NAMES:
        return None
    role, parts = doc.get("role"), doc.get("parts")
    if role.__class__ not in (str, int) or role not in _ROLE_INPUT or not isinstance(parts, list) or not parts:
        return None
    plain = [_plain_part(p) for p in parts]
    if None in plain:
        return None
    out = {key: value for key, value in doc.items() if value is not None}
    out["kind"] = "message"
    out["role"] = _ROLE_INPUT[role]
    out["parts"] = plain
    return out


def canonical_message(raw: Any, at: str = "params.message") -> Message:
    """A 1.0 message (raw ProtoJSON) in the canonical (0.3) shape the service and the task history use.

    Validated once: a message that plainly has the 1.0 shape is mapped and checked by the
    canonical model alone. Anything else (snake_case names, a part with two members, a
    wrong type anywhere) is checked as ProtoJSON first, so its error speaks 1.0's names.

    Raises
    ------
    InvalidParams
        Naming the fields that are wrong, under ``at``.
    """
    doc = _plain_message(raw)
    if doc is not None:
        try:
            return Message.model_validate(doc)
        except ValidationError:
            pass  # refused below, in 1.0's words
    checked = parse_params(ProtoMessage, raw, at=at)
    doc = _plain_message(checked.model_dump(by_alias=True, exclude_unset=True))
    if doc is None:  # a ProtoMessage always dumps to the plain shape
        raise AssertionError("a checked 1.0 message did not map to the canonical shape")
    return parse_params(Message, doc, at=at)


def canonical_push(config: ProtoPushConfig) -> PushConfigInput:
    """A 1.0 push config as the canonical input: ``authentication.scheme`` becomes ``schemes[0]``."""
    auth = config.authentication
    return PushConfigInput(
        url=config.url,
        id=config.id or None,
        token=config.token or None,
        authentication=PushAuthentication(schemes=[auth.scheme], credentials=auth.credentials) if auth else None,
    )


def push_body(config: PushConfigRow, stored: bytes) -> tuple[bytes, str]:
    """A push as its config's version sends it (the outbox keeps the canonical 0.3 body).

    A config registered over 1.0 gets a ``StreamResponse`` (``{statusUpdate}``, or
    ``{task}`` with ``--push-body task``) as ``application/a2a+json``; one registered over
    0.3 gets the body as stored.
    """
    if config.version == "0.3":
        return stored, "application/json"
    doc = orjson.loads(stored)
    rendered = event(doc) if doc.get("kind") in ("status-update", "artifact-update") else frame_task(doc)
    if config.version == BOUND_VERSION:  # registered on the v2-advertised interface: its task ids are bound
        rendered = bound_push(rendered, config.tenant)
    return orjson.dumps(rendered), "application/a2a+json"


# -- a peer's answers: ProtoJSON → canonical (the hand-off client reads other agents' Tasks) ----------


class ProtoArtifact(Proto):
    artifact_id: str
    name: str | None = None
    description: str | None = None
    parts: list[Part] = Field(default_factory=list)
    metadata: dict[str, Any] | None = None


class ProtoStatus(Proto):
    state: str | int = "TASK_STATE_UNSPECIFIED"
    message: dict[str, Any] | None = None
    timestamp: str | None = None


class ProtoTask(Proto):
    id: str = Field(min_length=1)
    context_id: str | None = None
    status: ProtoStatus
    artifacts: list[ProtoArtifact] | None = None
    metadata: dict[str, Any] | None = None


def canonical_task(doc: Any) -> dict[str, Any]:
    """A peer's 1.0 Task in the canonical (0.3) shape; ValueError if it is not a Task.

    The reverse of :func:`task`, for the hand-off client: what another agent answers is
    read into the one shape the rest of Tether handles, whichever version it spoke.
    """
    parsed = ProtoTask.model_validate(doc)
    state = _STATE_NUMBERS.get(parsed.status.state) if isinstance(parsed.status.state, int) else parsed.status.state
    status: dict[str, Any] = {"state": _CANONICAL_STATES.get(state or "", "unknown")}
    if parsed.status.message is not None:
        status["message"] = canonical_message(parsed.status.message, "status.message").model_dump(exclude_none=True)
    if parsed.status.timestamp:
        status["timestamp"] = parsed.status.timestamp
    out: dict[str, Any] = {"kind": "task", "id": parsed.id, "contextId": parsed.context_id, "status": status}
    if parsed.artifacts:
        out["artifacts"] = [
            {
                "artifactId": a.artifact_id,
                **({"name": a.name} if a.name else {}),
                "parts": [_canonical_part(p) for p in a.parts],
                **({"metadata": a.metadata} if a.metadata else {}),
            }
            for a in parsed.artifacts
        ]
    if parsed.metadata:
        out["metadata"] = parsed.metadata
    return out
