"""What a hand-off keeps of the files a peer answers with, alone: bytes made blobs within limits, the rest dropped.

The two-host tests (``test_a2a_handoff_files.py``) show it on the wire; here each rule of
``tether.a2a.peer._files`` is pinned on a peer's task as the client reads it.
"""

from __future__ import annotations

import base64

import pytest

from tether.a2a.files import FileLimits
from tether.a2a.peer._files import kept, outbound
from tether.engine.handoff.peer import PeerFile, PeerRefused, PeerTask
from tether.files import Blob

LIMITS = FileLimits(part=1000, message=1500)


def _file(data: bytes, **extra: object) -> dict[str, object]:
    return {"kind": "file", "file": {"bytes": base64.b64encode(data).decode(), **extra}}


def _task(*parts: object, files: list[dict[str, object]] | None = None) -> PeerTask:
    artifacts = [{"artifactId": "a", "parts": list(parts)}]
    return PeerTask("t", "c", "completed", artifacts=artifacts, files=list(files or []))  # type: ignore[arg-type]


def test_bytes_become_a_blob_and_the_part_a_reference_with_its_name_type_and_metadata() -> None:
    data = b"x" * 700
    task = kept(_task({"kind": "text", "text": "hi"}, _file(data, name="a.txt", mimeType="text/plain")), LIMITS)
    blob = Blob.of(data)
    assert task.blobs == [blob]
    assert task.artifacts[0]["parts"] == [
        {"kind": "text", "text": "hi"},
        {"kind": "file", "file": {"blob": blob.digest, "size": 700, "name": "a.txt", "mimeType": "text/plain"}},
    ]


def test_a_uri_stays_the_uri_and_a_blob_the_peer_names_is_dropped() -> None:
    named = {"kind": "file", "file": {"blob": "sha256:" + "0" * 64, "size": 3}}
    uri = {"kind": "file", "file": {"uri": "https://x.example/f", "name": "f", "extra": 1}, "metadata": {"k": 1}}
    task = kept(_task(named, uri, files=[named, uri]), LIMITS)
    expected = {"kind": "file", "file": {"uri": "https://x.example/f", "name": "f"}, "metadata": {"k": 1}}
    assert task.artifacts[0]["parts"] == [expected] and task.files == [expected] and task.blobs == []


def test_a_question_s_file_counts_with_the_artifacts_against_the_answer_s_limit() -> None:
    with pytest.raises(PeerRefused) as refused:
        kept(_task(_file(b"a" * 800), files=[_file(b"b" * 800)]), LIMITS)
    assert refused.value.code == "a2a_peer_file_too_large"
    assert "--a2a-file-message-bytes" in refused.value.message and "1600 bytes" in refused.value.message


def test_a_part_over_the_limit_is_refused_before_it_is_decoded() -> None:
    with pytest.raises(PeerRefused) as refused:
        kept(_task(_file(b"z" * 1001)), LIMITS)
    assert refused.value.code == "a2a_peer_file_too_large"
    assert "artifacts.0.parts.0 is 1001 bytes" in refused.value.message
    assert "--a2a-file-part-bytes" in refused.value.message


def test_bytes_that_are_not_base64_are_a_final_invalid_response() -> None:
    with pytest.raises(PeerRefused) as refused:
        kept(_task({"kind": "file", "file": {"bytes": "not base64!"}}), LIMITS)
    assert refused.value.code == "a2a_peer_invalid_response"


def test_a_file_is_sent_with_its_bytes_or_as_its_uri() -> None:
    assert outbound(PeerFile(blob="sha256:" + "1" * 64, name="n", media_type="text/plain", data=b"hi")) == {
        "kind": "file",
        "file": {"bytes": "aGk=", "name": "n", "mimeType": "text/plain"},
    }
    assert outbound(PeerFile(uri="https://x.example/f")) == {"kind": "file", "file": {"uri": "https://x.example/f"}}
