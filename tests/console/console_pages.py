"""What the console tests do again and again: hand the host a task over A2A, sign in, read the page."""

from __future__ import annotations

import uuid
from typing import Any

from inproc import InProcessHost
from playwright.sync_api import Page, expect

#: every wait for the page (the runs list is live over /v1/runs:watch: a new run shows within moments)
TIMEOUT_MS = 15_000


def a2a_send(host: InProcessHost, key: str, skill: str, text: str, **configuration: Any) -> dict[str, Any]:
    """Hand the host a task over A2A 0.3 ``message/send`` (blocking: answered once it waits or ends)."""
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "message/send",
        "params": {
            "message": {
                "kind": "message",
                "role": "user",
                "messageId": f"m-{uuid.uuid4().hex}",
                "parts": [{"kind": "text", "text": text}],
                "metadata": {"skillId": skill},
            },
            "configuration": {"blocking": True, **configuration},
        },
    }
    answer = host.http(key).post("/v1/a2a", json=body).json()
    assert "result" in answer, answer
    task: dict[str, Any] = answer["result"]
    return task


def sign_in(page: Page, host: InProcessHost, key: str) -> None:
    """Open the console and sign in with ``key``, as a person would."""
    page.goto(f"{host.url}/console")
    page.get_by_label("API key").fill(key)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("heading", name="Runs", exact=True)).to_be_visible(timeout=TIMEOUT_MS)


def open_run(page: Page, host: InProcessHost, run_id: str) -> None:
    page.goto(f"{host.url}/console#/runs/{run_id}")
    expect(page.locator("#run-id")).to_have_text(run_id, timeout=TIMEOUT_MS)
