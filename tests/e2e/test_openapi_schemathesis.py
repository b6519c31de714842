"""The served OpenAPI document against the server, checked by schemathesis: every operation, bounded, repeatable.

One in-process host (SQLite) serves the module. schemathesis loads the document the host
serves at ``/v1/openapi.json`` and, for every operation in it, sends the document's
examples, its boundary cases (the coverage phase: each length, pattern, enum and range
just inside and just outside) and generated requests, both valid and schema-violating
ones. Each answer must be no 5xx, carry a status and a content type the operation
declares, and have a body that validates against the declared schema; a request that
violates the document must be refused (4xx), and a method it does not list on a
path must be answered 405 with ``Allow``. A refused request that could write
(POST, DELETE) must have written nothing: the store's row counts are compared around it.

Generation is bounded (``MAX_EXAMPLES`` per operation) and derandomized, with no example
database, so a run sends the same requests every time (measured: the same 1,095 requests,
in order, in two runs of this module). One caveat: hypothesis now and then draws a constant
it found in the source modules loaded (``.hypothesis/constants``), so this module run alone
and run within the whole suite may differ in a few generated values; each is repeatable.
The operations that declare the API key are also sent without it and with a made-up one
(``ignored_auth``), and must refuse both. One operation is left out of generation:
``GET /v1/runs:watch``, a stream that never ends, which every valid request opens (it names
nothing that could be missing), so each generated call would wait out its timeout;
``test_the_streams_answer_as_documented`` reads it, and its refusals, instead. A run's event
stream is safe to fuzz because generated run ids never name a real run (it answers 404 or
400 at once), and the purge only removes runs that ended, which the last test creates for
itself.

Generated ids never find a resource, so ``test_live_resources_answer_as_documented``
sends fixed requests about real runs and a real webhook (a snapshot with a pending
interrupt, the long-poll, the interrupt's token, cancel, resolve, a delivery) through
the same checks.
"""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import jsonschema
import pytest
import schemathesis
from harness import wait_until
from hypothesis import HealthCheck, settings
from inproc import InProcessHost
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    ignored_auth,
    missing_required_header,
    negative_data_rejection,
    response_schema_conformance,
    status_code_conformance,
    unsupported_method,
)

from tether.types import INT64_MAX

#: generated requests per operation and phase (the coverage phase adds its boundary cases)
MAX_EXAMPLES = 25
#: what every answer is held to
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
    negative_data_rejection,
    # an operation that declares the API key answers 401 without it, and with a made-up one
    ignored_auth,
    # a method the document does not list on a path is 405, with an Allow header
    unsupported_method,
    missing_required_header,
]
#: the tables a refused request must leave as they were (not ``run_events`` and ``outbox``: runs that
#: an earlier, accepted request started may still be writing those)
WRITTEN_BY_REQUESTS = ("runs", "idempotency", "webhooks", "push_configs", "a2a_tasks", "workflows", "api_keys")


@dataclass
class World:
    host: InProcessHost
    key: str

    @property
    def auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.key}"}

    def rows(self) -> dict[str, int]:
        """How many rows each table a request could write holds (read-only, beside the running host)."""
        db = sqlite3.connect(f"file:{self.host.data_dir / 'tether.db'}?mode=ro", uri=True, timeout=10)
        try:
            return {table: db.execute(f"SELECT count(*) FROM {table}").fetchone()[0] for table in WRITTEN_BY_REQUESTS}
        finally:
            db.close()


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    data_dir: Path = tmp_path_factory.mktemp("openapi") / "host"
    # loopback is exempt from the egress guard, so a webhook on it is taken (its deliveries fail, as they may)
    host = InProcessHost(data_dir, "--egress-allow-cidr", "127.0.0.1/32").start()
    try:
        assert host.dev_key, "a fresh data directory makes a key with every scope"
        yield World(host, host.dev_key)
    finally:
        host.close()


@pytest.fixture(scope="module")
def served_document(world: World) -> schemathesis.BaseSchema:
    """The document as the host serves it (no key needed), not one built in the test."""
    # The key is the test's to send (every call carries a valid one; ``ignored_auth`` sends none and
    # a made-up one), never a generated parameter: a case generated without it, sent with it, would
    # be judged as if it had none.
    generation = {"deterministic": True, "with-security-parameters": False}
    config = schemathesis.Config.from_dict({"generation": generation})
    return schemathesis.openapi.from_url(f"{world.host.url}/v1/openapi.json", config=config)


#: every operation but the stream that never ends (``test_the_streams_answer_as_documented`` reads it)
schema = schemathesis.pytest.from_fixture("served_document").exclude(method="GET", path="/v1/runs:watch")


