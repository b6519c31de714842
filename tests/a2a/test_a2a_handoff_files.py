"""Files across a hand-off: two real Tether hosts hand a file over and get one back, in A2A 1.0 and 0.3, on both stores.

A client sends host A a message with a file (about 1 MiB of bytes, and one by URI). A's
workflow hands the run's message files to host B (a ``vendor.tether.a2a-handoff`` node with
``files`` from ``variables.message``), its version pinned to 1.0 or to 0.3. B's skill keeps
what it was sent and answers with a file of its own (other bytes, and a URI). A keeps B's
file as a blob of its run and answers its client with B's parts, each marked untrusted. The
bytes are compared by sha256 on B (what B received) and in A's artifact (what came back),
and nothing at rest on A but the blobs holds them: its events, run and task record are
content-free. A SIGKILL of A between its send and its record sends nothing twice, and a
file over A's limits fails the node with the limit named, storing nothing.
"""

from __future__ import annotations

import base64
import hashlib
import json
import random
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import httpx
import pytest
from a2a_wire import get_task, message, send, task_record, wait_state
from handoff_hosts import Doc, Pair, assert_clean, b_runs, events, outputs_of, run
from harness import HostProcess, wait_until
from inproc import InProcessHost
from pg import fresh_database, migrated_database
from workflow_docs import node, workflow_doc

MIB = 1024 * 1024
SENT = random.Random(26).randbytes(MIB + 5)  # every byte value: no text codec keeps it intact
RETURNED = random.Random(62).randbytes(MIB + 11)  # B's own file: A holds nothing like it before B answers
SENT_URI = "https://files.example.com/q3/report.pdf?rev=7"
RETURNED_URI = "https://b.example/receipts/q3.pdf"
HANDOFF = "vendor.tether.a2a-handoff"
OCTETS = "application/octet-stream"
#: A's skills: the hand-off pinned to each version (1.0 is what B's card offers first)
SKILLS = {"1.0": "hand-file", "0.3": "hand-file-03"}


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _a_workflows(b_url: str) -> list[Doc]:
    inputs = {
        "prompt": {"type": "variable", "variableName": "prompt"},
        "files": {"type": "variable", "variableName": "message"},  # the message's files, as the run holds them
    }
    config = {"agent": b_url, "skill": "reply-file"}
    return [
        workflow_doc(skill, [node("peer", HANDOFF, config={**config, "version": v}, inputs=inputs)], [])
        for v, skill in SKILLS.items()
    ]


def _b_workflows() -> list[Doc]:
    """B's skill: answers with a text naming what it read, and a file of its own (bytes, and a URI)."""
    parts = [
        {"kind": "text", "text": "B read: {{ variables.prompt }}"},
        {"kind": "file", "file": {"bytes": b64(RETURNED), "name": "signed.bin", "mimeType": OCTETS}},
        {"kind": "file", "file": {"uri": RETURNED_URI, "name": "receipt.pdf", "mimeType": "application/pdf"}},
    ]
    reply = node("reply", "vendor.tether.template", config={"outputs": {"message": {"parts": parts}}})
    return [workflow_doc("reply-file", [reply], [])]


Kind = type[HostProcess] | type[InProcessHost]


def _pair(folder: Path, backend: str, stack: ExitStack, *a_args: str, kind: Kind = InProcessHost) -> Pair:
    """A and B, each on a database of its own when the backend is PostgreSQL; in-process unless one is to be killed.

    A process migrates its fresh database itself, as at a first start; an in-process host's is
    copied from the suite's migrated template (``backends.Hosts`` does the same).
    """
    databases: dict[str, str | None] = {"a_database": None, "b_database": None}
    if backend == "postgres":
        make = fresh_database if kind is HostProcess else migrated_database
        databases = {name: stack.enter_context(make()) for name in databases}
    legacy = ("--a2a-minimum-version", "0.3")  # A hands off in 0.3 too
    pair = Pair(folder, _a_workflows, _b_workflows(), a_args=(*a_args, *legacy), kind=kind, **databases)
    stack.callback(pair.close)
    return pair


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory, backend: str) -> Iterator[Pair]:
    with ExitStack() as stack:
        yield _pair(tmp_path_factory.mktemp(f"files-{backend}"), backend, stack)


