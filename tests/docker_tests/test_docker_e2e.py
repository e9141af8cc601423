"""End to end with a real Docker engine: build the image, `compose up`, see traces, `compose exec`, `down`.

Everything runs as the user would run it, with host networking on free loopback ports (see
engine.py); the stand-in base replaces the CUDA PyTorch image that cannot be pulled here.
"""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import time
import urllib.error
from pathlib import Path

import pytest

from .stack import OWNER_GID, OWNER_UID, TIMINGS, Stack, free_port, stack_env

# First test pays for the session fixtures: stand-in base (~2.5 min on a fresh machine) + two builds.
pytestmark = pytest.mark.timeout(1200)

RESULTS = "/workspace/LightX2V/save_results"
# A second capture through `docker compose exec`, while the stack runs.
EXEC_CAPTURE = ["python", "-m", "lightx2v.infer", "--preset", "tiny", "--infer_steps", "2", "--prompt", "exec"]
TRACE_GLOB = "torch_profile/*/*.pt.trace.json*"


def traces(results: Path) -> set[Path]:
    """Trace files under the results folder: what the plugin reads (not the summaries written beside them,
    not the profiler's hidden temporary names)."""
    return {
        p
        for p in results.glob(TRACE_GLOB)
        if p.name.endswith((".pt.trace.json", ".pt.trace.json.gz")) and not p.name.startswith(".")
    }


def wait_for(what: str, predicate, timeout: float, interval: float = 0.1):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


def listed_runs(stack: Stack) -> list[str]:
    try:
        return stack.runs()
    except (OSError, urllib.error.URLError):
        return []


def land_then_list(stack: Stack, results: Path, known: set[Path], timeout: float) -> tuple[Path, float, float]:
    """Wait for a new trace file under the host's results folder, then for its run in TensorBoard.
    Returns the trace and the monotonic times it landed and was listed."""
    trace = wait_for(
        "a new trace in " + str(results / TRACE_GLOB),
        lambda: next(iter(traces(results) - known), None),
        timeout,
    )
    landed = time.monotonic()
    run = trace.parent.relative_to(results / "torch_profile").as_posix()
    wait_for(f"run {run} listed by /runs", lambda: run in listed_runs(stack), 60)
    return trace, landed, time.monotonic()


def owners_paths(root: Path) -> list[Path]:
    return [root, *root.rglob("*")]


def owners(root: Path) -> set[tuple[int, int]]:
    return {(p.lstat().st_uid, p.lstat().st_gid) for p in owners_paths(root)}


def load_trace(path: Path) -> dict:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as f:
        return json.load(f)


def test_rebuild_after_a_code_change_reuses_the_dependency_layer(image):
    _, steps = image
    install = [cached for step, cached in steps.items() if "pip install" in step]
    source = [cached for step, cached in steps.items() if step.startswith("COPY . .")]
    assert install == [True], steps
    assert source == [False], steps


def test_torch_comes_from_the_base_image_untouched(docker_engine, standin_base, image):
    probe = (
        "import importlib.metadata as m, os; d = m.distribution('torch');"
        "record = next(f for f in d.files if f.name == 'RECORD');"
        "print(d.version, record.locate(), os.stat(record.locate()).st_mtime_ns)"
    )

    def torch_record(tag: str) -> str:
        return docker_engine.run("run", "--rm", "--network", "none", "--entrypoint", "python3", tag, "-c", probe).stdout

    assert torch_record(image[0]) == torch_record(standin_base)


@pytest.mark.parametrize(
    "results_owner, project_owner, expected",
    [
        ((4321, 4322), (OWNER_UID, OWNER_GID), (4321, 4322)),  # the mounted folder's owner wins
        (None, (OWNER_UID, OWNER_GID), (OWNER_UID, OWNER_GID)),  # Docker creates it root-owned: project owner
        ((0, 0), (OWNER_UID, OWNER_GID), (OWNER_UID, OWNER_GID)),  # root leftovers are handed over too
        ((0, 0), (0, 0), (0, 0)),  # rootless Docker: the host user is root inside
    ],
    ids=["folder-owner", "created-by-docker", "root-leftovers", "all-root"],
)
def test_entrypoint_runs_as_the_owner_of_the_results_folder(
    docker_engine, image, tmp_path, results_owner, project_owner, expected
):
    project = tmp_path / "project"
    project.mkdir()
    os.chown(project, *project_owner)
    results = project / "save_results"
    if results_owner is not None:
        (results / "torch_profile").mkdir(parents=True)
        (results / "torch_profile" / "old.pt.trace.json").write_text("{}")
        for path in owners_paths(results):
            os.chown(path, *results_owner)
    out = docker_engine.run(
        "run", "--rm", "--network", "none",
        "-v", f"{results}:{RESULTS}", "-v", f"{project}:/workspace/host-project:ro",
        image[0], "sh", "-c", f"id -u; id -g; mkdir -p {RESULTS}/new && touch {RESULTS}/new/file",
    ).stdout.split()  # fmt: skip
    assert (int(out[0]), int(out[1])) == expected
    assert owners(results) == {expected}


