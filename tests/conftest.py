"""Shared test helpers: where the repository is, how to start its modules in real subprocesses."""

from __future__ import annotations

import itertools
import os
import socket
import sys
from pathlib import Path
from typing import NoReturn

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).resolve().parent / "fixtures"
H200_TRACE = FIXTURES / "h200_dit_stack.pt.trace.json.gz"


# Markers that say what a test starts (registered in pyproject.toml); each of them makes the test slow too, so
# `python3 -m pytest -m "not slow"` is the fast part: unit tests and the summary on files, no engines or ranks.
HEAVY_MARKERS = ("docker", "torchrun", "browser")


def in_ci() -> bool:
    """True when the run is CI's (``CI=true``, as .ci/run and most CI services set it)."""
    return os.environ.get("CI", "").strip().lower() in {"1", "true", "yes"}


def missing_tool(what: str) -> NoReturn:
    """A tool a test needs is not on this machine: outside CI the test skips and says what to install; in CI it
    fails, so a machine that lost a tool never turns green by skipping."""
    if in_ci():
        pytest.fail(f"{what} (CI=true: a missing tool fails the run instead of skipping)", pytrace=False)
    pytest.skip(what)


# pytest-xdist (the README's command runs two workers) hands out whole files, and every Docker test to one worker:
# helpers/xdist_scopes.py says how and why. A Docker test lives under DOCKER_DIR, where that rule finds it.
def pytest_collection_modifyitems(items):
    from helpers.xdist_scopes import DOCKER_DIR

    for item in items:
        if any(item.get_closest_marker(name) for name in HEAVY_MARKERS) and not item.get_closest_marker("slow"):
            item.add_marker(pytest.mark.slow)
        if item.get_closest_marker("docker") and not item.nodeid.startswith(DOCKER_DIR):
            raise pytest.UsageError(f"{item.nodeid}: a Docker test belongs under {DOCKER_DIR}, where the xdist "
                                    "scheduler keeps every Docker test on one worker (helpers/xdist_scopes.py)")


def pytest_xdist_make_scheduler(config, log):
    from helpers.xdist_scopes import FileScheduling

    return FileScheduling(config, log)


# Build and start-up times the Docker tests measured (tests/docker_tests/stack.py TIMINGS), printed once at the end
# of the run (docs/docker.md quotes them). Under xdist they are measured in a worker and sent to the controller.
def _docker_timings() -> dict[str, str]:
    stack = sys.modules.get("docker_tests.stack")
    return dict(stack.TIMINGS) if stack is not None else {}


_WORKER_TIMINGS: dict[str, str] = {}


def pytest_sessionfinish(session):
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:
        workeroutput["docker_timings"] = _docker_timings()


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    _WORKER_TIMINGS.update(getattr(node, "workeroutput", {}).get("docker_timings", {}))


def pytest_terminal_summary(terminalreporter):
    timings = {**_docker_timings(), **_WORKER_TIMINGS}
    if timings:
        terminalreporter.write_sep("-", "docker timings (docs/docker.md)")
        for name, value in timings.items():
            terminalreporter.write_line(f"{name}: {value}")


def subprocess_env(**overrides: str) -> dict[str, str]:
    """Environment for a child Python that imports this checkout's `lightx2v`, installed or not."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH", "")) if p)
    env["PYTHONUNBUFFERED"] = "1"
    env.update(overrides)
    return env


# Ports for the servers tests start: each xdist worker counts through its own block below Linux's ephemeral range
# (32768-60999), so no port handed out here is also handed to another worker, to a client socket's source port or
# to anything else that binds port 0 between our check and the server's bind.
PORT_BASE, PORT_BLOCK, PORT_BLOCKS = 20000, 1000, 12


def _worker_index() -> int:
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")  # gw0, gw1, ...; unset without xdist
    return int(worker[2:]) % PORT_BLOCKS if worker[2:].isdigit() else 0


_PORT_CANDIDATES = itertools.cycle(range(PORT_BASE + _worker_index() * PORT_BLOCK,
                                         PORT_BASE + (_worker_index() + 1) * PORT_BLOCK))


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago and that no other worker of this run is handed."""
    for port in itertools.islice(_PORT_CANDIDATES, PORT_BLOCK):
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:  # in use (another run, a server from an earlier test still closing)
                continue
            return port
    raise RuntimeError(f"no free port in {PORT_BASE + _worker_index() * PORT_BLOCK}+{PORT_BLOCK}")


@pytest.fixture
def fresh_profiler_session(tmp_path, monkeypatch):
    """A new capture session in an empty working directory, with the profiler's environment switches unset and
    empty call-site and config caches, as in a new process: a config validated by an earlier test would otherwise
    be served for an equal value (1 for True) that the test expects to be refused."""
    from lightx2v.utils import torch_trace_profiler
    from lightx2v.utils.torch_trace_profiler import TorchTraceProfiler

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(torch_trace_profiler, "_CONFIGS", {})
    monkeypatch.setattr(torch_trace_profiler, "_SITES", {})
    for var in ("LIGHTX2V_TORCH_PROFILE", "LIGHTX2V_TORCH_PROFILE_DIR", "LIGHTX2V_TENSORBOARD_PORT",
                "LIGHTX2V_TORCH_PROFILE_MEMORY_SNAPSHOT"):
        monkeypatch.delenv(var, raising=False)
    TorchTraceProfiler.reset_session()
    yield
    TorchTraceProfiler.reset_session()
