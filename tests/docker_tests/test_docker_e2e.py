"""End to end with a real Docker engine: build the image, `compose up`, see traces, `compose exec`, `down`.

Everything runs as the user would run it, with host networking on free loopback ports (see
engine.py); the stand-in base replaces the CUDA PyTorch image that cannot be pulled here.
"""

from __future__ import annotations

import os
import subprocess
import time

import pytest

from .stack import OWNER_GID, OWNER_UID, TIMINGS, start_stack
from .traces import land_then_list, owner_report, owners, owners_paths, traces
from helpers.traces import load_trace

# First test pays for the session fixtures: stand-in base (~2.5 min on a fresh machine) + two builds.
pytestmark = [pytest.mark.docker, pytest.mark.timeout(1200)]

CHECKOUT = "/workspace/LightX2V"
RESULTS = f"{CHECKOUT}/save_results"
# A second capture through `docker compose exec`, while the stack runs: the image's demo command.
EXEC_CAPTURE = ["lightx2v-demo", "--preset", "tiny", "--infer_steps", "2", "--prompt", "exec"]
# What the base image's python3 has installed, read with that interpreter, isolated from the working directory.
BASE_DISTRIBUTIONS = ("import importlib.metadata as m, importlib.util;"
                      "print(sorted(d.metadata['Name'] for d in m.distributions()),"
                      " importlib.util.find_spec('lightx2v'))")


def test_rebuild_after_a_code_change_reuses_the_dependency_layer(image):
    steps = image[1]
    install = [cached for step, cached in steps.items() if "install-stack.sh dependencies" in step]
    source = [cached for step, cached in steps.items() if step.startswith("COPY . ")]
    assert install == [True], steps
    assert source == [False], steps


def test_the_polyfill_is_fetched_on_a_base_whose_ca_is_only_in_its_system_bundle(docker_engine, standin_base, image):
    """Issue 20: behind a TLS-inspecting proxy (this machine's own network re-signs TLS) the base has the
    proxy's CA in its system bundle and PIP_CERT, and nothing for node: the assets stage must still fetch."""
    env = docker_engine.run("image", "inspect", "--format", "{{json .Config.Env}}", standin_base).stdout
    assert "NODE_EXTRA_CA_CERTS" not in env and "PIP_CERT=" in env, env
    cold_output = image[2]
    assert "npm trusts node's own roots and this machine's CA bundle(s)" in cold_output, cold_output
    assert "assets: installed webcomponents.js@0.7.24" in cold_output, cold_output
    assert "assets: WARNING" not in cold_output, cold_output


def test_torch_comes_from_the_base_image_untouched(docker_engine, standin_base, image):
    probe = (
        "import importlib.metadata as m, os; d = m.distribution('torch');"
        "record = next(f for f in d.files if f.name == 'RECORD');"
        "print(d.version, record.locate(), os.stat(record.locate()).st_mtime_ns)"
    )

    def torch_record(tag: str) -> str:
        return docker_engine.run("run", "--rm", "--network", "none", "--entrypoint", "python3", tag, "-c", probe).stdout

    assert torch_record(image[0]) == torch_record(standin_base)


def test_the_base_interpreter_gains_nothing(docker_engine, standin_base, image):
    """The stack lives in its own venv: the base python3 has the same distributions as before and no
    `lightx2v` of ours to shadow (or be shadowed by) the user's; the stack's interpreter has no torch."""

    def base(tag: str) -> str:
        return docker_engine.run("run", "--rm", "--network", "none", "--entrypoint", "python3", tag,
                                 "-I", "-c", BASE_DISTRIBUTIONS).stdout

    assert base(image[0]) == base(standin_base)
    assert base(image[0]).rstrip().endswith("None")
    stack = docker_engine.run("run", "--rm", "--network", "none", "--entrypoint", "lightx2v-stack-python", image[0],
                              "-c", "import importlib.util, lightx2v; print(importlib.util.find_spec('torch'), "
                              "lightx2v.__file__)").stdout.split()
    assert stack[0] == "None" and stack[1].startswith("/opt/lightx2v-profiling/venv/"), stack


@pytest.mark.parametrize(
    "results_owner, checkout_owner, expected",
    [
        ((4321, 4322), (OWNER_UID, OWNER_GID), (4321, 4322)),  # the results folder's owner wins
        (None, (OWNER_UID, OWNER_GID), (OWNER_UID, OWNER_GID)),  # no save_results yet: the checkout's owner
        ((0, 0), (OWNER_UID, OWNER_GID), (OWNER_UID, OWNER_GID)),  # root leftovers are handed over too
        ((0, 0), (0, 0), (0, 0)),  # rootless Docker: the host user is root inside
    ],
    ids=["folder-owner", "no-results-yet", "root-leftovers", "all-root"],
)
def test_entrypoint_runs_as_the_owner_of_the_checkout(
    docker_engine, image, tmp_path, results_owner, checkout_owner, expected
):
    checkout = tmp_path / "LightX2V"
    checkout.mkdir()
    os.chown(checkout, *checkout_owner)
    results = checkout / "save_results"
    if results_owner is not None:
        (results / "torch_profile").mkdir(parents=True)
        (results / "torch_profile" / "old.pt.trace.json").write_text("{}")
        for path in owners_paths(results):
            os.chown(path, *results_owner)
    out = docker_engine.run(
        "run", "--rm", "--network", "none", "-v", f"{checkout}:{CHECKOUT}",
        image[0], "sh", "-c", f"id -u; id -g; mkdir -p {RESULTS}/new && touch {RESULTS}/new/file",
    ).stdout.split()  # fmt: skip
    assert (int(out[0]), int(out[1])) == expected
    assert owners(results) == {expected}


