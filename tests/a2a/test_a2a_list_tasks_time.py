"""ListTasks' ``statusTimestampAfter`` is an instant: parsed as a ProtoJSON Timestamp, compared as a time.

The same instant written with another offset or more fraction digits gives the same page,
on both 1.0 bindings and both stores; anything that is not an RFC 3339 date-time with an
offset is refused (``-32602`` over JSON-RPC, ``400`` over HTTP+JSON) naming the field, as
the official TCK's ``test_invalid_timestamp_error`` expects.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import httpx
import pytest
from a2a_wire10 import answer10, post10, result10, user10

REST = "/v1/a2a/rest"
V10 = {"A2A-Version": "1.0"}


def _task_in_new_context(http: httpx.Client) -> dict[str, Any]:
    message = {**user10("hello", skill="echo"), "contextId": f"ctx-{uuid.uuid4()}"}
    task: dict[str, Any] = result10(http, "SendMessage", {"message": message})["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    return task


def _listed_rpc(http: httpx.Client, context_id: str, after: str) -> int:
    page = result10(http, "ListTasks", {"contextId": context_id, "statusTimestampAfter": after})
    return int(page.get("totalSize", 0))


def _listed_rest(http: httpx.Client, context_id: str, after: str) -> int:
    response = http.get(f"{REST}/tasks", headers=V10, params={"contextId": context_id, "statusTimestampAfter": after})
    assert response.status_code == 200, response.text
    return int(response.json().get("totalSize", 0))


def _written(moment: datetime, offset: timedelta, digits: int) -> str:
    """``moment`` in RFC 3339 at ``offset`` with ``digits`` fraction digits (0-9), zero-padded past microseconds."""
    local = moment.astimezone(timezone(offset))
    text = local.strftime("%Y-%m-%dT%H:%M:%S")
    if digits:
        text += "." + f"{local.microsecond:06d}{'0' * 3}"[:digits]
    if not offset:
        return text + "Z"
    sign = "-" if offset < timedelta(0) else "+"
    minutes = int(abs(offset).total_seconds()) // 60
    return f"{text}{sign}{minutes // 60:02d}:{minutes % 60:02d}"


@pytest.mark.parametrize("listed", [_listed_rpc, _listed_rest], ids=["jsonrpc", "http-json"])
def test_the_same_instant_in_any_offset_or_precision_lists_the_same_task(http: httpx.Client, listed: Any) -> None:
    task = _task_in_new_context(http)
    context = task["contextId"]
    stamp = datetime.fromisoformat(result10(http, "GetTask", {"id": task["id"]})["status"]["timestamp"])
    assert stamp.tzinfo is not None and stamp.microsecond % 1000 == 0, "stored stamps are whole milliseconds"
    offsets = [timedelta(0), timedelta(hours=1), timedelta(hours=-7), timedelta(hours=5, minutes=30)]
    for offset in offsets:
        for digits in (3, 6, 9):
            at = _written(stamp, offset, digits)
            assert listed(http, context, at) == 1, f"the task's own instant {at} must list it"
        # a whole-second instant at or before the stamp lists it; one just after it does not
        floor = stamp.replace(microsecond=0)
        assert listed(http, context, _written(floor, offset, 0)) == 1
        assert listed(http, context, _written(stamp + timedelta(microseconds=1), offset, 6)) == 0
    # one nanosecond after the stamp is after it: every fraction digit counts, not Python's six
    nano_after = _written(stamp, timedelta(0), 6).replace("Z", "001Z")
    assert listed(http, context, nano_after) == 0
    assert listed(http, context, "1970-01-01T00:00:00Z") == 1
    assert listed(http, context, _written(datetime.now(UTC) + timedelta(days=1), timedelta(0), 3)) == 0


BAD_TIMESTAMPS = [
    "yesterday",
    "-1",
    "1700000000",
    "2026-01-31",  # a date, no time
    "2026-01-31T00:00:00",  # no offset
    "2026-02-30T00:00:00Z",  # no such day
    "2026-01-31T24:00:00Z",
    "2026-01-31T00:00:00+25:00",
    "",
]


@pytest.mark.parametrize("bad", BAD_TIMESTAMPS)
def test_a_value_that_is_no_timestamp_is_refused_naming_the_field(http: httpx.Client, bad: str) -> None:
    before = result10(http, "ListTasks", {"pageSize": 1}).get("totalSize", 0)
    body = answer10(post10(http, "ListTasks", {"statusTimestampAfter": bad}), "ListTasks")
    assert body["error"]["code"] == -32602, body
    assert "statusTimestampAfter" in body["error"]["message"], body
    assert "RFC 3339" in body["error"]["message"] or "instant" in body["error"]["message"], body

    rest = http.get(f"{REST}/tasks", headers=V10, params={"statusTimestampAfter": bad})
    assert rest.status_code == 400, rest.text
    error = rest.json()["error"]
    assert error["details"][0]["reason"] == "INVALID_PARAMS" and "statusTimestampAfter" in error["message"]
    assert result10(http, "ListTasks", {"pageSize": 1}).get("totalSize", 0) == before, "a refusal writes nothing"


def test_a_number_for_the_timestamp_is_refused(http: httpx.Client) -> None:
    body = answer10(post10(http, "ListTasks", {"statusTimestampAfter": 1700000000}), "ListTasks")
    assert body["error"]["code"] == -32602 and "statusTimestampAfter" in body["error"]["message"], body
