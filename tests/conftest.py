"""Shared test helpers: where the repository is, how to start its modules in real subprocesses."""

from __future__ import annotations

import os
import socket
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


def pytest_collection_modifyitems(items):
    for item in items:
        if any(item.get_closest_marker(name) for name in HEAVY_MARKERS) and not item.get_closest_marker("slow"):
            item.add_marker(pytest.mark.slow)


def subprocess_env(**overrides: str) -> dict[str, str]:
    """Environment for a child Python that imports this checkout's `lightx2v`, installed or not."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH", "")) if p)
    env["PYTHONUNBUFFERED"] = "1"
    env.update(overrides)
    return env


def free_port() -> int:
    """A TCP port that was free on 127.0.0.1 a moment ago."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


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