@schema.parametrize()
@settings(
    max_examples=MAX_EXAMPLES,
    derandomize=True,
    database=None,
    deadline=None,
    # a refusal-heavy operation filters many cases; that is the point here, not a slow strategy
    suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow],
)
def test_every_operation_answers_as_documented(case: schemathesis.Case, world: World) -> None:
    writes = case.method in ("POST", "DELETE")
    before = world.rows() if writes else None
    response = case.call(headers=world.auth, timeout=10)
    case.validate_response(response, checks=CHECKS, headers=world.auth)
    if before is not None and 400 <= response.status_code < 500:
        assert world.rows() == before, f"refused {case.method} {case.formatted_path} ({response.status_code}) wrote"


def test_live_resources_answer_as_documented(world: World, served_document: schemathesis.BaseSchema) -> None:
    """Real runs, which generated ids never name: each answer validates against the document."""
    http = world.host.http(world.key)
    gated = http.post("/v1/runs", json={"workflowId": "approval-gated", "inputs": {"prompt": "draft"}}).json()["runId"]
    to_cancel = http.post("/v1/runs", json={"workflowId": "approval-gated", "inputs": {"prompt": "x"}}).json()["runId"]
    by_token = http.post("/v1/runs", json={"workflowId": "approval-gated", "inputs": {"prompt": "y"}}).json()["runId"]
    echoed = http.post("/v1/runs", json={"workflowId": "echo", "inputs": {"prompt": "hi"}}).json()["runId"]
    for run_id in (gated, to_cancel, by_token):
        wait_until(lambda r=run_id: http.get(f"/v1/runs/{r}").json()["status"] == "waiting-approval", what="the gate")
    wait_until(lambda: http.get(f"/v1/runs/{echoed}").json()["status"] == "completed", what="the echo run")
    snapshot = http.get(f"/v1/runs/{gated}").json()
    token, node = snapshot["interrupt"]["interruptToken"], snapshot["interrupt"]["nodeId"]

    def check(path: str, method: str, expected: int, **data: Any) -> dict[str, Any]:
        case = served_document[path][method].Case(**data)
        response = case.call(headers=world.auth, timeout=10)
        case.validate_response(response, checks=CHECKS, headers=world.auth)
        assert response.status_code == expected, response.text
        return response.json() if response.content else {}

    hook = {"url": "https://127.0.0.1:9/hook", "events": ["run.completed"]}
    webhook_id = check("/v1/webhooks", "POST", 201, body=hook)["webhookId"]
    finished = http.post("/v1/runs", json={"workflowId": "echo", "inputs": {"prompt": "hook"}}).json()["runId"]
    wait_until(lambda: http.get("/v1/deliveries").json()["deliveries"], what="a delivery of the webhook")
    deliveries = check("/v1/deliveries", "GET", 200, query={"limit": 10})["deliveries"]
    assert finished in {d["runId"] for d in deliveries}
    check("/v1/webhooks/{webhook_id}", "DELETE", 204, path_parameters={"webhook_id": webhook_id})
    check("/v1/webhooks/{webhook_id}", "DELETE", 404, path_parameters={"webhook_id": webhook_id})
    assert check("/v1/runs/{run_id}", "GET", 200, path_parameters={"run_id": gated})["interrupt"]["nodeId"] == node
    check("/v1/runs/{run_id}", "GET", 200, path_parameters={"run_id": echoed})
    check("/v1/runs", "GET", 200, query={"status": "waiting-approval", "limit": 1})
    page = check("/v1/runs/{run_id}/events/poll", "GET", 200, path_parameters={"run_id": echoed}, query={"timeout": 0})
    assert page["isTerminal"] and page["events"]
    check("/v1/workflows/{workflow_id}", "GET", 200, path_parameters={"workflow_id": "echo"})
    check("/v1/interrupts/{token}", "GET", 200, path_parameters={"token": token})
    bad_answer = {"resumeValue": {"action": "approve-it"}}
    path = "/v1/runs/{run_id}/interrupts/{node_id}"
    check(path, "POST", 400, path_parameters={"run_id": gated, "node_id": node}, body=bad_answer)
    check(path, "POST", 404, path_parameters={"run_id": gated, "node_id": "no-such-node"}, body=bad_answer)
    accept = {"resumeValue": {"action": "accept"}}
    check(path, "POST", 200, path_parameters={"run_id": gated, "node_id": node}, body=accept)
    check("/v1/interrupts/{token}", "GET", 409, path_parameters={"token": token})
    other = http.get(f"/v1/runs/{by_token}").json()["interrupt"]["interruptToken"]
    check("/v1/interrupts/{token}", "POST", 400, path_parameters={"token": other}, body={"resumeValue": "yes"})
    check("/v1/interrupts/{token}", "POST", 200, path_parameters={"token": other}, body=accept)
    check("/v1/interrupts/{token}", "POST", 409, path_parameters={"token": other}, body=accept)
    check("/v1/interrupts/{token}", "GET", 400, path_parameters={"token": other[:-2]})
    cancelled = check("/v1/runs/{run_id}/cancel", "POST", 200, path_parameters={"run_id": to_cancel}, body={})
    assert cancelled["status"] == "cancelled"
    check(path, "POST", 422, path_parameters={"run_id": to_cancel, "node_id": node}, body={"resumeValue": {}})
    wait_until(lambda: http.get(f"/v1/runs/{echoed}").json()["status"] == "completed", what="the echo run")
    check("/v1/runs/{run_id}/cancel", "POST", 409, path_parameters={"run_id": echoed}, body={})
    purged = check("/v1/runs:purge", "POST", 200, body={"before": "2999-01-01T00:00:00Z", "dryRun": True})
    assert echoed in purged["runIds"]