def _ask(a: httpx.Client, skill: str) -> str:
    """A client asks A over A2A 0.3 with a text, ~1 MiB of bytes and a URI; the task's id (A's run)."""
    sent = message("Publish the Q3 report", skill=skill)
    sent["parts"] += [
        {"kind": "file", "file": {"bytes": b64(SENT), "name": "q3.bin", "mimeType": "application/octet-stream"}},
        {"kind": "file", "file": {"uri": SENT_URI, "name": "signed.pdf", "mimeType": "application/pdf"}},
    ]
    task = send(a, sent, blocking=False)
    task_id: str = task["id"]
    return task_id


def _download(http: httpx.Client, run_id: str, digest: str) -> bytes:
    response = http.get(f"/v1/runs/{run_id}/files/{digest}")
    assert response.status_code == 200, response.text
    return response.content


def _assert_b_received(b: httpx.Client, b_task: str) -> None:
    """B's run holds A's file: the bytes as a blob of its own (sha256 compared), the URI as it was."""
    sent = run(b, b_task)["inputs"]["message"]["parts"]
    assert [p["kind"] for p in sent] == ["text", "file", "file"], sent
    assert sent[0]["text"] == "Publish the Q3 report"
    reference = {"blob": f"sha256:{sha(SENT)}", "size": len(SENT), "name": "q3.bin"}
    assert sent[1]["file"] == {**reference, "mimeType": "application/octet-stream"}
    assert sha(_download(b, b_task, sent[1]["file"]["blob"])) == sha(SENT)
    assert sent[2]["file"] == {"uri": SENT_URI, "name": "signed.pdf", "mimeType": "application/pdf"}


def _assert_a_answered(a: httpx.Client, task_id: str, b_url: str, b_task: str) -> None:
    """A's artifact is B's answer, every part marked untrusted, B's file byte for byte and its URI as a URI."""
    task = get_task(a, task_id)
    (artifact,) = task["artifacts"]
    parts = artifact["parts"]
    assert [p["kind"] for p in parts] == ["text", "file", "file"], parts
    for part in parts:
        assert part["metadata"]["contentTrust"] == "untrusted", part
        assert part["metadata"]["source"] == {"agent": b_url, "taskId": b_task}
    assert parts[0]["text"] == "B read: Publish the Q3 report"
    returned = parts[1]["file"]
    assert sha(base64.b64decode(returned["bytes"], validate=True)) == sha(RETURNED)
    assert (returned["name"], returned["mimeType"]) == ("signed.bin", "application/octet-stream")
    assert parts[2]["file"] == {"uri": RETURNED_URI, "name": "receipt.pdf", "mimeType": "application/pdf"}


def _assert_content_free(a: httpx.Client, task_id: str) -> None:
    """Nothing at rest on A holds the bytes: events, run and task record refer to the blobs, which hold them."""
    logged = json.dumps(events(a, task_id))
    snapshot = run(a, task_id)
    for data in (SENT, RETURNED):
        assert b64(data) not in logged and b64(data) not in json.dumps(snapshot)
    assert len(logged) < 64 * 1024, "the events hold references, not files"
    kept = outputs_of(snapshot)["message"]["parts"][1]["file"]
    assert kept == {
        "blob": f"sha256:{sha(RETURNED)}",
        "size": len(RETURNED),
        "name": "signed.bin",
        "mimeType": "application/octet-stream",
    }
    assert sha(_download(a, task_id, kept["blob"])) == sha(RETURNED)
    record = task_record(a, task_id)
    assert set(record) <= {"taskId", "runId", "contextId", "state", "updatedAt", "interruptKind", "pushConfig"}


