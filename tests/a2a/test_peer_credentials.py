"""The outbound credential lookup: a credential opens only for a request to the origin it is bound to."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tether.a2a.peer import OutboundCredentials, add_credential, canonical_origin
from tether.engine.handoff.peer import PeerRefused
from tether.secrets import SecretBox
from tether.store.sqlite import SqliteStore

KEY = b"h" * 32


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SqliteStore]:
    opened = SqliteStore(tmp_path / "tether.db")
    await opened.open()
    yield opened
    await opened.close()


@pytest.mark.parametrize(
    ("url", "origin"),
    [
        ("https://B.Example:443/v1/a2a", "https://b.example"),
        ("https://b.example:8443/.well-known/agent-card.json", "https://b.example:8443"),
        ("http://b.example:80", "http://b.example"),
        ("https://[::1]:9443/x", "https://[::1]:9443"),
    ],
)
def test_an_origin_is_scheme_host_and_a_port_that_is_not_the_default(url: str, origin: str) -> None:
    assert canonical_origin(url) == origin


async def test_the_secret_is_sent_to_its_own_origin_only(store: SqliteStore) -> None:
    box = SecretBox(KEY)
    await add_credential(store, box, name="b", origin="https://b.example:8443", scheme="Bearer", secret="s3cret\n")
    lookup = OutboundCredentials(store, box)
    assert await lookup("b", "https://B.example:8443/v1/a2a") == "Bearer s3cret"
    for elsewhere in ("https://b.example/v1/a2a", "http://b.example:8443/", "https://evil.example:8443/"):
        with pytest.raises(PeerRefused) as refused:
            await lookup("b", elsewhere)
        assert refused.value.code == "credential_origin_mismatch"
        assert "s3cret" not in refused.value.message
    with pytest.raises(PeerRefused) as unknown:
        await lookup("c", "https://b.example:8443/")
    assert unknown.value.code == "credential_not_found"


async def test_a_row_moved_to_another_origin_or_opened_with_another_key_does_not_open(store: SqliteStore) -> None:
    box = SecretBox(KEY)
    row = await add_credential(store, box, name="b", origin="https://b.example", scheme="Bearer", secret="s3cret")
    with pytest.raises(PeerRefused) as other_key:
        await OutboundCredentials(store, SecretBox(b"o" * 32))("b", "https://b.example/")
    assert other_key.value.code == "credential_unreadable"
    await store.delete_credential("b")
    row.origin = "https://evil.example"  # an edited row: the origin is bound into the seal
    await store.insert_credential(row)
    with pytest.raises(PeerRefused) as moved:
        await OutboundCredentials(store, box)("b", "https://evil.example/")
    assert moved.value.code == "credential_unreadable"
