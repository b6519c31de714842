"""A 1.0 message, however it is spelled, becomes the same stored message; a malformed one is refused in 1.0's words.

The 1.0 codec reads a message that plainly has the ProtoJSON shape (camelCase names,
one member per part) with a single validation, and anything else through the full
ProtoJSON model first. These tests hold the two ways to one answer, over the wire: the
same message in camelCase, in proto snake_case and in a mix of both is stored as the same
history entry; every malformed message is refused with -32602 naming the 1.0 field, and
writes nothing.
"""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import pytest
from a2a_wire10 import answer10, post10, result10

from tether.a2a.v1_0 import protojson


def _spelled(snake: bool, **fields: Any) -> dict[str, Any]:
    """``fields`` (camelCase) with the names in snake_case when ``snake``."""
    if not snake:
        return fields
    return {"".join("_" + c.lower() if c.isupper() else c for c in name): value for name, value in fields.items()}


def _message(spelling: str, message_id: str, context_id: str) -> dict[str, Any]:
    """One message in camelCase, in snake_case, or mixed: camelCase but for the optional fields."""
    snake = spelling == "snake"
    parts = [
        _spelled(snake, text="look at these", metadata={"note": "first"}),
        _spelled(snake, data={"payload": "x"}),
        _spelled(snake, data=[1, 2, 3]),
    ]
    required = _spelled(snake, messageId=message_id, role="ROLE_USER", parts=parts)
    optional = _spelled(
        spelling != "camel",
        contextId=context_id,
        extensions=["https://example.com/ext/v1"],
        referenceTaskIds=["run_earlier"],
        metadata={"origin": "test"},
    )
    return {**required, **optional}


def _stored(http: httpx.Client, spelling: str) -> dict[str, Any]:
    message_id, context_id = f"spelled-{uuid.uuid4()}", f"ctx-{uuid.uuid4()}"
    task = result10(http, "SendMessage", {"message": _message(spelling, message_id, context_id)})["task"]
    assert task["contextId"] == context_id, "the context the message names, whatever its spelling"
    got = result10(http, "GetTask", {"id": task["id"]})
    (first,) = [m for m in got["history"] if m["messageId"] == message_id]
    assert first.pop("messageId") == message_id and first.pop("contextId") == context_id
    assert first.pop("taskId") == task["id"]
    return first


def test_every_spelling_of_a_message_is_stored_alike(http: httpx.Client) -> None:
    camel, snake, mixed = (_stored(http, spelling) for spelling in ("camel", "snake", "mixed"))
    assert camel == snake == mixed
    assert camel == {
        "role": "ROLE_USER",
        "parts": [
            {"text": "look at these", "metadata": {"note": "first"}},
            {"data": {"payload": "x"}},
            {"data": [1, 2, 3]},
        ],
        "extensions": ["https://example.com/ext/v1"],
        "referenceTaskIds": ["run_earlier"],
        "metadata": {"origin": "test"},
    }


FILES = [
    {"raw": "aGVsbG8=", "filename": "hello.txt", "mediaType": "text/plain"},
    {"url": "https://example.com/report.pdf", "mediaType": "application/pdf"},
]


