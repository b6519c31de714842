"""File parts over the raw wire, both A2A generations, both stores: kept, echoed, bounded, content-free at rest.

A file with inline bytes (0.3 ``file.bytes``, 1.0 ``raw``) is stored once as a blob and
referred to everywhere else; a file given by URI stays that URI. The ``echo`` skill
answers with every part it was sent, so a file goes in, comes back out of ``tasks/get``,
``GetTask``, the HTTP+JSON binding and every stream, byte for byte (sha256 compared), in
the version that reads it, whichever version sent it. Over a limit, a file is refused
with the limit named and nothing is written (the store's rows counted).
"""

from __future__ import annotations

import base64
import hashlib
import json
import random
import uuid
from typing import Any

import httpx
import pytest
from a2a_wire import WORKFLOWS, error, get_task, message, run_events, send, stream, task_record
from a2a_wire10 import post10, result10, stream10
from backends import suite_host
from harness import Host
from keys import made_key
from store_rows import row_counts

MIB = 1024 * 1024
URI = "https://files.example.com/q3/report.pdf?rev=7"
#: the limits the module's host runs with: a 1 MiB file fits, 2 MiB and one byte does not
PART_LIMIT = 2 * MIB
MESSAGE_LIMIT = 3 * MIB


@pytest.fixture
def host(request: pytest.FixtureRequest, backend: str) -> Host:
    return suite_host(
        request,
        "--workflows",
        str(WORKFLOWS),
        "--a2a-file-part-bytes",
        str(PART_LIMIT),
        "--a2a-file-message-bytes",
        str(MESSAGE_LIMIT),
    )


def payload(size: int = MIB + 17, seed: int | None = None) -> bytes:
    """Bytes no text codec would keep intact (every byte value), different each call unless seeded."""
    return random.Random(seed if seed is not None else uuid.uuid4().int).randbytes(size)


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def parts03(data: bytes) -> list[dict[str, Any]]:
    """Text first, then the file's bytes, then a file by URI: what echo must answer with, in order."""
    return [
        {"kind": "text", "text": "the Q3 report, and where the signed copy is"},
        {"kind": "file", "file": {"bytes": b64(data), "name": "q3.bin", "mimeType": "application/octet-stream"}},
        {"kind": "file", "file": {"uri": URI, "name": "signed.pdf", "mimeType": "application/pdf"}},
    ]


def parts10(data: bytes) -> list[dict[str, Any]]:
    """The same parts as A2A 1.0 writes them."""
    return [
        {"text": "the Q3 report, and where the signed copy is"},
        {"raw": b64(data), "filename": "q3.bin", "mediaType": "application/octet-stream"},
        {"url": URI, "filename": "signed.pdf", "mediaType": "application/pdf"},
    ]


def message03(parts: list[dict[str, Any]], **fields: Any) -> dict[str, Any]:
    return {"kind": "message", "role": "user", "messageId": f"files-{uuid.uuid4()}", "parts": parts, **fields}


def message10(parts: list[dict[str, Any]], **fields: Any) -> dict[str, Any]:
    return {"role": "ROLE_USER", "messageId": f"files-{uuid.uuid4()}", "parts": parts, **fields}


def file_sha03(part: dict[str, Any]) -> str:
    return sha(base64.b64decode(part["file"]["bytes"], validate=True))


def file_sha10(part: dict[str, Any]) -> str:
    return sha(base64.b64decode(part["raw"], validate=True))


def assert_content_free(http: httpx.Client, task_id: str, data: bytes) -> None:
    """Nothing at rest but the blob holds the bytes: the run's events and snapshot, and the task record,
    show the file as a reference (name, media type, size, digest)."""
    encoded = b64(data)
    events = run_events(http, task_id)
    assert encoded not in json.dumps(events), "no event holds the bytes"
    snapshot = http.get(f"/v1/runs/{task_id}").json()
    assert encoded not in json.dumps(snapshot), "the run snapshot holds no bytes"
    sent = snapshot["inputs"]["message"]["parts"][1]
    reference = {"blob": f"sha256:{sha(data)}", "size": len(data), "name": "q3.bin"}
    assert sent == {"kind": "file", "file": {**reference, "mimeType": "application/octet-stream"}}
    assert snapshot["inputs"]["message"]["parts"][2] == parts03(data)[2], "a URI is kept as the URI"
    record = task_record(http, task_id)
    assert set(record) <= {"taskId", "runId", "contextId", "state", "updatedAt", "interruptKind", "pushConfig"}
    download = http.get(f"/v1/runs/{task_id}/files/{sent['file']['blob']}")
    assert download.status_code == 200 and sha(download.content) == sha(data)
    assert download.headers["content-type"] == "application/octet-stream"
    assert download.headers["x-content-type-options"] == "nosniff"


