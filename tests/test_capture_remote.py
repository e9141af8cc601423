"""Arming the next capture of a running process from outside: `python -m lightx2v.capture` and the trace
browser's "Capture next call" button, against real long-running processes, a real 2-rank torchrun job, a real
TensorBoard and headless Chromium."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from lightx2v.capture.control import find_processes

from conftest import REPO_ROOT, free_port, subprocess_env
from helpers.procs import Server, answers, http_get, launcher, runs, wait_until
from helpers.traces import PLUGIN_TRACE_RE, load_trace, run_dirs

PROGRAMS = REPO_ROOT / "tests" / "programs"


def capture_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "lightx2v.capture", *args], capture_output=True, text=True,
                          timeout=120, cwd=cwd, env=subprocess_env())


def line_with(server: Server, prefix: str, count: int = 1, timeout: float = 180) -> list[str]:
    return wait_until(lambda: len(found := [x for x in server.lines if x.startswith(prefix)]) >= count and found,
                      timeout, what=f"{count} line(s) starting {prefix!r}; output so far:\n{server.output()[-3000:]}")


def fields(line: str) -> dict[str, str]:
    return dict(kv.split("=", 1) for kv in line.split()[1:])


def status_of(logdir: Path, pid: int) -> dict:
    (process,) = [p for p in find_processes(str(logdir)) if p.pid == pid]
    return process.status


class LongRunning:
    """tests/programs/long_running.py in its own folder: save_results/torch_profile is the logdir.

    With ``checkout``, the process imports a *copy* of the profiler module from a LightX2V-like checkout (its own
    `lightx2v` package, without this project's `lightx2v.capture`), as users run it."""

    def __init__(self, base: Path, first_calls: int = 100, checkout: bool = False):
        self.base = base
        self.root = base / "save_results"
        self.logdir = self.root / "torch_profile"
        self.control = base / "control"
        self.control.mkdir(parents=True)
        env = {"LIGHTX2V_TORCH_PROFILE_DIR": str(self.logdir), "OMP_NUM_THREADS": "1"}
        self.module = REPO_ROOT / "lightx2v" / "utils" / "torch_trace_profiler.py"
        if checkout:
            utils = base / "LightX2V" / "lightx2v" / "utils"
            utils.mkdir(parents=True)
            (utils.parent / "__init__.py").write_text("")
            (utils / "__init__.py").write_text("")
            self.module = utils / "torch_trace_profiler.py"
            shutil.copy(REPO_ROOT / "lightx2v" / "utils" / "torch_trace_profiler.py", self.module)
            env["PYTHONPATH"] = str(base / "LightX2V")
        self.server = Server([sys.executable, str(PROGRAMS / "long_running.py"), str(self.control), str(first_calls)],
                             cwd=base, **env)
        assert fields(line_with(self.server, "READY")[0])["module"] == str(self.module)
        wait_until(lambda: status_of(self.logdir, self.pid)["captures"] == 1, 60, what="its status file")

    @property
    def pid(self) -> int:
        return self.server.pid

    def signal(self, name: str) -> None:
        (self.control / name).touch()


@pytest.fixture
def long_running(tmp_path):
    process = LongRunning(tmp_path)
    try:
        yield process
    finally:
        process.server.stop()


@pytest.fixture
def long_running_copy(tmp_path):
    process = LongRunning(tmp_path, checkout=True)
    try:
        yield process
    finally:
        process.server.stop()


@pytest.mark.slow
def test_arm_a_running_process_captures_once_and_tensorboard_lists_it(long_running_copy, tmp_path):
    proc, logdir = long_running_copy, long_running_copy.logdir
    port = free_port()
    tensorboard = launcher(logdir, port)
    try:
        (first_run,) = run_dirs(logdir)
        wait_until(lambda: runs(port) == [first_run.name], 90, what="TensorBoard listing the first capture")
        assert not status_of(logdir, proc.pid)["armed"]

        armed = capture_cli("arm", "--pid", str(proc.pid), str(logdir), cwd=tmp_path)
        assert armed.returncode == 0, armed.stderr
        assert f"armed: pid {proc.pid} captures at its next first run()" in armed.stdout
        again = capture_cli("arm", str(proc.root), cwd=tmp_path)  # the results root: every running process there
        assert again.returncode == 0, again.stderr
        assert "already armed" in again.stdout
        status = status_of(logdir, proc.pid)
        assert status["armed"] and status["armed_by"].startswith("python -m lightx2v.capture")
        listed = capture_cli("list", str(proc.root), cwd=tmp_path)
        assert f"pid {proc.pid}" in listed.stdout and "ARMED" in listed.stdout

        proc.signal("go")  # 100 calls so far; now hundreds more, a new context each
        wait_until(lambda: status_of(logdir, proc.pid)["captures"] == 2, 120, what="the second capture")
        new_run = Path(status_of(logdir, proc.pid)["last_capture"]["run_dir"])
        assert new_run != first_run and new_run.parent == logdir
        wait_until(lambda: sorted(runs(port)) == sorted([first_run.name, new_run.name]), 60,
                   what="TensorBoard listing the new run")

        proc.signal("stop")
        done = fields(line_with(proc.server, "DONE")[0])
        assert proc.server.proc.wait(60) == 0
        # Exactly one more capture of 5 calls: 4 extra target calls per capture, two captures in the process.
        assert int(done["targets"]) == int(done["runs"]) + 2 * 4 and done["captures"] == "2"
        assert run_dirs(logdir) == sorted([first_run, new_run])
        (trace_path,) = [p for p in new_run.iterdir() if PLUGIN_TRACE_RE.match(p.name)]
        assert "ProfilerStep#4" in {e.get("name") for e in load_trace(trace_path)["traceEvents"]}
        last = status_of(logdir, proc.pid)["last_capture"]
        assert last["calls"] == 5 and last["error"] is None and last["trace_paths"] == [str(trace_path)]
    finally:
        tensorboard.stop()

    exited = capture_cli("arm", "--pid", str(proc.pid), str(logdir), cwd=tmp_path)
    assert exited.returncode == 1
    assert f"process {proc.pid} on " in exited.stderr and "exited at" in exited.stderr
    assert "nothing armed" in exited.stderr


def test_unknown_and_silent_processes_are_refused_clearly(tmp_path):
    logdir = tmp_path / "tb"
    control = logdir / ".capture"
    control.mkdir(parents=True)
    missing = capture_cli("arm", "--pid", "4242", str(logdir), cwd=tmp_path)
    assert missing.returncode == 1 and "no process with pid 4242 writes captures here" in missing.stderr
    # A process killed with SIGKILL leaves its last heartbeat behind.
    status = control / "host_4242.status.json"
    status.write_text(json.dumps({"protocol": 1, "pid": 4242, "host": "host", "heartbeat_seconds": 2.0,
                                  "exited_at": None, "argv": ["serve.py"]}))
    beat = time.time() - 60
    os.utime(status, (beat, beat))  # its last heartbeat, a minute ago
    gone = capture_cli("arm", "--pid", "4242", str(logdir), cwd=tmp_path)
    silent_at_most = time.time() - beat  # the CLI measured the silence somewhere between the two clock reads
    assert gone.returncode == 1
    said = re.search(r"has not written its status for (\d+) s: it was killed or is hung; nothing armed", gone.stderr)
    assert said and 60 <= int(said.group(1)) <= round(silent_at_most), gone.stderr
    assert not (control / "host_4242.request").exists()
    assert "[gone]" in capture_cli("list", str(logdir), cwd=tmp_path).stdout


@pytest.mark.torchrun
def test_torchrun_job_without_a_process_group_is_refused_clearly(tmp_path):
    """2 ranks under torchrun without init_process_group: no c10d store, so no way for the ranks to agree on a call.
    Their status says why, and arming the job (listed as one) is refused with that reason, nothing written.
    (A job with a process group is armed as a whole: tests/test_capture_jobs.py.)"""
    from lightx2v.capture.jobs import arm_job, group

    from helpers.torchrun import run_torchrun

    run_torchrun(PROGRAMS / "distributed_capture.py", "tensorboard", "--no-init", cwd=tmp_path)
    logdir = tmp_path / "tb"
    ranks = find_processes(str(logdir))
    assert sorted(p.status["rank"] for p in ranks) == [0, 1]
    assert all("without a process group (no c10d store)" in p.status["remote_refused"] for p in ranks)
    (job,) = group(ranks)
    assert job.world_size == 2 and job.state == "exited"
    listed = capture_cli("list", str(logdir), cwd=tmp_path)
    assert listed.stdout.count("\n") == 1 and "2 ranks on" in listed.stdout and "[exited]" in listed.stdout
    armed = capture_cli("arm", "--job", job.id, str(logdir), cwd=tmp_path)
    assert armed.returncode == 1 and "exited at" in armed.stderr
    with pytest.raises(Exception, match="exited at"):
        arm_job(job)
    assert not list((logdir / ".capture").glob("*.request"))


def post(port: int, body: bytes, **headers: str):
    request = urllib.request.Request(f"http://127.0.0.1:{port}/api/capture", data=body, method="POST",
                                     headers={"Content-Type": "application/json", **headers})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def test_capture_post_is_same_origin_only(tmp_path):
    root = tmp_path / "save_results"
    root.mkdir()
    port = free_port()
    browser = Server([sys.executable, "-m", "lightx2v.trace_browser", "--root", str(root), "--port", str(port),
                      "--host", "127.0.0.1"])
    try:
        wait_until(lambda: answers(port), 30, what="the trace browser")
        own = f"http://127.0.0.1:{port}"
        body = json.dumps({"id": "host_1"}).encode()
        assert post(port, body)[0] == 403  # no Origin: not from a page
        status, answer = post(port, body, Origin="https://evil.example")
        assert status == 403 and "cross-origin" in answer["message"]
        status, answer = post(port, body, Origin=f"http://evil.example:{port}", Host=f"evil.example:{port}")
        assert status == 403 and "DNS rebinding" in answer["message"]
        assert post(port, body, Origin=own, **{"Content-Type": "text/plain"})[0] == 403
        status, answer = post(port, body, Origin=own)  # allowed through, and the answer says why nothing armed
        assert status == 409 and "no process with id 'host_1'" in answer["message"]
        assert http_get(f"{own}/files/x.json", method="POST")[0] == 405  # every other POST stays refused
        assert http_get(f"{own}/api/capture")[0] == 200
    finally:
        browser.stop()


@pytest.mark.browser
def test_capture_next_call_button_in_chromium(long_running, tmp_path):
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.common.by import By

    from helpers.browser import chromium

    proc = long_running
    (first_run,) = run_dirs(proc.logdir)
    port = free_port()
    browser = Server([sys.executable, "-m", "lightx2v.trace_browser", "--root", str(proc.root), "--port", str(port),
                      "--host", "127.0.0.1"])
    try:
        wait_until(lambda: answers(port), 30, what="the trace browser")
        with chromium(offline=False) as driver:
            driver.get(f"http://127.0.0.1:{port}/")

            # The panel rebuilds its rows every 2 s, so an element found in one WebDriver call may be gone by the
            # next: the row's state is read in one script call, and the click is retried only while the button
            # it found was replaced before the click reached it (a stale element is never clicked).
            def row_state() -> dict:
                return driver.execute_script("""
                    const row = document.querySelector(`#processes tr[data-id$='_${arguments[0]}']`);
                    const button = row && row.querySelector('button.arm');
                    return {text: row ? row.innerText : '', button: button ? button.textContent : null,
                            enabled: button ? !button.disabled : null,
                            message: document.getElementById('capture-message').textContent};""", proc.pid)

            def row_text() -> str:
                return row_state()["text"]

            def click_arm() -> bool:
                try:
                    driver.find_element(By.CSS_SELECTOR, f"#processes tr[data-id$='_{proc.pid}'] button.arm").click()
                    return True
                except StaleElementReferenceException:
                    return False

            wait_until(lambda: "running, not armed" in row_text(), 30, what="the process row")
            state = row_state()
            assert f"torch_profile/{first_run.name}" in state["text"] and "(5 calls)" in state["text"]
            assert state["button"] == "Capture next call" and state["enabled"]
            wait_until(click_arm, 30, what="a click on the row's button")
            wait_until(lambda: "armed: pid" in row_state()["message"], 30, what="the arm answer")
            wait_until(lambda: "captures at its next run()" in row_text(), 30, what="the row showing armed")
            assert row_state()["enabled"] is False  # armed: nothing to add
            assert status_of(proc.logdir, proc.pid)["armed_by"].startswith("the trace browser")

            proc.signal("go")
            wait_until(lambda: "running, not armed" in row_text() and first_run.name not in row_text(), 120,
                       what="the row showing the new capture")
            new_run = Path(status_of(proc.logdir, proc.pid)["last_capture"]["run_dir"])
            assert f"torch_profile/{new_run.name}" in row_text()
            driver.refresh()
            listed = [td.text for td in driver.find_elements(By.CSS_SELECTOR, "#traces td.path")]
            assert sum(name.startswith(f"torch_profile/{new_run.name}/") for name in listed) == 1
    finally:
        browser.stop()


@pytest.mark.parametrize("switch", ["1", "0"])
@pytest.mark.slow
def test_watcher_is_one_daemon_thread_started_by_the_first_capture_and_can_be_switched_off(tmp_path, switch):
    script = (
        "import threading\n"
        "from lightx2v.utils.torch_trace_profiler import TorchTraceProfileContext\n"
        "names = lambda: [(t.name, t.daemon) for t in threading.enumerate() if t.name.startswith('lightx2v-')]\n"
        "before = names()\n"
        "for _ in range(3):\n"
        "    TorchTraceProfileContext('step', tb_dir='tb').run(lambda: None)\n"
        "print(before, names())\n"
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, cwd=tmp_path,
                          env=subprocess_env(LIGHTX2V_TORCH_PROFILE_REMOTE=switch))
    assert proc.returncode == 0, proc.stderr
    if switch == "1":
        assert proc.stdout.strip() == "[] [('lightx2v-capture-watcher', True)]"
        (status,) = (tmp_path / "tb" / ".capture").iterdir()
        assert json.loads(status.read_text())["exited_at"]  # marked at exit: arming it now says "exited"
    else:
        assert proc.stdout.strip() == "[] []"
        assert not (tmp_path / "tb" / ".capture").exists()
