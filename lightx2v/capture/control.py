"""Find the processes that write captures under a folder, tell whether they still run, and arm one.

Everything goes through files under ``<logdir>/.capture/`` that the process's own copy of the profiler module
writes and reads, so this works from another venv, container or version: nothing is imported from the process.
"""

from __future__ import annotations

import dataclasses
import glob
import json
import os
import secrets
import socket
import time
from typing import Any, Optional

# The protocol's names, as the drop-in module defines them (it is torch-free at import).
from lightx2v.utils.torch_trace_profiler import CONTROL_DIR, CONTROL_PROTOCOL, REQUEST_SUFFIX, STATUS_SUFFIX

SEARCH_DEPTH = 3  # <root>/.capture, <root>/torch_profile/.capture, ... : a results root or a logdir both work
MISSED_HEARTBEATS = 5  # a process whose status is older than this many heartbeats is gone (or hung)
ACK_SECONDS = 10.0  # a running process answers a request within one poll (0.5 s); this is the patience


class NotArmed(Exception):
    """The request was not placed or not taken; the message says why, for a person."""


@dataclasses.dataclass(frozen=True)
class Process:
    """One process as its status file describes it, read at ``read_at``."""

    id: str  # "<host>_<pid>", the status file's stem
    status_path: str
    status: dict[str, Any]
    beat_at: float  # the status file's mtime: the process touches it every heartbeat
    read_at: float

    @property
    def pid(self) -> int:
        return int(self.status.get("pid", 0))

    @property
    def host(self) -> str:
        return str(self.status.get("host", "?"))

    @property
    def request_path(self) -> str:
        return self.status_path[: -len(STATUS_SUFFIX)] + REQUEST_SUFFIX

    @property
    def silent_for(self) -> float:
        """Seconds since the process last wrote its status (it rewrites it every heartbeat)."""
        return max(0.0, self.read_at - self.beat_at)

    @property
    def state(self) -> str:
        """'running', 'exited' (it said so at exit) or 'gone' (killed or hung: no heartbeat)."""
        if self.status.get("exited_at"):
            return "exited"
        beat = float(self.status.get("heartbeat_seconds") or 2.0)
        return "running" if self.silent_for <= beat * MISSED_HEARTBEATS else "gone"

    def not_running_reason(self) -> Optional[str]:
        if self.state == "exited":
            return f"process {self.pid} on {self.host} exited at {_clock(self.status['exited_at'])}; nothing armed"
        if self.state == "gone":
            return (f"process {self.pid} on {self.host} has not written its status for {self.silent_for:.0f} s: it "
                    "was killed or is hung; nothing armed")
        return None

    def describe(self) -> str:
        """One line for a person: who, what it runs, its state, what it last captured."""
        s = self.status
        parts = [f"{self.id}: pid {self.pid} on {self.host}", f"[{self.state}]",
                 " ".join(s.get("argv") or [])[:80] or "?"]
        if s.get("world_size", 1) > 1:
            parts.append(f"rank {s.get('rank')}/{s.get('world_size')}")
        if self.state == "running":
            parts.append("ARMED: the next run() captures" if s.get("armed") else
                         "capturing now" if s.get("capturing") else "not armed")
        last = s.get("last_capture")
        if last:
            parts.append(f"last capture {_clock(last.get('finished_at'))} -> {last.get('run_dir')}"
                         + (f" (error: {last['error']})" if last.get("error") else ""))
        return "; ".join(parts)


def find_processes(root: str) -> list[Process]:
    """Every process that has a status file under ``root`` (a logdir or a folder above it), newest first."""
    root = os.path.abspath(root)
    found = []
    for depth in range(SEARCH_DEPTH):
        pattern = os.path.join(root, *(["*"] * depth), CONTROL_DIR, "*" + STATUS_SUFFIX)
        for path in glob.glob(pattern):  # `*` never matches hidden folders, so only our `.capture` is entered
            process = read_process(path)
            if process is not None:
                found.append(process)
    found.sort(key=lambda p: (-p.beat_at, p.id))
    return found


