"""The OpenWOP v2 wire as the tests speak it: bound ids and their path form, the checked error envelope."""

from __future__ import annotations

import time
from typing import Any

import httpx
from schemas import openwop_validator

#: an Idempotency-Key of the v2 grammar (22-128 of A-Z a-z 0-9 . _ ~ -)
KEY_ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._~-"


def project(bound: str) -> str:
    """RFC 0184's path form, written here from its definition (not Tether's code): bytes outside A-Za-z0-9._- as ~HH."""
    kept = set(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-")
    return "".join(chr(b) if b in kept else f"~{b:02X}" for b in bound.encode())


def refused(response: httpx.Response, status: int, code: str) -> dict[str, Any]:
    """A v2 refusal: the status, the closed envelope (the official v2 schema), the code, the major named."""
    assert response.status_code == status, f"expected {status} {code}, got {response.status_code}: {response.text}"
    assert response.headers["openwop-version"] == "2.0", response.headers
    body: dict[str, Any] = response.json()
    openwop_validator("v2/error-envelope").validate(body)
    assert body["error"] == code, body
    return body


def create(http: httpx.Client, workflow: str = "echo", **body: Any) -> dict[str, Any]:
    answer = http.post("/runs", json={"workflowId": workflow, "inputs": {"prompt": "hi"}, **body})
    assert answer.status_code == 201, answer.text
    created: dict[str, Any] = answer.json()
    return created


def wait_status(http: httpx.Client, run_id: str, *statuses: str, timeout: float = 15.0) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        snapshot: dict[str, Any] = http.get(f"/runs/{project(run_id)}").json()
        if snapshot.get("status") in statuses:
            return snapshot
        assert time.monotonic() < deadline, f"run {run_id} still {snapshot.get('status')}, not {statuses}"
        time.sleep(0.02)
