"""``tether runs events --follow``: a live view in a terminal, the old lines through a pipe.

The CLI runs as a real ``tether`` process against a real host on loopback: under a
pseudo-terminal (``os.openpty``) it must draw the run, its nodes and what it waits for,
redraw when another client answers the gate, leave the finished view on screen and exit
0; Ctrl-C must end it with 130 and no traceback. Through a pipe it must print exactly
what it always printed, one line per event, even when the connection drops half-way
(it re-attaches after the last event it saw: nothing twice, nothing missed).
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import selectors
import signal
import socket
import struct
import subprocess
import sys
import termios
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from harness import wait_until
from inproc import InProcessHost

from tether.cli._render import event_line

#: every control sequence rich writes: colours, cursor moves, line erasures, cursor show/hide
_CONTROL = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
#: what rich writes to erase the lines of the previous frame before it draws the next
_ERASE_LINE = "\x1b[2K"
_COLUMNS, _ROWS = 140, 50


@pytest.fixture(scope="module")
def host(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessHost]:
    with InProcessHost(tmp_path_factory.mktemp("cli-follow") / "data") as started:
        yield started


def _env() -> dict[str, str]:
    """The test's own environment (PYTHONPATH: the code under test) as an xterm that sets no rich overrides."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("FORCE_COLOR", "NO_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE", "COLUMNS", "LINES")
    }
    env["TERM"] = "xterm-256color"
    for name in ("TETHER_URL", "TETHER_API_KEY", "TETHER_DATA_DIR", "TETHER_DATABASE_URL"):
        env.pop(name, None)
    return env


def _tether(*args: str) -> list[str]:
    return [sys.executable, "-m", "tether", *args]


def start_waiting_run(host: InProcessHost) -> str:
    created = host.http(host.dev_key).post(
        "/v1/runs", json={"workflowId": "approval-gated", "inputs": {"prompt": "ship it"}}
    )
    assert created.status_code == 201, created.text
    run_id: str = created.json()["runId"]
    wait_until(
        lambda: host.http(host.dev_key).get(f"/v1/runs/{run_id}").json()["status"] == "waiting-approval",
        what="the run to wait at its gate",
    )
    return run_id


def approve(host: InProcessHost, run_id: str) -> None:
    answered = host.http(host.dev_key).post(
        f"/v1/runs/{run_id}/interrupts/gate", json={"resumeValue": {"action": "accept"}}
    )
    assert answered.status_code == 200, answered.text


