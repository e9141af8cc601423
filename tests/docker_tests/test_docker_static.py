"""Static checks of the Docker files: linters, the Compose spec, and the promises compose.yaml makes.

No engine needed; these run in seconds and catch what a Docker build or `compose up` would only show later.
"""

from __future__ import annotations

import configparser
import json
import os
import re
import subprocess

import pytest

from .engine import EngineError
from .engine import tool as find_tool
from .stack import REPO_ROOT, SERVICE
from conftest import missing_tool

COMPOSE = REPO_ROOT / "compose.yaml"
CI_OVERRIDE = REPO_ROOT / "tests" / "docker_tests" / "compose.ci.yaml"
DOCKERFILE = REPO_ROOT / "Dockerfile"
SUPERVISORD_CONF = REPO_ROOT / "docker" / "supervisord.conf"
SHELL_SCRIPTS = [REPO_ROOT / "docker" / name
                 for name in ("entrypoint.sh", "smoke-gpu.sh", "inference.sh", "install-stack.sh", "stack-command")]


def tool(name: str) -> str:
    """A linter or Compose's CLI; one not installed skips outside CI and fails in it."""
    try:
        return find_tool(name)
    except EngineError:
        missing_tool(f"needs `{name}` (scripts/install_test_deps.sh installs it)")


def run(*cmd: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, cwd=REPO_ROOT, env=env)


def compose_env(**values: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LIGHTX2V_", "TB_", "TRACE_BROWSER_"))}
    env.update(values)
    return env


def compose_config(*files, **env: str) -> dict:
    args = [a for f in files for a in ("--file", str(f))]
    result = run(tool("docker-compose"), *args, "config", "--format", "json", env=compose_env(**env))
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)["services"][SERVICE]


def test_hadolint_passes_the_dockerfile():
    result = run(tool("hadolint"), str(DOCKERFILE))
    assert result.returncode == 0, result.stdout + result.stderr


def test_dockerfile_builds_with_the_legacy_builder_only():
    text = DOCKERFILE.read_text()
    assert not re.search(r"^#\s*syntax\s*=", text, flags=re.MULTILINE | re.IGNORECASE)
    assert "--mount" not in text


@pytest.mark.parametrize("script", SHELL_SCRIPTS, ids=lambda p: p.name)
def test_shell_scripts_pass_shellcheck(script):
    result = run(tool("shellcheck"), str(script))
    assert result.returncode == 0, result.stdout + result.stderr


def test_compose_files_are_valid_for_compose_v5():
    assert run(tool("docker-compose"), "--file", str(COMPOSE), "config", "-q", env=compose_env()).returncode == 0
    merged = run(
        tool("docker-compose"), "--file", str(COMPOSE), "--file", str(CI_OVERRIDE), "config", "-q",
        env=compose_env(LIGHTX2V_TEST_IMAGE="x", TB_PORT="1", TRACE_BROWSER_PORT="2"),
    )  # fmt: skip
    assert merged.returncode == 0, merged.stderr


@pytest.mark.slow
def test_compose_file_matches_the_compose_spec_schema():
    # Only compose.yaml: the CI override's `!reset` tags are Compose's own YAML extension, which
    # check-jsonschema's parser rejects; `docker-compose config` above validates the merged result.
    result = run(tool("check-jsonschema"), "--builtin-schema", "vendor.compose-spec", str(COMPOSE))
    assert result.returncode == 0, result.stdout + result.stderr


def test_compose_publishes_on_loopback_and_prints_the_host_port():
    service = compose_config(COMPOSE, TB_PORT="23456", TRACE_BROWSER_PORT="23457")
    published = {(p["host_ip"], p["published"], p["target"]) for p in service["ports"]}
    assert published == {("127.0.0.1", "23456", 16006), ("127.0.0.1", "23457", 9001)}
    assert service["environment"]["LIGHTX2V_TENSORBOARD_PORT"] == "23456"
    assert service["environment"]["LIGHTX2V_TRACE_BROWSER_URL"] == "http://127.0.0.1:23457/"

    defaults = compose_config(COMPOSE)
    assert {p["published"] for p in defaults["ports"]} == {"16006", "9001"}


