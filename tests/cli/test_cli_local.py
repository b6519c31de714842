"""The CLI commands that need no running host: API keys (on the store) and workflow validation.

Each test gets its own data directory, so keys created in one never leak into another.
"""

from __future__ import annotations

import copy
import hashlib
import json
import re
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from tether.cli.main import cli

KEY_PATTERN = re.compile(r"^tk_[0-9a-f]{16}_[0-9a-f]{64}$")

VALID_WORKFLOW: dict[str, Any] = {
    "id": "cli-check",
    "name": "CLI check",
    "version": "1.0.0",
    "nodes": [
        {
            "id": "first",
            "typeId": "core.identity",
            "name": "First",
            "position": {"x": 0, "y": 0},
            "config": {},
            "inputs": {"payload": {"type": "variable", "variableName": "prompt"}},
        },
        {
            "id": "second",
            "typeId": "core.noop",
            "name": "Second",
            "position": {"x": 200, "y": 0},
            "config": {},
            "inputs": {},
        },
    ],
    "edges": [{"id": "e1", "sourceNodeId": "first", "targetNodeId": "second"}],
    "triggers": [{"id": "manual", "type": "manual"}],
    "variables": [{"name": "prompt", "type": "string", "required": True}],
    "metadata": {},
    "settings": {},
}


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return tmp_path / "data"


