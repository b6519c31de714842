"""Two real Tether hosts on loopback for hand-off tests: A hands off, B is the peer.

Both serve HTTPS with a test CA (``--tls-certfile``): the egress guard reaches only HTTPS
URLs, and both guards exempt loopback with ``--egress-allow-cidr 127.0.0.1/32`` and trust
the CA with ``--egress-ca-bundle``. B is a public agent (``--a2a-anonymous-tenant``)
unless a test says otherwise. Both are ``tether serve`` processes, or in-process hosts
(``inproc.InProcessHost``, ``kind=``) for a test that kills neither and reads no process's CPU:
the hand-off is the same over a real socket, and starting two costs milliseconds, not seconds.
The helpers read runs and their logs over REST.
"""

from __future__ import annotations

import json
import socket
import ssl
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import trustme
from harness import HostProcess, wait_until
from inproc import InProcessHost

Doc = dict[str, Any]
SECURE = ("--egress-allow-cidr", "127.0.0.1/32")


def free_port() -> int:
    """A port for a host that must come back where its peer expects it (a restart keeps it)."""
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port: int = probe.getsockname()[1]
    probe.close()
    return port


def write_tls(folder: Path) -> tuple[Path, Path, Path]:
    """A test CA and a certificate for 127.0.0.1 it signed: (CA file, certificate chain, key), as PEM files."""
    ca = trustme.CA()
    ca_file = folder / "ca.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    issued = ca.issue_cert("127.0.0.1")
    cert, key = folder / "cert.pem", folder / "key.pem"
    cert.write_bytes(b"".join(pem.bytes() for pem in issued.cert_chain_pems))
    issued.private_key_pem.write_to_path(str(key))
    return ca_file, cert, key


class Pair:
    """Host A (hands off) and host B (the peer), with HTTPS clients that trust the test CA."""

    def __init__(
        self,
        folder: Path,
        a_workflows: Callable[[str], list[Doc]],
        b_workflows: list[Doc] = [],  # noqa: B006 (read only)
        *,
        b_pushes: bool = True,
        b_anonymous: bool = True,
        a_args: tuple[str, ...] = (),
        a_database: str | None = None,
        b_database: str | None = None,
        kind: type[HostProcess] | type[InProcessHost] = HostProcess,
    ) -> None:
        """``a_database``/``b_database``: a PostgreSQL database for that host (else it stores in SQLite)."""
        self.ca_file, self.cert, self.key = write_tls(folder)
        tls = (
            "--tls-certfile",
            str(self.cert),
            "--tls-keyfile",
            str(self.key),
            "--egress-ca-bundle",
            str(self.ca_file),
        )
        self.b_port = free_port()
        b_flows = folder / "b-workflows"
        b_flows.mkdir()
        for doc in b_workflows:
            (b_flows / f"{doc['id']}.json").write_text(json.dumps(doc))
        public = ("--a2a-anonymous-tenant", "default") if b_anonymous else ()
        b_args = (*tls, "--port", str(self.b_port), *public, "--workflows", str(b_flows))
        self.b = kind(folder / "b", *b_args, *(SECURE if b_pushes else ()), database_url=b_database)
        self.b.start()
        self.b_url = self.b.url
        flows = folder / "a-workflows"
        flows.mkdir()
        for doc in a_workflows(self.b_url):
            (flows / f"{doc['id']}.json").write_text(json.dumps(doc))
        self.a_port = free_port()
        a_all = (*tls, *SECURE, "--port", str(self.a_port), "--workflows", str(flows), *a_args)
        self.a = kind(folder / "a", *a_all, database_url=a_database)
        self.a.start()
        assert self.a.url.startswith("https://") and self.b.url.startswith("https://")
        assert self.a.dev_key and self.b.dev_key
        self.a_key, self.b_key = self.a.dev_key, self.b.dev_key

    def http(self, host: HostProcess | InProcessHost, key: str) -> httpx.Client:
        return httpx.Client(
            base_url=host.url,
            headers={"Authorization": f"Bearer {key}"},
            verify=ssl.create_default_context(cafile=str(self.ca_file)),
            timeout=30,
        )

    def a_http(self) -> httpx.Client:
        return self.http(self.a, self.a_key)

    def b_http(self) -> httpx.Client:
        return self.http(self.b, self.b_key)

    def close(self) -> None:
        """Kill processes (no shutdown code runs); stop in-process hosts (nothing may be left running)."""
        for host in (self.a, self.b):
            if isinstance(host, HostProcess):
                host.kill()
            else:
                host.close()


def start(http: httpx.Client, workflow_id: str, inputs: Doc) -> str:
    response = http.post("/v1/runs", json={"workflowId": workflow_id, "inputs": inputs})
    assert response.status_code == 201, response.text
    run_id: str = response.json()["runId"]
    return run_id


def run(http: httpx.Client, run_id: str) -> Doc:
    response = http.get(f"/v1/runs/{run_id}")
    assert response.status_code == 200, response.text
    doc: Doc = response.json()
    return doc


def until_status(http: httpx.Client, run_id: str, *statuses: str, timeout: float = 20.0) -> Doc:
    return wait_until(
        lambda: (doc := run(http, run_id))["status"] in statuses and doc,
        timeout=timeout,
        interval=0.1,
        what=f"run {run_id} to be {' or '.join(statuses)}",
    )


def peer_task(http: httpx.Client, run_id: str) -> str:
    """B's task id, as A recorded it in its run's log."""
    return wait_until(
        lambda: run(http, run_id)["nodeStates"].get("peer", {}).get("handoff", {}).get("taskId"),
        what="the peer's task id on A",
    )


def events(http: httpx.Client, run_id: str) -> list[Doc]:
    response = http.get(f"/v1/runs/{run_id}/events/poll", params={"lastSequence": -1, "timeout": 0})
    assert response.status_code == 200, response.text
    found: list[Doc] = response.json()["events"]
    return found


def assert_clean(http: httpx.Client, run_id: str) -> list[Doc]:
    """One ``run.started``, every sequence once, no node started or finished twice."""
    docs = events(http, run_id)
    assert [e["sequence"] for e in docs] == list(range(len(docs)))
    assert Counter(e["type"] for e in docs)["run.started"] == 1
    for kind in ("node.started", "node.completed", "node.failed"):
        per_node = Counter(e["nodeId"] for e in docs if e["type"] == kind)
        assert all(n == 1 for n in per_node.values()), f"{kind} twice: {per_node}"
    return docs


def b_runs(pair: Pair) -> list[Doc]:
    with pair.b_http() as http:
        runs: list[Doc] = http.get("/v1/runs").json()["runs"]
    return runs


def approve(http: httpx.Client, run_id: str, node_id: str, action: str = "accept") -> None:
    response = http.post(f"/v1/runs/{run_id}/interrupts/{node_id}", json={"resumeValue": {"action": action}})
    assert response.status_code == 200, response.text


def outputs_of(doc: Doc) -> Doc:
    outputs: Doc = doc["nodeStates"]["peer"]["outputs"]
    return outputs
