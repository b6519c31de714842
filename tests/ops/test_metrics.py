"""``GET /metrics``, read with prometheus_client's own parser: counters move by exactly the work done.

Every test scrapes a real in-process host before and after a known amount of work and
compares the two; the scrapes themselves are not requests the host counts.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from harness import wait_until
from inproc import InProcessHost
from prometheus_client.parser import text_string_to_metric_families
from receiver import Receiver, egress_to

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def scrape(host: InProcessHost) -> Samples:
    answer = host.http().get("/metrics")
    assert answer.status_code == 200
    assert answer.headers["content-type"].startswith("text/plain; version=")
    samples: Samples = {}
    for family in text_string_to_metric_families(answer.text):
        for sample in family.samples:
            samples[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return samples


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


@pytest.fixture
def host(tmp_path: Path) -> Iterator[InProcessHost]:
    with InProcessHost(tmp_path / "data") as started:
        yield started


def send(http: httpx.Client, text: str, skill: str = "echo") -> dict[str, object]:
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "message/send",
        "params": {
            "message": {
                "kind": "message",
                "role": "user",
                "messageId": f"m-{text}",
                "parts": [{"kind": "text", "text": text}],
                "metadata": {"skillId": skill},
            }
        },
    }
    answer = http.post("/v1/a2a", json=body)
    assert answer.status_code == 200
    result: dict[str, object] = answer.json()["result"]
    return result


def test_counters_move_by_exactly_the_work_done(host: InProcessHost) -> None:
    http = host.http(host.dev_key)
    before = scrape(host)
    tasks = [send(http, f"hello-{n}") for n in range(3)]
    assert all(t["status"]["state"] == "completed" for t in tasks)  # type: ignore[index]
    for _ in range(2):
        assert http.get("/v1/runs").status_code == 200
    assert host.http().get("/v1/runs").status_code == 401
    after = scrape(host)

    def delta(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    assert delta("tether_requests_total", surface="a2a", operation="message/send", outcome="2xx") == 3
    assert delta("tether_requests_total", surface="rest", operation="GET /v1/runs", outcome="2xx") == 2
    assert delta("tether_requests_total", surface="rest", operation="GET /v1/runs", outcome="4xx") == 1
    assert delta("tether_request_duration_seconds_count", surface="a2a", operation="message/send") == 3
    assert delta("tether_runs_started_total", workflow="echo") == 3
    assert delta("tether_runs_finished_total", workflow="echo", status="completed") == 3
    events = sum(
        len(http.get(f"/v1/runs/{t['id']}/events/poll", params={"timeout": 0}).json()["events"]) for t in tasks
    )
    assert delta("tether_events_committed_total") == events
    assert delta("tether_store_commit_duration_seconds_count") >= 3
    assert value(after, "tether_runs", status="running") == 0


def test_waiting_runs_gate_waits_and_open_streams(host: InProcessHost) -> None:
    http = host.http(host.dev_key)
    task = send(http, "needs approval", skill="approval-gated")
    assert value(scrape(host), "tether_runs", status="waiting-approval") == 1
    with httpx.Client(base_url=host.url, headers={"Authorization": f"Bearer {host.dev_key}"}, timeout=30) as streamer:
        with streamer.stream("GET", f"/v1/runs/{task['id']}/events") as stream:
            assert stream.status_code == 200
            assert value(scrape(host), "tether_open_streams", surface="rest") == 1
    wait_until(lambda: value(scrape(host), "tether_open_streams", surface="rest") == 0, what="the stream to close")
    snapshot = http.get(f"/v1/runs/{task['id']}").json()
    resolved = http.post(
        f"/v1/runs/{task['id']}/interrupts/{snapshot['interrupt']['nodeId']}",
        json={"resumeValue": {"action": "accept"}},
    )
    assert resolved.status_code == 200
    wait_until(lambda: http.get(f"/v1/runs/{task['id']}").json()["status"] == "completed", what="the run to end")
    after = scrape(host)
    assert value(after, "tether_runs", status="waiting-approval") == 0
    assert value(after, "tether_interrupt_wait_seconds_count") == 1
    assert value(after, "tether_runs_finished_total", workflow="approval-gated", status="completed") == 1
    assert value(after, "tether_outbox_deliveries", status="dead") == 0


def test_no_label_carries_an_id(host: InProcessHost) -> None:
    http = host.http(host.dev_key)
    task = send(http, "ids")
    http.get(f"/v1/runs/{task['id']}")
    http.get(f"/v1/runs/{task['id']}/events/poll", params={"timeout": 0})
    http.get("/v1/no/such/route")
    labels = {v for (_, pairs) in scrape(host) for _, v in pairs}
    assert not [v for v in labels if re.search(r"run_[0-9a-f]{8}", v) or str(task["id"]) in v], labels
    assert "GET /v1/runs/{run_id}" in labels and "GET unmatched" in labels


def test_request_counts_and_latencies_read_as_prometheus_clients_own_histogram_would() -> None:
    """``Requests`` keeps plain numbers on the hot path; scraped, it matches the library's own types."""
    from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest

    from tether.ops.metrics import Metrics

    observed = [(200, 0.0004), (200, 0.0005), (200, 0.003), (404, 0.0011), (503, 45.0), (200, 1.0)]
    ours = Metrics()
    reference = CollectorRegistry()
    counter = Counter("tether_requests", "", ["surface", "operation", "outcome"], registry=reference)
    buckets = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)
    histogram = Histogram(
        "tether_request_duration_seconds", "", ["surface", "operation"], buckets=buckets, registry=reference
    )
    for status, seconds in observed:
        ours.request("a2a", "tasks/get", status, seconds)
        counter.labels("a2a", "tasks/get", f"{status // 100}xx").inc()
        histogram.labels("a2a", "tasks/get").observe(seconds)

    def samples(text: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
        return {
            (s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(text)
            for s in family.samples
            if s.name.startswith("tether_request") and not s.name.endswith("_created")
        }

    mine = samples(generate_latest(ours.registry).decode())
    assert mine == samples(generate_latest(reference).decode())
    assert (
        mine[
            (
                "tether_request_duration_seconds_bucket",
                frozenset({("surface", "a2a"), ("operation", "tasks/get"), ("le", "0.0005")}),
            )
        ]
        == 2
    )


def test_delivery_attempts_by_outcome_and_the_oldest_due_delivery(tmp_path: Path, receiver: Receiver) -> None:
    """A webhook that fails once then lands, and one that fails until it is dead-lettered."""
    schedule = ("--push-retry-schedule", "200ms")
    with InProcessHost(tmp_path / "data", *egress_to(receiver), *schedule) as host:
        http = host.http(host.dev_key)
        hook = {"url": receiver.url("/hook"), "events": ["run.completed"], "secret": "s" * 32}
        assert http.post("/v1/webhooks", json=hook).status_code == 201
        receiver.script = [500, 204]
        send(http, "lands-second-time")
        wait_until(
            lambda: value(scrape(host), "tether_outbox_attempts_total", kind="webhook", outcome="delivered") == 1
        )
        receiver.script = [503]
        send(http, "never-lands")
        wait_until(lambda: value(scrape(host), "tether_outbox_attempts_total", kind="webhook", outcome="dead") == 1)
        after = scrape(host)
        assert value(after, "tether_outbox_attempts_total", kind="webhook", outcome="retry") == 2
        assert value(after, "tether_outbox_deliveries", status="dead") == 1
        assert value(after, "tether_outbox_oldest_due_age_seconds") == 0  # nothing left due
        assert len(receiver.requests) == 4


def test_metrics_on_their_own_port_and_only_there(tmp_path: Path) -> None:
    """``--metrics-port``: the scrape port serves /metrics alone; the API's port has no /metrics."""
    import socket

    from harness import HostProcess

    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    host = HostProcess(tmp_path / "data", "--metrics-port", str(port)).start()
    try:
        http = host.http(host.dev_key)
        send(http, "counted")
        assert http.get("/metrics").status_code == 404  # not beside the API
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as scraper:
            scraped = scraper.get("/metrics")
            assert scraped.status_code == 200 and scraped.headers["content-type"].startswith("text/plain; version=")
            samples = {s.name: s for f in text_string_to_metric_families(scraped.text) for s in f.samples}
            assert "tether_requests_total" in samples
            assert scraper.get("/v1/runs", headers={"Authorization": f"Bearer {host.dev_key}"}).status_code == 404
    finally:
        host.kill()
        host.close_clients()


def test_group_sizes_account_for_every_commit(host: InProcessHost) -> None:
    """Each durable SQLite transaction reports how many writes it carried: all of them add up to at
    least every commit made (other writes, key reads' claims, ride along), in fewer transactions."""
    import threading

    http = host.http(host.dev_key)
    before = scrape(host)
    threads = [threading.Thread(target=send, args=(host.http(host.dev_key), f"group-{n}")) for n in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    send(http, "group-last")
    after = scrape(host)

    def delta(name: str) -> float:
        return value(after, name) - value(before, name)

    commits = delta("tether_store_commit_duration_seconds_count")
    assert commits >= 13  # each send commits at least once
    assert delta("tether_store_group_size_sum") >= commits
    assert 1 <= delta("tether_store_group_size_count") <= delta("tether_store_group_size_sum")


def _follow_until_the_end(host: InProcessHost, run_id: str, surface: str, seen: list[bytes]) -> None:
    """Read one stream of ``run_id`` (REST SSE or A2A ``tasks/resubscribe``) until the host ends it."""
    headers = {"Authorization": f"Bearer {host.dev_key}"}
    with httpx.Client(base_url=host.url, headers=headers, timeout=60) as client:
        if surface == "rest":
            request = client.build_request("GET", f"/v1/runs/{run_id}/events", params={"streamMode": "debug"})
        else:
            body = {"jsonrpc": "2.0", "id": 1, "method": "tasks/resubscribe", "params": {"id": run_id}}
            request = client.build_request("POST", "/v1/a2a", json=body)
        stream = client.send(request, stream=True)
        try:
            assert stream.status_code == 200
            for line in stream.iter_lines():
                if line.startswith("data:"):
                    seen.append(line.encode())
        finally:
            stream.close()


def _waiting_run(host: InProcessHost) -> str:
    http = host.http(host.dev_key)
    run_id: str = http.post("/v1/runs", json={"workflowId": "approval-gated", "inputs": {"prompt": "x"}}).json()[
        "runId"
    ]
    wait_until(lambda: http.get(f"/v1/runs/{run_id}").json()["status"] == "waiting-approval", what="the gate")
    return run_id


def _approve_and_count(host: InProcessHost, run_id: str, streams: list[str]) -> tuple[float, float, float]:
    """Open ``streams`` on a run at its gate, approve it, read them to the end: the fan-outs timed
    meanwhile, the commits made, and the seconds the fan-outs took in all."""
    import threading

    frames: list[list[bytes]] = [[] for _ in streams]
    readers = [
        threading.Thread(target=_follow_until_the_end, args=(host, run_id, surface, into), daemon=True)
        for surface, into in zip(streams, frames, strict=True)
    ]
    for reader in readers:
        reader.start()
    wait_until(lambda: all(frames_seen for frames_seen in frames), what="every stream to be attached")
    before = scrape(host)
    http = host.http(host.dev_key)
    answered = http.post(f"/v1/runs/{run_id}/interrupts/gate", json={"resumeValue": {"action": "accept"}})
    assert answered.status_code == 200
    wait_until(lambda: http.get(f"/v1/runs/{run_id}").json()["status"] == "completed", what="the run to end")
    for reader in readers:
        reader.join(30)
        assert not reader.is_alive(), "every stream ends with the run"
    after = scrape(host)

    def delta(name: str) -> float:
        return value(after, name) - value(before, name)

    return (
        delta("tether_stream_fanout_seconds_count"),
        delta("tether_store_commit_duration_seconds_count"),
        delta("tether_stream_fanout_seconds_sum"),
    )


def test_stream_fanout_is_timed_once_per_commit_however_many_streams_follow(host: InProcessHost) -> None:
    """Every commit made while streams follow its run is one fan-out, whether one stream or five (of both
    surfaces) take it; with no stream open, nothing is timed."""
    one, commits_one, _ = _approve_and_count(host, _waiting_run(host), ["rest"])
    assert commits_one >= 1 and one == commits_one
    five, commits_five, seconds = _approve_and_count(host, _waiting_run(host), ["rest", "a2a", "rest", "a2a", "rest"])
    assert five == commits_five == commits_one, "one observation per commit, not one per stream"
    assert 0 < seconds < 30
    none, commits_none, _ = _approve_and_count(host, _waiting_run(host), [])
    assert commits_none == commits_one and none == 0
