"""`python -m lightx2v.serve`: the supervisor stack in the foreground, stopped by Ctrl-C; clear errors."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

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
        assert f"ssh -N -L {tb}:127.0.0.1:{tb} -L {browser}:127.0.0.1:{browser}" in out
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
