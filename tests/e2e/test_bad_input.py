"""Refused requests against a real host: the right status, the official envelope, nothing written.

One in-process host (started with ``--max-body-bytes 2048``) serves the whole module. It holds one
run waiting at an approval gate and one waiting for a clarification; after every test's
refusals, the run list and both runs' event logs must be exactly what they were before,
so a refused request can never leave something half-written.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from harness import wait_until
from inproc import InProcessHost
from schemas import openwop_validator

MAX_BODY = 2048


@dataclass
class World:
    host: InProcessHost
    http: httpx.Client
    approval: str
    clarification: str
    baseline: dict[str, Any]

    def events(self, run_id: str) -> list[dict[str, Any]]:
        events: list[dict[str, Any]] = self.http.get(f"/v1/runs/{run_id}/events/poll", params={"timeout": 0}).json()[
            "events"
        ]
        return events

    def state(self) -> dict[str, Any]:
        runs = self.http.get("/v1/runs", params={"limit": 500}).json()["runs"]
        return {
            "runs": sorted(r["runId"] for r in runs),
            "approval": (self.events(self.approval), _interrupt(self.http, self.approval)),
            "clarification": (self.events(self.clarification), _interrupt(self.http, self.clarification)),
        }

    def assert_untouched(self) -> None:
        now = self.state()
        assert now["runs"] == self.baseline["runs"], "a refused request created a run"
        assert now["approval"] == self.baseline["approval"], "a refused request changed the approval run"
        assert now["clarification"] == self.baseline["clarification"], "a refused request changed the clarification run"


def _interrupt(http: httpx.Client, run_id: str) -> tuple[str, str | None, str | None]:
    snapshot = http.get(f"/v1/runs/{run_id}").json()
    interrupt = snapshot.get("interrupt") or {}
    return snapshot["status"], interrupt.get("interruptId"), snapshot.get("currentNodeId")


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    data_dir: Path = tmp_path_factory.mktemp("bad-input") / "host"
    host = InProcessHost(data_dir, "--max-body-bytes", str(MAX_BODY)).start()
    try:
        assert host.dev_key
        http = host.http(host.dev_key)
        approval = http.post("/v1/runs", json={"workflowId": "approval-gated", "inputs": {"prompt": "draft"}}).json()[
            "runId"
        ]
        clarification = http.post("/v1/runs", json={"workflowId": "clarification-gated"}).json()["runId"]
        wait_until(
            lambda: http.get(f"/v1/runs/{approval}").json()["status"] == "waiting-approval", what="the approval gate"
        )
        wait_until(
            lambda: http.get(f"/v1/runs/{clarification}").json()["status"] == "waiting-input",
            what="the clarification gate",
        )
        world = World(host, http, approval, clarification, {})
        world.baseline = world.state()
        assert world.baseline["approval"][1] == ("waiting-approval", world.baseline["approval"][1][1], "gate")
        assert world.baseline["clarification"][1][0] == "waiting-input"
        yield world
    finally:
        host.close()


@pytest.fixture
def w(world: World) -> Iterator[World]:
    """The shared world, checked untouched after the test."""
    yield world
    world.assert_untouched()


def _refused(response: httpx.Response, status: int, error: str | None = None) -> dict[str, Any]:
    assert response.status_code == status, f"expected {status}, got {response.status_code}: {response.text}"
    assert response.headers["content-type"].startswith("application/json"), response.headers
    body: dict[str, Any] = response.json()
    openwop_validator("error-envelope").validate(body)
    if error is not None:
        assert body["error"] == error, body
    return body


def _post_raw(w: World, path: str, content: bytes, content_type: str = "application/json") -> httpx.Response:
    return w.http.post(path, content=content, headers={"Content-Type": content_type})


# --- the create body ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "content",
    [
        b'{"workflowId": "echo", "inputs": ',
        b"{'workflowId': 'echo'}",
        b"not json at all",
        b'{"workflowId": "echo"} trailing',
        b"\xff\xfe",
    ],
    ids=["truncated", "single-quotes", "text", "trailing", "binary"],
)
def test_malformed_json_body(w: World, content: bytes) -> None:
    body = _refused(_post_raw(w, "/v1/runs", content), 400, "validation_error")
    assert "JSON" in body["message"]


@pytest.mark.parametrize("content", [b"[]", b'[{"workflowId": "echo"}]', b'"echo"', b"42", b"null", b"true"])
def test_body_that_is_not_an_object(w: World, content: bytes) -> None:
    _refused(_post_raw(w, "/v1/runs", content), 400, "validation_error")


def test_empty_body(w: World) -> None:
    _refused(_post_raw(w, "/v1/runs", b""), 400, "validation_error")


def test_body_over_the_limit_is_413(w: World) -> None:
    big = {"workflowId": "echo", "inputs": {"prompt": "x" * (MAX_BODY + 100)}}
    body = _refused(w.http.post("/v1/runs", json=big), 413)
    assert body["error"] == "payload_too_large"
    assert body["details"]["maxBodyBytes"] == MAX_BODY


def test_chunked_body_over_the_limit_is_413(w: World) -> None:
    chunks = [b'{"workflowId": "echo", "inputs": {"prompt": "'] + [b"y" * 512] * 8 + [b'"}}']
    response = w.http.post("/v1/runs", content=iter(chunks), headers={"Content-Type": "application/json"})
    assert "content-length" not in response.request.headers
    body = _refused(response, 413)
    assert body["error"] == "payload_too_large"


def test_body_at_the_limit_is_read(w: World) -> None:
    doc: dict[str, Any] = {"workflowId": "no-such-workflow", "inputs": {"pad": ""}}
    pad = MAX_BODY - len(json.dumps(doc, separators=(",", ":")))
    doc["inputs"]["pad"] = "z" * pad
    content = json.dumps(doc, separators=(",", ":")).encode()
    assert len(content) == MAX_BODY
    _refused(_post_raw(w, "/v1/runs", content), 400, "validation_error")


def test_resolve_body_over_the_limit_is_413(w: World) -> None:
    response = w.http.post(
        f"/v1/runs/{w.approval}/interrupts/gate", json={"resumeValue": {"action": "accept", "feedback": "f" * MAX_BODY}}
    )
    _refused(response, 413, "payload_too_large")


def test_unknown_workflow(w: World) -> None:
    body = _refused(
        w.http.post("/v1/runs", json={"workflowId": "no-such-workflow", "inputs": {}}), 400, "validation_error"
    )
    assert "no-such-workflow" in body["message"]
    assert body["details"]["workflowId"] == "no-such-workflow"


@pytest.mark.parametrize(
    "inputs",
    [{}, {"other": "x"}, {"prompt": None}],
    ids=["missing", "only-others", "null"],
)
def test_missing_required_variable(w: World, inputs: dict[str, Any]) -> None:
    # shape requires its prompt (echo no longer does: it echoes an A2A message of files alone)
    body = _refused(w.http.post("/v1/runs", json={"workflowId": "shape", "inputs": inputs}), 400, "validation_error")
    assert "prompt" in body["message"]
    assert "prompt" in json.dumps(body.get("details", {}))


def test_inputs_omitted_when_a_variable_is_required(w: World) -> None:
    body = _refused(w.http.post("/v1/runs", json={"workflowId": "shape"}), 400, "validation_error")
    assert "prompt" in body["message"]


@pytest.mark.parametrize("value", [5, 1.5, True, ["a"], {"a": 1}], ids=["int", "float", "bool", "list", "object"])
def test_variable_of_the_wrong_type(w: World, value: Any) -> None:
    body = _refused(
        w.http.post("/v1/runs", json={"workflowId": "echo", "inputs": {"prompt": value}}), 400, "validation_error"
    )
    assert "prompt" in body["message"]
    assert "string" in body["message"]
    assert body["details"]["errors"][0]["path"] == "inputs.prompt"


@pytest.mark.parametrize("inputs", ["text", ["prompt"], 3, None], ids=["string", "list", "number", "null"])
def test_inputs_not_an_object(w: World, inputs: Any) -> None:
    _refused(w.http.post("/v1/runs", json={"workflowId": "echo", "inputs": inputs}), 400, "validation_error")


@pytest.mark.parametrize(
    "content_type", ["text/plain", "application/x-www-form-urlencoded", "text/html; charset=utf-8"]
)
def test_wrong_content_type(w: World, content_type: str) -> None:
    content = json.dumps({"workflowId": "echo", "inputs": {"prompt": "x"}}).encode()
    body = _refused(_post_raw(w, "/v1/runs", content, content_type), 415)
    assert content_type.split(";")[0] in body["message"]


def test_wrong_content_type_on_resolve(w: World) -> None:
    content = json.dumps({"resumeValue": {"action": "accept"}}).encode()
    _refused(_post_raw(w, f"/v1/runs/{w.approval}/interrupts/gate", content, "text/plain"), 415)


@pytest.mark.parametrize(
    "extra",
    [{"unexpected": 1}, {"workflowID": "echo"}, {"runId": "run_mine"}, {"inputs": {"prompt": "x"}, "priority": "high"}],
    ids=["unexpected", "miscased", "runId", "priority"],
)
def test_unknown_fields_in_the_body(w: World, extra: dict[str, Any]) -> None:
    doc = {"workflowId": "echo", "inputs": {"prompt": "x"}, **extra}
    body = _refused(w.http.post("/v1/runs", json=doc), 400, "validation_error")
    unknown = next(k for k in extra if k != "inputs")
    assert unknown in body["message"] or unknown in json.dumps(body.get("details", {}))


@pytest.mark.parametrize(
    "doc",
    [
        {"workflowId": "", "inputs": {"prompt": "x"}},
        {"workflowId": 7, "inputs": {"prompt": "x"}},
        {"workflowId": "w" * 129, "inputs": {"prompt": "x"}},
        {"workflowId": "echo", "inputs": {"prompt": "x"}, "tags": ["t"] * 101},
        {"workflowId": "echo", "inputs": {"prompt": "x"}, "tags": ["t" * 257]},
        {"workflowId": "echo", "inputs": {"prompt": "x"}, "metadata": "m"},
        {"workflowId": "echo", "inputs": {"prompt": "x"}, "callbackUrl": "http://127.0.0.1:1/hook"},
        {"inputs": {"prompt": "x"}},
    ],
    ids=[
        "empty-id",
        "numeric-id",
        "long-id",
        "too-many-tags",
        "long-tag",
        "metadata-string",
        "callback",
        "no-workflow",
    ],
)
def test_invalid_create_fields(w: World, doc: dict[str, Any]) -> None:
    _refused(w.http.post("/v1/runs", json=doc), 400, "validation_error")


@pytest.mark.parametrize(
    "key", ["has space", "x" * 256, "semi;colon", "é"], ids=["space", "long", "semicolon", "non-ascii"]
)
def test_bad_idempotency_key(w: World, key: str) -> None:
    response = w.http.post(
        "/v1/runs",
        content=json.dumps({"workflowId": "echo", "inputs": {"prompt": "x"}}).encode(),
        headers={b"Content-Type": b"application/json", b"Idempotency-Key": key.encode()},
    )
    _refused(response, 400, "validation_error")


# --- run ids, routes, methods, query parameters ------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "template", "kwargs"),
    [
        ("GET", "/v1/runs/{id}", {}),
        ("GET", "/v1/runs/{id}/events", {}),
        ("GET", "/v1/runs/{id}/events/poll", {"params": {"timeout": 0}}),
        ("POST", "/v1/runs/{id}/cancel", {"json": {}}),
        ("POST", "/v1/runs/{id}/interrupts/gate", {"json": {"resumeValue": {"action": "accept"}}}),
    ],
    ids=["get", "events", "poll", "cancel", "resolve"],
)
def test_run_id_too_long(w: World, method: str, template: str, kwargs: dict[str, Any]) -> None:
    run_id = "run_" + "a" * 196
    assert len(run_id) == 200
    body = _refused(w.http.request(method, template.format(id=run_id), **kwargs), 400, "validation_error")
    assert "128" in body["message"]


@pytest.mark.parametrize(
    "path", ["/v1/nothing", "/v1/runs/abc/nothing", "/v2/runs", "/", "/v1/workflows/no-such-workflow"]
)
def test_unknown_route_is_404(w: World, path: str) -> None:
    _refused(w.http.get(path), 404)


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("DELETE", "/v1/runs"),
        ("PUT", "/v1/runs"),
        ("PATCH", "/v1/runs/{id}"),
        ("DELETE", "/v1/runs/{id}"),
        ("GET", "/v1/runs/{id}/cancel"),
        ("POST", "/.well-known/openwop"),
    ],
)
def test_wrong_method_is_405(w: World, method: str, path: str) -> None:
    body = _refused(w.http.request(method, path.format(id=w.approval)), 405)
    assert body["error"] == "method_not_allowed"
    assert method in body["message"]


@pytest.mark.parametrize("method", ["GET", "PUT", "DELETE", "PATCH"])
def test_the_a2a_endpoint_takes_only_post(w: World, method: str) -> None:
    refused = w.http.request(method, "/v1/a2a")
    body = _refused(refused, 405, "method_not_allowed")
    assert refused.headers["allow"] == "POST" and method in body["message"]
    assert w.http.get("/v1/openapi.json").json()["paths"]["/v1/a2a"].keys() == {"post"}


@pytest.mark.parametrize(
    "params",
    [
        {"lastSequence": "abc"},
        {"lastSequence": "1.5"},
        {"lastSequence": "-5"},
        {"timeout": "61"},
        {"timeout": "-1"},
        {"timeout": "soon"},
    ],
)
def test_bad_poll_parameters(w: World, params: dict[str, str]) -> None:
    _refused(w.http.get(f"/v1/runs/{w.approval}/events/poll", params=params), 400, "validation_error")


@pytest.mark.parametrize("params", [{"limit": "0"}, {"limit": "501"}, {"limit": "many"}, {"cursor": "x" * 257}])
def test_bad_list_parameters(w: World, params: dict[str, str]) -> None:
    _refused(w.http.get("/v1/runs", params=params), 400, "validation_error")


def test_cursor_the_host_never_issued_is_refused(w: World) -> None:
    """Not a silently empty page: a client would take that as the end of the list."""
    assert len(w.http.get("/v1/runs").json()["runs"]) == 2
    _refused(w.http.get("/v1/runs", params={"cursor": "%%%"}), 400, "validation_error")


def test_bad_cancel_body(w: World) -> None:
    _refused(w.http.post(f"/v1/runs/{w.approval}/cancel", json={"reason": "r", "force": True}), 400, "validation_error")
    _refused(w.http.post(f"/v1/runs/{w.approval}/cancel", json={"reason": "r" * 513}), 400, "validation_error")
    _refused(_post_raw(w, f"/v1/runs/{w.approval}/cancel", b"{nope"), 400, "validation_error")


# --- resolving with a bad resumeValue ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "body",
    [
        {"resumeValue": {"action": "approve-it"}},
        {"resumeValue": {"action": "refine"}},
        {"resumeValue": {"action": "refine", "refineFeedback": {"scope": "everything"}}},
        {"resumeValue": {"action": "refine", "refineFeedback": "make it better"}},
        {"resumeValue": {"action": "edit-accept"}},
        {"resumeValue": {"action": "ask"}},
        {"resumeValue": {"action": "accept", "feedback": 5}},
        {"resumeValue": {}},
        {"resumeValue": "accept"},
        {"resumeValue": None},
        {"resumeValue": ["accept"]},
        {},
        {"resumeValue": {"action": "accept"}, "extra": True},
        {"action": "accept"},
    ],
    ids=[
        "unknown-action",
        "refine-no-feedback",
        "refine-bad-scope",
        "refine-string",
        "edit-no-data",
        "ask-no-question",
        "feedback-not-string",
        "empty-value",
        "string-value",
        "null-value",
        "list-value",
        "no-resume-value",
        "extra-field",
        "unwrapped",
    ],
)
def test_bad_approval_resume_value(w: World, body: dict[str, Any]) -> None:
    _refused(w.http.post(f"/v1/runs/{w.approval}/interrupts/gate", json=body), 400, "validation_error")
    snapshot = w.http.get(f"/v1/runs/{w.approval}").json()
    assert snapshot["status"] == "waiting-approval"
    assert snapshot["currentNodeId"] == "gate"
    assert snapshot["interrupt"]["interruptId"] == w.baseline["approval"][1][1]


def test_refine_without_feedback_names_the_field(w: World) -> None:
    body = _refused(
        w.http.post(f"/v1/runs/{w.approval}/interrupts/gate", json={"resumeValue": {"action": "refine"}}),
        400,
        "validation_error",
    )
    assert "refineFeedback" in body["message"]


def test_unknown_action_lists_the_allowed_ones(w: World) -> None:
    body = _refused(
        w.http.post(f"/v1/runs/{w.approval}/interrupts/gate", json={"resumeValue": {"action": "approve-it"}}),
        400,
        "validation_error",
    )
    assert "approve-it" in body["message"]
    assert set(body["details"]["allowedActions"]) == {"accept", "reject", "refine", "edit-accept", "ask"}


@pytest.mark.parametrize(
    "value",
    [
        {"answers": {"q1": "blue", "q9": "red"}},
        {"answers": [{"id": "nope", "answer": "x"}]},
        {"answers": {}},
        {"answers": [{"id": "q1"}]},
        {"answers": "blue"},
        {"answer": "blue"},
        {"action": "accept"},
    ],
    ids=[
        "unknown-id-map",
        "unknown-id-list",
        "unanswered",
        "list-without-answer",
        "string",
        "no-answers",
        "approval-shape",
    ],
)
def test_bad_clarification_answers(w: World, value: Any) -> None:
    body = _refused(
        w.http.post(f"/v1/runs/{w.clarification}/interrupts/ask", json={"resumeValue": value}), 400, "validation_error"
    )
    if "nope" in json.dumps(value) or "q9" in json.dumps(value):
        assert "nope" in body["message"] or "q9" in body["message"]
    snapshot = w.http.get(f"/v1/runs/{w.clarification}").json()
    assert snapshot["status"] == "waiting-input"
    assert snapshot["interrupt"]["interruptId"] == w.baseline["clarification"][1][1]


def test_resolve_at_the_wrong_node(w: World) -> None:
    _refused(
        w.http.post(f"/v1/runs/{w.approval}/interrupts/publish", json={"resumeValue": {"action": "accept"}}),
        404,
        "interrupt_not_found",
    )
    _refused(
        w.http.post(f"/v1/runs/{w.clarification}/interrupts/gate", json={"resumeValue": {"action": "accept"}}),
        404,
        "interrupt_not_found",
    )


def test_resolve_with_a_forged_token(w: World) -> None:
    token = w.http.get(f"/v1/runs/{w.approval}").json()["interrupt"]["interruptToken"]
    payload, _, mac = token.partition(".")
    forged = payload + "." + ("A" if mac[0] != "A" else "B") + mac[1:]
    with w.host.client() as anonymous:
        response = anonymous.post(f"/v1/interrupts/{forged}", json={"resumeValue": {"action": "accept"}})
        assert 400 <= response.status_code < 500
        openwop_validator("error-envelope").validate(response.json())
        response = anonymous.get("/v1/interrupts/not-a-token")
        assert 400 <= response.status_code < 500
        openwop_validator("error-envelope").validate(response.json())


def test_after_every_refusal_nothing_was_written(world: World) -> None:
    """Runs last: the refusals of the whole module created no run and touched no waiting run."""
    world.assert_untouched()
    runs = world.http.get("/v1/runs", params={"limit": 500}).json()["runs"]
    assert sorted(r["runId"] for r in runs) == sorted([world.approval, world.clarification])
    assert {r["status"] for r in runs} == {"waiting-approval", "waiting-input"}