def test_compose_passes_the_users_inference_command_through():
    service = compose_config(COMPOSE, LIGHTX2V_INFER_CMD="python my_infer.py --steps 2")
    assert service["environment"]["LIGHTX2V_INFER_CMD"] == "python my_infer.py --steps 2"


def test_compose_reserves_all_gpus_and_mounts_the_checkout():
    service = compose_config(COMPOSE)
    (device,) = service["deploy"]["resources"]["reservations"]["devices"]
    assert device["driver"] == "nvidia" and device["count"] == -1 and device["capabilities"] == ["gpu"]
    assert service["ipc"] == "host"
    # Nothing set: this project is the checkout (its demo runs); traces in ./save_results as before.
    (mount,) = service["volumes"]
    assert (mount["type"], mount["source"], mount["target"]) == ("bind", str(REPO_ROOT), "/workspace/LightX2V")
    assert not mount.get("read_only")
    # LIGHTX2V_PATH: the user's checkout, where LightX2V's scripts and guide expect it.
    (mount,) = compose_config(COMPOSE, LIGHTX2V_PATH="/home/u/LightX2V")["volumes"]
    assert (mount["source"], mount["target"]) == ("/home/u/LightX2V", "/workspace/LightX2V")


def supervisor_stop_timeouts() -> dict[str, float]:
    """stopwaitsecs of every program in docker/supervisord.conf (supervisor's default is 10 s)."""
    parser = configparser.RawConfigParser()
    parser.read(SUPERVISORD_CONF)
    return {
        section: float(parser[section].get("stopwaitsecs", "10"))
        for section in parser.sections()
        if section.startswith("program:")
    }


def test_stop_grace_period_outlasts_supervisors_stop_timeout():
    grace = compose_config(COMPOSE)["stop_grace_period"]
    seconds = int(re.fullmatch(r"(\d+)s", grace).group(1))
    timeouts = supervisor_stop_timeouts()
    assert timeouts, f"no [program:...] sections in {SUPERVISORD_CONF}"
    # supervisord stops programs one after another, each within its stopwaitsecs.
    assert seconds > sum(timeouts.values()), (grace, timeouts)


def test_the_image_never_sets_pythonpath_or_puts_its_commands_first():
    """The user's Python must stay the user's: no PYTHONPATH from the image, and the stack's commands come after
    the base's PATH (they are named lightx2v-*, and no `python` of ours is among them)."""
    text = DOCKERFILE.read_text()
    assert "PYTHONPATH=" not in re.sub(r"LIGHTX2V_\w*PYTHONPATH=", "", text)
    assert re.search(r"^\s*PATH=\$\{PATH\}:/opt/lightx2v-profiling/bin\s*$", text, flags=re.MULTILINE)


def test_dockerfile_sets_a_default_for_every_variable_supervisord_reads():
    needed = set(re.findall(r"%\(ENV_(\w+)\)s", SUPERVISORD_CONF.read_text()))
    env_block = re.findall(r"^ENV ((?:.*\\\n)*.*)$", DOCKERFILE.read_text(), flags=re.MULTILINE)
    defined = set(re.findall(r"(\w+)=", " ".join(env_block)))
    assert needed <= defined, f"supervisord.conf reads {sorted(needed - defined)} with no ENV default in the Dockerfile"


def test_the_servers_listen_on_loopback_unless_the_image_says_otherwise():
    """Issue 20: supervisord.conf (also run by `python -m lightx2v.serve`) defaults to 127.0.0.1; only the image,
    which knows a published port needs all interfaces, sets 0.0.0.0, explicitly."""
    hosts = re.findall(r'--host "\$\{LIGHTX2V_BIND_HOST:-([^}]*)\}"', SUPERVISORD_CONF.read_text())
    assert hosts == ["127.0.0.1", "127.0.0.1"]
    assert re.search(r"^\s+LIGHTX2V_BIND_HOST=0\.0\.0\.0 \\$", DOCKERFILE.read_text(), flags=re.MULTILINE)
