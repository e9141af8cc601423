"""docker/supervisord.conf run for real: TensorBoard, one inference run and the trace browser under supervisord.

One stack for the module, ready (first run listed, inference done, trace browser up) before any test reads
it, and left ready by each test, so every test passes alone and in any order; the SIGTERM test stops a
stack of its own. The inference program runs `tests/helpers/capture.py` (a real torch.profiler capture) through
LIGHTX2V_INFER_CMD; `test_default_inference_command` runs the conf's own default command.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest

from conftest import REPO_ROOT, free_port, subprocess_env
from helpers.procs import (
    Server,
    alive,
    answers,
    descendants,
    get_json,
    http_get,
    process_group,
    runs,
    supervisor_stop_bound,
    wait_until,
)

CONF = REPO_ROOT / "docker" / "supervisord.conf"
CAPTURE = REPO_ROOT / "tests" / "helpers" / "capture.py"


def stack_env(workdir, **extra) -> dict[str, str]:
    run_dir = workdir / "run"
    run_dir.mkdir(exist_ok=True)
    env = {
        "LIGHTX2V_SUPERVISOR_RUN_DIR": str(run_dir),
        "LIGHTX2V_PYTHON": sys.executable,
        "LIGHTX2V_BIND_HOST": "127.0.0.1",
        "TENSORBOARD_PORT": str(free_port()),
        "TRACE_BROWSER_PORT": str(free_port()),
        "LIGHTX2V_TORCH_PROFILE_DIR": "",
        "LIGHTX2V_RESULTS_DIR": "",
        "LIGHTX2V_INFER_CMD": "",
    }
    env.update(extra)
    return env


def start_stack(workdir, **extra) -> tuple[Server, dict[str, str]]:
    env = stack_env(workdir, **extra)
    server = Server([sys.executable, "-m", "supervisor.supervisord", "-n", "-c", str(CONF)], cwd=workdir, **env)
    return server, env


def supervisorctl(env, *args: str) -> str:
    result = subprocess.run([sys.executable, "-m", "supervisor.supervisorctl", "-c", str(CONF), *args],
                            env=subprocess_env(**env), capture_output=True, text=True, timeout=30)
    return result.stdout


def status(env) -> dict[str, str]:
    """{program: status line} from `supervisorctl status`."""
    return {line.split()[0]: line for line in supervisorctl(env, "status").splitlines() if line.strip()}


def first_run_stack(workdir) -> dict:
    """A stack whose inference writes the run `first_run`, once all of it is up and that inference is done."""
    command = f"{sys.executable} {CAPTURE} save_results/torch_profile first_run"
    server, env = start_stack(workdir, LIGHTX2V_INFER_CMD=command)
    stack = {"server": server, "env": env, "tb": int(env["TENSORBOARD_PORT"]),
             "browser": int(env["TRACE_BROWSER_PORT"]), "workdir": workdir}
    try:
        wait_until(lambda: "first_run" in runs(stack["tb"]), 120, what="the inference's run in /runs")
        wait_until(lambda: "EXITED" in status(env).get("inference", ""), 60, what="the inference to finish")
        wait_until(lambda: any((workdir / "save_results" / ".trace_browser").glob("*.json")), 60,
                   what="the trace browser's discovery file")
    except BaseException:
        server.stop()
        raise
    return stack


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    stack = first_run_stack(tmp_path_factory.mktemp("stack"))
    try:
        yield stack
    finally:
        stack["server"].stop()


@pytest.mark.slow
def test_tensorboard_shows_the_inference_run(stack):
    port = stack["tb"]
    wait_until(lambda: "first_run" in runs(port), 120, what="the inference's run in /runs")
    base = f"http://127.0.0.1:{port}/data/plugin/pytorch_profiler"
    assert get_json(f"{base}/views?run=first_run") == ["Overview", "Operator", "Trace", "Module"]
    worker = get_json(f"{base}/workers?run=first_run&view=Overview")[0]
    for view in ("overview", "operation?group_by=Operation", "operation/table?group_by=Operation", "trace"):
        sep = "&" if "?" in view else "?"
        code, _, body = http_get(f"{base}/{view}{sep}run=first_run&worker={worker}&span=default")
        assert code == 200 and len(body) > 50, (view, body[:200])  # smoke: stock TensorBoard answers these too
    assert (stack["workdir"] / "save_results" / "torch_profile" / "first_run").is_dir()
    # what only the fixed plugin gives on a torch >= 2 trace: call stacks rebuilt from python_function events
    # (stock 0.4.3 answers HTTP 500 here), and an empty table, not a 500, for an operator without one
    query = f"run=first_run&worker={worker}&span=default&group_by=Operation"
    stacks = [row["call_stack"] for row in get_json(f"{base}/operation/stack?{query}&op_name=aten::addmm")["data"]]
    assert stacks and all("capture.py(" in s for s in stacks), stacks[:3]
    assert get_json(f"{base}/operation/stack?{query}&op_name=no::such_op")["data"] == []


def test_supervisorctl_status(stack):
    lines = wait_until(lambda: (s := status(stack["env"])) and "EXITED" in s.get("inference", "") and s, 60,
                       what="inference to finish")
    assert "RUNNING" in lines["tensorboard"] and "RUNNING" in lines["trace_browser"]


@pytest.mark.slow
def test_logs_reach_stdout_once(stack):
    """Each program's lines once per start (test_killed_tensorboard_... may have started TensorBoard again)."""
    def tensorboard_started_and_said_so():
        out = stack["server"].output()
        starts = out.count("spawned: 'tensorboard'")
        banners = len(re.findall(r"TensorBoard 2\.\d+\.\d+ at http://", out))
        return starts >= 1 and banners == starts and out.count("plugin fixes applied") == starts and out

    out = wait_until(tensorboard_started_and_said_so, 60, what="one TensorBoard banner per start")
    trace_lines = [line for line in stack["server"].lines if line.endswith("first_run/rank0_test.pt.trace.json")]
    assert len(trace_lines) == 1, out[-3000:]  # the inference's own print, once
    assert len(re.findall(r"Trace browser: http://127\.0\.0\.1:\d+/", out)) == 1