@pytest.mark.parametrize("version", sorted(SKILLS))
def test_a_file_goes_to_the_peer_and_its_file_comes_back(pair: Pair, version: str) -> None:
    with pair.a_http() as a, pair.b_http() as b:
        task_id = _ask(a, SKILLS[version])
        done = wait_state(a, task_id, "completed", "failed", timeout=30)
        assert done["status"]["state"] == "completed", done
        record = run(a, task_id)["nodeStates"]["peer"]["handoff"]
        assert record["version"] == version  # B was spoken to in the pinned version
        b_task = record["taskId"]
        _assert_b_received(b, b_task)
        _assert_a_answered(a, task_id, pair.b_url, b_task)
        _assert_content_free(a, task_id)
        assert_clean(a, task_id)
        assert_clean(b, b_task)


def test_sigkill_a_between_send_and_record_sends_the_file_once(tmp_path: Path, backend: str) -> None:
    """A dies after B took the message with its file and before A wrote B's task down: A sends again
    (the same messageId, the same bytes), B finds the task it made, and the file arrives once."""
    marker = tmp_path / "sent"
    pause = f"--test-handoff-pause-file={marker}"
    with ExitStack() as stack:
        hosts = _pair(tmp_path, backend, stack, "--enable-test-seams", pause, kind=HostProcess)
        with hosts.a_http() as a:
            task_id = _ask(a, SKILLS["1.0"])
        wait_until(marker.exists, what="A to pause between its send and its record")
        with hosts.a_http() as a:
            assert "taskId" not in run(a, task_id)["nodeStates"]["peer"].get("handoff", {}), "paused before the record"
        [b_run] = b_runs(hosts)
        hosts.a.kill()
        hosts.a.args.remove(pause)  # restarted, A sends again and goes on
        hosts.a.start()
        with hosts.a_http() as a, hosts.b_http() as b:
            done = wait_state(a, task_id, "completed", "failed", timeout=30)
            assert done["status"]["state"] == "completed", done
            b_task = run(a, task_id)["nodeStates"]["peer"]["handoff"]["taskId"]
            assert b_task == b_run["runId"] and [r["runId"] for r in b_runs(hosts)] == [b_task]
            history = get_task(b, b_task)["history"]
            assert [m["role"] for m in history].count("user") == 1, "B took one message"
            _assert_b_received(b, b_task)
            _assert_a_answered(a, task_id, hosts.b_url, b_task)
            _assert_content_free(a, task_id)
            assert_clean(a, task_id)
            assert_clean(b, b_task)


@pytest.mark.parametrize(
    ("limits", "flag"),
    [
        # a part over the limit: read, and refused before it is kept
        (("--a2a-file-part-bytes", str(MIB // 2)), "--a2a-file-part-bytes"),
        # an answer longer than A reads at all (its file limits in base64, beside --max-body-bytes)
        (("--a2a-file-part-bytes", "65536", "--a2a-file-message-bytes", "65536"), "--a2a-file-message-bytes"),
    ],
    ids=["part", "answer"],
)
def test_a_file_over_the_limits_fails_the_node_and_nothing_is_kept(
    tmp_path: Path, backend: str, limits: tuple[str, ...], flag: str
) -> None:
    with ExitStack() as stack:
        hosts = _pair(tmp_path, backend, stack, *limits)
        with hosts.a_http() as a:
            small = message("Publish the Q3 report", skill=SKILLS["1.0"])  # within A's limits itself
            task_id = send(a, small, blocking=False)["id"]
            failed = wait_state(a, task_id, "failed", "completed", timeout=30)
            assert failed["status"]["state"] == "failed", failed
            error = run(a, task_id)["nodeStates"]["peer"]["error"]
            assert error["code"] == "a2a_peer_file_too_large", error
            assert flag in error["message"], error
            missing = a.get(f"/v1/runs/{task_id}/files/sha256:{sha(RETURNED)}")
            assert missing.status_code == 404, "nothing of B's file is kept"
            assert b64(RETURNED) not in json.dumps(events(a, task_id))
            assert_clean(a, task_id)
