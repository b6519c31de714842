"""Hand-offs on two hosts sharing one PostgreSQL: only the run's lease holder follows, and a survivor takes over.

Hosts A1 and A2 share a database (and the host key, as operators must); a third host, B
(its own SQLite store), is the peer. A run on A hands B an approval-gated task: the host
that holds the run's lease, and only it, follows the hand-off (it alone has read the peer,
``lastReadAt``, and it keeps the lease, renewed, while it waits). SIGKILL that host: once
its lease lapses the other host takes the run over, follows the hand-off (B now pushes to
it) and completes the run when B's operator approves, with one remote task and no node
executed twice. Real processes (A1, A2; B, never killed, runs in-process), a real database, a real SIGKILL.
"""

from __future__ import annotations

import asyncio
import json
import ssl
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest
from backends import Hosts
from handoff_hosts import SECURE, Doc, approve, assert_clean, free_port, run, until_status, write_tls
from harness import HostProcess, wait_until
from inproc import InProcessHost
from prometheus_client.parser import text_string_to_metric_families
from workflow_docs import node, workflow_doc

LEASE = "2"


@pytest.fixture
def backend() -> str:
    """Only PostgreSQL: SQLite is one host's store by design."""
    return "postgres"


class Lease:
    """The run's lease as the database has it: (owner, epoch, expires_at) or None."""

    def __init__(self, database_url: str) -> None:
        self.database_url = database_url

    def __call__(self, run_id: str) -> tuple[str, int, Any] | None:
        async def read() -> tuple[str, int, Any] | None:
            connection = await asyncpg.connect(self.database_url)
            try:
                row = await connection.fetchrow(
                    "SELECT owner, epoch, expires_at FROM run_leases WHERE run_id = $1 AND expires_at >= now()", run_id
                )
            finally:
                await connection.close()
            return None if row is None else (row["owner"], row["epoch"], row["expires_at"])

        return asyncio.run(read())


@pytest.fixture
def peer(tmp_path: Path) -> Iterator[tuple[InProcessHost, Path, tuple[str, ...]]]:
    """Host B, a public Tether agent over HTTPS, and the TLS flags (and CA) the A hosts need to reach it.

    B is never killed: it runs in-process (the A hosts, which are, are processes).
    """
    ca_file, cert, key = write_tls(tmp_path)
    tls = ("--tls-certfile", str(cert), "--tls-keyfile", str(key), "--egress-ca-bundle", str(ca_file))
    b = InProcessHost(tmp_path / "b", *tls, *SECURE, "--port", str(free_port()), "--a2a-anonymous-tenant", "default")
    with b:  # started, and stopped at the end
        yield b, ca_file, tls


def _hand_approval(folder: Path, b: InProcessHost) -> Path:
    """The A hosts' workflows: ``hand-approval`` hands B an approval-gated task."""
    flows = folder / "a-workflows"
    flows.mkdir()
    prompt = {"prompt": {"type": "variable", "variableName": "prompt"}}
    hand = workflow_doc(
        "hand-approval",
        [node("peer", "vendor.tether.a2a-handoff", config={"agent": b.url, "skill": "approval-gated"}, inputs=prompt)],
        [],
        [{"name": "prompt", "type": "string", "required": False}],
    )
    (flows / "hand-approval.json").write_text(json.dumps(hand))
    return flows


def _taken_over(http: httpx.Client) -> float:
    text = http.get("/metrics").text
    return next(
        s.value
        for f in text_string_to_metric_families(text)
        for s in f.samples
        if s.name == "tether_runs_taken_over_total"
    )


def _client(host: HostProcess, key: str, ca_file: Path) -> httpx.Client:
    return httpx.Client(
        base_url=host.url,
        headers={"Authorization": f"Bearer {key}"},
        verify=ssl.create_default_context(cafile=str(ca_file)),
        timeout=30,
    )


