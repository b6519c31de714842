"""``tether credentials``: the sealed secrets hand-offs present to their peers, kept on the store directly."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import click

from tether.cli import _render as render
from tether.cli._output import fail, new_console
from tether.cli._reach import LocalStore, on_store
from tether.store.base import Store


@click.group()
def credentials() -> None:
    """Keep the secrets hand-offs present to other agents: sealed, each bound to one origin.

    A workflow's hand-off names one (``config.credential``); it is sent only to the origin
    it was added for. Works on the store directly, like ``tether keys``; only fingerprints
    are ever shown.
    """


def _sealing(data_dir: Path, key_file: Path | None) -> Callable[[Store], Awaitable[Any]]:
    """Check the host key against the store, as ``serve`` does, so a credential opens on the hosts that use it."""
    from tether.app import check_host_key, host_secret

    path = key_file if key_file is not None else data_dir / "host.key"

    async def check(store: Store) -> Any:
        from tether.secrets import SecretBox

        key = host_secret(path)
        await check_host_key(store, key, path)
        return SecretBox(key)

    return check


@credentials.command("add")
@click.argument("name")
@click.option("--origin", required=True, help="The only origin it is sent to, e.g. https://b.example:8443.")
@click.option("--scheme", default="Bearer", show_default=True, help="Authorization scheme it is sent under.")
@click.option(
    "--secret-file",
    required=True,
    type=click.Path(exists=True, dir_okay=False, allow_dash=True, path_type=Path),
    help="File holding the secret (one line); - reads it from stdin. It is never printed.",
)
@click.option(
    "--secret-key-file",
    envvar="TETHER_SECRET_KEY_FILE",
    show_envvar=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="The host's key (as given to tether serve) [default: <data-dir>/host.key].",
)
@on_store
def credentials_add(
    name: str, origin: str, scheme: str, secret_file: Path, secret_key_file: Path | None, local: LocalStore
) -> None:
    """Seal the secret in SECRET_FILE under NAME, for ORIGIN only; prints its fingerprint."""
    import sys

    from tether.a2a.peer import add_credential

    secret = sys.stdin.read() if str(secret_file) == "-" else secret_file.read_text(encoding="utf-8")
    seal = _sealing(local.data_dir, secret_key_file)

    async def add(store: Store) -> Any:
        box = await seal(store)
        return await add_credential(store, box, name=name, origin=origin, scheme=scheme, secret=secret)

    row = local.run(add)
    click.echo(f"added credential {name!r}: {row.scheme} for {row.origin} only (fingerprint {row.secret_fingerprint})")


@credentials.command("list")
@on_store
def credentials_list(local: LocalStore) -> None:
    """List credentials: name, origin, scheme and fingerprint (never the secret)."""
    rows = local.run(lambda store: store.list_credentials())
    if not rows:
        click.echo("no outbound credentials; add one with: tether credentials add NAME --origin URL --secret-file FILE")
        return
    render.print_table(new_console(), render.credentials_table(rows))


@credentials.command("remove")
@click.argument("name")
@on_store
def credentials_remove(name: str, local: LocalStore) -> None:
    """Forget credential NAME; a hand-off that names it fails at its next call to its peer."""
    removed = local.run(lambda store: store.delete_credential(name))
    if not removed:
        fail(f"error: no credential named {name!r} (see: tether credentials list)")
    click.echo(f"removed credential {name!r}")
