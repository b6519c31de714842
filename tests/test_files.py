"""The canonical file part and its blob (``tether.files``): names by content, references, inline bytes made blobs."""

from __future__ import annotations

import base64
import hashlib

import pytest

from tether.files import DIGEST, Blob, decode_base64, digest_of, file_parts, stored_inline, stored_part


def test_a_blob_is_named_by_the_sha256_of_its_bytes() -> None:
    blob = Blob.of(b"report")
    assert blob.digest == "sha256:" + hashlib.sha256(b"report").hexdigest() and blob.size == 6
    assert DIGEST.fullmatch(blob.digest) and Blob.of(b"report") == blob


def test_a_stored_part_refers_to_its_blob_and_keeps_name_type_and_metadata() -> None:
    blob = Blob.of(b"x")
    assert stored_part(blob) == {"kind": "file", "file": {"blob": blob.digest, "size": 1}}
    full = stored_part(blob, "a.txt", "text/plain", {"note": 1})
    assert (
        full["file"]["name"] == "a.txt" and full["file"]["mimeType"] == "text/plain" and full["metadata"] == {"note": 1}
    )
    assert digest_of(full) == blob.digest
    assert digest_of({"kind": "file", "file": {"uri": "https://example.com/a"}}) is None
    assert digest_of({"kind": "text", "text": "sha256:" + "0" * 64}) is None


def test_base64_is_read_strictly() -> None:
    assert decode_base64(base64.b64encode(b"\x00\xff").decode()) == b"\x00\xff"
    for bad in ("not base64!", "abc", "YW J"):
        with pytest.raises(ValueError, match="not standard base64"):
            decode_base64(bad)


def test_outputs_without_inline_bytes_are_returned_as_they_are() -> None:
    outputs = {"message": {"parts": [{"kind": "text", "text": "hi"}, {"kind": "file", "file": {"uri": "u"}}]}}
    assert stored_inline(outputs) == (outputs, []) and stored_inline(outputs)[0] is outputs


def test_inline_bytes_anywhere_in_outputs_become_blob_references() -> None:
    raw = base64.b64encode(b"made").decode()
    outputs = {
        "message": {"parts": [{"kind": "text", "text": "t"}, {"kind": "file", "file": {"bytes": raw, "name": "m"}}]},
        "more": [{"kind": "file", "file": {"bytes": raw, "mimeType": "x/y"}, "metadata": {"k": 1}}],
    }
    stored, blobs = stored_inline(outputs)
    made = Blob.of(b"made")
    assert blobs == [made, made]
    assert stored["message"]["parts"][1] == {"kind": "file", "file": {"blob": made.digest, "size": 4, "name": "m"}}
    assert stored["more"][0] == {
        "kind": "file",
        "file": {"blob": made.digest, "size": 4, "mimeType": "x/y"},
        "metadata": {"k": 1},
    }
    assert outputs["message"]["parts"][1]["file"]["bytes"] == raw, "the outputs handed in are not changed"
    assert [p["file"]["blob"] for p in file_parts(stored)] == [made.digest, made.digest]
    with pytest.raises(ValueError, match="not standard base64"):
        stored_inline({"kind": "file", "file": {"bytes": "%%%"}})
