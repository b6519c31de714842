"""``tether keys``: API keys, made and revoked on the store directly (it works before a first ``serve``)."""

from __future__ import annotations

import click

from tether.cli import _render as render
from tether.cli._output import fail, json_option, new_console, print_json
from tether.cli._reach import LocalStore, on_store
from tether.errors import TetherError
from tether.store.base import Store


@click.group()
def keys() -> None:
    """Create, list and revoke API keys.

    Works on the store directly, so it needs no key of its own; a running host sees the
    change within seconds.
    """


def _scopes_option(ctx: click.Context, param: click.Parameter, value: str | None) -> list[str]:
    from tether.auth.keys import parse_scopes

    try:
        return parse_scopes(value)
    except TetherError as exc:
        raise click.BadParameter(exc.message, ctx=ctx, param=param) from exc


@keys.command("create")
@click.option("--name", required=True, help="Unique name among active keys (e.g. ci-bot).")
@click.option(
    "--rotate",
    is_flag=True,
    help="If an active key NAME exists, revoke it and create a new one (so a script always gets a working key).",
)
@click.option("--tenant", default="default", show_default=True, help="Tenant the key acts for.")
@click.option(
    "--scopes",
    callback=_scopes_option,
    help='Comma-separated scopes, e.g. "runs:read,runs:create" (default: all scopes).',
)
@on_store
def keys_create(name: str, rotate: bool, tenant: str, scopes: list[str], local: LocalStore) -> None:
    """Create a key and print it once; only its hash is stored. The raw key is the last line."""
    from tether.auth.keys import create_key
    from tether.clock import now_iso

    async def create(store: Store) -> tuple[bool, str]:
        replaced = rotate and await store.revoke_key(name, now_iso())
        return replaced, await create_key(store, name, tenant, scopes)

    replaced, raw = local.run(create, create=True)
    if replaced:
        click.echo(f"revoked the previous key {name!r}")
    click.echo(f"created key {name!r} for tenant {tenant!r} with scopes: {', '.join(scopes)}")
    click.echo("store it now: it cannot be shown again")
    click.echo(raw)


@keys.command("list")
@json_option("Print the keys as a JSON array (never their secrets or hashes).")
@on_store
def keys_list(as_json: bool, local: LocalStore) -> None:
    """List keys (never their secrets or hashes)."""
    from tether.auth.keys import ALL_SCOPES

    rows = local.run(lambda store: store.list_keys())
    if as_json:
        print_json(
            [
                {
                    "name": r.name,
                    "tenant": r.tenant,
                    "scopes": r.scopes,
                    "createdAt": r.created_at,
                    "revokedAt": r.revoked_at,
                }
                for r in rows
            ]
        )
        return
    if not rows:
        click.echo("no API keys yet; create one with: tether keys create --name NAME")
        return
    render.print_table(new_console(), render.keys_table(rows, ALL_SCOPES))


@keys.command("revoke")
@click.argument("name")
@on_store
def keys_revoke(name: str, local: LocalStore) -> None:
    """Revoke the active key NAME; a running host refuses it within seconds."""
    from tether.clock import now_iso

    revoked = local.run(lambda store: store.revoke_key(name, now_iso()))
    if not revoked:
        fail(f"error: no active key named {name!r} (see: tether keys list)")
    click.echo(f"revoked key {name!r}")
