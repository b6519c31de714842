"""``tether push``: outbound deliveries (A2A pushes, webhooks, run callbacks) and redelivering dead letters."""

from __future__ import annotations

import click

from tether.cli import _render as render
from tether.cli._client import HostClient, segment
from tether.cli._output import json_option, new_console, print_json
from tether.cli._reach import on_host
from tether.types import DELIVERY_KINDS


@click.group()
def push() -> None:
    """See outbound deliveries (A2A pushes, webhooks) and redeliver dead letters.

    Talks to a running host through its REST API (--url, --key).
    """


@push.command("list")
@click.option(
    "--status",
    type=click.Choice(["pending", "delivered", "dead"]),
    help="Only deliveries in this state (dead = dead letters).",
)
@click.option(
    "--kind",
    type=click.Choice(DELIVERY_KINDS),
    help="Only OpenWOP webhooks, A2A pushes, or announcements to a run's callbackUrl.",
)
@click.option("--limit", default=50, show_default=True, type=click.IntRange(1, 1000))
@json_option("Print the deliveries as a JSON array.")
@on_host
def push_list(status: str | None, kind: str | None, limit: int, as_json: bool, client: HostClient) -> None:
    """Deliveries of your tenant, newest first, with their last error."""
    body = client.get("/v1/deliveries", {"limit": limit, "status": status, "kind": kind})
    items = body.get("deliveries", []) if isinstance(body, dict) else []
    if as_json:
        print_json(items)
        return
    if not items:
        which = " ".join(filter(None, [status and f"in state {status}", kind and f"of kind {kind}"]))
        click.echo("no deliveries" + (f" {which}" if which else ""))
        return
    render.print_table(new_console(), render.deliveries_table(items))


@push.command("redeliver")
@click.argument("delivery_id")
@on_host
def push_redeliver(delivery_id: str, client: HostClient) -> None:
    """Send dead letter DELIVERY_ID again, from the start of the retry ladder."""
    client.post(f"/v1/deliveries/{segment(delivery_id)}/redeliver", {})
    click.echo(f"delivery {delivery_id}: pending again")
