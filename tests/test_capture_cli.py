"""`python -m lightx2v.capture` on bad input, deep folders, chrome-format processes, and the `.capture` status files it
keeps tidy; the status files come from real processes running the real profiler module."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lightx2v.capture.control import (
    KEEP_EXITED,
    NotArmed,
    arm,
    find_control_dirs,
    find_processes,
    read_process,
)

from conftest import subprocess_env
from helpers.procs import Server, wait_until

# One capture of a tiny call, then (when STOP_FILE is not "-") stay alive until STOP_FILE exists.
PROCESS = """
import os, sys, time, torch
from lightx2v.utils.torch_trace_profiler import TorchTraceProfileContext
profile_format, stop_file = sys.argv[1], sys.argv[2]
ctx = TorchTraceProfileContext("cli", profile_format=profile_format, wait=0, warmup=1, active=1)
ctx.run(torch.relu, torch.ones(4))
print("CAPTURED", os.getpid(), flush=True)
while stop_file != "-" and not os.path.exists(stop_file):
    time.sleep(0.1)
"""


def capture_cli(*args: str, cwd: Path, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "lightx2v.capture", *args], capture_output=True, text=True,
                          timeout=120, cwd=cwd, env=subprocess_env(LIGHTX2V_TORCH_PROFILE_DIR="",
                                                                   LIGHTX2V_RESULTS_DIR="", **env))


def run_once(cwd: Path, logdir: Path) -> int:
    """A real process that captures once into ``logdir`` and exits; its pid."""
    done = subprocess.run([sys.executable, "-c", PROCESS, "tensorboard", "-"], cwd=cwd, capture_output=True,
                          text=True, timeout=300, env=subprocess_env(LIGHTX2V_TORCH_PROFILE_DIR=str(logdir)),
                          check=True)
    return int(done.stdout.split("CAPTURED")[1].split()[0])


@pytest.fixture(scope="module")
def exited(tmp_path_factory) -> Path:
    """The status file a real process left when it exited (read-only for the tests: they copy it)."""
    base = tmp_path_factory.mktemp("exited")
    pid = run_once(base, base / "tb")
    (status,) = (base / "tb" / ".capture").glob(f"*_{pid}.status.json")
    assert json.loads(status.read_text())["exited_at"]
    return status


# ----------------------------------------------------------------------------------------------- bad input
def test_a_missing_folder_is_a_usage_error(tmp_path):
    missing = capture_cli("list", str(tmp_path / "no" / "such"), cwd=tmp_path)
    assert missing.returncode == 2 and f"{tmp_path / 'no' / 'such'}: no such folder" in missing.stderr
    (tmp_path / "a_file").write_text("x")
    not_a_folder = capture_cli("arm", str(tmp_path / "a_file"), cwd=tmp_path)
    assert not_a_folder.returncode == 2 and "not a folder" in not_a_folder.stderr
    default = capture_cli(cwd=tmp_path)  # save_results under an empty working directory
    assert default.returncode == 2 and "no such folder (the default" in default.stderr
    assert "Traceback" not in missing.stderr + not_a_folder.stderr + default.stderr


@pytest.mark.parametrize("flag,value", [("--wait", "-5"), ("--wait", "0"), ("--wait", "nan"), ("--wait", "inf"),
                                        ("--pid", "-3"), ("--pid", "0"), ("--pid", "x")])
def test_bad_flag_values_are_refused(flag, value, tmp_path):
    result = capture_cli("arm", flag, value, str(tmp_path), cwd=tmp_path)
    assert result.returncode == 2 and f"argument {flag}:" in result.stderr and "Traceback" not in result.stderr


# ------------------------------------------------------------------------------------------- where it looks
@pytest.mark.slow
def test_a_folder_far_above_the_logdir_finds_it(tmp_path):
    logdir = tmp_path / "data" / "svc" / "save_results" / "torch_profile"
    pid = run_once(tmp_path, logdir)
    listed = capture_cli("list", str(tmp_path / "data"), cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    assert f"pid {pid} on {socket.gethostname()}; [exited]" in listed.stdout
    assert find_control_dirs(str(tmp_path / "data"), depth=2).control_dirs == []  # 3 folders down: depth 3 needed
    assert find_control_dirs(str(tmp_path / "data"), depth=3).control_dirs == [str(logdir / ".capture")]


def test_the_search_skips_hidden_and_package_trees_and_stops_at_its_limit(tmp_path):
    for where in (".venv/x", "node_modules/y", "a/.cache", "ok/logdir"):
        (tmp_path / where / ".capture").mkdir(parents=True)
    assert find_control_dirs(str(tmp_path)).control_dirs == [str(tmp_path / "ok" / "logdir" / ".capture")]
    wide = tmp_path / "wide"
    for i in range(30):
        (wide / f"d{i:02}").mkdir(parents=True)
    search = find_control_dirs(str(wide), limit=10)
    assert search.truncated and search.control_dirs == []
    assert not find_control_dirs(str(wide), limit=100).truncated


@pytest.mark.slow
def test_a_chrome_format_process_cannot_be_armed_and_the_reason_says_why(tmp_path):
    stop = tmp_path / "stop"
    process = Server([sys.executable, "-c", PROCESS, "chrome", str(stop)], cwd=tmp_path)
    try:
        wait_until(lambda: any(line.startswith("CAPTURED") for line in process.lines), 300,
                   what=f"the chrome capture; output so far:\n{process.output()[-2000:]}")
        assert (tmp_path / "save_results" / "trace.json").is_file()
        armed = capture_cli("arm", "--pid", str(process.pid), "save_results", cwd=tmp_path)
        assert armed.returncode == 1
        assert f"no process with pid {process.pid} writes captures here" in armed.stderr
        assert "chrome-format process writes no status file, so it cannot be armed" in armed.stderr
        listed = capture_cli("list", "save_results", cwd=tmp_path)
        assert listed.returncode == 0 and "profile_format='tensorboard'" in listed.stdout
    finally:
        stop.touch()
        process.stop()


# --------------------------------------------------------------------------------------- tidy status files
def copy_status(exited: Path, control: Path, ident: str, mtime: float | None = None, **changes) -> Path:
    status = json.loads(exited.read_text())
    status.update(changes)
    path = control / f"{ident}.status.json"
    path.write_text(json.dumps(status))
    if mtime is not None:
        os.utime(path, (mtime, mtime))
    return path


@pytest.mark.slow
def test_listing_prunes_old_exited_status_files_and_never_a_live_one(tmp_path, exited):
    control = tmp_path / "tb" / ".capture"
    control.mkdir(parents=True)
    now = time.time()
    day = 24 * 3600
    dead_pid = json.loads(exited.read_text())["pid"]  # that process has exited
    old = copy_status(exited, control, "h_old", exited_at=now - 2 * day)
    (control / "h_old.request").write_text("{}")
    recent = [copy_status(exited, control, f"h_recent{i:02}", exited_at=now - 60 * (i + 1))
              for i in range(KEEP_EXITED + 5)]
    gone_dead = copy_status(exited, control, "h_gone_dead", mtime=now - 2 * day, exited_at=None, pid=dead_pid)
    gone_alive = copy_status(exited, control, "h_gone_alive", mtime=now - 2 * day, exited_at=None, pid=os.getpid())
    gone_elsewhere = copy_status(exited, control, "h_gone_other_host", mtime=now - 2 * day, exited_at=None,
                                 pid=dead_pid, host="another-host")
    running = copy_status(exited, control, "h_running", exited_at=None, pid=os.getpid())

    listed = capture_cli("list", str(tmp_path), cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    left = {p.name for p in control.iterdir()}
    assert old.name not in left and "h_old.request" not in left
    assert {p.name for p in recent[:KEEP_EXITED]} <= left and not {p.name for p in recent[KEEP_EXITED:]} & left
    assert gone_dead.name not in left
    assert {gone_alive.name, gone_elsewhere.name, running.name} <= left
    assert "h_running: " in listed.stdout and "[running]" in listed.stdout
    assert len(find_processes(str(tmp_path))) == KEEP_EXITED + 3


@pytest.mark.slow
def test_a_failed_request_write_leaves_no_temporary_file(tmp_path, exited):
    control = tmp_path / "tb" / ".capture"
    control.mkdir(parents=True)
    path = copy_status(exited, control, "h_live", exited_at=None, pid=os.getpid())
    process = read_process(str(path))
    assert process is not None and process.state == "running"
    blocker = Path(process.request_path)
    blocker.mkdir()  # a folder where the request file goes: the rename onto it fails
    (blocker / "keep").write_text("")
    with pytest.raises(NotArmed, match="cannot write .*h_live.request"):
        arm(process, ack_seconds=1)
    assert sorted(p.name for p in control.iterdir()) == ["h_live.request", "h_live.status.json"]
    assert [p.name for p in blocker.iterdir()] == ["keep"]
