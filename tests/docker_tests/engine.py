"""A private Docker engine for the tests, and the stand-in base image it builds once.

CI machines have no container registry, so nothing can be pulled: the tests start Debian's own `dockerd`
(no bridge, no iptables; every container uses host networking, so all traffic stays on loopback) and make
a stand-in for the real CUDA PyTorch base from a debootstrapped Debian with the torch this machine runs
(the same version, fetched as a wheel by `pip download` through this machine's own pip configuration, so
any machine whose pip installed torch can make it). State lives in one persistent folder, so the stand-in
(about 2.5 minutes to make) is built once per machine and reused by later runs; a lock file keeps two test
runs from sharing the engine at once.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

STATE_DIR = Path(os.environ.get("LIGHTX2V_TEST_DOCKER_DIR", "/var/lib/lightx2v-test-docker"))
DEBIAN_SUITE = "bookworm"
STANDIN_PYTHON = "3.11"  # Debian 12's python3: the torch wheel is fetched for it
# A wheel file to use instead of fetching one (for machines whose pip cannot fetch torch)
ENV_TORCH_WHEEL = "LIGHTX2V_TEST_TORCH_WHEEL"
INSTALL_HINT = "apt-get install -y --no-install-recommends docker.io debootstrap iptables"
HOST_CA_BUNDLE = "/etc/ssl/certs/ca-certificates.crt"
# Changing how the stand-in is made changes its tag, so a stale one is never reused.
# v3: no NODE_EXTRA_CA_CERTS: like a user's base, only the system bundle (and PIP_CERT for pip) holds the CA.
# v4: Debian's python3-pip too, so /usr/bin/python3 is a stock Debian 12 python3 (pip refuses outside a venv, PEP 668)
STANDIN_RECIPE = ("v4: debootstrap minbase + python3-venv + python3-pip, /opt/venv + torch wheel + numpy"
                  " + host CA in the system bundle")


class EngineError(RuntimeError):
    """The test engine could not be started or used; the message says what to install or check."""


ENGINE_TOOLS = ("dockerd", "docker", "debootstrap")  # the engine, its CLI, and what makes the stand-in base


def missing_engine_tools() -> list[str]:
    """The engine's tools this machine lacks (before any is started: a lack skips outside CI, a failure fails)."""
    return [name for name in ENGINE_TOOLS if not shutil.which(name)]


def tool(name: str) -> str:
    """Path of a command-line tool, looking next to this Python too (pip puts console scripts there)."""
    found = shutil.which(name) or shutil.which(name, path=str(Path(sys.executable).parent))
    if not found:
        raise EngineError(f"`{name}` not found on PATH")
    return found


