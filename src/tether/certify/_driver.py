"""The requests the floor files make again and again: create, settle, poll, read an error code, stream."""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from typing import Any

import httpx

from tether.certify.ledger import Blocked, Inapplicable
from tether.certify.session import TERMINAL, Session, enc, wait_for

NOOP = "conformance-noop"
CANCELLABLE = "conformance-cancellable"
DELAY = "conformance-delay"
FOREIGN_RUN_ID = "openwop-conformance-foreign-tenant/foreignopaque0123456789abcdef"
VERSION = re.compile(r"^(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)$")


def code_of(response: httpx.Response) -> str | None:
    """The suite's ``readErrorCode``: ``error`` when a string, else the legacy ``error.code``."""
    try:
        body = response.json()
    except ValueError:
        return None
    if not isinstance(body, dict):
        return None
    error = body.get("error")
    if isinstance(error, str):
        return error
    if isinstance(error, dict) and isinstance(error.get("code"), str):
        return str(error["code"])
    return None


def major(response: httpx.Response) -> str:
    """The major the answer names in ``OpenWOP-Version`` (``""`` when none)."""
    named: str = response.headers.get("openwop-version", "")
    return named.strip().split(".")[0]


def fixture_listed(doc: dict[str, Any], fixture: str) -> None:
    if fixture not in (doc.get("fixtures") or []):
        raise Inapplicable(f"{fixture} is not in the root's fixtures[]")


def created(drv: httpx.Client, body: dict[str, Any], **headers: str) -> str:
    answer = drv.post("/runs", json=body, headers=headers)
    if answer.status_code != 201:
        raise Blocked(f"POST /runs answered {answer.status_code} {answer.text[:200]}")
    run_id: str = answer.json()["runId"]
    return run_id


def status_of(drv: httpx.Client, run_id: str) -> str | None:
    answer = drv.get(f"/runs/{enc(run_id)}")
    return str(answer.json().get("status")) if answer.status_code == 200 else None


def settled(drv: httpx.Client, run_id: str, *statuses: str, timeout: float = 10.0) -> str:
    """The run's status once it is one of ``statuses`` (terminal by default), as the suite polls for it."""
    wanted = statuses or TERMINAL
    try:
        return wait_for(lambda: (s := status_of(drv, run_id)) in wanted and s or None, timeout=timeout, what="")
    except Exception as exc:
        raise Blocked(f"run {run_id} did not reach {'|'.join(wanted)} within {timeout:g} s") from exc


def noop_settled(drv: httpx.Client) -> str:
    run_id = created(drv, {"workflowId": NOOP})
    settled(drv, run_id)
    return run_id


def poll(drv: httpx.Client, run_id: str, query: str = "") -> dict[str, Any]:
    answer = drv.get(f"/runs/{enc(run_id)}/events/poll?timeout=1{query}")
    if answer.status_code != 200:
        raise Blocked(f"poll of {run_id} answered {answer.status_code}")
    body: dict[str, Any] = answer.json()
    return body


@dataclass
class Stream:
    """What the suite's ``subscribe`` returns: the status, the frames that carried data, who closed the stream."""

    status: int
    frames: list[dict[str, str]] = field(default_factory=list)
    closed_by: str = "server"

    @property
    def ids(self) -> list[int]:
        return [int(f["id"]) for f in self.frames if re.fullmatch(r"-?[0-9]+", f.get("id", ""))]


def subscribe(
    session: Session, key: str, path: str, *, timeout: float = 8.0, last_event_id: str | None = None
) -> Stream:
    """A raw SSE GET read until the server closes it or ``timeout`` passes; a frame counts when it has data."""
    headers = {"Accept": "text/event-stream", "Authorization": f"Bearer {key}", "OpenWOP-Version": "2.0"}
    if last_event_id is not None:
        headers["Last-Event-ID"] = last_event_id
    deadline = time.monotonic() + timeout
    with (
        httpx.Client(base_url=session.url, timeout=timeout, verify=session.verify) as client,
        client.stream("GET", path, headers=headers) as r,
    ):
        if r.status_code != 200:
            r.read()
            return Stream(r.status_code)
        stream = Stream(200)
        fields: dict[str, str] = {}
        data: list[str] = []
        try:
            for line in r.iter_lines():
                if line == "":
                    if data:
                        stream.frames.append({**fields, "data": "\n".join(data)})
                    fields, data = {}, []
                elif not line.startswith(":"):
                    name, _, value = line.partition(":")
                    value = value.removeprefix(" ")
                    if name == "data":
                        data.append(value)
                    else:
                        fields[name] = value
                if time.monotonic() > deadline:
                    stream.closed_by = "client"
                    break
        except httpx.ReadTimeout:
            stream.closed_by = "client"
        return stream


def base36(number: int) -> str:
    """JavaScript's ``number.toString(36)``."""
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    out = ""
    while True:
        number, digit = divmod(number, 36)
        out = digits[digit] + out
        if not number:
            return out
