"""``tether runs``: list, start and follow runs, and answer what they wait for, through the host's REST API."""

from __future__ import annotations

from typing import Any

import click

from tether.cli import _render as render
from tether.cli._client import HostClient, segment
from tether.cli._output import EXIT_FAILED, EXIT_INTERRUPTED, fail, json_option, new_console, print_json
from tether.cli._reach import on_host
from tether.types import RUN_STATUSES, TERMINAL, WAITING


@click.group()
def runs() -> None:
    """Inspect runs and answer what they wait for.

    Talks to a running host through its REST API (--url, --key).
    """


def _run_path(run_id: str, *rest: str) -> str:
    return "/".join(["/v1/runs", segment(run_id), *rest])


@runs.command("list")
@click.option("--status", type=click.Choice(RUN_STATUSES), help="Only runs in this status.")
@click.option("--workflow", "workflow_id", help="Only runs of this workflow id.")
@click.option("--limit", default=20, show_default=True, type=click.IntRange(1, 500))
@click.option("--cursor", help="Page on from a previous listing's cursor.")
@click.option(
    "--waiting-on-peer", is_flag=True, help="Only unfinished runs that wait on another agent (a hand-off in flight)."
)
@json_option("Print the runs as a JSON array of RunSnapshots (for scripts).")
@on_host
def runs_list(
    status: str | None,
    workflow_id: str | None,
    limit: int,
    cursor: str | None,
    waiting_on_peer: bool,
    as_json: bool,
    client: HostClient,
) -> None:
    """The tenant's runs, newest first."""
    query = {"status": status, "workflowId": workflow_id, "limit": limit, "cursor": cursor}
    if waiting_on_peer:
        query["waitingOn"] = "peer"
    body = client.get("/v1/runs", query)
    items = body.get("runs", []) if isinstance(body, dict) else []
    if as_json:
        print_json(items)
        return
    if not items:
        click.echo("no runs")
        return
    render.print_table(new_console(), render.runs_table(items))
    if isinstance(body, dict) and body.get("nextCursor"):
        click.echo(f"more: tether runs list --cursor {body['nextCursor']}")


def _inputs_option(ctx: click.Context, param: click.Parameter, values: tuple[str, ...]) -> dict[str, Any]:
    """``NAME=VALUE`` pairs are strings; ``NAME:=JSON`` pairs are JSON (numbers, booleans, objects...)."""
    import json

    inputs: dict[str, Any] = {}
    for item in values:
        name, sep, raw = item.partition("=")
        if not sep or not name or name == ":":
            raise click.BadParameter(f"{item!r} should read NAME=VALUE or NAME:=JSON", ctx=ctx, param=param)
        if not name.endswith(":"):
            inputs[name] = raw
            continue
        try:
            inputs[name[:-1]] = json.loads(raw)
        except ValueError as exc:
            raise click.BadParameter(f"{item!r}: the value after := is not JSON ({exc})", ctx=ctx, param=param) from exc
    return inputs


#: a run has stopped for now when it is in one of these: over, or waiting for someone
_SETTLED = frozenset({*TERMINAL, *WAITING})


@runs.command("start")
@click.argument("workflow_id")
@click.option(
    "--input",
    "inputs",
    multiple=True,
    callback=_inputs_option,
    metavar="NAME=VALUE",
    help="One input variable (repeat for each): NAME=VALUE sets a string, NAME:=JSON any JSON value.",
)
@click.option("--wait", is_flag=True, help="Wait until the run ends or waits for someone, then print where it is.")
@json_option("Print the RunSnapshot (with --wait) or the creation answer.")
@on_host
def runs_start(workflow_id: str, inputs: dict[str, Any], wait: bool, as_json: bool, client: HostClient) -> None:
    """Start a run of WORKFLOW_ID and print its id (the last line)."""
    created = client.post("/v1/runs", {"workflowId": workflow_id, "inputs": inputs})
    run_id = str(created.get("runId", "")) if isinstance(created, dict) else ""
    if not wait:
        if as_json:
            print_json(created)
        else:
            click.echo(f"started run {run_id} of {workflow_id}")
            click.echo(run_id)
        return
    snapshot = _settled(client, run_id)
    if as_json:
        print_json(snapshot)
    else:
        click.echo(render.run_summary(snapshot))
    if snapshot.get("status") in ("failed", "cancelled"):
        raise click.exceptions.Exit(EXIT_FAILED)


