"""The ``--help`` of every ``tether`` command, pinned to ``help.txt``.

The help is the CLI's reference: an option renamed, a default changed or a command lost in a
refactor changes it, so a change to it must be a change someone chose. After a deliberate
edit, rewrite the file with ``TETHER_WRITE_HELP=1 pytest tests/cli/test_cli_help.py`` and
review its diff like code.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import click
from click.testing import CliRunner

from tether.cli.main import cli

PINNED = Path(__file__).with_name("help.txt")
#: the width click gives help text in a terminal 100 columns wide (it keeps 2 free)
TEXT_WIDTH = 98


def command_paths(command: click.Command, path: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    """Every command and group under ``command``, depth first in name order (as ``--help`` lists them)."""
    yield path
    if isinstance(command, click.Group):
        for name in sorted(command.commands):
            yield from command_paths(command.commands[name], (*path, name))


def help_text() -> str:
    """Each command's help under a header naming it, as a terminal 100 columns wide shows it."""
    pages = []
    for path in command_paths(cli):
        result = CliRunner().invoke(cli, [*path, "--help"], prog_name="tether", terminal_width=TEXT_WIDTH)
        assert result.exit_code == 0, result.output
        pages.append(f"===== tether {' '.join(path)} --help\n{result.output}")
    return "".join(pages)


def headers(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("===== ")]


def test_every_commands_help_is_as_pinned() -> None:
    text = help_text()
    if os.environ.get("TETHER_WRITE_HELP") == "1":
        PINNED.write_text(text, encoding="utf-8")
    pinned = PINNED.read_text(encoding="utf-8")
    assert headers(text) == headers(pinned), "a command was added or lost"
    assert text == pinned, "the CLI's help changed; if on purpose, rewrite tests/cli/help.txt with TETHER_WRITE_HELP=1"


def test_embedding_serve_leaves_its_help_alone() -> None:
    """``serve_settings`` (how tests and benchmarks embed the host) must not take ``-h`` from ``tether serve``.

    click keeps the first help option a command makes, and one made outside the root group had only
    ``--help``. A fresh interpreter, so no earlier test has made it first.
    """
    script = (
        "from click.testing import CliRunner\n"
        "from tether.cli.main import cli\n"
        "from tether.cli.serve import serve_settings\n"
        "serve_settings(['--port', '0'])\n"
        "result = CliRunner().invoke(cli, ['serve', '-h'], prog_name='tether')\n"
        "print(result.exit_code, result.output)\n"
    )
    shown = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True)
    assert shown.stdout.startswith("0 Usage: tether serve [OPTIONS]"), shown.stdout
    assert "-h, --help" in shown.stdout