def test_only_the_lease_holder_follows_and_a_survivor_takes_the_handoff_over(
    start_process: Hosts[HostProcess],
    shared_database: str,
    peer: tuple[InProcessHost, Path, tuple[str, ...]],
    tmp_path: Path,
) -> None:
    b, ca_file, tls = peer
    flows = _hand_approval(tmp_path, b)
    args = (
        *tls,
        *SECURE,
        "--workflows",
        str(flows),
        "--lease-seconds",
        LEASE,
        "--secret-key-file",
        str(tmp_path / "shared-host.key"),
        "--handoff-poll-max-seconds",
        "60",  # completing in seconds after a take-over is the new follower's (and B's push's) doing
    )
    a1 = start_process(*args, name="a1", database_url=shared_database)
    a2 = start_process(*args, name="a2", database_url=shared_database)
    assert a1.dev_key and a2.dev_key is None, "the second host shares the first one's keys"
    owner = {(h.data_dir / "host.id").read_text().strip(): h for h in (a1, a2)}
    lease = Lease(shared_database)
    assert b.dev_key
    with _client(a1, a1.dev_key, ca_file) as on_a1, _client(a2, a1.dev_key, ca_file) as on_a2:
        created = on_a1.post("/v1/runs", json={"workflowId": "hand-approval", "inputs": {"prompt": "ship it"}})
        assert created.status_code == 201, created.text
        run_id = created.json()["runId"]
        waiting = until_status(on_a1, run_id, "waiting-approval")
        task_id = waiting["nodeStates"]["peer"]["handoff"]["taskId"]

        # the host that holds the lease follows; it keeps the lease (renewed) while it waits on the peer
        holder_id, epoch, expires = wait_until(lambda: lease(run_id), what="a live lease on the waiting run")
        holder = owner[holder_id]
        other = a2 if holder is a1 else a1
        on_holder, on_other = (on_a1, on_a2) if holder is a1 else (on_a2, on_a1)
        renewed = wait_until(
            lambda: (now := lease(run_id)) and now[2] > expires and now, what="the holder to renew the lease"
        )
        again = wait_until(lambda: (now := lease(run_id)) and now[2] > renewed[2] and now, what="a second renewal")
        assert again[:2] == (holder_id, epoch), "the lease never changed hands while its holder lived"
        assert run(on_holder, run_id)["nodeStates"]["peer"]["handoff"].get("lastReadAt"), "the holder follows"
        assert "lastReadAt" not in run(on_other, run_id)["nodeStates"]["peer"]["handoff"], "the other does not"
        with _client(b, b.dev_key, ca_file) as on_b:
            pushed_to = wait_until(
                lambda: on_b.get(f"/v1/a2a/tasks/{task_id}").json().get("pushConfig"), what="A's push config"
            )
            assert pushed_to["url"].startswith(holder.url + "/v1/a2a/handoffs/")

            # the follower dies; the survivor takes the run over once the lease lapses, and follows the hand-off
            holder.kill()
            taken = wait_until(
                lambda: (now := lease(run_id)) and now[0] != holder_id and now, timeout=30, what="the take-over"
            )
            assert owner[taken[0]] is other and taken[1] > epoch
            # what an operator graphs: one run taken over, by the survivor
            assert wait_until(lambda: _taken_over(on_other), what="the take-over counted") == 1
            wait_until(
                lambda: run(on_other, run_id)["nodeStates"]["peer"]["handoff"].get("lastReadAt"),
                what="the survivor to read the peer",
            )
            wait_until(
                lambda: on_b.get(f"/v1/a2a/tasks/{task_id}").json()["pushConfig"]["url"].startswith(other.url),
                what="B to push to the survivor",
            )
            assert run(on_other, run_id)["status"] == "waiting-approval"
            approve(on_b, task_id, "gate")
            done = until_status(on_other, run_id, "completed", "failed", timeout=15)
            assert done["status"] == "completed", done
            assert done["nodeStates"]["peer"]["outputs"]["taskId"] == task_id
            assert_clean(on_other, run_id)
            assert_clean(on_b, task_id)
            b_runs: list[Doc] = on_b.get("/v1/runs").json()["runs"]
            assert [r["runId"] for r in b_runs] == [task_id], "one remote task"
        wait_until(lambda: lease(run_id) is None, what="the survivor to let the finished run's lease go")


def test_a_push_that_lands_on_the_host_not_following_wakes_the_one_that_is(
    start_process: Hosts[HostProcess],
    shared_database: str,
    peer: tuple[InProcessHost, Path, tuple[str, ...]],
    tmp_path: Path,
) -> None:
    """Both hosts publish the second one's URL (as a load balancer would send every push
    there). The second starts once the first holds the run and follows its hand-off, polling
    B less and less often. B's push lands on the second host, which passes the wake-up on:
    the first completes the run sooner than its next poll."""
    b, ca_file, tls = peer
    flows = _hand_approval(tmp_path, b)
    front = free_port()
    args = (
        *tls,
        *SECURE,
        "--workflows",
        str(flows),
        "--secret-key-file",
        str(tmp_path / "shared-host.key"),
        "--handoff-poll-max-seconds",
        "60",
        "--public-url",
        f"https://127.0.0.1:{front}",
    )
    own = free_port()
    a1 = start_process(*args, "--port", str(own), name="a1", database_url=shared_database)
    a1.url = f"https://127.0.0.1:{own}"  # where it listens; the URL it prints is the front's
    assert a1.dev_key and b.dev_key
    with _client(a1, a1.dev_key, ca_file) as on_a1, _client(b, b.dev_key, ca_file) as on_b:
        created = on_a1.post("/v1/runs", json={"workflowId": "hand-approval", "inputs": {"prompt": "ship it"}})
        run_id = created.json()["runId"]
        task_id = until_status(on_a1, run_id, "waiting-approval")["nodeStates"]["peer"]["handoff"]["taskId"]
        assert run(on_a1, run_id)["nodeStates"]["peer"]["handoff"].get("lastReadAt"), "the first host follows"
        a2 = start_process(*args, "--port", str(front), name="a2", database_url=shared_database)
        pushed_to = wait_until(
            lambda: on_b.get(f"/v1/a2a/tasks/{task_id}").json().get("pushConfig"), what="A's push config"
        )
        assert pushed_to["url"].startswith(f"https://127.0.0.1:{front}/v1/a2a/handoffs/") and a2.url.endswith(
            f":{front}"
        )
        # the first host's poll backs off (doubling); approve just after a read that came 8 s after
        # the one before it, so the next read is 16 s away: finishing sooner is the push's doing
        reads: list[tuple[str, float]] = []

        def just_read_after_a_long_pause() -> bool:
            last = run(on_a1, run_id)["nodeStates"]["peer"]["handoff"]["lastReadAt"]
            if not reads or reads[-1][0] != last:
                reads.append((last, time.monotonic()))
            return len(reads) >= 2 and reads[-1][1] - reads[-2][1] >= 7.5 and time.monotonic() - reads[-1][1] < 1.0

        wait_until(just_read_after_a_long_pause, timeout=60, interval=0.1, what="the poll to back off to 8 s")
        approve(on_b, task_id, "gate")
        done = until_status(on_a1, run_id, "completed", "failed", timeout=8)
        assert done["status"] == "completed", done
