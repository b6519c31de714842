"""Two hosts on one PostgreSQL database agree on every task's A2A 1.1 generation.

A generation is a fold of the durable log (``tether.a2a.generations``), so a host that
served none of a task's writes computes the same number as the one that served them all.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
from a2a_wire import WORKFLOWS
from a2a_wire10 import post10, result10, user10
from backends import Hosts
from inproc import InProcessHost


def _generation(http: httpx.Client, task_id: str) -> str:
    body = post10(http, "GetTask", {"id": task_id}, version="1.1").json()
    assert "result" in body, body
    generation: str = body["result"]["generation"]
    return generation


def _accept(task_id: str) -> dict[str, Any]:
    return {**user10("ok"), "taskId": task_id, "parts": [{"data": {"action": "accept"}}]}


def test_two_hosts_on_one_database_agree_on_every_generation(
    start_host: Hosts[InProcessHost], shared_database: str, tmp_path: Path
) -> None:
    args = ("--workflows", str(WORKFLOWS), "--secret-key-file", str(tmp_path / "shared.key"))
    one = start_host(*args, name="one", database_url=shared_database)
    two = start_host(*args, name="two", database_url=shared_database)
    assert one.dev_key
    first, second = one.http(one.dev_key), two.http(one.dev_key)
    ids = []
    for skill in ("multi-step", "approval-gated", "echo"):
        ids.append(result10(first, "SendMessage", {"message": user10("x", skill=skill)}, version="1.1")["task"]["id"])
    result10(second, "SendMessage", {"message": _accept(ids[1])}, version="1.1")
    for task_id in ids:
        assert _generation(first, task_id) == _generation(second, task_id), task_id
