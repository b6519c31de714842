"""``tether workflows``: what the running host has loaded, and a local check of one workflow file."""

from __future__ import annotations

from pathlib import Path

import click

from tether.cli import _render as render
from tether.cli._client import HostClient
from tether.cli._output import EXIT_FAILED, json_option, new_console, print_json
from tether.cli._reach import on_host


@click.group()
def workflows() -> None:
    """List the host's workflows, or validate a workflow file locally."""


@workflows.command("list")
@json_option("Print the workflows as a JSON array.")
@on_host
def workflows_list(as_json: bool, client: HostClient) -> None:
    """Workflows the running host has loaded, and whether it can execute each."""
    body = client.get("/v1/workflows")
    items = body.get("workflows", []) if isinstance(body, dict) else []
    if as_json:
        print_json(items)
        return
    if not items:
        click.echo("the host has no workflows loaded")
        return
    render.print_table(new_console(), render.workflows_table(items))


@workflows.command("validate")
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
def workflows_validate(file: Path) -> None:
    """Check FILE against the workflow schema and what this engine can run (no host needed)."""
    from tether.engine.nodes import SUPPORTED_TYPE_IDS
    from tether.engine.validation import executability_problems, load_workflow_file
    from tether.errors import WorkflowInvalid

    try:
        wf = load_workflow_file(file)
    except WorkflowInvalid as exc:
        errors = (exc.details or {}).get("errors") or [{"path": "", "message": exc.message}]
        click.echo(f"{file}: invalid ({len(errors)} error{'s' if len(errors) != 1 else ''})", err=True)
        for error in errors:
            where = f"{error.get('path')}: " if error.get("path") else ""
            click.echo(f"  {where}{error.get('message')}", err=True)
        raise click.exceptions.Exit(EXIT_FAILED) from None
    problems = executability_problems(wf, SUPPORTED_TYPE_IDS)
    if problems:
        click.echo(f"{file}: valid, but this host cannot run it", err=True)
        for problem in problems:
            click.echo(f"  {problem}", err=True)
        raise click.exceptions.Exit(EXIT_FAILED)
    click.echo(f"{file}: valid ({wf.id} {wf.version}, {len(wf.nodes)} node{'s' if len(wf.nodes) != 1 else ''})")
