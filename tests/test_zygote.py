"""The harness's zygote: its children are the processes ``subprocess.Popen`` would have started.

Each test checks that the process came from the zygote (a ``ZygoteProcess``), so a silent
fall back to Popen cannot pass for it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import zygote
from harness import HostProcess

pytestmark = [
    pytest.mark.process,
    pytest.mark.skipif(os.environ.get(zygote.SWITCH) == "0", reason=f"{zygote.SWITCH}=0 turns the zygote off"),
]

TETHER = [sys.executable, "-m", "tether"]


def _finish(proc: subprocess.Popen[bytes] | zygote.ZygoteProcess) -> tuple[int, str, str]:
    assert isinstance(proc, zygote.ZygoteProcess), "the zygote did not start it"
    assert proc.stdout is not None and proc.stderr is not None
    out, err = proc.stdout.read(), proc.stderr.read()
    proc.stdout.close()
    proc.stderr.close()
    return proc.wait(30), out.decode(), err.decode()


def test_exit_status_output_environment_and_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    code, out, _ = _finish(zygote.popen([*TETHER, "--version"], stdout=subprocess.PIPE, stderr=subprocess.PIPE))
    assert (code, out.split(",")[0]) == (0, "tether")
    code, _, err = _finish(zygote.popen([*TETHER, "no-such-command"], stdout=subprocess.PIPE, stderr=subprocess.PIPE))
    assert code == 2 and "No such command" in err

    monkeypatch.chdir(tmp_path)  # the child works where the test is, and has the environment it is given
    by_env = {**os.environ, "TETHER_DATA_DIR": str(tmp_path / "from-env")}
    code, _, err = _finish(
        zygote.popen(
            [*TETHER, "keys", "create", "--name", "k1"], env=by_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
    )
    assert code == 0, err
    code, _, err = _finish(
        zygote.popen(
            [*TETHER, "keys", "create", "--name", "k2", "--data-dir", "relative"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
    )
    assert code == 0, err
    listed = zygote.run([*TETHER, "keys", "list", "--data-dir", "from-env"], timeout=60)
    assert "k1" in listed.stdout and "k2" not in listed.stdout
    assert "k2" in zygote.run([*TETHER, "keys", "list", "--data-dir", "relative"], timeout=60).stdout


def test_signals_sessions_and_exit_codes(tmp_path: Path) -> None:
    host = HostProcess(tmp_path / "data").start()
    try:
        assert isinstance(host.proc, zygote.ZygoteProcess)
        assert os.getsid(host.pid) == os.getpgid(host.pid) == host.pid  # a session of its own, as Popen gave
        assert host.proc.poll() is None and host.http().get("/healthz").status_code == 200
        proc = host.proc
        host.kill()  # SIGKILL to its process group
        assert proc.returncode == proc.poll() == proc.wait(0) == -signal.SIGKILL
        host.start()
        assert host.stop() == 0  # SIGTERM: a graceful exit through the interpreter's own
    finally:
        host.kill()
        host.close_clients()


def test_sibling_hosts_make_different_ids(tmp_path: Path) -> None:
    """Forked from one interpreter, each host still draws its ids from a generator of its own."""
    tails: list[set[str]] = []
    for name in ("a", "b"):
        host = HostProcess(tmp_path / name).start()
        try:
            assert isinstance(host.proc, zygote.ZygoteProcess)
            made = [
                host.http(host.dev_key).post("/v1/runs", json={"workflowId": "echo", "inputs": {"prompt": "x"}})
                for _ in range(3)
            ]
            tails.append({response.json()["runId"][-15:] for response in made})  # the random bits of each id
        finally:
            host.stop()
            host.close_clients()
    assert len(tails[0]) == len(tails[1]) == 3 and not tails[0] & tails[1]


def test_an_environment_read_at_start_gets_popen(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONHASHSEED": "7"}  # the interpreter reads it before any import: no fork honours it
    proc = zygote.popen([*TETHER, "--version"], stdout=subprocess.PIPE, env=env)
    assert isinstance(proc, subprocess.Popen)
    assert proc.communicate(timeout=60)[0].startswith(b"tether") and proc.returncode == 0


def test_a_zygote_that_died_means_popen(monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    own = zygote.Zygote()  # not this worker's: the rest of its tests keep theirs
    monkeypatch.setattr(zygote, "ZYGOTE", own)
    try:
        code, out, _ = _finish(zygote.popen([*TETHER, "--version"], stdout=subprocess.PIPE, stderr=subprocess.PIPE))
        assert (code, out.split(",")[0]) == (0, "tether")
        assert own._proc is not None
        own._proc.kill()
        own._proc.wait()
        for _ in range(2):
            proc = zygote.popen([*TETHER, "--version"], stdout=subprocess.PIPE)
            assert isinstance(proc, subprocess.Popen)
            assert proc.communicate(timeout=60)[0].startswith(b"tether") and proc.returncode == 0
        assert caplog.text.count("zygote unavailable") == 1  # said once
    finally:
        own.shutdown()
