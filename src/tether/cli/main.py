"""The ``tether`` command: the root group, which adds one group of commands per module.

``serve`` runs the host; ``keys`` and ``credentials`` work on its store directly; ``workflows``,
``runs`` and ``push`` talk to a running host through its REST API (``_reach`` holds both ways
in). Every failure a command can meet ends the same way, in ``TetherCli.invoke``: one
``error: ...`` line on stderr and a stable exit status (``_output``), so scripts can branch on
it and humans read one line instead of a traceback.
"""

from __future__ import annotations

from typing import Any

import click

from tether.cli._client import HostError, HostUnreachable
from tether.cli._output import EXIT_UNREACHABLE, fail
from tether.cli.certify import certify
from tether.cli.credentials import credentials
from tether.cli.keys import keys
from tether.cli.push import push
from tether.cli.runs import runs
from tether.cli.serve import serve
from tether.cli.workflows import workflows
from tether.errors import TetherError


class TetherCli(click.Group):
    """The root group: turns the errors commands may raise into one stderr line and an exit status."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except HostError as exc:
            fail(f"error: {exc.message} ({exc.code}, HTTP {exc.status})")
        except HostUnreachable as exc:
            fail(
                f"error: cannot reach Tether at {exc.url} ({exc.reason}); is `tether serve` running there? "
                "(set --url or TETHER_URL)",
                EXIT_UNREACHABLE,
            )
        except TetherError as exc:
            fail(f"error: {exc.message}")


@click.group(cls=TetherCli, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(package_name="tether", prog_name="tether")
def cli() -> None:
    """Tether: a host for OpenWOP workflows whose runs are durable A2A tasks."""


def main() -> None:
    """Console-script entry point (``tether``, ``python -m tether``)."""
    cli(prog_name="tether")


cli.add_command(serve)
cli.add_command(keys)
cli.add_command(credentials)
cli.add_command(workflows)
cli.add_command(runs)
cli.add_command(push)
cli.add_command(certify)
