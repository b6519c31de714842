"""A hand-off to a peer that wants a key: the key is A's outbound credential, sealed, and sent to B's origin only.

Host B serves no public agent (no ``--a2a-anonymous-tenant``): every A2A call needs one
of B's keys. Host A keeps B's key as an outbound credential (``tether credentials add``,
bound to B's origin) and its workflow names it. The raw key is then looked for in
everything A keeps and says: its data directory, its log, the CLI's output, the run.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from handoff_hosts import (
    Doc,
    Pair,
    approve,
    assert_clean,
    b_runs,
    events,
    outputs_of,
    peer_task,
    run,
    start,
    until_status,
)
from harness import cli
from inproc import InProcessHost
from workflow_docs import node, workflow_doc

HANDOFF = "vendor.tether.a2a-handoff"


def _workflows(b_url: str) -> list[Doc]:
    prompt = {"prompt": {"type": "variable", "variableName": "prompt"}}
    variables = [{"name": "prompt", "type": "string", "required": False}]

    def hand(workflow_id: str, **config: str) -> Doc:
        config = {"agent": b_url, "skill": "approval-gated", **config}
        return workflow_doc(workflow_id, [node("peer", HANDOFF, config=config, inputs=prompt)], [], variables)

    return [
        hand("hand-with-key", credential="b-key"),
        hand("hand-with-key-03", credential="b-key", version="0.3"),
        hand("hand-without-key"),
        hand("hand-with-misbound-key", credential="elsewhere"),
        hand("hand-with-unknown-key", credential="nobody"),
    ]


@pytest.fixture
def pair(tmp_path: Path) -> Iterator[Pair]:
    # neither is killed; A hands off in 0.3 too, so it runs with the legacy floor
    legacy = ("--a2a-minimum-version", "0.3")
    hosts = Pair(tmp_path, _workflows, b_anonymous=False, a_args=legacy, kind=InProcessHost)
    yield hosts
    hosts.close()


def _add_credentials(pair: Pair, folder: Path) -> list[str]:
    """B's key as A's credential ``b-key`` (for B's origin), and ``elsewhere`` bound to another origin.

    Returns what the CLI printed, to be searched for the secret.
    """
    secret_file = folder / "b-key.txt"  # outside A's data directory
    secret_file.write_text(pair.b_key + "\n")
    said = [
        cli(
            "credentials",
            "add",
            "b-key",
            "--origin",
            pair.b_url,
            "--secret-file",
            str(secret_file),
            data_dir=pair.a.data_dir,
        ),
        cli(
            "credentials",
            "add",
            "elsewhere",
            "--origin",
            "https://127.0.0.1:1",
            "--secret-file",
            str(secret_file),
            data_dir=pair.a.data_dir,
        ),
        cli("credentials", "list", data_dir=pair.a.data_dir),
    ]
    return [r.stdout + r.stderr for r in said]


def test_a_peer_that_needs_a_key_is_reached_with_the_sealed_credential_only(pair: Pair, tmp_path: Path) -> None:
    printed = _add_credentials(pair, tmp_path)
    assert "fingerprint" in printed[0] and pair.b_url in printed[0]
    with pair.a_http() as a, pair.b_http() as b:
        # the control: without the credential, B refuses A
        refused = until_status(a, start(a, "hand-without-key", {"prompt": "let me in"}), "failed", "completed")
        assert refused["nodeStates"]["peer"]["error"]["code"] == "a2a_peer_unauthorized", refused
        assert b_runs(pair) == []
        # with it, in each version: B's gate waits, B's operator approves, A completes
        run_ids = []
        for workflow_id in ("hand-with-key", "hand-with-key-03"):
            run_id = start(a, workflow_id, {"prompt": "Publish the Q3 report"})
            until_status(a, run_id, "waiting-approval")
            task_id = peer_task(a, run_id)
            approve(b, task_id, "gate")
            done = until_status(a, run_id, "completed", "failed")
            assert done["status"] == "completed", done
            assert outputs_of(done)["taskId"] == task_id
            record = done["nodeStates"]["peer"]["handoff"]
            assert record["credential"] == "b-key"
            assert_clean(b, task_id)
            run_ids.append(run_id)
        assert {r["runId"] for r in b_runs(pair)} == {peer_task(a, r) for r in run_ids}
        said_by_a = [str(run(a, r)) + str(events(a, r)) for r in run_ids]
    secret = pair.b_key
    assert secret not in pair.a.stored_bytes().decode("latin-1"), "the credential sits sealed in A's store"
    assert secret not in pair.a.log()
    assert not [out for out in printed if secret in out]
    assert not [doc for doc in said_by_a if secret in doc]


def test_a_credential_bound_to_another_origin_is_never_sent(pair: Pair, tmp_path: Path) -> None:
    _add_credentials(pair, tmp_path)
    with pair.a_http() as a:
        failed = until_status(a, start(a, "hand-with-misbound-key", {"prompt": "x"}), "failed", "completed")
        error = failed["nodeStates"]["peer"]["error"]
        assert error["code"] == "credential_origin_mismatch", error
        assert "https://127.0.0.1:1" in error["message"] and pair.b_url in error["message"]
        assert_clean(a, failed["runId"])
        unknown = until_status(a, start(a, "hand-with-unknown-key", {"prompt": "x"}), "failed", "completed")
        assert unknown["nodeStates"]["peer"]["error"]["code"] == "credential_not_found"
    assert b_runs(pair) == [], "A sent B nothing at all: not even its card request carried the key"
