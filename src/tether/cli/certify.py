"""``tether certify``: check a running host against the three v2 profiles' floors and write a signed bundle.

The checks go to the host over HTTP (``--url``, ``--key``, ``--tenant-b-key``); the
bundle is signed with this deployment's certification key, which lives in the store
(``--data-dir`` or ``--database-url``) sealed with the host key, and is published in the
host's v2 discovery ``signingKeys[]``. ``tether certify keys`` lists and rotates that key.
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any

import click

from tether.build import package_digest
from tether.cli._output import EXIT_FAILED, fail, json_option, print_json
from tether.cli._reach import LocalStore, on_store, store_options
from tether.store.base import Store

#: the exit status when the bundle was written but not every profile certified
EXIT_NOT_CERTIFIED = EXIT_FAILED


def _host_key(local: LocalStore, secret_key_file: Path | None) -> bytes:
    path = secret_key_file if secret_key_file is not None else local.data_dir / "host.key"
    if not path.exists():
        fail(f"error: no host key at {path}: pass --secret-key-file, the key `tether serve` uses")
    key = path.read_bytes()
    if len(key) < 32:
        fail(f"error: the host key {path} holds {len(key)} bytes; it needs at least 32")
    return key


def _secret_key_option(command: Any) -> Any:
    return click.option(
        "--secret-key-file",
        type=click.Path(dir_okay=False, path_type=Path),
        help="The host key the store's secrets are sealed with [default: <data-dir>/host.key].",
    )(command)


def _relaxation(value: str) -> dict[str, str]:
    obligation, sep, reason = value.partition("=")
    if not sep or not obligation or not reason:
        raise click.BadParameter(f"{value!r}: write OBLIGATION=REASON, e.g. webhooks.egress-guard='loopback receiver'")
    return {"obligation": obligation, "durability": "deployment", "reason": reason}


@click.group(invoke_without_command=True)
@click.option(
    "--url",
    envvar="TETHER_URL",
    default="http://127.0.0.1:8080",
    show_default=True,
    show_envvar=True,
    help="Base URL of the host to check.",
)
@click.option("--key", envvar="TETHER_API_KEY", show_envvar=True, help="An API key of the host (tk_...).")
@click.option(
    "--tenant-b-key",
    envvar="TETHER_TENANT_B_API_KEY",
    show_envvar=True,
    help="A key of a second tenant (the SSE cursor file needs one; without it that file is blocked).",
)
@click.option(
    "--schemas",
    type=click.Path(file_okay=False, exists=True, path_type=Path),
    help="A folder with the official openwop/v2/*.schema.json (needs jsonschema); without it schema legs are blocked.",
)
@click.option(
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    default="certification-bundle.json",
    show_default=True,
    help="Where to write the bundle.",
)
@click.option(
    "--build-kind",
    type=click.Choice(["commit", "image-digest", "artifact-sha256"]),
    help="What --build-id names [default: commit with --build-id, else artifact-sha256].",
)
@click.option("--build-id", help="The host's build id [default: SHA-256 of this install's tether package].")
@click.option(
    "--receiver-listen",
    metavar="HOST:PORT",
    help="Run a webhook receiver here for the durable-delivery file (without one, that file is blocked).",
)
@click.option(
    "--receiver-url",
    help="The public https URL the host reaches that receiver at (a tunnel to --receiver-listen) "
    "[default: the listen address itself].",
)
@click.option(
    "--receiver-certfile",
    type=click.Path(dir_okay=False, exists=True),
    help="Serve the receiver and the effect-retry provider with TLS.",
)
@click.option(
    "--receiver-keyfile", type=click.Path(dir_okay=False, exists=True), help="The key of --receiver-certfile."
)
@click.option("--relaxation", "relaxations", multiple=True, help="A relaxation the host runs under: OBLIGATION=REASON.")
@click.option("--skip", "skipped", multiple=True, help="A floor file not to run (recorded as skipped).")
@_secret_key_option
@store_options
@click.pass_context
def certify(
    ctx: click.Context,
    url: str,
    key: str | None,
    tenant_b_key: str | None,
    schemas: Path | None,
    out: Path,
    build_kind: str | None,
    build_id: str | None,
    receiver_listen: str | None,
    receiver_url: str | None,
    receiver_certfile: str | None,
    receiver_keyfile: str | None,
    relaxations: tuple[str, ...],
    skipped: tuple[str, ...],
    secret_key_file: Path | None,
    data_dir: Path,
    database_url: str | None,
) -> None:
    """Run Tether's own check of the v2 profiles' floors against --url and write a signed bundle to --out.

    It is not the official conformance suite, and the bundle says so (suite "tether-certify",
    evidence tier "self"). Every floor file is one row; a row that did not pass says why. Exits
    0 when every profile certified, 1 when the bundle was written but some did not.
    """
    if ctx.invoked_subcommand is not None:
        return
    if not key:
        fail("error: certify needs an API key of the host: pass --key or set TETHER_API_KEY", 2)
    from tether.auth.signing_keys import ensure_signing_key, unsealed
    from tether.certify.runner import Build
    from tether.certify.runner import certify as run
    from tether.certify.session import SchemaDir, Session
    from tether.secrets import SecretBox

    declared = [_relaxation(r) for r in relaxations]
    source = click.get_current_context().get_parameter_source("data_dir")
    local = LocalStore(data_dir, database_url, implicit=source is click.core.ParameterSource.DEFAULT)
    box = SecretBox(_host_key(local, secret_key_file))
    signing = local.run(lambda store: ensure_signing_key(store, box))
    try:
        private = unsealed(signing, box)
    except ValueError as exc:
        fail(f"error: {exc} (--secret-key-file)")
    session = Session(url, key, tenant_b_key=tenant_b_key, schemas=SchemaDir(schemas) if schemas else None)
    build = Build(build_kind or ("commit" if build_id else "artifact-sha256"), build_id or package_digest())
    with contextlib.ExitStack() as stack:
        if receiver_listen is not None:
            from tether.certify import ScopedReceiver

            tls = {"certfile": receiver_certfile, "keyfile": receiver_keyfile}
            session.receiver = stack.enter_context(ScopedReceiver(receiver_listen, receiver_url, **tls))
        if receiver_certfile is not None:
            session.provider_tls = (receiver_certfile, receiver_keyfile)
        try:
            bundle = run(
                session,
                build=build,
                signer=(private, signing.key_id),
                relaxations=declared,
                skip=frozenset(skipped),
            )
        except RuntimeError as exc:
            fail(f"error: {exc}")
    out.write_text(json.dumps(bundle, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    totals = bundle["results"]["totals"]
    click.echo(f"wrote {out}: {', '.join(f'{v} {k}' for k, v in totals.items())}; signed with {signing.key_id}")
    for row in bundle.get("detail", {}).get("nonPass", []):
        click.echo(f"  {row['result']:<14} {row['id']}: {row['reason']}")
    for relaxation in bundle["host"].get("relaxations", []):
        click.echo(f"  relaxation {relaxation['obligation']}: {relaxation['reason']}")
    for profile in bundle["claimedProfiles"]:
        click.echo(f"{profile['id']}: {'certified' if profile['certified'] else 'not certified'}")
    if not all(p["certified"] for p in bundle["claimedProfiles"]):
        raise click.exceptions.Exit(EXIT_NOT_CERTIFIED)


@certify.group("keys")
def certify_keys() -> None:
    """The Ed25519 keys bundles are signed with (published in v2 discovery ``signingKeys[]``)."""


def _key_rows(store: Store) -> Any:
    from tether.auth.signing_keys import published_keys

    return published_keys(store)


@certify_keys.command("list")
@json_option("Print the keys as discovery publishes them.")
@on_store
def keys_list(as_json: bool, local: LocalStore) -> None:
    """List the signing keys, oldest first; the last unretired one signs."""
    keys = local.run(_key_rows)
    if as_json:
        print_json(keys)
        return
    if not keys:
        click.echo("no signing key yet: the first `tether serve` on this store makes one")
    for entry in keys:
        state = f"retired {entry['retiredAt']}" if "retiredAt" in entry else "signing"
        click.echo(f"{entry['keyId']}  {entry['publicKey']}  {state}")


@certify_keys.command("rotate")
@_secret_key_option
@on_store
def keys_rotate(secret_key_file: Path | None, local: LocalStore) -> None:
    """Make a new signing key and retire the current one (it stays published, so old bundles still verify)."""
    from tether.auth.signing_keys import rotate_signing_key
    from tether.secrets import SecretBox

    box = SecretBox(_host_key(local, secret_key_file))
    try:
        retired, made = local.run(lambda store: rotate_signing_key(store, box))
    except ValueError as exc:
        fail(f"error: {exc} (--secret-key-file)")
    click.echo(f"retired {retired.key_id} at {retired.retired_at}; bundles are now signed with {made.key_id}")
