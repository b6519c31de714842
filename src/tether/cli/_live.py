"""``tether runs events --follow`` in a terminal: one run, redrawn in place as its events arrive.

A person watching a run wants where it is, not a scrolling log: its status, each node's
state and how long it took, what it waits for and the command that answers it, and the
last few events. The view folds the stream's events into a snapshot with the engine's
own ``apply`` (the one place a snapshot changes), so it shows what the host would
answer to ``GET /v1/runs/{id}`` without asking it again per event. It redraws four
times a second, so the clock of a running or waiting node moves, and on every event.

Only for a terminal: piped, or with ``--json``, the command prints its lines as it always
has (scripts read them), and this module is not imported.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from rich import box
from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.table import Table
from rich.text import Text

from tether import clock
from tether.cli import _render as render
from tether.cli._client import HostClient, HostError, segment
from tether.engine.state import apply, initial_snapshot
from tether.types import TERMINAL, WAITING

__all__ = ["RunView", "follow_live", "node_state"]

#: events kept on screen, newest last
LATEST_EVENTS = 8
_REFRESHES_PER_SECOND = 4

#: what a node's status in the snapshot reads as on screen
_NODE_STATES = {
    "running": "running",
    "suspended": "waiting",
    "completed": "done",
    "failed": "failed",
    "skipped": "skipped",
    "cancelled": "cancelled",
}
_NODE_STYLES = {
    "pending": "dim",
    "running": "cyan",
    "waiting": "yellow",
    "done": "green",
    "failed": "red",
    "skipped": "dim",
    "cancelled": "magenta",
}


def node_state(entry: Mapping[str, Any] | None) -> str:
    """pending (not reached), running, waiting (at a gate, a question or a peer), done, failed, skipped, cancelled."""
    if not entry:
        return "pending"
    return _NODE_STATES.get(str(entry.get("status")), str(entry.get("status") or "pending"))


def _status_style(status: str) -> str:
    if status == "completed":
        return "bold green"
    if status in ("failed", "cancelled"):
        return "bold red"
    if status in WAITING:
        return "bold yellow"
    return "bold cyan"


def _moment(value: Any) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        return clock.parse(value)
    except ValueError:
        return None


def _span(seconds: float) -> str:
    """``0.012s``, ``3.4s``, ``2m05s``, ``1h02m``: short, and exact enough to tell nodes apart."""
    if seconds < 10:
        return f"{seconds:.3f}s" if seconds < 1 else f"{seconds:.1f}s"
    whole = int(seconds)
    if whole < 3600:
        return f"{whole // 60}m{whole % 60:02d}s" if whole >= 60 else f"{whole}s"
    return f"{whole // 3600}h{whole % 3600 // 60:02d}m"


class RunView:
    """One run as the live view shows it; fed events by one thread, drawn by Live's refresh thread.

    Parameters:
        snapshot: the run as the host answered ``GET /v1/runs/{id}`` before following it
            (its id, workflow and creation time; the rest is rebuilt from the events).
        nodes: the workflow's nodes as (id, type id) in definition order, so that nodes not
            reached yet show as pending; empty when the definition could not be read.
    """

    def __init__(self, snapshot: Mapping[str, Any], nodes: Iterable[tuple[str, str]] = ()) -> None:
        self.run_id = str(snapshot.get("runId", "?"))
        self.workflow_id = str(snapshot.get("workflowId", "?"))
        created = str(snapshot.get("createdAt") or clock.now_iso())
        self.snapshot = initial_snapshot(self.run_id, self.workflow_id, created)
        self.types = dict(nodes)
        self.latest: deque[str] = deque(maxlen=LATEST_EVENTS)
        self.note = "following live; Ctrl-C stops watching (the run goes on)"
        self._lock = threading.Lock()

    @property
    def status(self) -> str:
        return str(self.snapshot.get("status", "?"))

    def seen(self, event: dict[str, Any]) -> None:
        """Fold one event into the view."""
        with self._lock:
            try:
                apply(self.snapshot, event)
            except (KeyError, TypeError, ValueError):
                pass  # an event this CLI cannot read still shows below; the next ones still count
            self.latest.append(render.event_line(event))
            if self.status in TERMINAL:
                ended = render.when(self.snapshot.get("completedAt"))
                self.note = f"run {self.status}" + (f" at {ended}" if ended else "")
            else:
                self.note = "following live; Ctrl-C stops watching (the run goes on)"

    def reattaching(self, last: int, reason: str) -> None:
        """The stream was lost: say so until the next event arrives."""
        with self._lock:
            after = f"after event {last}" if last >= 0 else "from the start"
            self.note = f"lost the stream ({reason}); re-attaching {after}…"

    def render(self) -> RenderableType:
        with self._lock:
            return Group(*self._parts(clock.now()))

    def _parts(self, now: datetime) -> Iterable[RenderableType]:
        status = self.status
        header = Text.assemble(
            ("run ", "dim"),
            (self.run_id, "bold"),
            ("   workflow ", "dim"),
            (self.workflow_id, ""),
            ("   status ", "dim"),
            (status, _status_style(status)),
        )
        yield header
        yield self._nodes_table(now)
        for block in render.waiting_blocks(self.snapshot) if status not in TERMINAL else ():
            yield Text("\n".join(block), style="yellow")
        error = self.snapshot.get("error")
        if isinstance(error, dict):
            yield Text(f"error: {error.get('message', '')} ({error.get('code', 'unknown')})", style="red")
        if self.latest:
            yield Text("latest events", style="dim")
            yield Text("\n".join(self.latest), no_wrap=True, overflow="ellipsis")  # one line an event
        yield Text(self.note, style="dim")

    def _nodes_table(self, now: datetime) -> Table:
        table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
        for name in ("node", "type", "state", "started", "took"):
            table.add_column(name, no_wrap=True)
        states: dict[str, Any] = self.snapshot.get("nodeStates") or {}
        for node_id in [*self.types, *(n for n in states if n not in self.types)]:
            entry = states.get(node_id) or {}
            state = node_state(entry)
            started = _moment(entry.get("startedAt"))
            ended = _moment(entry.get("completedAt"))
            took = ""
            if started is not None and ended is not None:
                took = _span(max((ended - started).total_seconds(), 0.0))
            elif started is not None and state in ("running", "waiting") and self.status not in TERMINAL:
                took = _span(max((now - started).total_seconds(), 0.0)) + "…"
            table.add_row(
                Text(node_id),
                Text(self.types.get(node_id) or str(entry.get("typeId") or ""), style="dim"),
                Text(state, style=_NODE_STYLES.get(state, "")),
                Text(render.when(entry.get("startedAt")).partition(" ")[2]),
                Text(took),
            )
        return table


def workflow_nodes(client: HostClient, workflow_id: str) -> list[tuple[str, str]]:
    """The workflow's nodes as (id, type id) in definition order; none when it cannot be read (the view
    still works: it lists the nodes the run reached)."""
    try:
        definition = client.get(f"/v1/workflows/{segment(workflow_id)}")
    except HostError:
        return []
    nodes = definition.get("nodes") if isinstance(definition, dict) else None
    return [(str(n["id"]), str(n.get("typeId") or "")) for n in nodes or [] if isinstance(n, dict) and n.get("id")]


def follow_live(client: HostClient, run_id: str, console: Console) -> RunView:
    """Show ``run_id`` live until it ends; the last view stays on screen. Returns the view as it ended.

    A lost stream is re-attached after the last event shown (``HostClient.follow_events``).
    Ctrl-C (KeyboardInterrupt) leaves the view as it was and propagates to the caller.
    """
    snapshot = client.get(f"/v1/runs/{segment(run_id)}")
    if not isinstance(snapshot, dict):
        snapshot = {"runId": run_id}
    view = RunView(snapshot, workflow_nodes(client, str(snapshot.get("workflowId", ""))))
    with Live(
        get_renderable=view.render,
        console=console,
        refresh_per_second=_REFRESHES_PER_SECOND,
        redirect_stdout=False,
        redirect_stderr=False,
    ) as live:
        for event in client.follow_events(run_id, "debug", on_reattach=view.reattaching):
            view.seen(event)
            live.refresh()
    return view
