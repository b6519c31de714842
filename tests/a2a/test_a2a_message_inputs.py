"""A workflow sees the message that started it: ``inputs.message`` routes it, and a node answers with parts.

``tests/a2a/workflows/route-by-message.json`` takes one branch or the other by the
``messageId`` prefix (an edge condition on ``inputs.message.messageId``, as the A2A TCK's
scenarios are picked) and answers through an output ``message`` of parts: a text naming
the message and its context, or a file it makes with its bytes inline (stored as a blob,
never in an event) beside a file by URI.
"""

from __future__ import annotations

import base64
import json
import uuid

import httpx
from a2a_wire import result, run_events, send
from a2a_wire10 import result10

MADE = b"Generated file content"


def test_the_message_routes_the_run_and_reaches_its_templates(http: httpx.Client) -> None:
    message_id = f"greet-{uuid.uuid4()}"
    sent = {
        "kind": "message",
        "role": "user",
        "messageId": message_id,
        "contextId": "ctx-routing",
        "parts": [{"kind": "text", "text": "hi"}, {"kind": "data", "data": {"n": 1}}],
        "metadata": {"skillId": "route-by-message", "note": "a question"},
    }
    task = send(http, sent)
    assert task["status"]["state"] == "completed", task
    assert task["artifacts"][0]["parts"] == [
        {"kind": "text", "text": f"Hello, {message_id} in ctx-routing"},
        {"kind": "data", "data": {"asked": "a question"}},
    ]
    started = run_events(http, task["id"])[0]["payload"]["inputs"]
    assert started["message"] == {
        "messageId": message_id,
        "contextId": "ctx-routing",
        "metadata": {"skillId": "route-by-message", "note": "a question"},
        "parts": sent["parts"],
    }
    assert started["prompt"] == "hi" and started["n"] == 1, "the prompt and the data merge stay as they were"
    nodes = http.get(f"/v1/runs/{task['id']}").json()["nodeStates"]
    assert nodes["greet"]["status"] == "completed" and nodes["make-file"]["status"] == "skipped"


def test_another_message_id_takes_the_other_branch_and_gets_the_file_it_makes(http: httpx.Client) -> None:
    message = {
        "messageId": f"tck-artifact-file-{uuid.uuid4()}",
        "role": "ROLE_USER",
        "parts": [{"text": "make me a file"}],
        "metadata": {"skillId": "route-by-message"},
    }
    task = result10(http, "SendMessage", {"message": message})["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED", task
    made = {"raw": base64.b64encode(MADE).decode(), "filename": "output.txt", "mediaType": "text/plain"}
    linked = {"url": "https://example.com/output.txt", "filename": "output.txt", "mediaType": "text/plain"}
    assert task["artifacts"][0]["parts"] == [made, linked], "the file part first, as the TCK reads it"
    as03 = result(http, "tasks/get", {"id": task["id"]})
    assert as03["artifacts"][0]["parts"][0]["file"]["bytes"] == made["raw"]
    events = run_events(http, task["id"])
    assert made["raw"] not in json.dumps(events), "the bytes a node makes are a blob, not part of its event"
    [completed] = [e for e in events if e["type"] == "node.completed" and e["nodeId"] == "make-file"]
    stored = completed["payload"]["outputs"]["message"]["parts"][0]["file"]
    assert stored["size"] == len(MADE) and stored["name"] == "output.txt"
    assert http.get(f"/v1/runs/{task['id']}/files/{stored['blob']}").content == MADE