def run(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def create(data_dir: Path, name: str, *extra: str) -> Result:
    return run("keys", "create", "--name", name, "--data-dir", str(data_dir), *extra)


def write_workflow(tmp_path: Path, definition: dict[str, Any], name: str = "wf.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(definition), encoding="utf-8")
    return path


# --- keys ----------------------------------------------------------------------------------


def test_keys_create_prints_the_raw_key_alone_on_the_last_line(data_dir: Path) -> None:
    result = create(data_dir, "ci-bot")
    assert result.exit_code == 0, result.output
    lines = result.stdout.rstrip("\n").splitlines()
    assert len(lines) > 1, "a human line should come before the key"
    assert KEY_PATTERN.match(lines[-1]), lines[-1]
    assert not any(KEY_PATTERN.search(line) for line in lines[:-1]), "the key is printed once"
    assert result.stderr == ""


def test_keys_list_shows_the_name_but_neither_the_key_nor_its_hash(data_dir: Path) -> None:
    raw = create(data_dir, "ci-bot").stdout.splitlines()[-1]
    secret = raw.split("_")[2]
    digest = hashlib.sha256(secret.encode()).hexdigest()

    result = run("keys", "list", "--data-dir", str(data_dir))
    assert result.exit_code == 0, result.output
    assert "ci-bot" in result.stdout
    assert "default" in result.stdout
    assert raw not in result.stdout
    assert secret not in result.stdout
    assert digest not in result.stdout
    assert digest[:16] not in result.stdout


def test_keys_list_on_an_empty_store_says_how_to_create_one(data_dir: Path) -> None:
    result = run("keys", "list", "--data-dir", str(data_dir))
    assert result.exit_code == 0, result.output
    assert "tether keys create" in result.stdout


def _row(listing: str, name: str) -> list[str]:
    return next(line.split() for line in listing.splitlines() if line.split()[:1] == [name])


def test_revoked_key_is_listed_as_revoked(data_dir: Path) -> None:
    create(data_dir, "ci-bot")
    create(data_dir, "other")
    before = run("keys", "list", "--data-dir", str(data_dir)).stdout
    assert _row(before, "ci-bot")[-1] == "-", before

    result = run("keys", "revoke", "ci-bot", "--data-dir", str(data_dir))
    assert result.exit_code == 0, result.output
    assert "ci-bot" in result.stdout

    after = run("keys", "list", "--data-dir", str(data_dir)).stdout
    assert re.fullmatch(r"\d{2}:\d{2}:\d{2}Z", _row(after, "ci-bot")[-1]), after
    assert _row(after, "other")[-1] == "-", after


def test_revoking_an_unknown_name_exits_1_with_a_message(data_dir: Path) -> None:
    create(data_dir, "ci-bot")
    result = run("keys", "revoke", "nobody", "--data-dir", str(data_dir))
    assert result.exit_code == 1
    assert "no active key named 'nobody'" in result.stderr


def test_revoking_twice_fails_the_second_time(data_dir: Path) -> None:
    create(data_dir, "ci-bot")
    assert run("keys", "revoke", "ci-bot", "--data-dir", str(data_dir)).exit_code == 0
    result = run("keys", "revoke", "ci-bot", "--data-dir", str(data_dir))
    assert result.exit_code == 1
    assert "ci-bot" in result.stderr


def test_a_second_active_key_with_the_same_name_is_refused(data_dir: Path) -> None:
    assert create(data_dir, "ci-bot").exit_code == 0
    result = create(data_dir, "ci-bot")
    assert result.exit_code == 1
    assert "error:" in result.stderr
    assert "already exists" in result.stderr
    assert result.stdout == "", "no key may be printed when none was created"


def test_a_revoked_name_can_be_reused(data_dir: Path) -> None:
    create(data_dir, "ci-bot")
    run("keys", "revoke", "ci-bot", "--data-dir", str(data_dir))
    result = create(data_dir, "ci-bot")
    assert result.exit_code == 0, result.output
    assert KEY_PATTERN.match(result.stdout.splitlines()[-1])


def test_unknown_scopes_are_refused(data_dir: Path) -> None:
    result = create(data_dir, "ci-bot", "--scopes", "bogus")
    assert result.exit_code != 0
    assert "bogus" in result.stderr
    assert not KEY_PATTERN.search(result.stdout)
    assert "ci-bot" not in run("keys", "list", "--data-dir", str(data_dir)).stdout


def test_scopes_are_stored_as_given(data_dir: Path) -> None:
    result = create(data_dir, "reader", "--scopes", "runs:read,runs:create", "--tenant", "acme")
    assert result.exit_code == 0, result.output
    listing = run("keys", "list", "--data-dir", str(data_dir)).stdout
    assert "acme" in listing
    assert "runs:read" in listing and "runs:create" in listing
    assert "webhooks:manage" not in listing


def test_an_invalid_key_name_is_refused_with_the_rule(data_dir: Path) -> None:
    result = create(data_dir, "has space")
    assert result.exit_code == 1
    assert "error:" in result.stderr and "has space" in result.stderr


def test_data_dir_comes_from_the_environment(data_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TETHER_DATA_DIR", str(data_dir))
    assert run("keys", "create", "--name", "env-key").exit_code == 0
    assert "env-key" in run("keys", "list", "--data-dir", str(data_dir)).stdout


def test_an_unsupported_database_url_is_a_usage_error(data_dir: Path) -> None:
    result = run("keys", "list", "--database-url", "mysql://db/tether")
    assert result.exit_code == 2
    assert "--database-url" in result.stderr


# --- workflows validate --------------------------------------------------------------------


def test_validate_accepts_a_valid_workflow(tmp_path: Path) -> None:
    path = write_workflow(tmp_path, VALID_WORKFLOW)
    result = run("workflows", "validate", str(path))
    assert result.exit_code == 0, result.output
    assert "valid" in result.stdout
    assert "cli-check" in result.stdout


def test_validate_names_an_edge_to_an_unknown_node(tmp_path: Path) -> None:
    definition = copy.deepcopy(VALID_WORKFLOW)
    definition["edges"].append({"id": "e-ghost", "sourceNodeId": "second", "targetNodeId": "ghost"})
    path = write_workflow(tmp_path, definition)
    result = run("workflows", "validate", str(path))
    assert result.exit_code == 1
    assert "e-ghost" in result.stderr
    assert "ghost" in result.stderr
    assert "targetNodeId" in result.stderr


def test_validate_lists_every_error(tmp_path: Path) -> None:
    definition = copy.deepcopy(VALID_WORKFLOW)
    definition["edges"].append({"id": "e2", "sourceNodeId": "nowhere", "targetNodeId": "second"})
    definition["edges"].append({"id": "e3", "sourceNodeId": "first", "targetNodeId": "elsewhere"})
    result = run("workflows", "validate", str(write_workflow(tmp_path, definition)))
    assert result.exit_code == 1
    assert "nowhere" in result.stderr and "elsewhere" in result.stderr
    assert "2 errors" in result.stderr


def test_validate_refuses_a_workflow_this_host_cannot_run(tmp_path: Path) -> None:
    definition = copy.deepcopy(VALID_WORKFLOW)
    definition["nodes"][1]["typeId"] = "vendor.unknownThing"
    result = run("workflows", "validate", str(write_workflow(tmp_path, definition)))
    assert result.exit_code == 1
    assert "vendor.unknownThing" in result.stderr


def test_validate_reports_a_file_that_is_not_json(tmp_path: Path) -> None:
    path = tmp_path / "broken.json"
    path.write_text("{not json", encoding="utf-8")
    result = run("workflows", "validate", str(path))
    assert result.exit_code == 1
    assert "not valid JSON" in result.stderr


def test_validate_a_missing_file_is_a_usage_error(tmp_path: Path) -> None:
    result = run("workflows", "validate", str(tmp_path / "absent.json"))
    assert result.exit_code == 2
