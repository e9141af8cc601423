"""`python -m lightx2v.serve`: the supervisor stack in the foreground, stopped by Ctrl-C; clear errors."""

from __future__ import annotations

import os
import re
import shlex
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from lightx2v import serve

from conftest import REPO_ROOT, free_port, subprocess_env
from helpers.procs import Server, alive, answers, descendants, process_group, runs, supervisor_stop_bound, wait_until

CAPTURE = REPO_ROOT / "tests" / "helpers" / "capture.py"


def run_serve(*args: str, cwd, **env) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "lightx2v.serve", *args], cwd=cwd, env=subprocess_env(**env),
                          capture_output=True, text=True, timeout=60)


def test_missing_config_is_a_clear_error(tmp_path):
    result = run_serve(cwd=tmp_path, LIGHTX2V_SUPERVISOR_CONF=str(tmp_path / "nope.conf"))
    assert result.returncode != 0
    assert "nope.conf not found" in result.stderr and "source tree" in result.stderr
    assert "Traceback" not in result.stderr


def test_busy_port_is_a_clear_error(tmp_path):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        result = run_serve("--host", "127.0.0.1", "--port", str(port), cwd=tmp_path)
    assert result.returncode == 2
    assert f"cannot use port {port} for the TensorBoard" in result.stderr and "--port" in result.stderr
    assert "Traceback" not in result.stderr


def test_bad_port_value(tmp_path):
    result = run_serve("--port", "70000", cwd=tmp_path)
    assert result.returncode == 2 and "--port must be 1-65535" in result.stderr


@pytest.mark.slow
def test_serve_runs_the_stack_and_ctrl_c_stops_it(tmp_path):
    """A failing inference leaves TensorBoard up; a capture made meanwhile shows; Ctrl-C stops it all."""
    tb, browser = free_port(), free_port()
    serve = Server([sys.executable, "-m", "lightx2v.serve", "--host", "127.0.0.1", "--port", str(tb),
                    "--browser-port", str(browser), "--infer-cmd", f"{sys.executable} {CAPTURE} --fail"],
                   cwd=tmp_path, TENSORBOARD_PORT="", LIGHTX2V_TORCH_PROFILE_DIR="", LIGHTX2V_INFER_CMD="")
    try:
        wait_until(lambda: answers(tb) and answers(browser), 90, what="TensorBoard and the trace browser")
        wait_until(lambda: "exited: inference (exit status 3; not expected)" in serve.output(), 60,
                   what="the failing inference")
        out = serve.output()
        assert f"http://127.0.0.1:{tb}/#pytorch_profiler" in out and f"http://127.0.0.1:{browser}/" in out
        assert f"ssh -N -L 16006:127.0.0.1:{tb} -L 9001:127.0.0.1:{browser}" in out
        sock = re.search(r"supervisorctl -s (unix://\S+) status", out).group(1)

        def status():
            return subprocess.run([sys.executable, "-m", "supervisor.supervisorctl", "-s", sock, "status"],
                                  capture_output=True, text=True, timeout=30).stdout

        wait_until(lambda: re.search(r"tensorboard\s+RUNNING", status()), 30, what="tensorboard RUNNING")
        assert re.search(r"inference\s+EXITED", status())

        subprocess.run([sys.executable, str(CAPTURE), "save_results/torch_profile", "by_hand"], cwd=tmp_path,
                       env=subprocess_env(), check=True, capture_output=True, timeout=300)
        wait_until(lambda: "by_hand" in runs(tb), 30, what="a capture made while serving")

        tree = descendants(serve.pid)
        groups = {g for g in (_pgid(p) for p in tree) if g}
        serve.proc.send_signal(signal.SIGINT)  # what Ctrl-C sends to the foreground process
        # the mechanism, not a stopwatch: exit 0 within the conf's worst case, every program ended by SIGTERM
        assert serve.proc.wait(supervisor_stop_bound(REPO_ROOT / "docker" / "supervisord.conf")) == 0
        assert "SIGKILL" not in serve.output(), serve.output()[-2000:]
        wait_until(lambda: not any(alive(pid) for pid in tree), 10, what="every child to be gone")
        assert not any(process_group(g) for g in groups)
        assert not Path(sock.removeprefix("unix://")).parent.exists()
    finally:
        serve.stop()