@pytest.fixture(scope="module")
def stack(docker_engine, image, project):
    tag, _ = image
    tb_port, browser_port = free_port(), free_port()
    stack = Stack(
        engine=docker_engine,
        project=project,
        name=f"lx2v-test-{os.getpid()}",
        env=stack_env(docker_engine, tag, tb_port, browser_port),
        tb_port=tb_port,
        browser_port=browser_port,
    )
    stack.up_started = time.monotonic()
    result = stack.compose("up", "--detach", "--wait", "--wait-timeout", "120", check=False)
    stack.healthy_at = time.monotonic()
    assert result.returncode == 0, f"compose up failed:\n{result.stderr}\n{stack.logs()}"
    TIMINGS["compose up -> healthy"] = f"{stack.healthy_at - stack.up_started:.1f} s"
    yield stack
    if stack.container_ids():
        print(stack.logs())
        stack.compose("down", check=False)


def test_compose_up_becomes_healthy_quickly(stack):
    assert stack.inspect()["State"]["Health"]["Status"] == "healthy"
    assert stack.healthy_at - stack.up_started < 60, stack.logs()


def test_compose_creates_no_network(stack):
    networks = stack.engine.run("network", "ls", "--format", "{{.Name}}").stdout.split()
    assert sorted(networks) == ["host", "none"]


def test_default_inference_trace_reaches_the_host_owned_by_the_user(stack):
    results = stack.project / "save_results"
    trace, landed, listed = land_then_list(stack, results, set(), timeout=240)
    TIMINGS["compose up -> default inference's run listed"] = f"{listed - stack.up_started:.1f} s"
    if landed > stack.healthy_at:  # otherwise the wait includes TensorBoard's own start
        TIMINGS["default inference: trace landed -> listed"] = f"{listed - landed:.1f} s"
    assert owners(results) == {(OWNER_UID, OWNER_GID)}, sorted(
        (str(p), p.lstat().st_uid) for p in owners_paths(results)
    )
    assert load_trace(trace)["traceEvents"]
    # The trace browser (the second viewer) lists it too, on its published port.
    listed_by_browser = [t["path"] for t in stack.get_json(stack.browser_port, "/api/traces")]
    assert trace.relative_to(results).as_posix() in listed_by_browser


def test_exec_capture_appears_without_restart(stack):
    results = stack.project / "save_results"
    known = traces(results)
    tensorboard_pid = ["supervisorctl", "-c", "docker/supervisord.conf", "pid", "tensorboard"]
    before = stack.exec(*tensorboard_pid).stdout.strip()
    started_at = stack.inspect()["State"]["StartedAt"]
    exec_started = time.monotonic()
    capture = stack.exec_in_background(*EXEC_CAPTURE)
    try:
        trace, landed, listed = land_then_list(stack, results, known, timeout=120)
    finally:
        output = capture.communicate(timeout=120)[0]
    assert capture.returncode == 0, output
    TIMINGS["compose exec capture: trace landed -> listed"] = f"{listed - landed:.1f} s"
    TIMINGS["compose exec capture: command start -> listed"] = f"{listed - exec_started:.1f} s"
    assert owners(trace.parent) == {(OWNER_UID, OWNER_GID)}
    after = stack.exec(*tensorboard_pid).stdout.strip()
    assert before == after and before.isdigit()
    assert stack.inspect()["State"]["StartedAt"] == started_at


def test_a_stopped_stack_starts_again_as_the_same_user(stack):
    """`compose stop` then `up` restarts the same container: it now starts directly as the re-pointed user
    (no root step); supervisord must still run, and the inference run at start lands owned by uid 1234."""
    results = stack.project / "save_results"
    known = traces(results)
    (container,) = stack.container_ids()
    stack.compose("stop")
    result = stack.compose("up", "--detach", "--wait", "--wait-timeout", "120", check=False)
    assert result.returncode == 0, f"{result.stderr}\n{stack.logs()}"
    assert stack.container_ids() == [container]
    land_then_list(stack, results, known, timeout=240)
    assert owners(results) == {(OWNER_UID, OWNER_GID)}


def test_compose_down_stops_cleanly_within_the_grace_period(stack):
    (cid,) = stack.container_ids()
    waiter = subprocess.Popen(["docker", "wait", cid], env=stack.engine.env, stdout=subprocess.PIPE, text=True)
    started = time.monotonic()
    stack.compose("down")
    seconds = time.monotonic() - started
    TIMINGS["compose down"] = f"{seconds:.1f} s"
    exit_code = waiter.communicate(timeout=30)[0].strip()
    assert exit_code == "0", f"container exited with {exit_code} (137 = killed after the grace period)"
    assert seconds < 30
    assert stack.container_ids() == []
