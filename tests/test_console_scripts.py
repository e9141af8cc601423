"""The commands the docs name (README.md and docs/, both languages) exist once the project is installed (`pip install
-e .`) or in the image, under the names the image gives them, and each answers --help."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest
import tomllib

from conftest import REPO_ROOT, missing_tool, subprocess_env

SCRIPTS = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]["scripts"]
IMAGE_ONLY = {"lightx2v-stack-python", "lightx2v-supervisorctl"}  # the image's interpreter and its supervisord
OUTSIDE_DOCKER_ONLY = {"lightx2v-serve"}  # the stack without Docker; the image's entrypoint does this itself


def image_commands() -> set[str]:
    return set(re.findall(r"^\s+(lightx2v-[a-z-]+)\)", (REPO_ROOT / "docker" / "stack-command").read_text(), re.M))


def test_the_installed_commands_are_the_images_under_the_same_names():
    assert set(SCRIPTS) - OUTSIDE_DOCKER_ONLY == image_commands() - IMAGE_ONLY


DOCS = [REPO_ROOT / "README.md", *sorted((REPO_ROOT / "docs").rglob("*.md"))]


def test_every_command_the_docs_name_is_installed_or_image_only():
    """Any `lightx2v-<name>` a doc writes as a command (not a path, an image or a project name: `lightx2v-assets
    install`, not `lightx2v-profiling`) is one pip installs or the image's own."""
    named = {name for doc in DOCS
             for name in re.findall(r"(?<![\w/.-])(lightx2v-[a-z]+(?:-[a-z]+)*)(?![\w/.:-])", doc.read_text())}
    # the image's folder and tag, a Compose project name, the profiler's watcher thread
    known_names = {"lightx2v-profiling", "lightx2v-alice", "lightx2v-capture-watcher"}
    assert named - known_names <= set(SCRIPTS) | IMAGE_ONLY


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_each_installed_command_answers_help(name):
    path = shutil.which(name)
    if path is None:
        missing_tool(f"`{name}` is not on PATH: install the project (`pip install -e .`, scripts/install_test_deps.sh)")
    result = subprocess.run([path, "--help"], capture_output=True, text=True, timeout=180, cwd=REPO_ROOT,
                            env=subprocess_env())
    assert result.returncode == 0, result.stderr[-2000:]
    assert "usage:" in result.stdout and "Traceback" not in result.stderr
    if name != "lightx2v-tensorboard":  # TensorBoard's own parser names itself
        assert result.stdout.startswith(f"usage: {name} "), result.stdout[:200]  # as typed: a line to copy


@pytest.mark.parametrize(("argv0", "named"), [
    ("/venv/bin/lightx2v-trace-summary", "lightx2v-trace-summary"),
    ("/repo/lightx2v/trace_summary/__main__.py", "python -m lightx2v.trace_summary"),  # python -m
    ("", "python -m lightx2v.trace_summary")])
def test_a_command_names_itself_as_typed(monkeypatch, argv0, named):
    from lightx2v.program import program

    monkeypatch.setattr("sys.argv", [argv0])
    assert program("lightx2v.trace_summary") == named
