"""A new user's first minutes, as the README gives them, on the system the test line targets: a stock Debian 12
`python3` (the stand-in base without its venv on PATH: Debian's pip, which refuses to install outside a venv),
a fresh clone, the README's first block pasted whole, TensorBoard answering and listing the embedded inference's
run, the trace browser listing its trace, and Ctrl-C stopping it all.

The block's last line, the test command, is .ci/run's own (tests/test_docs.py checks they are the same line): it
would run this suite inside itself, so it is left out here. Torch comes from a pip configuration that finds the
CPU build, as the README's note asks of a CPU-only machine: here the wheel folder the stand-in was made from.
Strict: nothing here skips in CI; a tool missing is a failure."""

from __future__ import annotations

import subprocess
import time
import uuid

import pytest

from .engine import HOST_CA_BUNDLE, torch_wheel
from conftest import REPO_ROOT, free_port
from helpers.procs import answers, http_get, runs, supervisor_stop_bound, wait_until
from helpers.readme_blocks import block_run_by

pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.timeout(1500)]

TEST_ID = "tests/docker_tests/test_new_user.py::test_the_first_block_on_a_fresh_clone_with_stock_debian_python3"
CI_LINE = "scripts/install_test_deps.sh && python3 -m pytest"
STOCK_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"  # Debian's, without the base's venv
INSTALL_TIMEOUT = 900  # torch from its wheel and `.[serve]` from the index, in a container on the 2-core VM


def _stock_debian(engine, base: str, *args: str, name: str | None = None, mounts=(), env=None,
                  detach: bool = False, check: bool = True) -> subprocess.CompletedProcess:
    """`docker run` of `base` as a stock Debian 12 user's shell: Debian's PATH, host networking (all traffic on
    loopback), pip told only where the CPU torch build is and which CA bundle this machine's network needs."""
    env_args = [arg for key, value in {"PATH": STOCK_PATH, "HOME": "/root", "PIP_CERT": HOST_CA_BUNDLE,
                                        **(env or {})}.items() for arg in ("-e", f"{key}={value}")]
    mount_args = [arg for source, target in mounts for arg in ("-v", f"{source}:{target}")]
    return engine.run("run", *(["-d"] if detach else ["--rm"]), *(["--name", name] if name else []),
                      "--network", "host", *env_args, *mount_args, base, *args, timeout=INSTALL_TIMEOUT, check=check)


def test_stock_debian_python3_refuses_pip_outside_a_venv(docker_engine, standin_base):
    """The base is what a user has, not what hides the problem: the README's old first line fails there."""
    result = _stock_debian(docker_engine, standin_base, "python3", "-m", "pip", "install", "tqdm", check=False)
    assert result.returncode != 0 and "externally-managed-environment" in result.stderr, result.stderr[-2000:]


@pytest.fixture(scope="module")
def wheels(docker_engine):
    """The folder holding the CPU torch wheel (fetched once per machine, as for the stand-in base)."""
    return torch_wheel(docker_engine.state_dir / "wheels").parent


def test_the_first_block_on_a_fresh_clone_with_stock_debian_python3(docker_engine, standin_base, wheels, tmp_path):
    commands = block_run_by(TEST_ID).commands()
    assert commands[-1] == CI_LINE, commands
    pasted = commands[:-1]
    assert pasted[0].startswith("python3 -m venv") and pasted[-1].endswith("lightx2v-serve"), pasted

    clone = tmp_path / "clone"
    cloned = subprocess.run(["git", "clone", "-q", str(REPO_ROOT), str(clone)], capture_output=True, text=True,
                            timeout=300)
    assert cloned.returncode == 0, f"git clone of {REPO_ROOT}: {cloned.stderr}"
    # the paste, in a shell that stops at the first failing line; its process group is the terminal's job
    (clone / ".pasted.sh").write_text("set -e\n" + "\n".join(pasted) + "\n")

    tb, browser = free_port(), free_port()
    name = f"lightx2v-new-user-{uuid.uuid4().hex[:8]}"
    _stock_debian(docker_engine, standin_base, "bash", "-c", "cd /home/user/clone && exec bash .pasted.sh",
                  name=name, detach=True, mounts=[(clone, "/home/user/clone"), (wheels, "/wheels")],
                  env={"PIP_FIND_LINKS": "/wheels", "TENSORBOARD_PORT": str(tb), "TRACE_BROWSER_PORT": str(browser)})

    def logs() -> str:
        result = docker_engine.run("logs", name, check=False)
        return result.stdout + result.stderr

    def running() -> bool:
        state = docker_engine.run("inspect", "-f", "{{.State.Running}}", name, check=False).stdout.strip()
        if state != "true":
            raise AssertionError(f"the paste ended early:\n{logs()[-4000:]}")
        return True

    try:
        started = time.monotonic()
        wait_until(lambda: running() and answers(tb), INSTALL_TIMEOUT, interval=1,
                   what="TensorBoard answering after the install")
        answered = time.monotonic() - started
        listed = wait_until(lambda: running() and [run for run in runs(tb) if run.endswith("_infer_main")], 300,
                            what="the embedded inference's run listed by TensorBoard")
        wait_until(lambda: answers(browser), 60, what="the trace browser")
        status, _, body = http_get(f"http://127.0.0.1:{browser}/")
        assert status == 200 and listed[0] in body.decode()
        print(f"new user, stock Debian python3: TensorBoard answered {answered:.1f} s after the paste, the first "
              f"run listed {time.monotonic() - started:.1f} s after it ({listed[0]})")
        out = logs()
        assert "Traceback" not in out and "externally-managed-environment" not in out, out[-4000:]
        # the clone's own stack serves (installed into the block's venv), no other copy of the project
        assert "serve: starting supervisord with /home/user/clone/docker/supervisord.conf" in out, out[-4000:]

        # Ctrl-C: SIGINT to the job's process group (bash, PID 1 here, and the serve it runs)
        docker_engine.run("exec", name, "/home/user/clone/.venv/bin/python", "-c",
                          "import os, signal; os.killpg(1, signal.SIGINT)")
        code = docker_engine.run("wait", name, timeout=supervisor_stop_bound(clone / "docker" / "supervisord.conf"))
        assert code.stdout.strip() == "0", logs()[-4000:]
        assert "stopping the stack" in logs()
        assert not answers(tb) and not answers(browser)
    finally:
        docker_engine.run("rm", "-f", name, check=False)

