"""Bad input to the servers is one clear line and exit 2, never a traceback and never a silent surprise: a
`--root` that is missing or a file, and a fix name `LIGHTX2V_TB_SKIP_FIXES` does not know."""

from __future__ import annotations

import socket
import subprocess
import sys
import time

import pytest

from lightx2v.tensorboard.patches import FIXES

from conftest import free_port, subprocess_env
from helpers.procs import Server, http_get, wait_until


def trace_browser(*args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "lightx2v.trace_browser", "--port", str(free_port()), *args],
                          env=subprocess_env(**env), capture_output=True, text=True, timeout=60)


def one_error_line(result: subprocess.CompletedProcess) -> str:
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    (line,) = [line for line in result.stderr.splitlines() if "error:" in line]
    return line


@pytest.mark.slow
def test_a_missing_root_is_an_error_and_not_created(tmp_path):
    missing = tmp_path / "no" / "such" / "x"
    line = one_error_line(trace_browser("--root", str(missing)))
    assert f"--root {missing} does not exist" in line and "--create-root" in line
    assert not (tmp_path / "no").exists()


@pytest.mark.slow
def test_a_root_that_is_a_file_is_named_as_such(tmp_path):
    trace = tmp_path / "a_file.json"
    trace.write_text('{"traceEvents": []}')
    assert f"--root {trace} is a file, not a folder" in one_error_line(trace_browser("--root", str(trace)))
    assert "cannot create --root" in one_error_line(trace_browser("--root", str(trace / "x"), "--create-root"))
    assert trace.read_text() == '{"traceEvents": []}'


def test_create_root_makes_the_folder_and_serves_it(tmp_path):
    """What the stack's supervisord passes: `serve` may start the trace browser before anything wrote results."""
    root = tmp_path / "later" / "save_results"
    port = free_port()
    server = Server([sys.executable, "-m", "lightx2v.trace_browser", "--root", str(root), "--port", str(port),
                     "--host", "127.0.0.1", "--create-root"])
    try:
        wait_until(lambda: http_get(f"http://127.0.0.1:{port}/api/traces")[0] == 200, 30, what="the browser")
        assert root.is_dir()
    finally:
        server.stop()


def test_the_supervisor_config_creates_the_root():
    from conftest import REPO_ROOT

    (line,) = [line for line in (REPO_ROOT / "docker" / "supervisord.conf").read_text().splitlines()
               if line.startswith("command=") and "-m lightx2v.trace_browser" in line]
    assert "-m lightx2v.trace_browser --create-root" in line


@pytest.mark.parametrize("value,unknown", [("rescan,bogus", "bogus"), ("all, Rescan", "Rescan"),
                                           ("cuda-runtime", "cuda-runtime")])
def test_an_unknown_fix_name_is_an_error_naming_the_known_ones(tmp_path, value, unknown):
    result = subprocess.run([sys.executable, "-m", "lightx2v.tensorboard", "--logdir", str(tmp_path), "--port",
                             str(free_port()), "--host", "127.0.0.1"], env=subprocess_env(LIGHTX2V_TB_SKIP_FIXES=value),
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    (line,) = [line for line in result.stderr.splitlines() if "LIGHTX2V_TB_SKIP_FIXES" in line]
    assert f"unknown name {unknown};" in line and all(fix.name in line for fix in FIXES) and "all" in line


def test_the_registry_knows_every_fix_by_name():
    """settings checks LIGHTX2V_TB_SKIP_FIXES against fix.FIX_NAMES (no plugin import): it must be FIXES' names."""
    from lightx2v.tensorboard.fix import FIX_NAMES

    assert FIX_NAMES == tuple(fix.name for fix in FIXES)


@pytest.mark.parametrize("where", [["--host", "127.0.0.1"], [], ["--bind_all"]], ids=["host", "default", "bind_all"])
def test_tensorboard_on_a_busy_port_says_so_in_one_line_before_loading(tmp_path, where):
    """It checked nothing: it loaded every run (~6 s), then printed "could not bind" and FileNotFoundError tracebacks
    of its workers, exit status 255. Now one line naming the port and the flag, status 2, as lightx2v-serve."""
    with socket.socket() as taken:
        taken.bind(("0.0.0.0", 0))
        taken.listen()
        port = taken.getsockname()[1]
        started = time.monotonic()
        result = subprocess.run([sys.executable, "-m", "lightx2v.tensorboard", "--logdir", str(tmp_path), "--port",
                                 str(port), *where], env=subprocess_env(), capture_output=True, text=True, timeout=120)
    assert result.returncode == 2, result.stderr
    assert result.stderr.splitlines() == [
        f"lightx2v.tensorboard: cannot use port {port} for the TensorBoard on "
        f"{'0.0.0.0' if where == ['--bind_all'] else where[1] if where else 'localhost'}: Address already in use. "
        "Pick another with --port."]
    assert time.monotonic() - started < 30 and result.stdout == ""