@pytest.fixture(scope="module")
def stack(docker_engine, image, project):
    """compose.yaml with nothing set: this project is the checkout, the embedded demo runs at start."""
    stack = start_stack(docker_engine, image[0], project, f"lx2v-test-{os.getpid()}")
    TIMINGS["compose up -> healthy"] = f"{stack.healthy_at - stack.up_started:.1f} s"
    yield stack
    if stack.container_ids():
        print(stack.logs())
        stack.compose("down", check=False)


def test_compose_up_becomes_healthy_quickly(stack):
    assert stack.inspect()["State"]["Health"]["Status"] == "healthy"
    assert stack.healthy_at - stack.up_started < 60, stack.logs()


def test_the_servers_listen_on_all_interfaces_of_the_container(stack):
    """Issue 20: outside the image the servers default to loopback; the image says 0.0.0.0 explicitly (its
    ENV), which a published port needs. Host networking: the container's sockets are this machine's."""
    assert stack.exec("sh", "-c", "echo $LIGHTX2V_BIND_HOST").stdout.strip() == "0.0.0.0"
    listening = {(address, port) for address, port in _listening_sockets() if port in (stack.tb_port,
                                                                                       stack.browser_port)}
    assert listening == {("00000000", stack.tb_port), ("00000000", stack.browser_port)}, listening


def _listening_sockets() -> list[tuple[str, int]]:
    """(hex local address, port) of every listening IPv4 TCP socket, from /proc/net/tcp."""
    sockets = []
    for line in open("/proc/net/tcp").read().splitlines()[1:]:
        fields = line.split()
        address, port = fields[1].split(":")
        if fields[3] == "0A":  # TCP_LISTEN
            sockets.append((address, int(port, 16)))
    return sockets


def test_compose_creates_no_network(stack):
    networks = stack.engine.run("network", "ls", "--format", "{{.Name}}").stdout.split()
    assert sorted(networks) == ["host", "none"]


def test_default_inference_trace_reaches_the_host_owned_by_the_user(stack):
    results = stack.project / "save_results"
    trace, landed, listed = land_then_list(stack, results, set(), timeout=240)
    TIMINGS["compose up -> default inference's run listed"] = f"{listed - stack.up_started:.1f} s"
    if landed > stack.healthy_at:  # otherwise the wait includes TensorBoard's own start
        TIMINGS["default inference: trace landed -> listed"] = f"{listed - landed:.1f} s"
    assert owners(results) == {(OWNER_UID, OWNER_GID)}, owner_report(results)
    assert load_trace(trace)["traceEvents"]
    # The trace browser (the second viewer) lists it too, on its published port.
    listed_by_browser = [t["path"] for t in stack.get_json(stack.browser_port, "/api/traces")]
    assert trace.relative_to(results).as_posix() in listed_by_browser


def test_the_image_serves_the_offline_views(stack):
    """Issue 10: the offline views work in the image by default (the assets stage installed the polyfill)."""
    results = stack.project / "save_results"
    trace, _, _ = land_then_list(stack, results, set(), timeout=240)
    rel = trace.relative_to(results).as_posix()
    index = stack.get_text(stack.browser_port, "/")
    assert f"/timeline/{rel}" in index and f"/overview/{rel}" in index, index[:2000]
    assert "assets install" not in index  # the "offline views missing" notice names that command
    assert "offline Timeline is missing" not in stack.logs()
    polyfill = stack.get_text(stack.browser_port, "/assets/webcomponents.min.js")
    assert "@license" in polyfill and len(polyfill) > 100_000
    assert "tr.ui" in stack.get_text(stack.browser_port, "/vendor/trace_viewer_full.html")
    overview = stack.get_text(stack.browser_port, f"/overview/{rel}")
    assert "<svg" in overview and "<script" not in overview
    # TensorBoard's own Trace view takes the same polyfill from the image, not from a CDN.
    embedding = stack.get_text(stack.tb_port, "/data/plugin/pytorch_profiler/trace_embedding.html")
    assert "cdnjs" not in embedding and "webcomponents.min.js" in embedding
    assert "@license" in stack.get_text(stack.tb_port, "/data/plugin/pytorch_profiler/webcomponents.min.js")


def test_exec_capture_appears_without_restart(stack):
    results = stack.project / "save_results"
    known = traces(results)
    tensorboard_pid = ["lightx2v-supervisorctl", "pid", "tensorboard"]
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


def test_compose_down_stops_cleanly_within_the_grace_period(docker_engine, image, project):
    """A stack of its own (so no test depends on another's order) after its demo inference at start."""
    stack = start_stack(docker_engine, image[0], project, f"lx2v-test-down-{os.getpid()}")
    try:
        land_then_list(stack, stack.project / "save_results", traces(stack.project / "save_results"), timeout=240)
        _down_within_the_grace_period(stack)
    finally:
        if stack.container_ids():
            print(stack.logs())
            stack.compose("down", check=False)


def _down_within_the_grace_period(stack) -> None:
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