@pytest.mark.parametrize("snake", [False, True], ids=["camel", "snake"])
def test_file_parts_in_either_spelling_are_kept_and_echoed_as_sent(http: httpx.Client, snake: bool) -> None:
    """Files are taken (issue 26; they were refused with -32005 before): echo answers with them as sent."""
    parts = [_spelled(snake, **part) for part in FILES]
    doc = _spelled(snake, messageId=f"files-{uuid.uuid4()}", role="ROLE_USER", parts=parts)
    task = result10(http, "SendMessage", {"message": doc})["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED", task
    assert task["artifacts"][0]["parts"] == FILES
    assert task["history"][0]["parts"] == FILES
    assert result10(http, "GetTask", {"id": task["id"]})["artifacts"] == task["artifacts"]


def test_file_parts_map_alike_in_either_spelling() -> None:
    """The codec itself: raw and url, filename and mediaType, in both spellings, as the canonical (0.3) shape."""
    camel = protojson.canonical_message({"messageId": "m", "role": "ROLE_USER", "parts": FILES})
    snake = protojson.canonical_message(
        {"message_id": "m", "role": 1, "parts": [_spelled(True, **part) for part in FILES]}
    )
    assert camel == snake
    assert camel.model_dump(exclude_none=True)["parts"] == [
        {"kind": "file", "file": {"bytes": "aGVsbG8=", "name": "hello.txt", "mimeType": "text/plain"}},
        {"kind": "file", "file": {"uri": "https://example.com/report.pdf", "mimeType": "application/pdf"}},
    ]


def _plain(**overrides: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {"messageId": f"bad-{uuid.uuid4()}", "role": "ROLE_USER", "parts": [{"text": "hi"}]}
    doc.update(overrides)
    return {key: value for key, value in doc.items() if value is not None}


MALFORMED = [
    ("two-members", _plain(parts=[{"text": "a", "data": {"b": 1}}]), "params.message.parts.0", "exactly one of"),
    ("no-member", _plain(parts=[{"metadata": {}}]), "params.message.parts.0", "exactly one of"),
    ("no-parts", _plain(parts=[]), "params.message.parts", "at least 1"),
    ("parts-not-a-list", _plain(parts={"text": "a"}), "params.message.parts", "list"),
    ("part-not-an-object", _plain(parts=["hi"]), "params.message.parts.0", ""),
    ("role-unknown", _plain(role="ROLE_SYSTEM"), "params.message", "ROLE_USER or ROLE_AGENT"),
    ("role-a-number-out-of-range", _plain(role=3), "params.message", "ROLE_USER or ROLE_AGENT"),
    ("role-a-boolean", _plain(role=True), "params.message.role", ""),
    ("no-role", _plain(role=None), "params.message.role", "required"),
    ("text-not-a-string", _plain(parts=[{"text": 5}]), "params.message.parts.0.text", "string"),
    ("raw-not-a-string", _plain(parts=[{"raw": 5}]), "params.message.parts.0.raw", "string"),
    ("url-not-a-string", _plain(parts=[{"url": ["x"]}]), "params.message.parts.0.url", "string"),
    ("filename-not-a-string", _plain(parts=[{"raw": "aGk=", "filename": 7}]), "params.message.parts.0.filename", ""),
    ("media-type-not-a-string", _plain(parts=[{"url": "u", "mediaType": {}}]), "params.message.parts.0.mediaType", ""),
    (
        "part-metadata-a-list",
        _plain(parts=[{"data": 1, "metadata": [["a", 1]]}]),
        "params.message.parts.0.metadata",
        "",
    ),
    ("no-message-id", _plain(messageId=None), "params.message.messageId", "required"),
    ("empty-message-id", _plain(messageId=""), "params.message.messageId", "at least 1"),
    ("long-task-id", _plain(taskId="t" * 129), "params.message.taskId", "at most 128"),
    ("metadata-a-list", _plain(metadata=["x"]), "params.message.metadata", "dictionary"),
    ("extensions-not-strings", _plain(extensions=[1]), "params.message.extensions.0", "string"),
    ("snake-case-wrong-type", {**_plain(), "context_id": 5}, "params.message.context_id", "string"),
    ("message-not-an-object", "hi", "params.message", ""),
]


@pytest.mark.parametrize(("doc", "path", "says"), [case[1:] for case in MALFORMED], ids=[c[0] for c in MALFORMED])
def test_a_malformed_message_is_refused_in_1_0_words_and_writes_nothing(
    http: httpx.Client, doc: Any, path: str, says: str
) -> None:
    before = result10(http, "ListTasks", {"pageSize": 1}).get("totalSize", 0)
    body = answer10(post10(http, "SendMessage", {"message": doc}), "SendMessage")
    error = body["error"]
    assert error["code"] == -32602, body
    assert error["message"].startswith(path), error["message"]
    assert says.lower() in error["message"].lower(), error["message"]
    assert "kind" not in error["message"], "a 1.0 caller is never told about 0.3's kind"
    assert result10(http, "ListTasks", {"pageSize": 1}).get("totalSize", 0) == before
