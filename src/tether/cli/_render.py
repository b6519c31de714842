"""How the CLI shows keys, workflows, runs and events: pure functions of plain data.

Kept apart from the commands so what an operator reads can be unit-tested from literal
snapshot dicts, without a host. Everything that came from the host or the store is wrapped
in ``rich.text.Text`` before it reaches a table, so a workflow named ``[red]x`` is shown as
written instead of being read as console markup. Summaries are plain text for the same
reason, and because operators paste them into tickets.
"""

from __future__ import annotations

import io
import json
from collections.abc import Collection, Iterable, Mapping
from typing import Any

from rich import box
from rich.console import Console, RenderableType
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

from tether.store.base import CredentialRow, KeyRow

_PAYLOAD_WIDTH = 100
_UNBOUNDED = 10_000


def print_table(console: Console, table: Table) -> None:
    """Print at the table's natural width even when the terminal (or a pipe's 80) is narrower.

    Rich would otherwise squeeze columns to ellipses or to nothing; an operator would
    rather see a wrapped line than a run id that cannot be pasted into the next command.
    """
    natural = Measurement.get(console, console.options.update_width(_UNBOUNDED), table).maximum
    if natural > console.width:
        console.width = natural
    console.print(table)


def to_text(renderable: RenderableType, width: int = 80) -> str:
    """Render to a plain string (no colour) the way the CLI prints it, for tests."""
    buffer = io.StringIO()
    console = Console(file=buffer, width=width, color_system=None, highlight=False, soft_wrap=False)
    if isinstance(renderable, Table):
        print_table(console, renderable)
    else:
        console.print(renderable)
    return buffer.getvalue()


def _table(title: str) -> Table:
    return Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, show_edge=False)


def when(value: Any) -> str:
    """An ISO timestamp shortened for a table cell: ``2024-05-01 12:00:03Z`` (UTC, no millis)."""
    if not isinstance(value, str) or not value:
        return ""
    text = value.replace("T", " ")
    if "." in text:
        head, _, tail = text.partition(".")
        zone = tail.lstrip("0123456789")
        text = head + zone
    return text


def short_json(value: Any, limit: int = _PAYLOAD_WIDTH) -> str:
    """Compact one-line JSON, cut at ``limit`` characters with an ellipsis."""
    try:
        text = json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= limit else text[: max(limit - 1, 0)] + "…"


def _cell(value: Any) -> Text:
    return Text("" if value is None else str(value))


# --- keys --------------------------------------------------------------------------------


def scopes_label(scopes: Collection[str], all_scopes: Collection[str] = ()) -> str:
    """``all`` when a key holds every scope (the usual case), else the scopes in order."""
    if all_scopes and set(scopes) == set(all_scopes):
        return "all"
    return ", ".join(scopes)


def keys_table(rows: Iterable[KeyRow], all_scopes: Collection[str] = ()) -> Table:
    """Name, tenant, scopes, created, revoked. Never the hash: it is a credential's fingerprint."""
    table = _table("API keys")
    table.add_column("name", no_wrap=True)
    table.add_column("tenant", no_wrap=True)
    table.add_column("scopes", overflow="fold")
    table.add_column("created", no_wrap=True)
    table.add_column("revoked", no_wrap=True)
    for row in rows:
        table.add_row(
            _cell(row.name),
            _cell(row.tenant),
            _cell(scopes_label(row.scopes, all_scopes)),
            _cell(when(row.created_at)),
            _cell(when(row.revoked_at) if row.revoked_at else "-"),
        )
    return table


def credentials_table(rows: Iterable[CredentialRow]) -> Table:
    """Name, origin, scheme, fingerprint, created. Never the secret: the fingerprint tells two apart."""
    table = _table("Outbound credentials")
    for column in ("name", "origin", "scheme", "fingerprint", "created"):
        table.add_column(column, no_wrap=True)
    for row in rows:
        table.add_row(
            _cell(row.name),
            _cell(row.origin),
            _cell(row.scheme),
            _cell(row.secret_fingerprint),
            _cell(when(row.created_at)),
        )
    return table


# --- workflows ---------------------------------------------------------------------------


def workflows_table(workflows: Iterable[Mapping[str, Any]]) -> Table:
    """The host's catalogue; a workflow it cannot run says why in ``problems``."""
    table = _table("Workflows")
    table.add_column("id", no_wrap=True)
    table.add_column("name")
    table.add_column("version", no_wrap=True)
    table.add_column("source", overflow="fold")
    table.add_column("executable", no_wrap=True)
    table.add_column("problems", overflow="fold")
    for wf in workflows:
        problems = wf.get("problems") or []
        table.add_row(
            _cell(wf.get("id")),
            _cell(wf.get("name")),
            _cell(wf.get("version")),
            _cell(wf.get("source")),
            _cell("yes" if wf.get("executable") else "no"),
            _cell("; ".join(str(p) for p in problems)),
        )
    return table


