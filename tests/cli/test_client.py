"""The CLI's HTTP client sends the query it is given: filters reach the host.

A stand-in host (httpx's ``MockTransport``) records each request's URL; the client is the
real one the commands use.
"""

from __future__ import annotations

import httpx

from tether.cli._client import HostClient


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