class Terminal:
    """A ``tether`` process whose stdin, stdout and stderr are a pseudo-terminal of a fixed size."""

    def __init__(self, args: list[str]) -> None:
        master, slave = os.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", _ROWS, _COLUMNS, 0, 0))
        self.master = master
        self.proc = subprocess.Popen(
            args, stdin=slave, stdout=slave, stderr=slave, env=_env(), close_fds=True, start_new_session=True
        )
        os.close(slave)
        self._raw = bytearray()
        self._lock = threading.Lock()
        self._reader = threading.Thread(target=self._read, name="test-pty-reader", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        while True:
            try:
                chunk = os.read(self.master, 65536)
            except OSError:  # EIO: every writer of the slave side has closed it
                return
            if not chunk:
                return
            with self._lock:
                self._raw += chunk

    @property
    def raw(self) -> str:
        with self._lock:
            return self._raw.decode("utf-8", "replace")

    def text(self) -> str:
        """Everything written, control sequences removed (every frame drawn, in order)."""
        return _CONTROL.sub("", self.raw)

    def screen(self) -> str:
        """The frame on screen now: what was drawn after the previous frame was erased."""
        raw = self.raw
        return _CONTROL.sub("", raw[raw.rfind(_ERASE_LINE) + len(_ERASE_LINE) :] if _ERASE_LINE in raw else raw)

    def shows(self, *needles: str) -> str | None:
        screen = self.screen()
        return screen if all(n in screen for n in needles) else None

    def wait(self, timeout: float = 30.0) -> int:
        code = self.proc.wait(timeout)
        self._reader.join(10)
        return code

    def close(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)
        self._reader.join(10)
        os.close(self.master)


def _node_row(screen: str, node: str) -> list[str]:
    """The cells of ``node``'s row in the nodes table on ``screen``."""
    for line in screen.splitlines():
        cells = line.split()
        if cells and cells[0] == node:
            return cells
    raise AssertionError(f"no row for node {node!r} in:\n{screen}")


def test_in_a_terminal_follow_is_a_live_view_that_ends_with_the_run(host: InProcessHost) -> None:
    assert host.dev_key
    run_id = start_waiting_run(host)
    terminal = Terminal(_tether("runs", "events", run_id, "--follow", "--url", host.url, "--key", host.dev_key))
    try:
        waiting = wait_until(
            lambda: terminal.shows("waiting-approval", f"tether runs approve {run_id}", "interrupt.requested"),
            what="the view of a run at its approval gate",
        )
        assert f"run {run_id}" in waiting and "workflow approval-gated" in waiting
        assert _node_row(waiting, "draft")[1:3] == ["core.identity", "done"]
        assert _node_row(waiting, "gate")[1:3] == ["core.approvalGate", "waiting"]
        assert _node_row(waiting, "publish")[1:] == ["core.noop", "pending"], "a node not reached yet is listed"
        assert "Approve the draft" in waiting, "the gate's title is shown"

        approve(host, run_id)  # from another client
        assert terminal.wait() == 0
        final = terminal.screen()
        assert "status completed" in final and "run completed at " in final, final
        assert _node_row(final, "gate")[1:3] == ["core.approvalGate", "done"]
        assert _node_row(final, "publish")[1:3] == ["core.noop", "done"]
        assert _node_row(final, "on-reject")[1:3] == ["core.noop", "skipped"]
        assert "tether runs approve" not in final, "nothing is waited for any more"
        assert "run.completed" in final, "the latest events include the end"
        text = terminal.text()
        assert text.index("waiting-approval") < text.rindex("status completed"), "the status changed on screen"
        assert "Traceback" not in text
    finally:
        terminal.close()


def test_ctrl_c_stops_watching_with_130_and_no_traceback(host: InProcessHost) -> None:
    assert host.dev_key
    run_id = start_waiting_run(host)
    terminal = Terminal(_tether("runs", "events", run_id, "--follow", "--url", host.url, "--key", host.dev_key))
    try:
        wait_until(lambda: terminal.shows("waiting-approval"), what="the live view")
        os.killpg(terminal.proc.pid, signal.SIGINT)  # what the terminal sends its foreground group on Ctrl-C
        assert terminal.wait() == 130
        text = terminal.text()
        assert "Traceback" not in text and "KeyboardInterrupt" not in text and "Aborted" not in text
        assert f"stopped watching; the run goes on (tether runs get {run_id})" in text
        assert "waiting-approval" in terminal.screen(), "the last view stays on screen"
    finally:
        terminal.close()
    assert host.http(host.dev_key).get(f"/v1/runs/{run_id}").json()["status"] == "waiting-approval"


def _old_lines(host: InProcessHost, run_id: str) -> str:
    """What ``runs events --follow`` printed through a pipe before the live view: one ``event_line`` per event."""
    page = host.http(host.dev_key).get(f"/v1/runs/{run_id}/events/poll", params={"timeout": 0}).json()
    assert page["isComplete"]
    return "".join(event_line(event) + "\n" for event in page["events"])


def test_through_a_pipe_follow_prints_the_same_lines_as_before(host: InProcessHost) -> None:
    assert host.dev_key
    run_id = start_waiting_run(host)
    follow = subprocess.Popen(
        _tether("runs", "events", run_id, "--follow", "--url", host.url, "--key", host.dev_key),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=_env(),
    )
    try:
        approve(host, run_id)
        out, err = follow.communicate(timeout=60)
    finally:
        if follow.poll() is None:
            follow.kill()
            follow.communicate()
    assert follow.returncode == 0, err
    assert out.decode() == _old_lines(host, run_id)
    assert b"\x1b" not in out, "no control sequences in a pipe"
    first = out.decode().splitlines()[0]
    assert re.fullmatch(r'   0  \d\d:\d\d:\d\d\.\d{3}  run\.started {13}- {13}\{"workflowId":.*', first), first
    as_json = subprocess.run(
        _tether("runs", "events", run_id, "--follow", "--json", "--url", host.url, "--key", host.dev_key),
        capture_output=True,
        env=_env(),
        timeout=60,
        check=True,
    )
    events = [json.loads(line) for line in as_json.stdout.splitlines()]
    assert [e["sequence"] for e in events] == list(range(len(events))) and events[-1]["type"] == "run.completed"


class SeverableProxy:
    """A TCP forwarder on loopback whose connections the test can cut, as a flaky network would."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.accepted = 0
        self._open: list[socket.socket] = []
        self._lock = threading.Lock()
        self._stopped = False
        threading.Thread(target=self._accept, name="test-proxy", daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", self.target_port))
            with self._lock:
                self.accepted += 1
                self._open += [client, upstream]
            threading.Thread(target=self._pump, args=(client, upstream), daemon=True).start()

    @staticmethod
    def _pump(a: socket.socket, b: socket.socket) -> None:
        selector = selectors.DefaultSelector()
        selector.register(a, selectors.EVENT_READ, b)
        selector.register(b, selectors.EVENT_READ, a)
        try:
            while True:
                for key, _ in selector.select():
                    data = key.fileobj.recv(65536)  # type: ignore[union-attr]
                    if not data:
                        return
                    key.data.sendall(data)
        except OSError:
            return
        finally:
            selector.close()
            for end in (a, b):
                end.close()

    def sever(self) -> None:
        """Cut every connection open now (both ends, at once)."""
        with self._lock:
            cut, self._open = self._open, []
        for end in cut:
            try:
                end.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def close(self) -> None:
        self.listener.close()
        self.sever()


def test_a_lost_connection_is_re_attached_after_the_last_event_seen(host: InProcessHost, tmp_path: Path) -> None:
    assert host.dev_key and host.settings is not None
    run_id = start_waiting_run(host)
    proxy = SeverableProxy(host.settings.port)
    out_path = tmp_path / "out.txt"
    with open(out_path, "wb") as out:
        follow = subprocess.Popen(
            _tether(
                "runs", "events", run_id, "--follow", "--url", f"http://127.0.0.1:{proxy.port}", "--key", host.dev_key
            ),
            stdout=out,
            stderr=subprocess.PIPE,
            env=_env(),
        )
    try:
        wait_until(lambda: b"interrupt.requested" in out_path.read_bytes(), what="the stream up to the gate")
        proxy.sever()
        wait_until(lambda: proxy.accepted >= 2, what="the CLI to connect again")
        approve(host, run_id)
        _, err = follow.communicate(timeout=60)
    finally:
        if follow.poll() is None:
            follow.kill()
            follow.communicate()
        proxy.close()
    assert follow.returncode == 0, err
    assert out_path.read_text() == _old_lines(host, run_id), "every event once, in order, across the re-attach"
    assert b"note: lost the stream" in err and b"re-attaching after event" in err
