"""The ``tether`` command: a thin list of commands over the store, auth and REST API.

Every failure a command can meet ends the same way, in ``TetherCli.invoke``: one
``error: ...`` line on stderr and a stable exit status (1: refused or failed, 2: the host
or a required argument is missing), so scripts can branch on it and humans read one line
instead of a traceback.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import click
from rich.console import Console

from tether.cli import _render as render
from tether.cli._client import DEFAULT_URL, HostClient, HostError, HostUnreachable, segment
from tether.errors import TetherError
from tether.settings import Settings
from tether.store.base import Store
from tether.types import DELIVERY_KINDS, RUN_STATUSES, TERMINAL, WAITING

T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])

EXIT_FAILED = 1
EXIT_UNREACHABLE = 2


def _fail(message: str, status: int = EXIT_FAILED) -> NoReturn:
    click.echo(message, err=True)
    raise click.exceptions.Exit(status)


class TetherCli(click.Group):
    """The root group: turns the errors commands may raise into one stderr line and an exit status."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except HostError as exc:
            _fail(f"error: {exc.message} ({exc.code}, HTTP {exc.status})")
        except HostUnreachable as exc:
            _fail(
                f"error: cannot reach Tether at {exc.url} ({exc.reason}); is `tether serve` running there? "
                "(set --url or TETHER_URL)",
                EXIT_UNREACHABLE,
            )
        except TetherError as exc:
            _fail(f"error: {exc.message}")


def _console() -> Console:
    # Built per call so output goes to whatever sys.stdout is now (CliRunner swaps it).
    return Console(highlight=False)


