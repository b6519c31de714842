"""``tether credentials``: outbound credentials are sealed on the store, listed by fingerprint, never printed."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from tether.cli.main import cli

SECRET = "tk_peer_secret_0123456789abcdef"


@pytest.fixture(autouse=True)
def _isolated_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("TETHER_DATA_DIR", "TETHER_DATABASE_URL", "TETHER_SECRET_KEY_FILE"):
        monkeypatch.delenv(name, raising=False)


def tether(*args: str, data_dir: Path, stdin: str | None = None) -> Result:
    return CliRunner().invoke(cli, [*args, "--data-dir", str(data_dir)], input=stdin)


@pytest.fixture
def secret_file(tmp_path: Path) -> Path:
    path = tmp_path / "secret.txt"
    path.write_text(SECRET + "\n")
    return path


def test_add_seals_the_secret_and_prints_only_its_fingerprint(tmp_path: Path, secret_file: Path) -> None:
    data = tmp_path / "data"
    added = tether(
        "credentials", "add", "peer-b", "--origin", "HTTPS://B.example:443/ignored", "--secret-file", str(secret_file),
        data_dir=data,
    )  # fmt: skip
    assert added.exit_code == 0, added.output
    assert "Bearer for https://b.example only" in added.output and "fingerprint" in added.output
    listed = tether("credentials", "list", data_dir=data)
    assert listed.exit_code == 0
    assert "peer-b" in listed.output and "https://b.example" in listed.output and "Bearer" in listed.output
    fingerprint = added.output.rsplit("fingerprint ", 1)[1].strip(" )\n")
    assert fingerprint in listed.output
    stored = b"".join(p.read_bytes() for p in data.iterdir() if p.is_file())
    assert SECRET.encode() not in stored and SECRET not in added.output + listed.output


def test_a_second_credential_of_one_name_is_refused_and_the_first_stands(tmp_path: Path, secret_file: Path) -> None:
    data = tmp_path / "data"
    first = tether(
        "credentials", "add", "b", "--origin", "https://b.example", "--secret-file", str(secret_file), data_dir=data
    )
    assert first.exit_code == 0
    again = tether(
        "credentials", "add", "b", "--origin", "https://c.example", "--secret-file", "-", data_dir=data, stdin="x"
    )
    assert again.exit_code == 1 and "already exists" in again.output
    assert "https://b.example" in tether("credentials", "list", data_dir=data).output


@pytest.mark.parametrize(
    ("name", "origin", "scheme", "secret", "says"),
    [
        ("b", "ftp://b.example", "Bearer", SECRET, "not an http(s) origin"),
        ("b", "not a url", "Bearer", SECRET, "not an http(s) origin"),
        ("b/c", "https://b.example", "Bearer", SECRET, "credential name"),
        ("b", "https://b.example", "Bear er", SECRET, "authorization scheme"),
        ("b", "https://b.example", "Bearer", "\n", "empty"),
        ("b", "https://b.example", "Bearer", "one\ntwo", "several lines"),
    ],
)
def test_what_cannot_be_a_credential_is_refused_with_the_rule(
    tmp_path: Path, name: str, origin: str, scheme: str, secret: str, says: str
) -> None:
    data = tmp_path / "data"
    args = ("credentials", "add", name, "--origin", origin, "--scheme", scheme, "--secret-file", "-")
    refused = tether(*args, data_dir=data, stdin=secret)
    assert refused.exit_code == 1 and says in refused.output, refused.output
    assert "no outbound credentials" in tether("credentials", "list", data_dir=data).output


def test_remove_forgets_it_and_removing_again_says_so(tmp_path: Path, secret_file: Path) -> None:
    data = tmp_path / "data"
    tether("credentials", "add", "b", "--origin", "https://b.example", "--secret-file", str(secret_file), data_dir=data)
    removed = tether("credentials", "remove", "b", data_dir=data)
    assert removed.exit_code == 0 and "removed credential 'b'" in removed.output
    again = tether("credentials", "remove", "b", data_dir=data)
    assert again.exit_code == 1 and "no credential named 'b'" in again.output


def test_a_credential_is_sealed_with_the_key_the_store_was_first_used_with(tmp_path: Path, secret_file: Path) -> None:
    data = tmp_path / "data"
    tether("credentials", "add", "b", "--origin", "https://b.example", "--secret-file", str(secret_file), data_dir=data)
    other_key = tmp_path / "other.key"
    other_key.write_bytes(b"k" * 32)
    args = ("credentials", "add", "c", "--origin", "https://c.example", "--secret-file", str(secret_file))
    refused = tether(*args, "--secret-key-file", str(other_key), data_dir=data)
    assert refused.exit_code != 0
    assert "c" not in [line.split()[0] for line in tether("credentials", "list", data_dir=data).output.splitlines()[3:]]