def _pgid(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except OSError:
        return None


# --- what the user's terminal, file or pipe gets, and a stop whatever it is connected to -----------------------

_SUPERVISOR_LINE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} (CRIT|ERRO|WARN|INFO|DEBG|TRAC|BLAT) \S")


class _ShellServe:
    """`lightx2v-serve` as a shell runs it, its output sent where `tail` says (`> log 2>&1`, `2>&1 | tee log`),
    in its own session like a terminal's job, with a $TMPDIR too deep for a Unix socket (serve's run folder
    moves to /tmp then)."""

    def __init__(self, base: Path, tail: str):
        self.cwd, self.tmp = base / "cwd", base / "tmp"
        self.cwd.mkdir(parents=True)
        self.tmp.mkdir()
        assert len(str(self.tmp)) > serve.SOCKET_PATH_MAX - len("/lightx2v-serve-XXXXXXXX/supervisor.sock")
        self.tb, self.browser = free_port(), free_port()
        command = (f"set -o pipefail; {shlex.quote(sys.executable)} -m lightx2v.serve --host 127.0.0.1 "
                   f"--port {self.tb} --browser-port {self.browser} --no-inference {tail}")
        self.shell = subprocess.Popen(["bash", "-c", command], cwd=self.cwd, start_new_session=True,
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                      env=subprocess_env(TMPDIR=str(self.tmp), TENSORBOARD_PORT="",
                                                         LIGHTX2V_TORCH_PROFILE_DIR="", LIGHTX2V_INFER_CMD=""))

    def serve_pid(self) -> int:
        for pid in descendants(self.shell.pid):
            try:  # the interpreter running lightx2v.serve (bash's own command line names it too)
                if Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[1:3] == [b"-m", b"lightx2v.serve"]:
                    return pid
            except OSError:
                continue
        raise AssertionError("no lightx2v.serve process under the shell")

    def wait_running(self) -> None:
        """Both servers answer and supervisord says both programs RUNNING (past startsecs: their start lines
        are written)."""
        wait_until(lambda: answers(self.tb) and answers(self.browser), 90, what="TensorBoard and the trace browser")

        def running():
            sock = re.search(r"supervisorctl -s (unix://\S+) status", (self.cwd / "serve.log").read_text())
            status = subprocess.run([sys.executable, "-m", "supervisor.supervisorctl", "-s", sock.group(1),
                                     "status"], capture_output=True, text=True, timeout=30).stdout
            return re.search(r"tensorboard\s+RUNNING", status) and re.search(r"trace_browser\s+RUNNING", status)

        wait_until(running, 60, what="tensorboard and trace_browser RUNNING")

    def finish(self) -> int:
        try:
            return self.shell.wait(supervisor_stop_bound(REPO_ROOT / "docker" / "supervisord.conf"))
        finally:
            self.kill()

    def kill(self) -> None:
        """Whatever of this run still lives, by the $TMPDIR only its processes have (a failed test must not
        leave servers behind: supervisord runs in a session of its own)."""
        if self.shell.poll() is None:
            os.killpg(self.shell.pid, signal.SIGKILL)
        mark = f"TMPDIR={self.tmp}".encode()
        for entry in os.listdir("/proc"):
            try:
                if entry.isdigit() and mark in Path(f"/proc/{entry}/environ").read_bytes().split(b"\0"):
                    os.kill(int(entry), signal.SIGKILL)
            except OSError:
                continue

    def normalized(self, log: str) -> tuple[list[str], list[str]]:
        """(supervisord's own lines, every other line with its paths and numbers made alike)."""
        own, others = [], []
        for line in (self.cwd / log).read_text(errors="replace").splitlines():
            if _SUPERVISOR_LINE.match(line):
                own.append(line)
                continue
            line = re.sub(r"lightx2v-serve-\w+", "RUN", line.replace(str(self.cwd), "CWD"))
            others.append(re.sub(r"\d+", "N", line))
        return own, sorted(others)


