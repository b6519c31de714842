"""``tether serve``: run the host, each option a field of ``Settings`` of the same name.

``serve_settings`` parses a ``serve`` command line into those ``Settings`` without serving,
so tests and benchmarks embed the host with the very parser, defaults and checks operators use.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from tether.cli._output import EXIT_UNREACHABLE, fail
from tether.cli._reach import store_options
from tether.settings import Settings


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


@click.command()
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
    "--a2a-skill",
    "a2a_skills",
    multiple=True,
    help="Only this workflow is an A2A skill (repeatable; a seeded fixture too) [default: every loaded workflow].",
)
@click.option(
    "--a2a-request-timeout",
    default=30.0,
    show_default=True,
    type=click.FloatRange(min=0, min_open=True),
    help="Seconds a blocking A2A message/send waits for the run.",
)
@click.option(
    "--a2a-minimum-version",
    default="1.0",
    show_default=True,
    type=click.Choice(["1.0", "0.3"]),
    help="Lowest A2A version a hand-off may speak: a peer offering only older ones fails the node "
    "(interop_version_unsupported) and is sent nothing. 0.3 lets hand-offs reach legacy peers and takes "
    "the a2a record off the v2 discovery root.",
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
    "--test-handoff-pause-file",
    type=click.Path(dir_okay=False, path_type=Path),
    hidden=True,  # for the crash tests, never for operators
    help="With --enable-test-seams: every hand-off touches this file after its send, then waits there forever "
    "(before it records the peer's task), so that a test can kill the host exactly there.",
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
        fail(f"error: {refused.message}", EXIT_UNREACHABLE)
    from tether import failpoints

    try:
        failpoints.arm_from_environment(settings.enable_test_seams)
    except ValueError as refused_failpoint:
        fail(f"error: {refused_failpoint}", EXIT_UNREACHABLE)
    run_host(settings)


#: bind addresses that accept callers from anywhere: the card's URL cannot be guessed from them
_WILDCARDS = ("0.0.0.0", "::", "")


def _serve_settings(params: dict[str, Any]) -> Settings:
    """``Settings`` from the parsed ``serve`` options: each option is the field of the same name."""
    if (params.get("tls_certfile") is None) != (params.get("tls_keyfile") is None):
        raise click.UsageError("--tls-certfile and --tls-keyfile go together")
    if params.get("test_handoff_pause_file") is not None and not params["enable_test_seams"]:
        raise click.UsageError("--test-handoff-pause-file is a test seam: it needs --enable-test-seams")
    if params["host"] in _WILDCARDS and not params["public_url"]:
        raise click.UsageError(
            f"--host {params['host'] or '(all)'} serves callers on other machines, but the agent card and links "
            "would point them at 127.0.0.1: also give --public-url (the URL they reach this host at), "
            "e.g. --public-url https://tether.example.com"
        )
    return Settings(**{**params, "egress_allow_cidrs": tuple(params["egress_allow_cidrs"])})


def serve_settings(args: list[str]) -> Settings:
    """The ``Settings`` that ``tether serve ARGS`` would run with: the same parser, defaults and checks.

    For embedding the host (tests serve it in-process) without copying the option list. The
    context has no help option: click keeps the first one a command makes, and one made here,
    outside the root group's ``-h, --help``, would take ``-h`` from ``tether serve`` in this process.
    """
    with serve.make_context("serve", list(args), help_option_names=[]) as ctx:
        return _serve_settings(ctx.params)
