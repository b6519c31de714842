"""How a command ends and prints: its exit statuses, its one-line errors, its tables and its ``--json``.

The statuses are stable so scripts can branch on them: 1, refused or failed; 2, the host or a
required argument is missing; 130, stopped with Ctrl-C.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NoReturn, TypeVar

import click
from rich.console import Console

F = TypeVar("F", bound=Callable[..., Any])

EXIT_FAILED = 1
EXIT_UNREACHABLE = 2
#: the exit status of a command stopped with Ctrl-C (SIGINT), as shells report it
EXIT_INTERRUPTED = 130


def fail(message: str, status: int = EXIT_FAILED) -> NoReturn:
    """End the command with ``message`` (one ``error: ...`` line) on stderr and exit ``status``."""
    click.echo(message, err=True)
    raise click.exceptions.Exit(status)


def new_console() -> Console:
    # Built per call so output goes to whatever sys.stdout is now (CliRunner swaps it).
    return Console(highlight=False)


def json_option(help_text: str) -> Callable[[F], F]:
    """``--json``: the listing as JSON on stdout, for scripts (every listing command has it)."""
    return click.option("--json", "as_json", is_flag=True, help=help_text)


def print_json(value: Any) -> None:
    import json

    click.echo(json.dumps(value, indent=2, ensure_ascii=False))
