"""The README's first screen holds: the hand-off walkthrough, pasted twice into one shell, works both times,
and with its port taken it gives up at once with the host's own reason.

The code block is read from README.md and run unchanged by a real ``bash``, against real
``tether serve`` processes (the walkthrough SIGKILLs one and starts another). Its port and
data directory are set the way a user would set them: ``DEMO_PORT`` and ``DEMO_DIR`` in
the shell before pasting.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
_BLOCK = re.compile(r"## A hand-off, in one terminal\s+```bash\n(.*?)```", re.DOTALL)
#: a line of the host's log (text format): the walkthrough keeps them in its log file, out of the way
_LOG_LINE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} [A-Z]+ ", re.MULTILINE)
#: the walkthrough gives up on a host that cannot start within this many seconds (it took about 1 s here)
GIVES_UP_WITHIN = 8.0

needs_a_shell = pytest.mark.skipif(
    shutil.which("curl") is None or shutil.which("bash") is None, reason="needs bash and curl"
)


def walkthrough() -> str:
    match = _BLOCK.search(README.read_text(encoding="utf-8"))
    assert match, "README.md has no 'A hand-off, in one terminal' bash block"
    return match.group(1)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def paste(script: str, folder: Path, port: int, timeout: float) -> tuple[str, str]:
    """Run ``script`` in a fresh ``bash`` whose user set ``DEMO_PORT`` and ``DEMO_DIR`` first; (stdout, stderr)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TETHER_", "DEMO_"))}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"  # this checkout's `tether`
    typed_first = f"DEMO_PORT={port} DEMO_DIR={folder / 'demo'}\n"
    shell = subprocess.Popen(
        ["bash"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=folder,
        start_new_session=True,
    )
    try:
        return shell.communicate(typed_first + script, timeout=timeout)
    finally:
        if shell.poll() is None:
            os.killpg(shell.pid, signal.SIGKILL)  # the shell and every host it started
            shell.communicate(timeout=10)


def test_the_walkthrough_names_its_port_and_data_directory_once() -> None:
    code = re.sub(r"\s+#\s.*$", "", walkthrough(), flags=re.MULTILINE)  # without its comments
    assert code.count("8080") == 1 and code.count("/tmp/tether-demo") == 1, "one variable each"
    assert "DEMO_PORT=${DEMO_PORT:-8080}" in code and "DEMO_DIR=${DEMO_DIR:-/tmp/tether-demo}" in code


@needs_a_shell
def test_the_walkthrough_pasted_twice_succeeds_both_times_and_reads_cleanly(tmp_path: Path) -> None:
    block = walkthrough()
    out, err = paste(f"{block}\necho '=== pasted again ==='\n{block}", tmp_path, free_port(), timeout=100)
    first, _, second = out.partition("=== pasted again ===")
    assert second, f"the second paste never ran:\n{out}\n{err}"
    for paste_output in (first, second):
        task_states = re.findall(r'"state":"([a-z-]+)"', paste_output)
        # sent: input-required; read after the crash: still input-required; answered: completed
        assert task_states[:2] == ["input-required", "input-required"], paste_output
        assert task_states[-1] == "completed", paste_output
        assert "approval.granted" in paste_output or "interrupt.resolved" in paste_output, paste_output
        assert "run.completed" in paste_output, paste_output
        served = re.findall(
            r"^tether: resumed (\d+) unfinished run\(s\); serving on (\S+)$", paste_output, re.MULTILINE
        )
        assert [count for count, _ in served] == ["0", "1"], "ready shows each start, and the crash resumed the task"
        assert "tether: stopped; every acknowledged run is on disk" in paste_output
    assert "Traceback" not in err and "error:" not in err, err
    assert not _LOG_LINE.search(out) and not _LOG_LINE.search(err), "the host's log lines stay in its log file"
    assert _LOG_LINE.search((tmp_path / "demo.log").read_text()), "...where they are"


@needs_a_shell
def test_with_its_port_taken_ready_gives_up_in_seconds_with_the_hosts_own_line(tmp_path: Path) -> None:
    block = walkthrough()
    start = "serve; ready"
    assert start in block, "the walkthrough starts its host with `serve; ready`"
    until_ready = block[: block.index(start) + len(start)]  # the walkthrough up to its first `ready`, as written
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        began = time.monotonic()
        out, err = paste(f'{until_ready}\necho "ready: $?"\n', tmp_path, port, timeout=60)
        took = time.monotonic() - began
    assert out.splitlines() == [
        f"tether: error: port {port} on 127.0.0.1 is already in use (another `tether serve`?): "
        "stop that process, or pick another --port",
        "ready: 1",
    ], (out, err)
    assert err == "", err
    assert took < GIVES_UP_WITHIN, f"ready took {took:.1f} s to give up"


def test_the_first_screen_says_which_python_and_to_use_a_virtual_environment() -> None:
    first_screen = README.read_text(encoding="utf-8").split("## A hand-off, in one terminal")[0]
    requires = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["requires-python"]
    assert requires == ">=3.11" and "Python 3.11+" in first_screen
    assert "python3 -m venv .venv && . .venv/bin/activate" in first_screen
    before_the_commands = first_screen.split("```bash")[0]
    assert "virtual environment" in before_the_commands, "said before the two commands that need it"