def test_a_file_sent_over_0_3_comes_back_from_echo_byte_for_byte(http: httpx.Client) -> None:
    data = payload()
    sent = parts03(data)
    task = send(http, message03(sent))
    assert task["status"]["state"] == "completed", task
    (artifact,) = task["artifacts"]
    assert artifact["parts"] == sent, "every part, as sent, in order (text first)"
    assert file_sha03(artifact["parts"][1]) == sha(data)
    assert task["history"][0]["parts"] == sent
    again = get_task(http, task["id"])
    assert again["artifacts"] == task["artifacts"] and again["history"] == task["history"]
    assert get_task(http, task["id"], historyLength=0)["history"] == []
    assert_content_free(http, task["id"], data)


def test_a_file_sent_over_1_0_reads_alike_in_every_binding_and_version(http: httpx.Client) -> None:
    data = payload()
    sent = parts10(data)
    task = result10(http, "SendMessage", {"message": message10(sent)})["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED", task
    assert task["artifacts"][0]["parts"] == sent and task["history"][0]["parts"] == sent
    assert file_sha10(task["artifacts"][0]["parts"][1]) == sha(data)
    got = result10(http, "GetTask", {"id": task["id"]})
    assert got["artifacts"] == task["artifacts"]
    rest = http.get(f"/v1/a2a/rest/tasks/{task['id']}", headers={"A2A-Version": "1.0"})
    assert rest.status_code == 200 and rest.json()["artifacts"] == task["artifacts"]
    listed = result10(http, "ListTasks", {"contextId": task["contextId"], "includeArtifacts": True})
    assert listed["tasks"][0]["artifacts"] == task["artifacts"]
    as03 = get_task(http, task["id"])  # a task started over 1.0, read over 0.3: the 0.3 shape
    assert as03["artifacts"][0]["parts"] == parts03(data)
    assert_content_free(http, task["id"], data)


def test_a_file_sent_over_0_3_reads_in_1_0_and_streams_carry_it(http: httpx.Client) -> None:
    data = payload()
    frames = stream(http, "message/stream", {"message": message03(parts03(data))})
    first, *updates = frames
    assert first.kind == "task" and first.result["history"][0]["parts"] == parts03(data)
    [artifact] = [f.result["artifact"] for f in updates if f.kind == "artifact-update"]
    assert artifact["parts"] == parts03(data)
    assert frames[-1].state == "completed"
    task_id = first.result["id"]
    task10 = result10(http, "GetTask", {"id": task_id})
    assert task10["artifacts"][0]["parts"] == parts10(data), "raw, filename, mediaType; url for the URI"
    # re-attached: the finished task alone over 0.3, every update again after Last-Event-ID over either
    (only,) = stream(http, "tasks/resubscribe", {"id": task_id})
    assert only.result["artifacts"][0]["parts"] == parts03(data)
    replayed = stream(http, "tasks/resubscribe", {"id": task_id}, headers={"Last-Event-ID": "-1"})
    assert [f.result["artifact"]["parts"] for f in replayed if f.kind == "artifact-update"] == [parts03(data)]
    replayed10 = stream10(http, "SubscribeToTask", {"id": task_id}, headers={"Last-Event-ID": "-1"})
    [update10] = [f.result["artifactUpdate"] for f in replayed10 if f.member == "artifactUpdate"]
    assert file_sha10(update10["artifact"]["parts"][1]) == sha(data)


def test_a_1_0_stream_carries_the_file(http: httpx.Client) -> None:
    data = payload()
    frames = stream10(http, "SendStreamingMessage", {"message": message10(parts10(data))})
    assert frames[0].member == "task" and frames[0].result["task"]["history"][0]["parts"] == parts10(data)
    [update] = [f.result["artifactUpdate"] for f in frames if f.member == "artifactUpdate"]
    assert update["artifact"]["parts"] == parts10(data)
    assert frames[-1].state == "TASK_STATE_COMPLETED"


def test_the_same_file_is_stored_once_and_a_resent_message_is_the_same_task(http: httpx.Client, host: Host) -> None:
    data = payload()
    before = row_counts(host)
    first_message = message03(parts03(data))
    first = send(http, first_message)
    assert send(http, first_message)["id"] == first["id"], "the same message again: the same task, stored once"
    second = send(http, message03(parts03(data)))
    assert second["id"] != first["id"] and second["artifacts"][0]["parts"] == parts03(data)
    after = row_counts(host)
    assert after["blobs"] == before["blobs"] + 1, "one blob for the same bytes, however many tasks"
    assert after["run_blobs"] == before["run_blobs"] + 2
    changed = {**first_message, "parts": parts03(payload())}
    reused = error(http, "message/send", {"message": changed})
    assert reused["code"] == -32602 and reused["data"]["reason"] == "idempotency_key_mismatch"


def test_a_file_over_a_limit_is_refused_naming_it_and_nothing_is_written(http: httpx.Client, host: Host) -> None:
    before = row_counts(host)
    too_big = payload(PART_LIMIT + 1, seed=1)
    refused = error(http, "message/send", {"message": message03(parts03(too_big))})
    assert refused["code"] == -32602, refused
    assert "--a2a-file-part-bytes" in refused["message"] and str(PART_LIMIT) in refused["message"]
    assert refused["data"] == {
        "limit": "a2a-file-part-bytes",
        "limitBytes": PART_LIMIT,
        "sizeBytes": PART_LIMIT + 1,
        "path": "params.message.parts.1",
    }
    half = payload(MESSAGE_LIMIT // 2 + 1, seed=2)
    two = message10([{"raw": b64(half)}, {"raw": b64(half), "filename": "again.bin"}])
    body = post10(http, "SendMessage", {"message": two}).json()
    assert body["error"]["code"] == -32602 and "--a2a-file-message-bytes" in body["error"]["message"], body
    [info] = [d for d in body["error"]["data"] if d["@type"].endswith("ErrorInfo")]
    assert info["reason"] == "FILE_TOO_LARGE" and info["metadata"]["limitBytes"] == str(MESSAGE_LIMIT)
    rest = http.post(
        "/v1/a2a/rest/message:send",
        json={"message": message10([{"raw": b64(too_big), "filename": "big.bin"}])},
        headers={"A2A-Version": "1.0"},
    )
    assert rest.status_code == 413, rest.text
    assert rest.json()["error"]["details"][0]["reason"] == "FILE_TOO_LARGE"
    streamed = stream(http, "message/stream", {"message": message03(parts03(too_big))})
    assert [f.body["error"]["code"] for f in streamed] == [-32602]
    not_base64 = message03([{"kind": "file", "file": {"bytes": "not base64!"}}])
    bad = error(http, "message/send", {"message": not_base64})
    assert bad["code"] == -32602 and "params.message.parts.0.file.bytes" in bad["message"], bad
    bad10 = post10(http, "SendMessage", {"message": message10([{"raw": "not base64!"}])}).json()["error"]
    assert bad10["code"] == -32602 and "params.message.parts.0.raw" in bad10["message"], bad10
    assert row_counts(host) == before, "a refused message writes nothing: no run, event, task, message or blob"


def test_a_reply_with_a_file_is_refused_and_changes_nothing(http: httpx.Client, host: Host) -> None:
    waiting = send(http, message("publish it", skill="approval-gated"))
    assert waiting["status"]["state"] == "input-required"
    before = row_counts(host)
    reply = message03(
        [{"kind": "data", "data": {"action": "accept"}}, {"kind": "file", "file": {"bytes": b64(b"signed")}}],
        taskId=waiting["id"],
    )
    refused = error(http, "message/send", {"message": reply})
    assert refused["code"] == -32005 and "starts a task" in refused["message"], refused
    assert row_counts(host) == before
    assert get_task(http, waiting["id"])["status"]["state"] == "input-required"


def test_a_data_part_cannot_stand_in_for_the_message_nor_reach_another_runs_file(http: httpx.Client) -> None:
    data = payload()
    theirs = send(http, message03(parts03(data)))
    blob = http.get(f"/v1/runs/{theirs['id']}").json()["inputs"]["message"]["parts"][1]["file"]
    forged = {"parts": [{"kind": "file", "file": blob}], "messageId": "not-this-one"}
    mine = send(http, message03([{"kind": "text", "text": "mine"}, {"kind": "data", "data": {"message": forged}}]))
    snapshot = http.get(f"/v1/runs/{mine['id']}").json()
    assert snapshot["inputs"]["message"]["messageId"] == mine["history"][0]["messageId"], "the message wins"
    assert mine["artifacts"][0]["parts"] == [
        {"kind": "text", "text": "mine"},
        {"kind": "data", "data": {"message": forged}},
    ], "the forged reference stays data: it never becomes a file"
    assert http.get(f"/v1/runs/{mine['id']}/files/{blob['blob']}").status_code == 404, "not linked to this run"


def test_the_file_route_answers_only_for_a_run_of_the_callers_tenant(http: httpx.Client, host: Host) -> None:
    data = payload(1000)
    task = send(http, message03(parts03(data)))
    digest = f"sha256:{sha(data)}"
    assert http.get(f"/v1/runs/{task['id']}/files/{digest}").content == data
    with host.client(made_key(host, f"other-{uuid.uuid4().hex[:8]}", "--tenant", "acme")) as other:
        assert other.get(f"/v1/runs/{task['id']}/files/{digest}").status_code == 404
    assert http.get(f"/v1/runs/{task['id']}/files/sha256:{'0' * 64}").status_code == 404
    assert http.get(f"/v1/runs/{task['id']}/files/md5:abc").status_code == 400
