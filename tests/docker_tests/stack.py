"""The project as a user runs it: a checkout copy owned by a non-root user, its image, a compose stack."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from .engine import Engine
from conftest import free_port  # containers use host networking: the one port rule of every test

REPO_ROOT = Path(__file__).resolve().parents[2]
OWNER_UID = OWNER_GID = 1234  # the "host user" owning the project copy; not root, not in /etc/passwd
SERVICE = "lightx2v"
TIMINGS: dict[str, str] = {}  # printed at the end of the run by tests/conftest.py


def copy_project(dst: Path, uid: int = OWNER_UID, gid: int = OWNER_GID) -> Path:
    """A copy of the checkout as a user would have it, owned by uid:gid, without outputs of earlier runs."""
    ignore = shutil.ignore_patterns(
        ".git", "save_results", "__pycache__", ".pytest_cache", "*.egg-info", ".venv", "build", "dist"
    )
    shutil.copytree(REPO_ROOT, dst, ignore=ignore, symlinks=True)
    for path in [dst, *dst.rglob("*")]:
        os.lchown(path, uid, gid)
    return dst


def build(engine: Engine, context: Path, base: str, tag: str, *extra: str) -> tuple[float, str]:
    started = time.monotonic()
    out = engine.run(
        "build", "--network", "host", "--build-arg", f"BASE_IMAGE={base}", "-t", tag, *extra, str(context)
    ).stdout
    return time.monotonic() - started, out


def cached_steps(build_output: str) -> dict[str, bool]:
    """Legacy builder output -> {step instruction: served from cache}."""
    steps = re.split(r"^Step \d+/\d+ : ", build_output, flags=re.MULTILINE)[1:]
    return {step.splitlines()[0]: " ---> Using cache" in step for step in steps}


@dataclass
class Stack:
    """A compose project: compose.yaml + the CI override, in the project copy, on free loopback ports."""

    engine: Engine
    project: Path
    name: str
    env: dict[str, str]
    tb_port: int
    browser_port: int
    up_started: float = 0.0  # time.monotonic() at `compose up`
    healthy_at: float = 0.0  # time.monotonic() when `compose up --wait` returned
    overrides: tuple[Path, ...] = ()  # more compose files, as a user's compose.override.yaml

    def compose_cmd(self, *args: str) -> list[str]:
        files = [self.project / "compose.yaml", self.project / "tests" / "docker_tests" / "compose.ci.yaml",
                 *self.overrides]
        return [
            "docker",
            "compose",
            "--project-name",
            self.name,
            *(a for f in files for a in ("--file", str(f))),
            *args,
        ]

    def compose(self, *args: str, check: bool = True, timeout: float = 300) -> subprocess.CompletedProcess:
        result = subprocess.run(self.compose_cmd(*args), env=self.env, capture_output=True, text=True, timeout=timeout)
        if check and result.returncode != 0:
            raise AssertionError(f"docker compose {' '.join(args)} failed:\n{result.stdout}\n{result.stderr}")
        return result

    def exec(self, *cmd: str, timeout: float = 300, workdir: str | None = None) -> subprocess.CompletedProcess:
        return self.compose("exec", "-T", *(["-w", workdir] if workdir else []), SERVICE, *cmd, timeout=timeout)

    def exec_in_background(self, *cmd: str, workdir: str | None = None) -> subprocess.Popen:
        return subprocess.Popen(
            self.compose_cmd("exec", "-T", *(["-w", workdir] if workdir else []), SERVICE, *cmd),
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )

    def container_ids(self, all_states: bool = True) -> list[str]:
        args = ["ps", "-q", "--filter", f"label=com.docker.compose.project={self.name}"]
        return self.engine.run(*args, *(["-a"] if all_states else [])).stdout.split()

    def inspect(self) -> dict:
        (cid,) = self.container_ids()
        return json.loads(self.engine.run("inspect", cid).stdout)[0]

    def get_json(self, port: int, path: str):
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as response:
            return json.load(response)

    def get_text(self, port: int, path: str) -> str:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as response:
            return response.read().decode()

    def runs(self) -> list[str]:
        """Run names the PyTorch Profiler plugin lists, through its HTTP API on loopback."""
        return self.get_json(self.tb_port, "/data/plugin/pytorch_profiler/runs")["runs"]

    def logs(self) -> str:
        result = self.compose("logs", "--no-color", check=False)
        return result.stdout + result.stderr


def stack_env(engine: Engine, image_tag: str, tb_port: int, browser_port: int, **settings: str) -> dict[str, str]:
    """The shell environment of `docker compose`: the test's image and ports, plus user settings such as
    LIGHTX2V_PATH and LIGHTX2V_INFER_CMD (none inherited from the test's own environment)."""
    env = {k: v for k, v in engine.env.items() if not k.startswith(("LIGHTX2V_", "TB_", "TRACE_BROWSER_"))}
    env.update(
        LIGHTX2V_TEST_IMAGE=image_tag,
        TB_PORT=str(tb_port),
        TRACE_BROWSER_PORT=str(browser_port),
        **settings,
    )
    return env


def start_stack(engine: Engine, image_tag: str, project: Path, name: str, overrides: tuple[Path, ...] = (),
                **settings: str) -> Stack:
    """`docker compose up --detach --wait` of compose.yaml (+ the CI override, + `overrides`) on free ports."""
    tb_port, browser_port = free_port(), free_port()
    stack = Stack(engine=engine, project=project, name=name,
                  env=stack_env(engine, image_tag, tb_port, browser_port, **settings),
                  tb_port=tb_port, browser_port=browser_port, overrides=overrides)
    stack.up_started = time.monotonic()
    result = stack.compose("up", "--detach", "--wait", "--wait-timeout", "120", check=False)
    stack.healthy_at = time.monotonic()
    assert result.returncode == 0, f"compose up failed:\n{result.stderr}\n{stack.logs()}"
    return stack
