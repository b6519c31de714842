"""The operator's CLI explains itself: --json on every listing, refusals for bad filters, no silent
``./.tether``, keys a script can always get, and ``runs start``.

Host-talking commands run against a real in-process host on loopback.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from inproc import InProcessHost

from tether.cli.main import cli


def run(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


@pytest.fixture(scope="module")
def host(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessHost]:
    with InProcessHost(tmp_path_factory.mktemp("cli-ops") / "data") as started:
        yield started


def on(host: InProcessHost, *args: str) -> Result:
    assert host.dev_key
    return run(*args, "--url", host.url, "--key", host.dev_key)


# --- keys ----------------------------------------------------------------------------------


def test_keys_create_rotate_gives_a_working_key_every_time(host: InProcessHost) -> None:
    first = run("keys", "create", "--name", "script", "--rotate", "--data-dir", str(host.data_dir))
    second = run("keys", "create", "--name", "script", "--rotate", "--data-dir", str(host.data_dir))
    assert first.exit_code == 0 and second.exit_code == 0, second.output
    assert "revoked the previous key 'script'" in second.stdout
    old, new = first.stdout.splitlines()[-1], second.stdout.splitlines()[-1]
    assert old != new
    with host.client(new) as client:
        assert client.get("/v1/runs").status_code == 200
    with host.client(old) as client:  # a running host sees the revocation within its key cache's seconds
        assert client.get("/v1/workflows").status_code in (200, 401)
    without = run("keys", "create", "--name", "script", "--data-dir", str(host.data_dir))
    assert without.exit_code == 1 and "script" in without.output, "without --rotate a taken name is refused"


def test_keys_list_json_names_keys_but_never_their_secrets(tmp_path: Path) -> None:
    raw = run("keys", "create", "--name", "ci", "--data-dir", str(tmp_path)).stdout.splitlines()[-1]
    listing = run("keys", "list", "--json", "--data-dir", str(tmp_path))
    assert listing.exit_code == 0, listing.output
    keys = json.loads(listing.stdout)
    assert [(k["name"], k["tenant"], k["revokedAt"]) for k in keys] == [("ci", "default", None)]
    assert raw.split("_")[2] not in listing.stdout


def test_local_commands_outside_a_data_directory_name_the_one_they_use(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    listed = run("keys", "list")
    assert listed.exit_code == 1
    assert str(tmp_path / ".tether") in listed.stderr and "--data-dir" in listed.stderr
    assert not (tmp_path / ".tether").exists(), "a refused listing makes nothing"
    created = run("keys", "create", "--name", "first")
    assert created.exit_code == 0
    assert f"made a new Tether data directory at {tmp_path / '.tether'}" in created.stderr
    assert (tmp_path / ".tether" / "tether.db").exists()
    assert json.loads(run("keys", "list", "--json").stdout)[0]["name"] == "first"


# --- listings ------------------------------------------------------------------------------


def test_runs_list_refuses_an_unknown_status(host: InProcessHost) -> None:
    result = on(host, "runs", "list", "--status", "bogus")
    assert result.exit_code == 2
    assert "'bogus' is not one of" in result.output and "waiting-approval" in result.output


def test_every_listing_speaks_json(host: InProcessHost) -> None:
    started = on(host, "runs", "start", "echo", "--input", "prompt=hi", "--wait", "--json")
    run_id = json.loads(started.stdout)["runId"]

    workflows = json.loads(on(host, "workflows", "list", "--json").stdout)
    assert {"echo", "approval-gated"} <= {w["id"] for w in workflows}
    runs = json.loads(on(host, "runs", "list", "--json").stdout)
    assert run_id in [r["runId"] for r in runs]
    events = [json.loads(line) for line in on(host, "runs", "events", run_id, "--json").stdout.splitlines()]
    assert [e["sequence"] for e in events] == list(range(len(events)))
    assert events[0]["type"] == "run.started" and events[-1]["type"] == "run.completed"
    assert json.loads(on(host, "push", "list", "--json").stdout) == []


def test_a_call_without_a_key_says_how_to_give_one(host: InProcessHost) -> None:
    for command in (["runs", "list"], ["push", "list", "--kind", "webhook"], ["workflows", "list"]):
        result = run(*command, "--url", host.url)
        assert result.exit_code == 2, result.output
        assert result.stderr == (
            "error: this command needs an API key: pass --key tk_..., or set TETHER_API_KEY "
            "(make one with: tether keys create --name NAME)\n"
        )


def test_the_database_url_help_names_both_stores() -> None:
    for command in (["serve"], ["keys", "create"]):
        shown = " ".join(run(*command, "--help").stdout.split())  # unwrapped
        assert "postgresql://USER@HOST:PORT/DBNAME" in shown and "sqlite:PATH" in shown, shown


# --- runs start ----------------------------------------------------------------------------


def test_runs_start_prints_the_run_id_last(host: InProcessHost) -> None:
    result = on(host, "runs", "start", "echo", "--input", "prompt=hello")
    assert result.exit_code == 0, result.output
    run_id = result.stdout.splitlines()[-1]
    with host.client(host.dev_key) as client:
        assert client.get(f"/v1/runs/{run_id}").json()["workflowId"] == "echo"


def test_runs_start_wait_returns_when_the_run_waits_for_someone(host: InProcessHost) -> None:
    result = on(host, "runs", "start", "approval-gated", "--input", "prompt=ship it", "--wait", "--json")
    assert result.exit_code == 0, result.output
    snapshot = json.loads(result.stdout)
    assert snapshot["status"] == "waiting-approval"
    approved = on(host, "runs", "approve", snapshot["runId"])
    assert approved.exit_code == 0 and "accepted" in approved.stdout
    ended = on(host, "runs", "start", "echo", "--input", "prompt=x", "--wait", "--json")
    assert json.loads(ended.stdout)["status"] == "completed", "--wait also returns when the run ends"


def test_runs_start_inputs_are_strings_unless_marked_json(host: InProcessHost) -> None:
    as_text = json.loads(on(host, "runs", "start", "echo", "--input", "prompt=42", "--wait", "--json").stdout)
    assert as_text["nodeStates"]["echo"]["outputs"]["payload"] == "42"
    as_json = json.loads(on(host, "runs", "start", "echo", "--input", 'prompt:="a=b"', "--wait", "--json").stdout)
    assert as_json["nodeStates"]["echo"]["outputs"]["payload"] == "a=b"
    typed = on(host, "runs", "start", "echo", "--input", "prompt:=42")
    assert typed.exit_code == 1 and "prompt" in typed.stderr, "the host checks the JSON value's type"


def test_runs_start_refuses_malformed_inputs(host: InProcessHost) -> None:
    result = on(host, "runs", "start", "echo", "--input", "no-equals-sign")
    assert result.exit_code == 2 and "NAME=VALUE" in result.output
    result = on(host, "runs", "start", "echo", "--input", "prompt:={oops")
    assert result.exit_code == 2 and "not JSON" in result.output


# --- HTTP: 405 ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "path", "allowed"),
    [
        ("DELETE", "/v1/interrupts/tok_x", "GET, POST"),
        ("PUT", "/v1/runs", "GET, POST"),
        ("DELETE", "/v1/runs/run_x", "GET"),
    ],
)
def test_every_405_lists_exactly_the_methods_served(host: InProcessHost, method: str, path: str, allowed: str) -> None:
    answer = host.http(host.dev_key).request(method, path)
    assert answer.status_code == 405
    assert answer.headers["allow"] == allowed
    for served in allowed.split(", "):
        assert host.http(host.dev_key).request(served, path).status_code != 405