def _settled(client: HostClient, run_id: str) -> dict[str, Any]:
    """The run's snapshot once it ends or waits, long-polling its events meanwhile."""
    params: dict[str, Any] = {"timeout": 10}
    while True:
        page = client.get(_run_path(run_id, "events", "poll"), params)
        if not isinstance(page, dict) or page.get("runStatus") in _SETTLED:
            snapshot = client.get(_run_path(run_id))
            return snapshot if isinstance(snapshot, dict) else {}
        events = page.get("events", [])
        if events:
            params["lastSequence"] = events[-1].get("sequence")


@runs.command("get")
@click.argument("run_id")
@json_option("Print the raw RunSnapshot.")
@on_host
def runs_get(run_id: str, as_json: bool, client: HostClient) -> None:
    """Where RUN_ID is, what it waits for, and how it ended."""
    snapshot = client.get(_run_path(run_id))
    if as_json:
        print_json(snapshot)
    else:
        click.echo(render.run_summary(snapshot))


@runs.command("events")
@click.argument("run_id")
@click.option(
    "--follow/--no-follow",
    default=False,
    show_default=True,
    help="Tail the live stream until the run ends (in a terminal: a live view of the run; a lost stream is "
    "re-attached).",
)
@json_option("Print each event as one JSON object per line (JSON Lines).")
@on_host
def runs_events(run_id: str, follow: bool, as_json: bool, client: HostClient) -> None:
    """Print RUN_ID's events, one line each.

    Columns: sequence, time, type, node, payload. With --follow in a terminal (and no
    --json), a live view instead: the run's status, its nodes, what it waits for and the
    latest events, until it ends.
    """
    import json
    import sys

    def line(event: dict[str, Any]) -> str:
        return json.dumps(event, ensure_ascii=False) if as_json else render.event_line(event)

    def reattaching(last: int, reason: str) -> None:
        after = f"after event {last}" if last >= 0 else "from the start"
        click.echo(f"note: lost the stream ({reason}); re-attaching {after}", err=True)

    if follow and not as_json and sys.stdout.isatty():
        from tether.cli._live import follow_live

        console = new_console()
        try:
            follow_live(client, run_id, console)
        except KeyboardInterrupt:
            console.print(f"stopped watching; the run goes on (tether runs get {run_id})", markup=False)
            raise click.exceptions.Exit(EXIT_INTERRUPTED) from None
        return
    if follow:
        for event in client.follow_events(run_id, "debug", on_reattach=reattaching):
            click.echo(line(event))
        return
    params: dict[str, Any] = {"timeout": 1}
    while True:
        page = client.get(_run_path(run_id, "events", "poll"), params)
        events = page.get("events", []) if isinstance(page, dict) else []
        for event in events:
            click.echo(line(event))
        if not events or page.get("isComplete"):
            return
        params["lastSequence"] = events[-1].get("sequence")


def _pending_interrupt(client: HostClient, run_id: str, status: str, what: str) -> str:
    """The node to resolve at, after checking the run really waits for ``what``."""
    snapshot = client.get(_run_path(run_id))
    if not isinstance(snapshot, dict):
        snapshot = {}
    interrupt = snapshot.get("interrupt")
    actual = snapshot.get("status", "?")
    if actual == status and isinstance(interrupt, dict) and interrupt.get("nodeId"):
        return str(interrupt["nodeId"])
    fail(f"error: run {run_id} is not waiting for {what} (status: {actual})")


def _resolve(client: HostClient, run_id: str, node_id: str, resume_value: dict[str, Any]) -> dict[str, Any]:
    result = client.post(_run_path(run_id, "interrupts", segment(node_id)), {"resumeValue": resume_value})
    return result if isinstance(result, dict) else {}


