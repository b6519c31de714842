"""The params of the A2A 0.3 methods, as the 0.3 JSON schema writes them, checked strictly.

A message inside them is the canonical :class:`~tether.a2a.message.Message` (0.3's shape is
Tether's canonical one). Task ids and push config ids are at most
:data:`~tether.a2a.message.ID_MAX` characters, as REST's run ids are.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from tether.a2a.errors import InvalidParams
from tether.a2a.message import Message, ParamId, StrictModel, parse_params
from tether.types import INT32_MAX

__all__ = [
    "DeletePushParams",
    "GetPushParams",
    "SendConfiguration",
    "SendParams",
    "SetPushParams",
    "TaskIdParams",
    "TaskQueryParams",
    "parse_send_params",
]


class SendConfiguration(StrictModel):
    acceptedOutputModes: list[str] | None = None
    historyLength: int | None = Field(default=None, ge=0, le=INT32_MAX)
    pushNotificationConfig: dict[str, Any] | None = None
    blocking: bool | None = None


class SendParams(StrictModel):
    message: Message
    configuration: SendConfiguration | None = None
    metadata: dict[str, Any] | None = None


class TaskIdParams(StrictModel):
    id: ParamId
    metadata: dict[str, Any] | None = None


class TaskQueryParams(TaskIdParams):
    historyLength: int | None = Field(default=None, ge=0, le=INT32_MAX)


class SetPushParams(StrictModel):
    taskId: ParamId
    pushNotificationConfig: dict[str, Any]


class GetPushParams(TaskIdParams):
    pushNotificationConfigId: ParamId | None = None


class DeletePushParams(TaskIdParams):
    pushNotificationConfigId: ParamId


def parse_send_params(params: dict[str, Any]) -> SendParams:
    """``message/send`` and ``message/stream`` params, refusing a message with no parts.

    The schema lets ``parts`` be empty, but such a message says nothing: a skill that
    needs no input would run on it, so it is refused before any skill is chosen.
    """
    send = parse_params(SendParams, params)
    if not send.message.parts:
        message = (
            'params.message.parts is empty: a message needs at least one part, such as {"kind": "text", "text": "..."} '
            'or {"kind": "data", "data": {...}}'
        )
        raise InvalidParams(message, data={"errors": [{"path": "params.message.parts", "message": message}]})
    return send
