"""The README's hand-off walkthrough, pasted twice into one shell, works both times.

The code block is read from README.md and run unchanged by a real ``bash``, except for
its port and data directory (a free port of this machine, a directory of this test),
against real ``tether serve`` processes: the walkthrough SIGKILLs one and starts another.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[2] / "README.md"
_BLOCK = re.compile(r"## A hand-off, in one terminal\s+```bash\n(.*?)```", re.DOTALL)


def walkthrough() -> str:
    match = _BLOCK.search(README.read_text(encoding="utf-8"))
    assert match, "README.md has no 'A hand-off, in one terminal' bash block"
    return match.group(1)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@pytest.mark.skipif(shutil.which("curl") is None or shutil.which("bash") is None, reason="needs bash and curl")
def test_the_walkthrough_pasted_twice_succeeds_both_times(tmp_path: Path) -> None:
    block = walkthrough()
    assert "8080" in block and "/tmp/tether-demo" in block
    port = str(free_port())
    block = block.replace("/tmp/tether-demo", str(tmp_path / "demo")).replace("8080", port)
    block = block.replace("tether serve ", f"tether serve --port {port} ")  # the README relies on the default
    script = f"{block}\necho '=== pasted again ==='\n{block}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("TETHER_")}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"  # this checkout's `tether`
    shell = subprocess.Popen(
        ["bash"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=tmp_path,
        start_new_session=True,
    )
    try:
        out, err = shell.communicate(script, timeout=100)
    finally:
        if shell.poll() is None:
            os.killpg(shell.pid, signal.SIGKILL)  # the shell and every host it started
            shell.communicate(timeout=10)
    first, _, second = out.partition("=== pasted again ===")
    assert second, f"the second paste never ran:\n{out}\n{err}"
    for paste in (first, second):
        task_states = re.findall(r'"state":"([a-z-]+)"', paste)
        # sent: input-required; read after the crash: still input-required; answered: completed
        assert task_states[:2] == ["input-required", "input-required"], paste
        assert task_states[-1] == "completed", paste
        assert "approval.granted" in paste or "interrupt.resolved" in paste, paste
        assert "run.completed" in paste, paste
    assert "Traceback" not in err and "error:" not in err, err