@pytest.mark.slow
def test_profiler_capture_appears_without_restart_and_names_the_perfetto_page(stack):
    """A capture by the real profiler while the stack runs: a new run, and its log points at the trace browser."""
    pid_before = supervisorctl(stack["env"], "pid", "tensorboard").strip()
    script = ("import torch\n"
              "from lightx2v.utils.torch_trace_profiler import TorchTraceProfileContext\n"
              "model, x = torch.nn.Linear(32, 32), torch.randn(8, 32)\n"
              "with TorchTraceProfileContext('second capture') as profile:\n"
              "    profile.run(model, x)\n")
    result = subprocess.run([sys.executable, "-c", script], cwd=stack["workdir"], capture_output=True, text=True,
                            env=subprocess_env(LIGHTX2V_TORCH_PROFILE_DIR="", LIGHTX2V_TORCH_PROFILE="1"),
                            timeout=300)
    assert result.returncode == 0, result.stderr
    assert f"Perfetto page: http://127.0.0.1:{stack['browser']}/" in result.stderr
    new_runs = wait_until(lambda: [r for r in runs(stack["tb"]) if r != "first_run"], 30, what="the second run")
    assert len(new_runs) == 1 and "second" in new_runs[0]
    assert supervisorctl(stack["env"], "pid", "tensorboard").strip() == pid_before


def test_trace_browser_lists_the_captures(stack):
    traces = get_json(f"http://127.0.0.1:{stack['browser']}/api/traces")
    paths = [t["path"] for t in traces]
    assert "torch_profile/first_run/rank0_test.pt.trace.json" in paths
    (discovery_file,) = (stack["workdir"] / "save_results" / ".trace_browser").glob("*.json")
    discovery = json.loads(discovery_file.read_text())
    assert discovery["port"] == stack["browser"] and discovery["url"] == f"http://127.0.0.1:{stack['browser']}/"
    assert discovery["pid"] == int(supervisorctl(stack["env"], "pid", "trace_browser").strip())


