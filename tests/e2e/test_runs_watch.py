"""``GET /v1/runs:watch`` on a real host: a tenant's run changes, live, resumable, its tenant only.

Streams are read with plain httpx in a thread per stream, frame by frame, so each test
sees the wire: ``sync`` first, then ``run`` frames carrying a run's summary, ``id:`` a
cursor that ``Last-Event-ID`` resumes after.
"""

from __future__ import annotations

import json
import queue
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import httpx
from harness import Host, wait_until
from keys import made_key

WAIT = 15.0
TERMINAL = ("completed", "failed", "cancelled")


@dataclass(frozen=True)
class Frame:
    id: str | None
    event: str | None
    data: dict[str, Any]


class Watch:
    """One open ``/v1/runs:watch`` stream, read in a thread into a queue of frames."""

    def __init__(self, response: httpx.Response) -> None:
        self.response = response
        self.frames: queue.Queue[Frame | None] = queue.Queue()
        #: every frame taken from the queue so far, in order
        self.seen: list[Frame] = []
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        fields: dict[str, list[str]] = {}
        try:
            for line in self.response.iter_lines():
                if line == "":
                    if fields:
                        data = json.loads("\n".join(fields.get("data", ["null"])))
                        self.frames.put(Frame(fields.get("id", [None])[-1], fields.get("event", [None])[-1], data))
                    fields = {}
                elif not line.startswith(":"):
                    name, _, value = line.partition(":")
                    fields.setdefault(name, []).append(value[1:] if value.startswith(" ") else value)
        except httpx.HTTPError:
            pass  # closed by the test
        finally:
            self.frames.put(None)

    def next(self, accept: Callable[[Frame], bool] = lambda _: True, timeout: float = WAIT) -> Frame:
        """The next frame ``accept`` takes (others are skipped); fails when none comes in time."""
        skipped: list[Frame] = []
        while True:
            try:
                frame = self.frames.get(timeout=timeout)
            except queue.Empty:
                raise AssertionError(f"no matching frame within {timeout}s; skipped {skipped}") from None
            assert frame is not None, f"the stream ended; skipped {skipped}"
            self.seen.append(frame)
            if accept(frame):
                return frame
            skipped.append(frame)

    def drain(self) -> list[Frame]:
        """The frames read so far, without waiting."""
        seen: list[Frame] = []
        while True:
            try:
                frame = self.frames.get_nowait()
            except queue.Empty:
                return seen
            if frame is not None:
                seen.append(frame)
                self.seen.append(frame)


@contextmanager
def watching(host: Host, key: str, last_event_id: str | None = None) -> Iterator[Watch]:
    headers = {"Accept": "text/event-stream"}
    if last_event_id is not None:
        headers["Last-Event-ID"] = last_event_id
    with host.client(key) as http:
        with http.stream("GET", "/v1/runs:watch", headers=headers, timeout=httpx.Timeout(30, read=60)) as response:
            assert response.status_code == 200, response.read()
            assert response.headers["content-type"].startswith("text/event-stream")
            assert response.headers["cache-control"] == "no-store"
            yield Watch(response)


def _create(host: Host, key: str, workflow: str = "approval-gated") -> str:
    response = host.http(key).post("/v1/runs", json={"workflowId": workflow, "inputs": {"prompt": "draft"}})
    assert response.status_code == 201, response.text
    run_id: str = response.json()["runId"]
    return run_id


def _summary_of(snapshot: dict[str, Any]) -> dict[str, Any]:
    """What a watch tells of a run whose ``GET /v1/runs/{id}`` answered ``snapshot`` (no interrupt pending)."""
    fields = ("runId", "workflowId", "status", "createdAt", "updatedAt", "lastSequence")
    return {name: snapshot[name] for name in fields}


def _of(run_id: str, status: str | None = None) -> Callable[[Frame], bool]:
    return lambda f: f.event == "run" and f.data["runId"] == run_id and (status is None or f.data["status"] == status)