def _schedule_option(ctx: click.Context, param: click.Parameter, value: str) -> str:
    from tether.egress.outbox import RetrySchedule

    try:
        RetrySchedule.parse(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from exc
    return value


def _span_option(ctx: click.Context, param: click.Parameter, value: str) -> float:
    from tether.clock import parse_span

    try:
        return parse_span(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from exc


def _tenant_option(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """A tenant name, checked as ``tether keys create --tenant`` checks it."""
    from tether.auth.keys import valid_tenant

    if value is not None and not valid_tenant(value):
        raise click.BadParameter(f"{value!r} must be 1-64 letters, digits, '.', '_' or '-' (a letter or digit first)")
    return value


# --- shared options ------------------------------------------------------------------------


def host_options(command: F) -> F:
    """``--url`` and ``--key`` for commands that talk to a running host."""
    command = click.option(
        "--key",
        envvar="TETHER_API_KEY",
        show_envvar=True,
        help="API key (tk_...) sent as 'Authorization: Bearer'.",
    )(command)
    command = click.option(
        "--url",
        envvar="TETHER_URL",
        default=DEFAULT_URL,
        show_default=True,
        show_envvar=True,
        help="Base URL of the Tether host.",
    )(command)
    return command


def store_options(command: F) -> F:
    """``--data-dir`` and ``--database-url`` for commands that open the store directly."""
    command = click.option(
        "--database-url",
        envvar="TETHER_DATABASE_URL",
        show_envvar=True,
        help="Where runs are kept instead of <data-dir>/tether.db: postgresql://USER@HOST:PORT/DBNAME (every host "
        "on one database serves the same runs) or sqlite:PATH.",
    )(command)
    command = click.option(
        "--data-dir",
        envvar="TETHER_DATA_DIR",
        default=".tether",
        show_default=True,
        show_envvar=True,
        type=click.Path(file_okay=False, path_type=Path),
        help="Directory holding the host's data (tether.db).",
    )(command)
    return command


def _with_store(
    data_dir: Path, database_url: str | None, operation: Callable[[Store], Awaitable[T]], *, create: bool = False
) -> T:
    """Open the store, run one operation, close it: the CLI's whole relationship with storage.

    Run with the default ``--data-dir`` (``./.tether``) where there is no store, a command
    that ``create``s (``keys create``, before a first ``tether serve``) says which
    directory it made; any other command refuses, naming the directory it looked in,
    instead of making an empty one. A directory named on purpose is used as given.
    """
    from tether.store import open_store

    source = click.get_current_context().get_parameter_source("data_dir")
    implicit = source is click.core.ParameterSource.DEFAULT
    if implicit and database_url is None and not (data_dir / "tether.db").exists():
        where = data_dir.absolute()
        if not create:
            _fail(
                f"error: no Tether data in {where} (the default --data-dir): pass --data-dir, or set "
                "TETHER_DATA_DIR, to the directory `tether serve --data-dir` uses"
            )
        click.echo(f"note: made a new Tether data directory at {where} (serve it with: tether serve)", err=True)

    try:
        store = open_store(data_dir=str(data_dir), database_url=database_url)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="'--database-url'") from exc

    async def run() -> T:
        await store.open()
        try:
            return await operation(store)
        finally:
            await store.close()

    return asyncio.run(run())


def _client(url: str, key: str | None) -> HostClient:
    """The host's REST API with ``key``: every route the CLI calls needs one, so a missing key is told up front."""
    if not key:
        _fail(
            "error: this command needs an API key: pass --key tk_..., or set TETHER_API_KEY "
            "(make one with: tether keys create --name NAME)",
            EXIT_UNREACHABLE,
        )
    return HostClient(url, key)


def _json_option(help_text: str) -> Callable[[F], F]:
    """``--json``: the listing as JSON on stdout, for scripts (every listing command has it)."""
    return click.option("--json", "as_json", is_flag=True, help=help_text)


def _print_json(value: Any) -> None:
    import json

    click.echo(json.dumps(value, indent=2, ensure_ascii=False))


# --- root ----------------------------------------------------------------------------------


@click.group(cls=TetherCli, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(package_name="tether", prog_name="tether")
def cli() -> None:
    """Tether: a host for OpenWOP workflows whose runs are durable A2A tasks."""


def main() -> None:
    """Console-script entry point (``tether``, ``python -m tether``)."""
    cli(prog_name="tether")


# --- serve ---------------------------------------------------------------------------------


@cli.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind.")
@click.option("--port", default=8080, show_default=True, type=click.IntRange(0, 65535), help="Port to bind.")
@store_options
@click.option(
    "--workflows",
    "workflows_dir",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="Extra directory of workflow JSON files to load beside the bundled ones.",
)
@click.option("--public-url", help="URL callers reach this host at (used in links and the agent card).")
@click.option(
    "--seed-fixtures",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="Directory of OpenWOP fixture workflows to store at start (idempotent).",
)
@click.option(
    "--max-body-bytes",
    default=1024 * 1024,
    show_default=True,
    type=click.IntRange(min=1),
    help="Largest request body accepted.",
)
@click.option(
    "--default-skill", default="echo", show_default=True, help="Workflow an A2A message without a skill runs."
)
@click.option(
    "--a2a-request-timeout",
    default=30.0,
    show_default=True,
    type=click.FloatRange(min=0, min_open=True),
    help="Seconds a blocking A2A message/send waits for the run.",
)
@click.option(
    "--a2a-file-part-bytes",
    default=8 * 1024 * 1024,
    show_default=True,
    type=click.IntRange(min=1),
    help="Most bytes one A2A file part may carry inline (decoded); more is refused (-32602, HTTP 413) naming "
    "this limit. A file sent as a URI is kept as a reference and never fetched.",
)
@click.option(
    "--a2a-file-message-bytes",
    default=16 * 1024 * 1024,
    show_default=True,
    type=click.IntRange(min=1),
    help="Most file bytes one A2A message may carry inline in all its parts. The A2A endpoint takes bodies of "
    "--max-body-bytes plus this much in base64.",
)
@click.option(
    "--enable-test-seams", is_flag=True, help="Serve the conformance suite's test seams (never in production)."
)
@click.option(
    "--lease-seconds",
    default=15.0,
    show_default=True,
    type=click.FloatRange(min=1.0),
    help="Several hosts on PostgreSQL: how long a silent host keeps its runs before another takes them over.",
)
@click.option(
    "--fallback-poll-seconds",
    default=5.0,
    show_default=True,
    type=click.FloatRange(min=0.1),
    help="Several hosts on PostgreSQL: the longest a lost wake-up hint can delay an event.",
)
@click.option(
    "--secret-key-file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Host key that seals push and webhook secrets and signs interrupt tokens [default: <data-dir>/host.key].",
)
@click.option(
    "--egress-allow-cidr",
    "egress_allow_cidrs",
    multiple=True,
    help="Development and tests only: exempt these addresses from the egress address arm (repeatable).",
)
@click.option(
    "--egress-ca-bundle",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Extra trusted CAs (PEM) for receivers with a private certificate.",
)
@click.option(
    "--delivery-concurrency",
    type=click.IntRange(1, 256),
    default=16,
    show_default=True,
    help="Deliveries (pushes, webhooks, callbacks) in flight at once to one receiver (host and port). A crash "
    "sends again those the receiver had answered but the host had not recorded: about this many per busy "
    "receiver (docs/operations.md).",
)
@click.option(
    "--push-retry-schedule",
    default="5s,30s,2m,10m,1h,4h,12h",
    show_default=True,
    callback=_schedule_option,
    help="Delays between delivery attempts; after the last one a delivery is dead-lettered.",
)
@click.option(
    "--webhook-max-attempts",
    default=4,
    show_default=True,
    type=click.IntRange(2, 20),
    help="OpenWOP v2 webhooks (POST /webhooks): attempts at a delivery before it is dead-lettered "
    "(v1 webhooks and A2A pushes keep --push-retry-schedule).",
)
@click.option(
    "--webhook-first-retry",
    default=1.0,
    show_default=True,
    type=click.FloatRange(0.1, 86400.0),
    help="OpenWOP v2 webhooks: seconds before a failed delivery's first retry; each later retry waits twice as "
    "long (4 attempts from 1 s are spent in about 7 s, inside the conformance suite's wait).",
)
@click.option(
    "--a2a-anonymous-tenant",
    metavar="NAME",
    callback=_tenant_option,
    help="Serve a public agent: A2A calls without a key act as 'anonymous' in tenant NAME, with the A2A scopes "
    "only (calls with a key are checked as ever; REST still needs a key). Off by default.",
)
@click.option(
    "--push-body",
    type=click.Choice(["status", "task"]),
    default="status",
    show_default=True,
    help="A2A push body: a TaskStatusUpdateEvent (RFC 0100) or the full Task (A2A v0.3 example).",
)
@click.option(
    "--tls-certfile",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Serve HTTPS with this certificate chain (PEM); needs --tls-keyfile. Peers that push to this host "
    "(A2A hand-offs) reach only HTTPS URLs.",
)
@click.option(
    "--tls-keyfile", type=click.Path(exists=True, dir_okay=False, path_type=Path), help="The key of --tls-certfile."
)
@click.option(
    "--handoff-poll-max-seconds",
    default=30.0,
    show_default=True,
    type=click.FloatRange(min=0.1),
    help="The longest a hand-off waits between reads of its peer's task (pushes wake it sooner).",
)
@click.option(
    "--a2a-conformance-peer-url",
    envvar="OPENWOP_A2A_CONFORMANCE_PEER_URL",
    show_envvar=True,
    metavar="URL",
    help="With --enable-test-seams: the A2A peer the conformance hand-off nodes (core.conformance.a2a-invoke, "
    "core.a2a.invoke) call; only then is the fixture conformance-a2a-task-roundtrip runnable and advertised.",
)
@click.option(
    "--metrics-port",
    type=click.IntRange(0, 65535),
    help="Serve /metrics on this port (same address, same TLS) and not on the API's port; 0 picks a free one.",
)
@click.option(
    "--drain-seconds",
    default=0.0,
    show_default=True,
    type=click.FloatRange(min=0),
    help="On SIGTERM, answer /readyz with 503 this long while still serving, so a load balancer drains first.",
)
@click.option(
    "--idle-timeout",
    default=75,
    show_default=True,
    type=click.IntRange(min=1),
    help="Seconds an HTTP connection may sit idle between requests before the host closes it. Keep it above "
    "the idle timeout of every client pool and load balancer in front (httpx 5 s, AWS ALB 60 s): a request "
    "sent just as the host closes the connection is reset, and the caller cannot tell whether it arrived.",
)
@click.option(
    "--task-retention",
    default="30d",
    show_default=True,
    callback=_span_option,
    metavar="SPAN",
    help="Purge a finished run (events, task, history, deliveries) this long after it ended, e.g. 12h or 90d; "
    "0 keeps every run forever. Runs that have not finished are never purged.",
)
@click.option(
    "--log-level",
    type=click.Choice(["debug", "info", "warning", "error"]),
    default="info",
    show_default=True,
    help="Least severe log records written to stderr; debug also shows a failed start-up's traceback.",
)
@click.option(
    "--log-format",
    type=click.Choice(["text", "json"]),
    default="text",
    show_default=True,
    help="Log lines as text for people, or one JSON object per line for a log collector.",
)
def serve(**params: Any) -> None:
    """Run the host until SIGTERM or Ctrl-C."""
    from tether.app import serve as run_host

    try:
        settings = _serve_settings(params)
    except click.UsageError as refused:
        if params["log_format"] == "json":  # one JSON object, like every other line of a JSON host
            import sys

            from tether.ops.logs import HostLines

            HostLines("json").say("start-up-refused", refused.message, level="error", stream=sys.stderr)
            raise click.exceptions.Exit(EXIT_UNREACHABLE) from None
        _fail(f"error: {refused.message}", EXIT_UNREACHABLE)
    run_host(settings)


#: bind addresses that accept callers from anywhere: the card's URL cannot be guessed from them
_WILDCARDS = ("0.0.0.0", "::", "")


def _serve_settings(params: dict[str, Any]) -> Settings:
    """``Settings`` from the parsed ``serve`` options: each option is the field of the same name."""
    if (params.get("tls_certfile") is None) != (params.get("tls_keyfile") is None):
        raise click.UsageError("--tls-certfile and --tls-keyfile go together")
    if params["host"] in _WILDCARDS and not params["public_url"]:
        raise click.UsageError(
            f"--host {params['host'] or '(all)'} serves callers on other machines, but the agent card and links "
            "would point them at 127.0.0.1: also give --public-url (the URL they reach this host at), "
            "e.g. --public-url https://tether.example.com"
        )
    return Settings(**{**params, "egress_allow_cidrs": tuple(params["egress_allow_cidrs"])})


def serve_settings(args: list[str]) -> Settings:
    """The ``Settings`` that ``tether serve ARGS`` would run with: the same parser, defaults and checks.

    For embedding the host (tests serve it in-process) without copying the option list.
    """
    with serve.make_context("serve", list(args)) as ctx:
        return _serve_settings(ctx.params)


# --- keys ----------------------------------------------------------------------------------


@cli.group()
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
@store_options
def keys_create(
    name: str, rotate: bool, tenant: str, scopes: list[str], data_dir: Path, database_url: str | None
) -> None:
    """Create a key and print it once; only its hash is stored. The raw key is the last line."""
    from tether.auth.keys import create_key
    from tether.clock import now_iso

    async def create(store: Store) -> tuple[bool, str]:
        replaced = rotate and await store.revoke_key(name, now_iso())
        return replaced, await create_key(store, name, tenant, scopes)

    replaced, raw = _with_store(data_dir, database_url, create, create=True)
    if replaced:
        click.echo(f"revoked the previous key {name!r}")
    click.echo(f"created key {name!r} for tenant {tenant!r} with scopes: {', '.join(scopes)}")
    click.echo("store it now: it cannot be shown again")
    click.echo(raw)


@keys.command("list")
@_json_option("Print the keys as a JSON array (never their secrets or hashes).")
@store_options
def keys_list(as_json: bool, data_dir: Path, database_url: str | None) -> None:
    """List keys (never their secrets or hashes)."""
    from tether.auth.keys import ALL_SCOPES

    rows = _with_store(data_dir, database_url, lambda store: store.list_keys())
    if as_json:
        _print_json(
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
    render.print_table(_console(), render.keys_table(rows, ALL_SCOPES))


@keys.command("revoke")
@click.argument("name")
@store_options
def keys_revoke(name: str, data_dir: Path, database_url: str | None) -> None:
    """Revoke the active key NAME; a running host refuses it within seconds."""
    from tether.clock import now_iso

    revoked = _with_store(data_dir, database_url, lambda store: store.revoke_key(name, now_iso()))
    if not revoked:
        _fail(f"error: no active key named {name!r} (see: tether keys list)")
    click.echo(f"revoked key {name!r}")


# --- outbound credentials ------------------------------------------------------------------


@cli.group()
def credentials() -> None:
    """Keep the secrets hand-offs present to other agents: sealed, each bound to one origin.

    A workflow's hand-off names one (``config.credential``); it is sent only to the origin
    it was added for. Works on the store directly, like ``tether keys``; only fingerprints
    are ever shown.
    """


def key_file_option(command: F) -> F:
    """``--secret-key-file``: the host key that seals credentials (the one ``tether serve`` uses)."""
    return click.option(
        "--secret-key-file",
        envvar="TETHER_SECRET_KEY_FILE",
        show_envvar=True,
        type=click.Path(dir_okay=False, path_type=Path),
        help="The host's key (as given to tether serve) [default: <data-dir>/host.key].",
    )(command)


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
@key_file_option
@store_options
def credentials_add(
    name: str,
    origin: str,
    scheme: str,
    secret_file: Path,
    secret_key_file: Path | None,
    data_dir: Path,
    database_url: str | None,
) -> None:
    """Seal the secret in SECRET_FILE under NAME, for ORIGIN only; prints its fingerprint."""
    import sys

    from tether.a2a.peer import add_credential

    secret = sys.stdin.read() if str(secret_file) == "-" else secret_file.read_text(encoding="utf-8")
    seal = _sealing(data_dir, secret_key_file)

    async def add(store: Store) -> Any:
        box = await seal(store)
        return await add_credential(store, box, name=name, origin=origin, scheme=scheme, secret=secret)

    row = _with_store(data_dir, database_url, add)
    click.echo(f"added credential {name!r}: {row.scheme} for {row.origin} only (fingerprint {row.secret_fingerprint})")


@credentials.command("list")
@store_options
def credentials_list(data_dir: Path, database_url: str | None) -> None:
    """List credentials: name, origin, scheme and fingerprint (never the secret)."""
    rows = _with_store(data_dir, database_url, lambda store: store.list_credentials())
    if not rows:
        click.echo("no outbound credentials; add one with: tether credentials add NAME --origin URL --secret-file FILE")
        return
    render.print_table(_console(), render.credentials_table(rows))


@credentials.command("remove")
@click.argument("name")
@store_options
def credentials_remove(name: str, data_dir: Path, database_url: str | None) -> None:
    """Forget credential NAME; a hand-off that names it fails at its next call to its peer."""
    removed = _with_store(data_dir, database_url, lambda store: store.delete_credential(name))
    if not removed:
        _fail(f"error: no credential named {name!r} (see: tether credentials list)")
    click.echo(f"removed credential {name!r}")


# --- workflows -----------------------------------------------------------------------------


@cli.group()
def workflows() -> None:
    """List the host's workflows, or validate a workflow file locally."""


@workflows.command("list")
@_json_option("Print the workflows as a JSON array.")
@host_options
def workflows_list(as_json: bool, url: str, key: str | None) -> None:
    """Workflows the running host has loaded, and whether it can execute each."""
    with _client(url, key) as client:
        body = client.get("/v1/workflows")
    items = body.get("workflows", []) if isinstance(body, dict) else []
    if as_json:
        _print_json(items)
        return
    if not items:
        click.echo("the host has no workflows loaded")
        return
    render.print_table(_console(), render.workflows_table(items))


@workflows.command("validate")
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
def workflows_validate(file: Path) -> None:
    """Check FILE against the workflow schema and what this engine can run (no host needed)."""
    from tether.engine.nodes import SUPPORTED_TYPE_IDS
    from tether.engine.workflow import executability_problems, load_workflow_file
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


# --- runs ----------------------------------------------------------------------------------


@cli.group()
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
@click.option("--json", "as_json", is_flag=True, help="Print the runs as a JSON array of RunSnapshots (for scripts).")
@host_options
def runs_list(
    status: str | None,
    workflow_id: str | None,
    limit: int,
    cursor: str | None,
    waiting_on_peer: bool,
    as_json: bool,
    url: str,
    key: str | None,
) -> None:
    """The tenant's runs, newest first."""

    query = {"status": status, "workflowId": workflow_id, "limit": limit, "cursor": cursor}
    if waiting_on_peer:
        query["waitingOn"] = "peer"
    with _client(url, key) as client:
        body = client.get("/v1/runs", query)
    items = body.get("runs", []) if isinstance(body, dict) else []
    if as_json:
        _print_json(items)
        return
    if not items:
        click.echo("no runs")
        return
    render.print_table(_console(), render.runs_table(items))
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
@click.option("--json", "as_json", is_flag=True, help="Print the RunSnapshot (with --wait) or the creation answer.")
@host_options
def runs_start(workflow_id: str, inputs: dict[str, Any], wait: bool, as_json: bool, url: str, key: str | None) -> None:
    """Start a run of WORKFLOW_ID and print its id (the last line)."""
    with _client(url, key) as client:
        created = client.post("/v1/runs", {"workflowId": workflow_id, "inputs": inputs})
        run_id = str(created.get("runId", "")) if isinstance(created, dict) else ""
        if not wait:
            if as_json:
                _print_json(created)
            else:
                click.echo(f"started run {run_id} of {workflow_id}")
                click.echo(run_id)
            return
        snapshot = _settled(client, run_id)
    if as_json:
        _print_json(snapshot)
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
@click.option("--json", "as_json", is_flag=True, help="Print the raw RunSnapshot.")
@host_options
def runs_get(run_id: str, as_json: bool, url: str, key: str | None) -> None:
    """Where RUN_ID is, what it waits for, and how it ended."""
    import json

    with _client(url, key) as client:
        snapshot = client.get(_run_path(run_id))
    if as_json:
        click.echo(json.dumps(snapshot, indent=2, ensure_ascii=False))
    else:
        click.echo(render.run_summary(snapshot))


#: the exit status of a command stopped with Ctrl-C (SIGINT), as shells report it
EXIT_INTERRUPTED = 130


@runs.command("events")
@click.argument("run_id")
@click.option(
    "--follow/--no-follow",
    default=False,
    show_default=True,
    help="Tail the live stream until the run ends (in a terminal: a live view of the run; a lost stream is "
    "re-attached).",
)
@_json_option("Print each event as one JSON object per line (JSON Lines).")
@host_options
def runs_events(run_id: str, follow: bool, as_json: bool, url: str, key: str | None) -> None:
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

    with _client(url, key) as client:
        if follow and not as_json and sys.stdout.isatty():
            from tether.cli._live import follow_live

            console = _console()
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
    _fail(f"error: run {run_id} is not waiting for {what} (status: {actual})")


def _resolve(client: HostClient, run_id: str, node_id: str, resume_value: dict[str, Any]) -> dict[str, Any]:
    result = client.post(_run_path(run_id, "interrupts", segment(node_id)), {"resumeValue": resume_value})
    return result if isinstance(result, dict) else {}


def _decide(action: str, run_id: str, comment: str | None, url: str, key: str | None) -> None:
    resume: dict[str, Any] = {"action": action}
    if comment is not None:
        resume["feedback"] = comment
    with _client(url, key) as client:
        node_id = _pending_interrupt(client, run_id, "waiting-approval", "an approval")
        result = _resolve(client, run_id, node_id, resume)
    verb = "accepted" if action == "accept" else "rejected"
    click.echo(f"{verb} run {run_id} at node {node_id!r}; run is now {result.get('status', '?')}")


@runs.command("approve")
@click.argument("run_id")
@click.option("--comment", help="Feedback recorded with the decision.")
@host_options
def runs_approve(run_id: str, comment: str | None, url: str, key: str | None) -> None:
    """Accept the approval gate RUN_ID waits at."""
    _decide("accept", run_id, comment, url, key)


@runs.command("reject")
@click.argument("run_id")
@click.option("--comment", help="Feedback recorded with the decision.")
@host_options
def runs_reject(run_id: str, comment: str | None, url: str, key: str | None) -> None:
    """Reject the approval gate RUN_ID waits at."""
    _decide("reject", run_id, comment, url, key)


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
@host_options
def runs_answer(run_id: str, answers: dict[str, str], url: str, key: str | None) -> None:
    """Answer the clarification RUN_ID waits for."""
    with _client(url, key) as client:
        node_id = _pending_interrupt(client, run_id, "waiting-input", "input")
        result = _resolve(client, run_id, node_id, {"answers": answers})
    click.echo(f"answered run {run_id} at node {node_id!r}; run is now {result.get('status', '?')}")


@runs.command("cancel")
@click.argument("run_id")
@click.option("--reason", help="Why, recorded on run.cancelled.")
@host_options
def runs_cancel(run_id: str, reason: str | None, url: str, key: str | None) -> None:
    """Cancel RUN_ID.

    A waiting run ends at once; a running one goes through cancelling.
    """
    with _client(url, key) as client:
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
@click.option(
    "--json", "as_json", is_flag=True, help="Print the purged (or, with --dry-run, purgeable) run ids as JSON."
)
@host_options
def runs_purge(before: str, dry_run: bool, as_json: bool, url: str, key: str | None) -> None:
    """Purge the tenant's finished runs that ended before TIMESTAMP, as task retention would.

    A purged run, its events and its A2A task read afterwards as an unknown id. Runs that
    have not ended, or still have a push or webhook pending, are kept.
    """
    ids: list[str] = []
    with _client(url, key) as client:
        while True:
            body = client.post("/v1/runs:purge", {"before": before, "dryRun": dry_run})
            ids += body["runIds"]
            if dry_run or not body["more"]:  # a dry run lists the first 1000 at most
                break
    if as_json:
        _print_json(ids)
        return
    for run_id in ids:
        click.echo(run_id)
    verb = "would purge" if dry_run else "purged"
    click.echo(
        f"{verb} {len(ids)} run(s) that ended before {before}"
        + (" (more left: --dry-run lists 1000)" if dry_run and len(ids) == 1000 else "")
    )


# --- push ----------------------------------------------------------------------------------


@cli.group()
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
@_json_option("Print the deliveries as a JSON array.")
@host_options
def push_list(status: str | None, kind: str | None, limit: int, as_json: bool, url: str, key: str | None) -> None:
    """Deliveries of your tenant, newest first, with their last error."""
    with _client(url, key) as client:
        body = client.get("/v1/deliveries", {"limit": limit, "status": status, "kind": kind})
    items = body.get("deliveries", []) if isinstance(body, dict) else []
    if as_json:
        _print_json(items)
        return
    if not items:
        which = " ".join(filter(None, [status and f"in state {status}", kind and f"of kind {kind}"]))
        click.echo("no deliveries" + (f" {which}" if which else ""))
        return
    render.print_table(_console(), render.deliveries_table(items))


@push.command("redeliver")
@click.argument("delivery_id")
@host_options
def push_redeliver(delivery_id: str, url: str, key: str | None) -> None:
    """Send dead letter DELIVERY_ID again, from the start of the retry ladder."""
    with _client(url, key) as client:
        client.post(f"/v1/deliveries/{segment(delivery_id)}/redeliver", {})
    click.echo(f"delivery {delivery_id}: pending again")
