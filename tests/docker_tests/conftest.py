"""Fixtures for the Docker tests: a private engine, the stand-in base, the project's image.

The project is tested the way a user runs it: a copy of the checkout owned by an unprivileged user (so the
test, which runs as root, can tell "files belong to the invoking user" from "files belong to root"), the
image built from the project's Dockerfile with the legacy builder, and compose.yaml plus a small CI override.
Build and start-up times are collected in TIMINGS and printed at the end of the run (tests/conftest.py).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from .engine import INSTALL_HINT, Engine, ensure_standin_base, missing_engine_tools
from .stack import TIMINGS, build, cached_steps, copy_project
from conftest import missing_tool


@pytest.fixture(scope="session")
def docker_engine():
    missing = missing_engine_tools()
    if missing:
        missing_tool(f"needs {', '.join(missing)} for a private Docker engine: {INSTALL_HINT}")
    engine = Engine()
    engine.start()
    try:
        yield engine
    finally:
        engine.stop()


@pytest.fixture(scope="session")
def standin_base(docker_engine) -> str:
    tag, seconds = ensure_standin_base(docker_engine)
    TIMINGS["stand-in base"] = "reused" if seconds is None else f"built in {seconds:.0f} s"
    return tag


@pytest.fixture(scope="session")
def project(tmp_path_factory) -> Path:
    return copy_project(tmp_path_factory.mktemp("docker-project") / "LightX2V")


@pytest.fixture(scope="session")
def image(docker_engine, standin_base, project):
    """The project's image, built cold (no cache: a cached layer could hide a broken install), then rebuilt
    after a one-line code change to show the dependency layer survives it: (tag, {step: cached} of the
    rebuild, the cold build's output)."""
    tag = f"lightx2v-test-image:{os.getpid()}"
    cold, cold_output = build(docker_engine, project, standin_base, tag, "--no-cache")
    with open(project / "lightx2v" / "__init__.py", "a") as f:
        f.write("# one-line change: the rebuild must reuse the dependency layer\n")
    warm, output = build(docker_engine, project, standin_base, tag)
    TIMINGS["image build, cold (no cache)"] = f"{cold:.1f} s"
    TIMINGS["image build after a one-line code change"] = f"{warm:.1f} s"
    yield tag, cached_steps(output), cold_output
    docker_engine.run("rmi", "-f", tag, check=False)
    docker_engine.run("image", "prune", "-f", check=False)