@pytest.mark.slow
def test_a_log_redirected_to_a_file_holds_every_line_a_piped_one_does(tmp_path):
    """`lightx2v-serve > serve.log 2>&1` (as nohup runs a server) against `... 2>&1 | cat > serve.log`: the
    programs under supervisord reopen /dev/stdout, which for a file opened by `>` is a new file at offset 0 that
    overwrote the lines written before. Every line must arrive whole, the same lines either way."""
    runs = {"file": _ShellServe(tmp_path / "file", "> serve.log 2>&1"),
            "pipe": _ShellServe(tmp_path / "pipe", "2>&1 | cat > serve.log")}
    try:
        for run in runs.values():
            run.wait_running()
        for run in runs.values():
            os.kill(run.serve_pid(), signal.SIGINT)  # Ctrl-C to serve alone: cat stays to take the last lines
        assert [run.finish() for run in runs.values()] == [0, 0]
    finally:
        for run in runs.values():
            run.kill()
    (file_own, file_lines), (pipe_own, pipe_lines) = (run.normalized("serve.log") for run in runs.values())
    assert file_lines == pipe_lines
    for needed in ("Trace browser: http://N.N.N.N:N/", "lightxNv.tensorboard: plugin fixes applied",
                   "NOTE: Using experimental fast data loading logic", "serve: SIGINT received",
                   "TensorBoard caught SIGTERM"):
        assert any(line.startswith(needed) for line in file_lines), (needed, file_lines)
    assert any("stopped: tensorboard" in line for line in file_own), file_own


@pytest.mark.slow
def test_ctrl_c_of_serve_piped_into_tee_stops_the_whole_stack(tmp_path):
    """`lightx2v-serve 2>&1 | tee serve.log`, then Ctrl-C: SIGINT to the whole foreground group, so tee dies
    first and every later write of the stack meets a closed pipe. Nothing of the stack may stay running."""
    run = _ShellServe(tmp_path, "2>&1 | tee serve.log")
    try:
        run.wait_running()
        tree = descendants(run.shell.pid)
        os.killpg(run.shell.pid, signal.SIGINT)  # what a terminal's Ctrl-C sends
        run.shell.wait(supervisor_stop_bound(REPO_ROOT / "docker" / "supervisord.conf"))
        wait_until(lambda: not any(alive(pid) for pid in tree), 15, what="every process of the stack to be gone")
        assert not answers(run.tb) and not answers(run.browser)
    finally:
        run.kill()


def test_what_the_stack_leaves_in_its_session_is_stopped_and_named():
    """The last resort behind a clean stop: supervisord gone (here: killed), a program's helper still running
    and deaf to SIGTERM; stop_leftovers ends it and says what it was."""
    deaf = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(60)"
    leader = subprocess.Popen(["sh", "-c", f"{shlex.quote(sys.executable)} -c {shlex.quote(deaf)} & wait"],
                              start_new_session=True)
    wait_until(lambda: descendants(leader.pid), 10, what="the helper")
    helper = next(iter(descendants(leader.pid)))
    leader.kill()
    leader.wait(10)
    assert alive(helper)
    left = serve.stop_leftovers(leader.pid, grace=0.5)
    assert any(f"(pid {helper})" in name for name in left), left
    wait_until(lambda: not alive(helper), 5, what="the helper to be gone")
    assert serve.stop_leftovers(leader.pid, grace=0.5) == []
