"""The CLI's HTTP client sends the query it is given (filters reach the host), and a followed
stream that is lost is re-attached after the last event seen.

A stand-in host (httpx's ``MockTransport``) records each request's URL; the client is the
real one the commands use.
"""

from __future__ import annotations

import json

import httpx
import pytest

from tether.cli._client import HostClient, HostError, HostUnreachable


def _recording() -> tuple[list[httpx.URL], httpx.MockTransport]:
    seen: list[httpx.URL] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request.url)
        return httpx.Response(200, json={"deliveries": []})

    return seen, httpx.MockTransport(answer)


def test_params_become_the_query_and_none_values_are_left_out() -> None:
    seen, transport = _recording()
    with HostClient("http://host.test", "tk_x", transport=transport) as client:
        client.get("/v1/deliveries", {"limit": 5, "status": "dead", "kind": None})
    assert seen[0].path == "/v1/deliveries"
    assert dict(seen[0].params) == {"limit": "5", "status": "dead"}


def test_a_query_written_into_the_path_is_kept() -> None:
    """httpx replaces a path's query with any ``params`` passed, even empty ones: the client passes none then."""
    seen, transport = _recording()
    with HostClient("http://host.test", None, transport=transport) as client:
        client.get("/v1/deliveries?limit=5&status=dead")
        client.get("/v1/deliveries?limit=5", {"status": None})
    assert [dict(url.params) for url in seen] == [{"limit": "5", "status": "dead"}, {"limit": "5"}]


def _sse(*events: dict[str, object]) -> bytes:
    return b"".join(
        b"id: %d\nevent: %s\ndata: %s\n\n" % (e["sequence"], str(e["type"]).encode(), json.dumps(e).encode())
        for e in events
    )


def test_follow_events_re_attaches_after_the_last_event_seen() -> None:
    """A stream the host ends before the run does is opened again with ``Last-Event-ID``: nothing twice."""
    log = [{"sequence": n, "type": t} for n, t in enumerate(["run.started", "node.started", "node.completed"])]
    log.append({"sequence": 3, "type": "run.completed"})
    asked: list[str | None] = []

    def answer(request: httpx.Request) -> httpx.Response:
        asked.append(request.headers.get("last-event-id"))
        if len(asked) == 1:
            return httpx.Response(200, content=_sse(*log[:2]))  # closed half-way (the host restarted)
        if len(asked) == 2:
            return httpx.Response(502, json={"error": "bad_gateway", "message": "the host is coming back"})
        after = int(request.headers["last-event-id"])
        return httpx.Response(200, content=_sse(*log[after + 1 :]))

    lost: list[tuple[int, str]] = []
    with HostClient("http://host.test", "tk_x", transport=httpx.MockTransport(answer)) as client:
        seen = list(client.follow_events("run_1", on_reattach=lambda last, why: lost.append((last, why))))
    assert [e["sequence"] for e in seen] == [0, 1, 2, 3]
    assert asked == [None, "1", "1"]
    assert [last for last, _ in lost] == [1, 1] and "closed the stream" in lost[0][1] and "502" in lost[1][1]


def test_follow_events_stops_at_a_refusal_and_gives_up_when_no_stream_is_accepted() -> None:
    def unknown(request: httpx.Request) -> httpx.Response:
        return httpx.Response(404, json={"error": "not_found", "message": "no such run"})

    with HostClient("http://host.test", "tk_x", transport=httpx.MockTransport(unknown)) as client:
        with pytest.raises(HostError, match="no such run"):
            list(client.follow_events("run_1"))

    def down(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    with HostClient("http://host.test", "tk_x", transport=httpx.MockTransport(down)) as client:
        with pytest.raises(HostUnreachable, match="gave up re-attaching"):
            list(client.follow_events("run_1", window=0.3))