def deliveries_table(deliveries: Iterable[Mapping[str, Any]]) -> Table:
    """Outbound deliveries; a dead letter shows why it died and how to send it again."""
    table = _table("Deliveries")
    table.add_column("delivery", no_wrap=True)
    table.add_column("kind", no_wrap=True)
    table.add_column("run", no_wrap=True)
    table.add_column("seq", no_wrap=True)
    table.add_column("status", no_wrap=True)
    table.add_column("attempts", no_wrap=True)
    table.add_column("url", overflow="fold")
    table.add_column("last error", overflow="fold")
    for item in deliveries:
        table.add_row(
            _cell(item.get("deliveryId")),
            _cell(item.get("kind")),
            _cell(item.get("runId")),
            _cell(item.get("sequence")),
            _cell(item.get("status")),
            _cell(item.get("attempts")),
            _cell(item.get("url")),
            _cell(item.get("lastError")),
        )
    return table


# --- runs --------------------------------------------------------------------------------


def interrupt_data(interrupt: Mapping[str, Any] | None) -> dict[str, Any]:
    """What a pending interrupt asks: Tether puts it under ``data``, other hosts under ``payload``."""
    if not interrupt:
        return {}
    data = interrupt.get("data")
    if not isinstance(data, dict):
        data = interrupt.get("payload")
        if isinstance(data, dict) and isinstance(data.get("data"), dict):
            data = data["data"]
    return dict(data) if isinstance(data, dict) else {}


def handoffs_in_flight(snapshot: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any]]]:
    """(node id, hand-off record) of each hand-off the run waits on: a node in flight that handed its task on."""
    nodes = snapshot.get("nodeStates")
    if not isinstance(nodes, dict):
        return []
    return [
        (node_id, entry["handoff"])
        for node_id, entry in nodes.items()
        if isinstance(entry, dict)
        and entry.get("status") in ("running", "suspended")
        and isinstance(entry.get("handoff"), dict)
    ]


def waiting_for(snapshot: Mapping[str, Any]) -> str:
    """``approval @ gate`` while a run is suspended, ``peer working @ node`` on a hand-off, else empty."""
    interrupt = snapshot.get("interrupt")
    if not isinstance(interrupt, dict):
        peers = [f"peer {h.get('peerState') or 'unknown'} @ {node}" for node, h in handoffs_in_flight(snapshot)]
        return ", ".join(peers)
    kind = interrupt.get("kind") or "interrupt"
    node = interrupt.get("nodeId") or snapshot.get("currentNodeId")
    return f"{kind} @ {node}" if node else str(kind)


def updated_at(snapshot: Mapping[str, Any]) -> Any:
    """The latest moment a snapshot records (hosts differ in which fields they carry)."""
    for field in ("updatedAt", "completedAt", "startedAt", "createdAt"):
        if snapshot.get(field):
            return snapshot[field]
    return None


def runs_table(runs: Iterable[Mapping[str, Any]]) -> Table:
    """One row per run: id, workflow, status, what it waits for, started, updated."""
    table = _table("Runs")
    table.add_column("run", no_wrap=True)
    table.add_column("workflow", overflow="fold")
    table.add_column("status", no_wrap=True)
    table.add_column("waiting for", overflow="fold")
    table.add_column("started", no_wrap=True)
    table.add_column("updated", no_wrap=True)
    for run in runs:
        table.add_row(
            _cell(run.get("runId")),
            _cell(run.get("workflowId")),
            _cell(run.get("status")),
            _cell(waiting_for(run)),
            _cell(when(run.get("startedAt") or run.get("createdAt"))),
            _cell(when(updated_at(run))),
        )
    return table


def _indent(text: str, prefix: str = "    ") -> list[str]:
    return [prefix + line for line in text.splitlines()]


def _handoff_lines(node_id: str, handoff: Mapping[str, Any]) -> list[str]:
    """Where a hand-off stands: whom it waits on, the remote task and its state, when it was last read."""
    lines = [f"waiting on a peer at node {node_id!r}"]
    lines.append(f"  peer:        {handoff.get('agent', '?')}")
    if not handoff.get("taskId"):
        lines.append("  remote task: not yet accepted by the peer")
        return lines
    version = f", A2A {handoff['version']}" if handoff.get("version") else ""
    lines.append(f"  remote task: {handoff['taskId']}{version}")
    state = handoff.get("peerState") or "unknown"
    since = f" (since {when(handoff['observedAt'])})" if handoff.get("observedAt") else ""
    lines.append(f"  peer state:  {state}{since}")
    read = when(handoff["lastReadAt"]) if handoff.get("lastReadAt") else "not by the host that answered"
    lines.append(f"  last read:   {read}")
    if handoff.get("credential"):
        lines.append(f"  credential:  {handoff['credential']}")
    return lines


