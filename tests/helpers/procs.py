"""Helpers for tests that run real servers: HTTP on loopback, waiting, process trees read from /proc."""

from __future__ import annotations

import configparser
import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from conftest import REPO_ROOT, free_port, subprocess_env

PLUGIN = "/data/plugin/pytorch_profiler"


def http_get(url: str, timeout: float = 10.0, method: str = "GET"):
    """(status, headers, body) for a request; HTTP errors are answers too, not exceptions."""
    request = urllib.request.Request(url, method=method)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, response.headers, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.headers, error.read()


def get_json(url: str, timeout: float = 30.0):
    status, _, body = http_get(url, timeout)
    assert status == 200, f"{url} -> HTTP {status}: {body[:300]!r}"
    return json.loads(body)


def _not_yet_errors() -> tuple[type[BaseException], ...]:
    """Errors that mean "not there yet, look again": a server not answering, a file half-written, and -- in
    browser tests -- an element the page replaced between finding it and reading it (pages that re-render)."""
    errors: tuple[type[BaseException], ...] = (OSError, urllib.error.URLError, ValueError, AssertionError)
    try:
        from selenium.common.exceptions import StaleElementReferenceException
    except ImportError:
        return errors
    return (*errors, StaleElementReferenceException)


def wait_until(predicate, timeout: float, interval: float = 0.1, what: str = "condition"):
    """Poll `predicate` until it returns something truthy; that value, or AssertionError after `timeout`."""
    deadline = time.monotonic() + timeout
    last_error = None
    not_yet = _not_yet_errors()
    while time.monotonic() < deadline:
        try:
            value = predicate()
            if value:
                return value
        except not_yet as exc:
            last_error = exc
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout} s waiting for {what} (last error: {last_error})")


def answers(port: int) -> bool:
    try:
        status, _, _ = http_get(f"http://127.0.0.1:{port}/", timeout=2)
        return status == 200
    except OSError:
        return False


def runs(port: int) -> list[str]:
    return get_json(f"http://127.0.0.1:{port}{PLUGIN}/runs")["runs"]


def workers(port: int, run: str, view: str = "Overview") -> list[str]:
    return get_json(f"http://127.0.0.1:{port}{PLUGIN}/workers?run={run}&view={view}")


# --- processes ---------------------------------------------------------------------------------------------

def _stat(pid: int) -> list[str] | None:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text[text.rindex(")") + 2:].split()  # fields after the command: state, ppid, pgrp, ...


def alive(pid: int) -> bool:
    """Running and not a zombie."""
    fields = _stat(pid)
    return fields is not None and fields[0] != "Z"


def descendants(pid: int) -> set[int]:
    """Every live process whose ancestry leads to `pid` (not `pid` itself)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            fields = _stat(int(entry))
            if fields is not None and fields[0] != "Z":
                children.setdefault(int(fields[1]), []).append(int(entry))
    found, todo = set(), [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def process_group(pgid: int) -> set[int]:
    members = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            fields = _stat(int(entry))
            if fields is not None and fields[0] != "Z" and int(fields[2]) == pgid:
                members.add(int(entry))
    return members


class Server:
    """A real child process (own session) whose combined output is collected line by line."""

    def __init__(self, args: list[str], cwd: str | os.PathLike | None = None, environ: dict[str, str] | None = None,
                 **env: str):
        """`environ`: the child's whole environment, instead of the tests' own (subprocess_env) plus `env`."""
        self.args = args
        child_env = {**environ, **env} if environ is not None else subprocess_env(**env)
        self.proc = subprocess.Popen(args, cwd=cwd, env=child_env, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True, errors="replace",
                                     start_new_session=True)
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))

    @property
    def pid(self) -> int:
        return self.proc.pid

    def output(self) -> str:
        return "\n".join(self.lines)

    def stop(self, timeout: float = 15.0) -> None:
        """SIGTERM, then SIGKILL to its whole process group if it lingers; never leaves it running."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(5)
        for pid in process_group(self.proc.pid):
            os.kill(pid, signal.SIGKILL)
        self._reader.join(5)


class ServerExited(RuntimeError):
    """The process a test waits on ended before the condition held: no point in waiting on."""


def wait_for(server: Server, predicate, timeout: float, what: str, interval: float = 0.5):
    """wait_until, with the server's last output in the message on a timeout; and no waiting on a server that has
    exited (its condition can only hold already): ServerExited at once."""
    def check():
        if server.proc.poll() is None:
            return predicate()
        try:
            value = predicate()
        except Exception:  # a server that is gone answers nothing: said below
            value = None
        if value:
            return value
        raise ServerExited(f"{server.args[0]} exited (status {server.proc.returncode}) before {what}\n"
                           f"--- its last output:\n{server.output()[-3000:]}")

    try:
        return wait_until(check, timeout, interval=interval, what=what)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n--- the last of {server.args[0]}'s output:\n{server.output()[-3000:]}") from None


def supervisor_stop_bound(conf: Path, margin: float = 30.0) -> float:
    """Seconds a SIGTERM'd supervisord may take with `conf`, for waits, not for timing assertions.

    It stops its programs one after another, each up to its `stopwaitsecs` (supervisor's default: 10) before
    SIGKILL: the sum is the worst case; `margin` covers start-up of the stop and a loaded machine.
    """
    parser = configparser.RawConfigParser()
    parser.read(conf)
    programs = [section for section in parser.sections() if section.startswith("program:")]
    return sum(parser.getfloat(section, "stopwaitsecs", fallback=10.0) for section in programs) + margin


def launcher(logdir, port: int, *extra: str, **env: str) -> Server:
    """`python -m lightx2v.tensorboard` (our launcher) on loopback."""
    return Server([sys.executable, "-m", "lightx2v.tensorboard", "--logdir", str(logdir), "--port", str(port),
                   "--host", "127.0.0.1", *extra], cwd=REPO_ROOT, **env)


def stock_tensorboard(logdir, port: int) -> Server:
    """Stock TensorBoard with the unpatched plugin, for comparison."""
    return Server([sys.executable, "-m", "tensorboard.main", "--logdir", str(logdir), "--port", str(port),
                   "--host", "127.0.0.1"], cwd=REPO_ROOT)


def land(src: Path, dest: Path) -> None:
    """Put a finished trace at `dest` the way the profiler does: hidden temp name, then rename."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.parent / f".{dest.name}.tmp"
    tmp.write_bytes(src.read_bytes())
    os.replace(tmp, dest)


def cpu_trace(base: Path) -> Path:
    """A real CPU capture (torch.profiler, with_stack) made once per test session under `base`."""
    done = base / "cpu_capture" / "rank0_test.pt.trace.json"
    if not done.exists():
        result = subprocess.run([sys.executable, str(REPO_ROOT / "tests" / "helpers" / "capture.py"),
                                 str(base), "cpu_capture"], env=subprocess_env(), capture_output=True,
                                text=True, timeout=300)
        assert result.returncode == 0, result.stderr
    return done


@contextmanager
def trace_browser(root, timeout: float = 60.0, **env: str) -> Iterator[tuple[Server, int]]:
    """A real `python -m lightx2v.trace_browser` serving `root` on 127.0.0.1, answering its list page; stopped
    when the block ends. Yields (server, port)."""
    port = free_port()
    server = Server([sys.executable, "-m", "lightx2v.trace_browser", "--root", str(root), "--port", str(port),
                     "--host", "127.0.0.1"], **env)
    try:
        wait_until(lambda: answers(port), timeout, what="the trace browser")
        yield server, port
    finally:
        server.stop()