@dataclass
class Engine:
    """One running dockerd; `run()` calls the docker CLI against it."""

    state_dir: Path = STATE_DIR
    env: dict[str, str] = field(default_factory=dict)
    _proc: subprocess.Popen | None = None
    _lock: object | None = None
    _runtime_dir: str | None = None

    def start(self, timeout: float = 60.0) -> None:
        if not shutil.which("dockerd"):
            raise EngineError(f"dockerd not found; install Debian's engine: {INSTALL_HINT}")
        self.state_dir.mkdir(parents=True, exist_ok=True)
        self._lock = _acquire_lock(self.state_dir / "lock")
        _end_leftover_daemon(self.state_dir / "dockerd.pid", self.state_dir / "data")
        # Runtime state (socket, containerd state, pid file) is per run; only images persist.
        self._runtime_dir = tempfile.mkdtemp(prefix="lx2v-dockerd-", dir="/run" if os.access("/run", os.W_OK) else None)
        sock = f"{self._runtime_dir}/docker.sock"
        log = open(self.state_dir / "dockerd.log", "wb")
        self._proc = subprocess.Popen(
            [
                "dockerd",
                f"--data-root={self.state_dir / 'data'}",
                f"--exec-root={self._runtime_dir}/exec",
                f"--pidfile={self._runtime_dir}/dockerd.pid",
                f"--host=unix://{sock}",
                "--bridge=none",
                "--iptables=false",
                "--ip6tables=false",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        (self.state_dir / "dockerd.pid").write_text(str(self._proc.pid))
        config_dir = Path(self._runtime_dir, "config")
        # Compose v5 from PyPI as a CLI plugin, so tests type `docker compose ...` exactly as users do.
        (config_dir / "cli-plugins").mkdir(parents=True)
        (config_dir / "cli-plugins" / "docker-compose").symlink_to(tool("docker-compose"))
        self.env = {
            **os.environ,
            "DOCKER_HOST": f"unix://{sock}",
            # A client config of our own: no credential helpers or contexts from the user's ~/.docker.
            "DOCKER_CONFIG": str(config_dir),
            "DOCKER_BUILDKIT": "0",  # Debian's engine has no BuildKit builder; the Dockerfile must not need it
        }
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise EngineError(f"dockerd exited with {self._proc.returncode}; see {self.state_dir / 'dockerd.log'}")
            if subprocess.run(["docker", "version"], env=self.env, capture_output=True).returncode == 0:
                self._remove_leftovers()
                return
            time.sleep(0.5)
        raise EngineError(f"dockerd did not answer within {timeout:.0f} s; see {self.state_dir / 'dockerd.log'}")

    def _remove_leftovers(self) -> None:
        """Containers and test images an interrupted earlier run left behind; the engine is ours alone, and
        only the stand-in base is worth keeping."""
        containers = self.run("ps", "-aq").stdout.split()
        if containers:
            self.run("rm", "-f", *containers)
        images = self.run("images", "-q", "lightx2v-test-image").stdout.split()
        if images:
            self.run("rmi", "-f", *set(images))
        self.run("image", "prune", "-f")

    def stop(self) -> None:
        if self._proc and self._proc.poll() is None:
            self._proc.send_signal(signal.SIGTERM)
            try:
                self._proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        (self.state_dir / "dockerd.pid").unlink(missing_ok=True)
        if self._runtime_dir:
            shutil.rmtree(self._runtime_dir, ignore_errors=True)
        if self._lock is not None:
            self._lock.close()

    def run(self, *args: str, check: bool = True, timeout: float = 600, **kwargs) -> subprocess.CompletedProcess:
        """`docker ARGS`, text output captured; a failure raises with the command's output in the message."""
        kwargs.setdefault("env", self.env)
        result = subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout, **kwargs)
        if check and result.returncode != 0:
            raise EngineError(
                f"docker {' '.join(args)} failed ({result.returncode}):\n{result.stdout}\n{result.stderr}"
            )
        return result

    def image_exists(self, tag: str) -> bool:
        return self.run("image", "inspect", tag, check=False).returncode == 0


def _acquire_lock(path: Path, timeout: float = 1200.0):
    handle = open(path, "w")
    deadline = time.monotonic() + timeout
    while True:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return handle
        except BlockingIOError:
            if time.monotonic() > deadline:
                raise EngineError(f"another test run holds {path} for over {timeout:.0f} s") from None
            time.sleep(1)


def _end_leftover_daemon(pid_file: Path, data_root: Path) -> None:
    """Stop a dockerd that an interrupted earlier run of these tests left on our data root (it would hold
    containerd's database locked). Only a process whose command line names our data root is touched."""
    try:
        pid = int(pid_file.read_text())
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    except (OSError, ValueError):
        return
    if "dockerd" not in cmdline or f"--data-root={data_root}" not in cmdline:
        return
    os.kill(pid, signal.SIGTERM)
    for _ in range(300):
        if not Path(f"/proc/{pid}").exists():
            return
        time.sleep(0.1)
    os.kill(pid, signal.SIGKILL)


def torch_requirement() -> str:
    """`torch==<version>` of the torch this machine runs (CPU builds carry `+cpu`), or the explicit wheel."""
    explicit = os.environ.get(ENV_TORCH_WHEEL)
    if explicit:
        return Path(explicit).name
    try:
        return f"torch=={version('torch')}"
    except PackageNotFoundError:
        raise EngineError("torch is not installed here; install the CPU build the tests run with (see .ci/run), "
                          f"or point {ENV_TORCH_WHEEL} at a cp311 torch wheel") from None


def torch_wheel(cache: Path) -> Path:
    """A cp311 wheel of `torch_requirement()`: the explicit file, else `pip download` into `cache`.

    pip resolves it the way it resolved this machine's own torch (its index, extra index or find-links), so
    nothing depends on where a wheel happens to lie on the development machine.
    """
    explicit = os.environ.get(ENV_TORCH_WHEEL)
    if explicit:
        if not Path(explicit).is_file():
            raise EngineError(f"{ENV_TORCH_WHEEL}={explicit}: no such file")
        return Path(explicit)
    requirement = torch_requirement()
    cache.mkdir(parents=True, exist_ok=True)
    result = subprocess.run(
        [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary", ":all:",
         "--python-version", STANDIN_PYTHON, "--implementation", "cp", "--platform", "manylinux_2_28_x86_64",
         "--dest", str(cache), requirement],
        capture_output=True, text=True,
    )  # fmt: skip
    wanted = requirement.split("==", 1)[1]
    wheels = sorted(p for p in cache.glob("torch-*.whl") if p.name.startswith(f"torch-{wanted}-"))
    if result.returncode != 0 or not wheels:
        tail = (result.stderr or result.stdout).strip()[-800:]
        raise EngineError(f"stand-in base: `pip download {requirement}` (cp311, manylinux x86_64) failed: {tail}\n"
                          f"Configure pip to find that torch build, or point {ENV_TORCH_WHEEL} at a wheel file.")
    return wheels[-1]


def standin_tag() -> str:
    key = f"{STANDIN_RECIPE}|{DEBIAN_SUITE}|{torch_requirement()}"
    return "lightx2v-test-standin:" + hashlib.sha256(key.encode()).hexdigest()[:12]


def ensure_standin_base(engine: Engine) -> tuple[str, float | None]:
    """The stand-in base image's tag, and the seconds spent making it (None when it already existed).

    Like `pytorch/pytorch`, it offers `python3` whose pip may install (a venv first on PATH, as conda's env
    is there) and an importable torch. Without that venv on PATH it is a stock Debian 12: /usr/bin/python3 with
    Debian's pip, which refuses to install outside a venv (tests/docker_tests/test_new_user.py). Like a user's
    base behind a TLS-inspecting proxy, this machine's CA
    bundle is its system bundle and pip is told to use it (PIP_CERT); nothing tells node about it.
    """
    tag = standin_tag()
    if engine.image_exists(tag):
        return tag, None
    if not shutil.which("debootstrap"):
        raise EngineError(f"debootstrap not found; {INSTALL_HINT}")
    started = time.monotonic()
    wheel = torch_wheel(engine.state_dir / "wheels")
    work = Path(tempfile.mkdtemp(prefix="standin-", dir=engine.state_dir))
    rootfs = work / "rootfs"
    try:
        cache = engine.state_dir / "debs"
        cache.mkdir(exist_ok=True)
        _check(
            [
                "debootstrap",
                "--variant=minbase",
                "--include=python3,python3-venv,python3-pip,ca-certificates",
                f"--cache-dir={cache}",
                DEBIAN_SUITE,
                str(rootfs),  # no mirror argument: debootstrap's default
            ],
            "debootstrap",
        )
        shutil.copyfile(HOST_CA_BUNDLE, rootfs / HOST_CA_BUNDLE.lstrip("/"))
        shutil.copyfile(wheel, rootfs / "tmp" / wheel.name)
        chroot_env = {
            "PATH": "/opt/venv/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            "PIP_CERT": HOST_CA_BUNDLE,
            "PIP_DISABLE_PIP_VERSION_CHECK": "1",
            "PIP_DEFAULT_TIMEOUT": "180",
            "HOME": "/root",
        }
        _check(["chroot", str(rootfs), "/usr/bin/python3", "-m", "venv", "/opt/venv"], "venv", env=chroot_env)
        # numpy: the official PyTorch images ship it, so the project must not be the one to bring it.
        _check(
            ["chroot", str(rootfs), "python3", "-m", "pip", "install", "--no-cache-dir", f"/tmp/{wheel.name}", "numpy"],
            "pip install torch",
            env=chroot_env,
        )
        (rootfs / "tmp" / wheel.name).unlink()
        tar = subprocess.Popen(["tar", "-C", str(rootfs), "-c", "."], stdout=subprocess.PIPE)
        engine.run(
            "import",
            "--change", "ENV PATH=/opt/venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            "--change", f"ENV PIP_CERT={HOST_CA_BUNDLE}",
            "--change", "WORKDIR /workspace",
            "-", tag,
            stdin=tar.stdout,
        )  # fmt: skip
        tar.wait()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    for old in engine.run("images", "--format", "{{.Repository}}:{{.Tag}}", "lightx2v-test-standin").stdout.split():
        if old != tag:
            engine.run("rmi", old, check=False)
    return tag, time.monotonic() - started


def _check(cmd: list[str], what: str, env: dict[str, str] | None = None) -> None:
    result = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if result.returncode != 0:
        tail = "\n".join((result.stdout + result.stderr).splitlines()[-30:])
        raise EngineError(f"stand-in base: {what} failed ({result.returncode}):\n{tail}")