@pytest.mark.slow
def test_killed_tensorboard_is_restarted_without_orphans(stack):
    env, port = stack["env"], stack["tb"]
    old_pid = int(supervisorctl(env, "pid", "tensorboard").strip())
    helpers = process_group(old_pid) - {old_pid}
    assert helpers, "expected the plugin's helper processes in TensorBoard's process group"
    os.kill(old_pid, signal.SIGKILL)
    new_pid = wait_until(lambda: (p := supervisorctl(env, "pid", "tensorboard").strip()).isdigit()
                         and int(p) not in (0, old_pid) and int(p), 30, what="a new TensorBoard")
    wait_until(lambda: answers(port), 60, what="TensorBoard's port again")
    wait_until(lambda: not any(alive(pid) for pid in helpers), 10, what="the old helpers to exit")
    assert alive(new_pid)
    wait_until(lambda: "first_run" in runs(port), 60, what="runs after the restart")


@pytest.mark.slow
def test_sigterm_stops_everything(tmp_path):
    """Its own stack (stopping the module's would break the tests after it). The mechanism, not a stopwatch:
    every program ends on SIGTERM (none escalated to SIGKILL after stopwaitsecs), all children and their
    process groups are gone, supervisord exits 0; the wait is the conf's worst case plus a margin."""
    stack = first_run_stack(tmp_path)
    server = stack["server"]
    try:
        wait_until(lambda: len(descendants(server.pid)) >= 3, 30, what="the programs")
        tree = descendants(server.pid)
        groups = {os.getpgid(pid) for pid in tree if alive(pid)}
        server.proc.send_signal(signal.SIGTERM)
        assert server.proc.wait(supervisor_stop_bound(CONF)) == 0
        wait_until(lambda: not any(alive(pid) for pid in tree), 10, what="every child to be gone")
        assert not any(process_group(g) for g in groups), "a process outlived its group"
        assert not list((stack["workdir"] / "save_results" / ".trace_browser").glob("*.json"))
        out = server.output()
        assert "stopped: tensorboard" in out and "stopped: trace_browser" in out, out[-2000:]
        assert "SIGKILL" not in out, out[-2000:]
    finally:
        server.stop()


@pytest.mark.slow
def test_failing_inference_leaves_tensorboard_up(tmp_path):
    server, env = start_stack(tmp_path, LIGHTX2V_INFER_CMD=f"{sys.executable} {CAPTURE} --fail",
                              LIGHTX2V_TRACE_BROWSER="0")
    try:
        port = int(env["TENSORBOARD_PORT"])
        wait_until(lambda: "EXITED" in status(env).get("inference", ""), 60, what="the failing inference to exit")
        assert "exited: inference (exit status 3; not expected)" in server.output()
        wait_until(lambda: answers(port), 60, what="TensorBoard")
        time.sleep(2)
        assert "RUNNING" in status(env)["tensorboard"] and answers(port)
        assert "capture.py: failing on purpose" in server.output()
    finally:
        server.stop()


@pytest.mark.slow
def test_default_inference_command(tmp_path):
    """No LIGHTX2V_INFER_CMD: the conf's default embedded tiny Qwen-Image run, profiled, shows in TensorBoard."""
    server, env = start_stack(tmp_path, LIGHTX2V_TRACE_BROWSER="0")
    try:
        port = int(env["TENSORBOARD_PORT"])
        found = wait_until(lambda: runs(port), 240, interval=0.5, what="the default inference's run")
        assert len(found) == 1 and "infer_main" in found[0]
        inference = wait_until(lambda: "EXITED" in status(env)["inference"] and status(env)["inference"], 120,
                               what="the default inference to exit")
        assert "not expected" not in inference, inference  # exit code 0 (exitcodes=0)
    finally:
        server.stop()