def _decide(client: HostClient, action: str, run_id: str, comment: str | None) -> None:
    resume: dict[str, Any] = {"action": action}
    if comment is not None:
        resume["feedback"] = comment
    node_id = _pending_interrupt(client, run_id, "waiting-approval", "an approval")
    result = _resolve(client, run_id, node_id, resume)
    verb = "accepted" if action == "accept" else "rejected"
    click.echo(f"{verb} run {run_id} at node {node_id!r}; run is now {result.get('status', '?')}")


#: ``--comment`` of ``approve`` and ``reject``
_comment_option = click.option("--comment", help="Feedback recorded with the decision.")


@runs.command("approve")
@click.argument("run_id")
@_comment_option
@on_host
def runs_approve(run_id: str, comment: str | None, client: HostClient) -> None:
    """Accept the approval gate RUN_ID waits at."""
    _decide(client, "accept", run_id, comment)


@runs.command("reject")
@click.argument("run_id")
@_comment_option
@on_host
def runs_reject(run_id: str, comment: str | None, client: HostClient) -> None:
    """Reject the approval gate RUN_ID waits at."""
    _decide(client, "reject", run_id, comment)


def _answers_option(ctx: click.Context, param: click.Parameter, values: tuple[str, ...]) -> dict[str, str]:
    answers: dict[str, str] = {}
    for item in values:
        question, sep, answer = item.partition("=")
        if not sep or not question:
            raise click.BadParameter(f"{item!r} should read ID=VALUE", ctx=ctx, param=param)
        answers[question] = answer
    return answers


@runs.command("answer")
@click.argument("run_id")
@click.option(
    "--answer",
    "answers",
    multiple=True,
    required=True,
    callback=_answers_option,
    metavar="ID=VALUE",
    help="Answer to one question (repeat for each).",
)
@on_host
def runs_answer(run_id: str, answers: dict[str, str], client: HostClient) -> None:
    """Answer the clarification RUN_ID waits for."""
    node_id = _pending_interrupt(client, run_id, "waiting-input", "input")
    result = _resolve(client, run_id, node_id, {"answers": answers})
    click.echo(f"answered run {run_id} at node {node_id!r}; run is now {result.get('status', '?')}")


@runs.command("cancel")
@click.argument("run_id")
@click.option("--reason", help="Why, recorded on run.cancelled.")
@on_host
def runs_cancel(run_id: str, reason: str | None, client: HostClient) -> None:
    """Cancel RUN_ID.

    A waiting run ends at once; a running one goes through cancelling.
    """
    result = client.post(_run_path(run_id, "cancel"), {"reason": reason} if reason else {})
    status = result.get("status", "?") if isinstance(result, dict) else "?"
    click.echo(f"run {run_id}: {status}")


@runs.command("purge")
@click.option(
    "--before",
    required=True,
    metavar="TIMESTAMP",
    help="Purge runs that ended before this instant: ISO 8601 with an offset (2026-11-30T00:00:00Z).",
)
@click.option("--dry-run", is_flag=True, help="Only list the runs that would go; delete nothing.")
@json_option("Print the purged (or, with --dry-run, purgeable) run ids as JSON.")
@on_host
def runs_purge(before: str, dry_run: bool, as_json: bool, client: HostClient) -> None:
    """Purge the tenant's finished runs that ended before TIMESTAMP, as task retention would.

    A purged run, its events and its A2A task read afterwards as an unknown id. Runs that
    have not ended, or still have a push or webhook pending, are kept.
    """
    ids: list[str] = []
    while True:
        body = client.post("/v1/runs:purge", {"before": before, "dryRun": dry_run})
        ids += body["runIds"]
        if dry_run or not body["more"]:  # a dry run lists the first 1000 at most
            break
    if as_json:
        print_json(ids)
        return
    for run_id in ids:
        click.echo(run_id)
    verb = "would purge" if dry_run else "purged"
    click.echo(
        f"{verb} {len(ids)} run(s) that ended before {before}"
        + (" (more left: --dry-run lists 1000)" if dry_run and len(ids) == 1000 else "")
    )