def read_process(status_path: str) -> Optional[Process]:
    """The process a status file describes, or None when the file is gone or not ours."""
    try:
        with open(status_path) as f:
            beat_at = os.fstat(f.fileno()).st_mtime
            status = json.load(f)
    except (OSError, ValueError):
        return None
    if not isinstance(status, dict) or status.get("protocol") != CONTROL_PROTOCOL:
        return None
    return Process(os.path.basename(status_path)[: -len(STATUS_SUFFIX)], status_path, status, beat_at, time.time())


def select(processes: list[Process], pid: Optional[int] = None, ident: Optional[str] = None) -> list[Process]:
    """The processes a user named (by pid, or by id when pids repeat across hosts), or NotArmed saying why not."""
    if ident is not None:
        chosen = [p for p in processes if p.id == ident]
        if not chosen:
            raise NotArmed(f"no process with id {ident!r} writes captures here")
        return chosen
    if pid is not None:
        chosen = [p for p in processes if p.pid == pid]
        if not chosen:
            raise NotArmed(f"no process with pid {pid} writes captures here (it never made its first capture, "
                           "remote arming is off in it, or it writes to another folder)")
        if len(chosen) > 1:
            raise NotArmed(f"pid {pid} is on several hosts: " + ", ".join(p.id for p in chosen) + "; name one by id")
        return chosen
    return processes


def arm(process: Process, by: Optional[str] = None, ack_seconds: float = ACK_SECONDS) -> dict[str, Any]:
    """Ask ``process`` to capture its next first run(); return its answer (``outcome``, ``captures_before``).

    Raises NotArmed when the process is not running, is a multi-rank job, or does not answer.
    """
    reason = process.not_running_reason()
    if reason:
        raise NotArmed(reason)
    if process.status.get("remote_refused"):
        raise NotArmed(f"{process.id}: refused: {process.status['remote_refused']}")
    request_id = secrets.token_hex(8)
    request = {"protocol": CONTROL_PROTOCOL, "id": request_id, "at": time.time(),
               "by": by or f"python -m lightx2v.capture (pid {os.getpid()} on {socket.gethostname()})"}
    tmp = os.path.join(os.path.dirname(process.request_path), f".{request_id}.request.tmp")
    try:
        with open(tmp, "w") as f:
            json.dump(request, f)
        os.replace(tmp, process.request_path)
    except OSError as exc:
        raise NotArmed(f"cannot write {process.request_path}: {exc.strerror or exc}") from exc
    deadline = time.monotonic() + ack_seconds
    while time.monotonic() < deadline:
        time.sleep(0.1)
        now = read_process(process.status_path)
        if now is None:
            continue
        answer = now.status.get("last_request") or {}
        if answer.get("id") == request_id:
            if str(answer.get("outcome", "")).startswith("refused"):
                raise NotArmed(f"{process.id}: {answer['outcome']}")
            return answer
        reason = now.not_running_reason()
        if reason:
            raise NotArmed(reason)
    raise NotArmed(f"{process.id} did not answer within {ack_seconds:.0f} s (busy in a long call without "
                   "releasing the GIL, or hung); the request stays and arms it when it next looks")


def explain(process: Process, answer: dict[str, Any]) -> str:
    """The line a person reads after arming."""
    outcome = answer.get("outcome", "?")
    if outcome in ("armed", "already armed"):
        return f"{process.id}: {outcome}: pid {process.pid} captures at its next first run()"
    return f"{process.id}: {outcome}"


def wait_for_capture(process: Process, captures_before: int, timeout: float) -> dict[str, Any]:
    """Block until ``process`` has finished a capture after ``captures_before``; its ``last_capture``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        now = read_process(process.status_path)
        if now is not None:
            if int(now.status.get("captures") or 0) > captures_before and now.status.get("last_capture"):
                return now.status["last_capture"]
            reason = now.not_running_reason()
            if reason:
                raise NotArmed(reason.replace("nothing armed", "it did not capture"))
        time.sleep(0.2)
    raise NotArmed(f"{process.id} is armed but has not captured within {timeout:.0f} s: its call site has not "
                   "run since (it captures at the next run())")


def _clock(epoch: Any) -> str:
    try:
        return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(float(epoch)))
    except (TypeError, ValueError):
        return "?"