def _first_event(response: httpx.Response) -> dict[str, str]:
    """The first server-sent event of a stream as its fields (``event``, ``id``, ``data``), comments skipped."""
    fields: dict[str, str] = {}
    for line in response.iter_lines():
        if not line:
            if fields:
                return fields
            continue
        name, _, value = line.partition(":")
        if name:  # a line starting with ':' is a comment
            fields[name] = value.removeprefix(" ")
    raise AssertionError("the stream ended before its first event")


def test_the_streams_answer_as_documented(world: World, served_document: schemathesis.BaseSchema) -> None:
    """A run's event stream read whole through schemathesis's checks; the runs watch, which never ends, by hand."""
    http = world.host.http(world.key)
    done = http.post("/v1/runs", json={"workflowId": "echo", "inputs": {"prompt": "streamed"}}).json()["runId"]
    wait_until(lambda: http.get(f"/v1/runs/{done}").json()["status"] == "completed", what="the echo run")
    case = served_document["/v1/runs/{run_id}/events"]["GET"].Case(path_parameters={"run_id": done})
    response = case.call(headers=world.auth, timeout=10)
    case.validate_response(response, checks=CHECKS, headers=world.auth)
    assert response.status_code == 200 and "event: run.completed" in response.text

    watch = served_document["/v1/runs:watch"]["GET"]
    for refused, headers in ((400, {**world.auth, "Last-Event-ID": "not-a-cursor"}), (401, {})):
        case = watch.Case(headers=headers)
        response = case.call(headers=headers, timeout=10)
        case.validate_response(response, checks=[not_a_server_error, status_code_conformance], headers=headers)
        assert response.status_code == refused, response.text
    declared = served_document.raw_schema["paths"]["/v1/runs:watch"]["get"]["responses"]["200"]["content"]
    with httpx.stream("GET", f"{world.host.url}/v1/runs:watch", headers=world.auth, timeout=10) as opened:
        assert opened.status_code == 200 and opened.headers["content-type"].startswith("text/event-stream")
        first = _first_event(opened)
    jsonschema.validate(first, declared["text/event-stream"]["schema"])
    assert first["event"] == "sync" and json.loads(first["data"]) == {"reason": "start"}


def _numbers(schema: Any, where: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """Every integer or number schema inside ``schema`` (through ``anyOf``, properties and items), with where it is."""
    if isinstance(schema, dict):
        if schema.get("type") in ("integer", "number"):
            yield where, schema
        for name, inner in schema.items():
            yield from _numbers(inner, f"{where}.{name}")
    elif isinstance(schema, list):
        for index, inner in enumerate(schema):
            yield from _numbers(inner, f"{where}[{index}]")


def test_every_number_the_document_takes_is_bounded_and_refused_past_its_bound(
    world: World, served_document: schemathesis.BaseSchema
) -> None:
    """No request may carry a number the stores cannot hold: each is declared with bounds inside a signed 64-bit
    integer, and a query value one past its maximum is refused (400, the envelope), written nowhere.

    Generated cases reach far values only now and then (an unbounded ``lastSequence`` once let 2**63 through to
    SQLite, a 500 that also dropped the connection); this walks every declared number instead.
    """
    checked = 0
    for path, item in served_document.raw_schema["paths"].items():
        for method, operation in item.items():
            inputs = [(f"{p['in']}:{p['name']}", p.get("schema")) for p in operation.get("parameters", [])]
            inputs.append(("body", operation.get("requestBody")))
            for name, declared in inputs:
                for where, number in _numbers(declared, name):
                    label = f"{method.upper()} {path} {where}"
                    assert "maximum" in number and number["maximum"] <= INT64_MAX, f"{label} has no bound: {number}"
                    assert "minimum" in number and number["minimum"] >= -INT64_MAX - 1, f"{label}: {number}"
                    if not name.startswith("query:"):
                        continue
                    past = int(number["maximum"]) + 1
                    params = {p: "run_bounds" for p in re.findall(r"{(\w+)}", path)}
                    case = served_document[path][method.upper()].Case(
                        path_parameters=params, query={name.removeprefix("query:"): past}
                    )
                    before = world.rows()
                    response = case.call(headers=world.auth, timeout=10)
                    case.validate_response(response, checks=[not_a_server_error, status_code_conformance])
                    assert response.status_code == 400 and response.json()["error"] == "validation_error", label
                    assert world.rows() == before
                    checked += 1
    assert checked >= 4, "the limits, the sequence and the timeout are all query numbers"