def _interrupt_lines(run_id: str, interrupt: Mapping[str, Any]) -> list[str]:
    kind = interrupt.get("kind") or "interrupt"
    node = interrupt.get("nodeId")
    data = interrupt_data(interrupt)
    lines = [f"waiting for {kind} at node {node!r}" if node else f"waiting for {kind}"]
    if data.get("title"):
        lines.append(f"  title:       {data['title']}")
    if data.get("description"):
        lines.append(f"  description: {data['description']}")
    if interrupt.get("requestedAt"):
        lines.append(f"  requested:   {when(interrupt['requestedAt'])}")
    if kind == "approval":
        actions = data.get("actions") or []
        if actions:
            lines.append(f"  actions:     {', '.join(str(a) for a in actions)}")
        if data.get("artifactData") not in (None, {}, []):
            lines.append(f"  artifact:    {short_json(data['artifactData'])}")
        lines.append(f"  approve with: tether runs approve {run_id} [--comment TEXT]")
        lines.append(f"  reject with:  tether runs reject {run_id} [--comment TEXT]")
    elif kind == "clarification":
        questions = [q for q in data.get("questions") or [] if isinstance(q, dict)]
        for question in questions:
            lines.append(f"  {question.get('id')}: {question.get('question')}")
        if questions:
            flags = " ".join(f"--answer {q.get('id')}=VALUE" for q in questions)
            lines.append(f"  answer with: tether runs answer {run_id} {flags}")
    elif data:
        lines.append(f"  data:        {short_json(data)}")
    return lines


def waiting_blocks(snapshot: Mapping[str, Any]) -> list[list[str]]:
    """What the run waits for, a block of lines each: the question or gate (with the command that
    answers it), then each hand-off in flight. Empty when it waits for nothing."""
    run_id = str(snapshot.get("runId", "?"))
    blocks = []
    interrupt = snapshot.get("interrupt")
    if isinstance(interrupt, dict):
        blocks.append(_interrupt_lines(run_id, interrupt))
    for node_id, handoff in handoffs_in_flight(snapshot):
        blocks.append(_handoff_lines(node_id, handoff))
    return blocks


def run_summary(snapshot: Mapping[str, Any]) -> str:
    """A readable account of one run: where it is, what it waits for, how it ended."""
    run_id = str(snapshot.get("runId", "?"))
    lines = [
        f"run:          {run_id}",
        f"workflow:     {snapshot.get('workflowId', '?')}",
        f"status:       {snapshot.get('status', '?')}",
    ]
    if snapshot.get("currentNodeId"):
        lines.append(f"current node: {snapshot['currentNodeId']}")
    if snapshot.get("startedAt"):
        lines.append(f"started:      {when(snapshot['startedAt'])}")
    if snapshot.get("completedAt"):
        lines.append(f"finished:     {when(snapshot['completedAt'])}")
    for block in waiting_blocks(snapshot):
        lines.append("")
        lines += block
    error = snapshot.get("error")
    if isinstance(error, dict):
        lines.append("")
        lines.append(f"error: {error.get('message', '')} ({error.get('code', 'unknown')})")
        if error.get("details"):
            lines.append(f"  details: {short_json(error['details'])}")
    outputs = snapshot.get("outputs")
    if outputs:
        lines.append("")
        lines.append("outputs:")
        lines += _indent(json.dumps(outputs, indent=2, ensure_ascii=False, default=str), "  ")
    return "\n".join(lines)


# --- events ------------------------------------------------------------------------------


def event_line(event: Mapping[str, Any]) -> str:
    """``  12  12:00:03.120  node.completed        gate  {"outputs":…}``: one event, one line."""
    sequence = event.get("sequence")
    timestamp = event.get("timestamp")
    clock = (
        timestamp.partition("T")[2].rstrip("Z")
        if isinstance(timestamp, str) and "T" in timestamp
        else str(timestamp or "")
    )
    payload = event.get("payload")
    if isinstance(payload, dict):
        payload = {k: v for k, v in payload.items() if k not in ("nodeId", "runId")}
    node = event.get("nodeId") or "-"
    shown = short_json(payload) if payload not in (None, {}) else ""
    seq = f"{sequence:>4}" if isinstance(sequence, int) else f"{sequence!s:>4}"
    return f"{seq}  {clock:<12}  {event.get('type', '?'):<22}  {node:<12}  {shown}".rstrip()