def test_a_watch_starts_with_a_sync_then_tells_each_change_of_a_run(host: Host, key: str) -> None:
    with watching(host, key) as watch:
        sync = watch.next()
        assert (sync.event, sync.data) == ("sync", {"reason": "start"})
        assert sync.id
        run_id = _create(host, key)
        waiting = watch.next(_of(run_id, "waiting-approval"))
        summary = waiting.data
        assert summary["workflowId"] == "approval-gated"
        assert summary["interrupt"]["kind"] == "approval" and summary["interrupt"]["nodeId"] == "gate"
        assert "interruptToken" not in summary["interrupt"], "a watcher reads the run for its token"
        listed = host.http(key).get(f"/v1/runs/{run_id}").json()
        assert summary["lastSequence"] == listed["lastSequence"] and summary["createdAt"] == listed["createdAt"]
        resolved = host.http(key).post(f"/v1/runs/{run_id}/interrupts/gate", json={"resumeValue": {"action": "accept"}})
        assert resolved.status_code == 200, resolved.text
        done = watch.next(_of(run_id, "completed"))
        assert "interrupt" not in done.data
        assert done.data["lastSequence"] > summary["lastSequence"]
        assert done.id != waiting.id


def test_another_tenants_runs_never_appear(host: Host, key: str, other_tenant_key: str) -> None:
    with watching(host, other_tenant_key) as theirs, watching(host, key) as ours:
        theirs.next()
        ours.next()
        mine = _create(host, key)
        ours.next(_of(mine, "waiting-approval"))
        their_run = _create(host, other_tenant_key, "echo")
        theirs.next(_of(their_run, "completed"))
        marker = _create(host, key, "echo")  # after their run in the host's feed: ours has passed it when it comes
        ours.next(_of(marker, "completed"))
        ours.drain()
        theirs.drain()
    ours_saw = {f.data.get("runId") for f in ours.seen if f.event == "run"}
    theirs_saw = {f.data.get("runId") for f in theirs.seen if f.event == "run"}
    assert {mine, marker} <= ours_saw and their_run not in ours_saw, "another tenant's run reached this watch"
    assert their_run in theirs_saw and not ({mine, marker} & theirs_saw)


def test_a_key_without_runs_read_is_refused_and_no_key_is_unauthorised(host: Host) -> None:
    creator = made_key(host, "creator-only", "--scopes", "runs:create")
    refused = host.http(creator).get("/v1/runs:watch")
    assert refused.status_code == 403
    assert refused.json()["error"] == "forbidden" and refused.json()["details"] == {"scopeRequired": "runs:read"}
    anonymous = host.http().get("/v1/runs:watch")
    assert anonymous.status_code == 401 and anonymous.json()["error"] == "unauthenticated"


def test_last_event_id_resumes_with_exactly_the_missed_changes(host: Host, key: str) -> None:
    first = _create(host, key)
    with watching(host, key) as watch:
        watch.next()
        _create(host, key, "echo")  # a change seen before the drop
        last = watch.next(lambda f: f.event == "run")
    resolved = host.http(key).post(f"/v1/runs/{first}/interrupts/gate", json={"resumeValue": {"action": "reject"}})
    assert resolved.status_code == 200
    ended = wait_until(lambda: (r := host.http(key).get(f"/v1/runs/{first}").json())["status"] in TERMINAL and r)
    missed = _create(host, key, "echo")
    with watching(host, key, last_event_id=last.id) as resumed:
        resumed.next(_of(missed, "completed"))
    frames = resumed.seen
    assert all(f.event == "run" for f in frames), "a resume the ring can serve needs no sync"
    assert any(f.data == _summary_of(ended) for f in frames), "the change made while away is replayed"
    assert last.id not in [f.id for f in frames], "the resumption point itself is not sent again"
    positions = [int(f.id.rsplit("-", 1)[1]) for f in frames if f.id]
    assert positions == sorted(set(positions)) and positions[0] > int((last.id or "").rsplit("-", 1)[1])


def test_a_cursor_the_host_cannot_serve_gets_a_sync_and_a_malformed_one_a_400(host: Host, key: str) -> None:
    with watching(host, key, last_event_id="0123456789abcdef-5") as watch:
        frame = watch.next()
        assert (frame.event, frame.data) == ("sync", {"reason": "gap"})
    refused = host.http(key).get("/v1/runs:watch", headers={"Last-Event-ID": "five"})
    assert refused.status_code == 400 and refused.json()["error"] == "validation_error"


def test_the_openapi_document_declares_the_watch(host: Host) -> None:
    operation = host.http().get("/v1/openapi.json").json()["paths"]["/v1/runs:watch"]["get"]
    assert "text/event-stream" in operation["responses"]["200"]["content"]
    assert {"400", "401", "403"} <= set(operation["responses"])
    assert [p["name"] for p in operation["parameters"]] == ["Last-Event-ID"]
