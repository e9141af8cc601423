"""Find the processes that write captures under a folder, tell whether they still run, and arm one.

Everything goes through files under ``<logdir>/.capture/`` that the process's own copy of the profiler module
writes and reads, so this works from another venv, container or version: nothing is imported from the process.
"""

from __future__ import annotations

import dataclasses
import json
import os
import secrets
import socket
import time
from typing import Any, Optional, Union

from lightx2v.fileio import write_atomically

# The protocol's names, as the drop-in module defines them (it is torch-free at import).
from lightx2v.utils.torch_trace_profiler import (
    CONTROL_DIR,
    CONTROL_PROTOCOL,
    ENV_REMOTE,
    REQUEST_SUFFIX,
    STATUS_SUFFIX,
    ArmOutcome,
    JobArmState,
)

SEARCH_DEPTH = 6  # folders below the one named: /data finds /data/svc/save_results/torch_profile/.capture
SEARCH_FOLDERS = 5000  # at most this many folders are looked at per search, so a huge tree stays quick
SKIPPED_FOLDERS = frozenset({"node_modules", "__pycache__", "site-packages", "dist-packages", "proc", "sys"})
MISSED_HEARTBEATS = 5  # a process whose status is older than this many heartbeats is gone (or hung)
ACK_SECONDS = 10.0  # a running process answers a request within one poll (0.5 s); this is the patience
KEEP_EXITED = 20  # per logdir, the status files of this many exited processes are kept (the newest) ...
KEEP_EXITED_SECONDS = 24 * 3600.0  # ... and none older than a day; a running process's file is never removed
WHY_NOT_LISTED = ("a process shows up after its first capture, and only with profile_format='tensorboard' (a "
                  "chrome-format process writes no status file, so it cannot be armed) and remote arming on "
                  f"({ENV_REMOTE} not 0), writing under this folder")


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
    def rank(self) -> int:
        return int(self.status.get("rank") or 0)

    @property
    def world_size(self) -> int:
        return int(self.status.get("world_size") or 1)

    @property
    def job(self) -> dict[str, Any]:
        """The job it is a rank of (``id``, ``launcher_pid``, ``arm``), {} for a single process."""
        return self.status.get("job") or {}

    @property
    def job_arm(self) -> dict[str, Any]:
        """Its part in the job's latest arm (``number``, ``state``, ``reason``, ``site``, ``target``, ``calls``), {}
        if none. ``state`` is a ``JobArmState`` (the text as written when it names none); see job_arm_state."""
        arm = self.job.get("arm") or {}
        if not arm:
            return {}
        state, reason = job_arm_state(arm)
        return {**arm, "state": state, "reason": reason}

    @property
    def remote_refused(self) -> Optional[str]:
        """Why the process refuses to be armed from outside (a job without a c10d store), or None."""
        return self.status.get("remote_refused") or None

    @property
    def captures(self) -> int:
        return int(self.status.get("captures") or 0)

    def capture_after(self, captures_before: int) -> Optional[dict[str, Any]]:
        """Its ``last_capture`` once it has finished more than ``captures_before`` captures, else None."""
        last = self.status.get("last_capture")
        return last if last and self.captures > captures_before else None

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
        if self.world_size > 1:
            parts.append(f"rank {self.rank}/{self.world_size}")
        if self.state == "running":
            parts.append("ARMED: the next run() captures" if s.get("armed") else
                         "capturing now" if s.get("capturing") else "not armed")
        last = s.get("last_capture")
        if last:
            parts.append(f"last capture {_clock(last.get('finished_at'))} -> {last.get('run_dir')}"
                         + (f" (error: {last['error']})" if last.get("error") else ""))
        return "; ".join(parts)


@dataclasses.dataclass(frozen=True)
class Search:
    """The control folders found under a root, and whether the search stopped at its folder limit."""

    control_dirs: list[str]
    truncated: bool


def find_control_dirs(root: str, depth: int = SEARCH_DEPTH, limit: int = SEARCH_FOLDERS) -> Search:
    """Every ``.capture`` folder under ``root``, searched down at most ``depth`` folders and ``limit`` folders in
    all, breadth first (the nearest logdirs are found first). Hidden folders, package trees (node_modules,
    site-packages, ...) and the runs inside a logdir (a folder with a ``.capture``) are not entered."""
    found: list[str] = []
    level, seen = [os.path.abspath(root)], 0
    for _ in range(depth + 1):
        below: list[str] = []
        for folder in level:
            seen += 1
            if seen > limit:
                return Search(found, True)
            try:
                entries = [e for e in os.scandir(folder) if e.is_dir(follow_symlinks=False)]
            except OSError:
                continue
            names = {e.name for e in entries}
            if CONTROL_DIR in names:
                found.append(os.path.join(folder, CONTROL_DIR))
                continue  # a logdir: its sub-folders are runs
            below += sorted(e.path for e in entries if not e.name.startswith(".") and e.name not in SKIPPED_FOLDERS)
        level = below
    return Search(found, False)


def find_processes(root: str, prune: bool = True) -> list[Process]:
    """Every process that has a status file under ``root`` (a logdir or a folder above it), newest first.

    With ``prune``, the status files of processes that exited long ago are removed first (``prune_exited``)."""
    return search_processes(root, prune)[0]


def search_processes(root: str, prune: bool = True) -> tuple[list[Process], Search]:
    """``find_processes``, with the search that found them (to say when it stopped at its limit)."""
    search = find_control_dirs(root)
    found = []
    for control in search.control_dirs:
        try:
            names = sorted(n for n in os.listdir(control) if n.endswith(STATUS_SUFFIX))
        except OSError:
            continue
        processes = [p for p in (read_process(os.path.join(control, n)) for n in names) if p is not None]
        if prune:
            processes = prune_exited(processes)
        found += processes
    found.sort(key=lambda p: (-p.beat_at, p.id))
    return found, search


def prune_exited(processes: list[Process], now: Optional[float] = None, keep: int = KEEP_EXITED,
                 max_age: float = KEEP_EXITED_SECONDS) -> list[Process]:
    """Remove the status (and request) files of processes of one control folder that are surely over: exited
    more than ``max_age`` ago or past the newest ``keep`` exited ones, or gone (no heartbeat) for more than
    ``max_age`` while their pid does not exist on this host. Returns the processes kept."""
    now = time.time() if now is None else now
    exited = sorted((p for p in processes if p.state == "exited"), key=lambda p: -_float(p.status.get("exited_at")))
    over = {p.status_path for i, p in enumerate(exited) if i >= keep or now - _float(p.status["exited_at"]) > max_age}
    over |= {p.status_path for p in processes
             if p.state == "gone" and now - p.beat_at > max_age and _surely_dead(p)}
    kept = []
    for process in processes:
        if process.status_path in over and _remove_if_unchanged(process):
            continue
        kept.append(process)
    return kept


def _surely_dead(process: Process) -> bool:
    """Whether the process is known not to exist: same host name as ours and no such pid here."""
    if process.host != socket.gethostname() or process.pid <= 0:
        return False
    try:
        os.kill(process.pid, 0)
    except ProcessLookupError:
        return True
    except OSError:  # e.g. EPERM: it exists, as another user
        return False
    return False


def _remove_if_unchanged(process: Process) -> bool:
    """Remove a process's files unless its status was rewritten since it was read (a new process, same id)."""
    try:
        if os.stat(process.status_path).st_mtime != process.beat_at:
            return False
        os.unlink(process.status_path)
    except FileNotFoundError:
        return True
    except OSError:
        return False
    try:
        os.unlink(process.request_path)
    except OSError:
        pass
    return True


def _float(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return 0.0


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
            raise NotArmed(f"no process with pid {pid} writes captures here: {WHY_NOT_LISTED}")
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
    if process.remote_refused:
        raise NotArmed(f"{process.id}: refused: {process.remote_refused}")
    request_id = secrets.token_hex(8)
    request = {"protocol": CONTROL_PROTOCOL, "id": request_id, "at": time.time(),
               "by": by or f"python -m lightx2v.capture (pid {os.getpid()} on {socket.gethostname()})"}
    try:
        write_atomically(process.request_path, json.dumps(request))
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
            outcome, why = request_outcome(answer)
            if outcome == ArmOutcome.REFUSED:
                raise NotArmed(f"{process.id}: {outcome_said(outcome, why)}")
            return {**answer, "outcome": outcome, "reason": why}
        reason = now.not_running_reason()
        if reason:
            raise NotArmed(reason)
    raise NotArmed(f"{process.id} did not answer within {ack_seconds:.0f} s (busy in a long call without "
                   "releasing the GIL, or hung); the request stays and arms it when it next looks")


def explain(process: Process, answer: dict[str, Any]) -> str:
    """The line a person reads after arming."""
    outcome, reason = request_outcome(answer)
    if outcome in (ArmOutcome.ARMED, ArmOutcome.ALREADY_ARMED):
        return f"{process.id}: {outcome_said(outcome)}: pid {process.pid} captures at its next first run()"
    return f"{process.id}: {outcome_said(outcome, reason)}"


def wait_for_capture(process: Process, captures_before: int, timeout: float) -> dict[str, Any]:
    """Block until ``process`` has finished a capture after ``captures_before``; its ``last_capture``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        now = read_process(process.status_path)
        if now is not None:
            capture = now.capture_after(captures_before)
            if capture:
                return capture
            reason = now.not_running_reason()
            if reason:
                raise NotArmed(reason.replace("nothing armed", "it did not capture"))
        time.sleep(0.2)
    raise NotArmed(f"{process.id} is armed but has not captured within {timeout:.0f} s: its call site has not "
                   "run since (it captures at the next run())")


def request_outcome(answer: dict[str, Any]) -> tuple[Union[ArmOutcome, str], Optional[str]]:
    """A ``last_request``'s ``outcome`` and ``reason``. Older drop-ins wrote a refusal's reason after the word
    ("refused: profiling is off ..."): that maps too. Text naming no outcome comes back as it is ("?" if none)."""
    value, reason = answer.get("outcome"), answer.get("reason")
    if isinstance(value, ArmOutcome):  # read already
        return value, reason
    text = str(value or "?")
    head, colon, rest = text.partition(":")
    try:
        outcome = ArmOutcome(head.strip())
    except ValueError:
        return text, reason
    if reason is None and colon and rest.strip():
        reason = rest.strip()
    return outcome, reason


def outcome_said(outcome: Union[ArmOutcome, JobArmState, str], reason: Optional[str] = None) -> str:
    """An outcome or a state for a person: its word, and why after a colon when there is a reason."""
    word = outcome.value if isinstance(outcome, (ArmOutcome, JobArmState)) else str(outcome)
    return f"{word}: {reason}" if reason else word


def job_arm_state(arm: dict[str, Any]) -> tuple[Union[JobArmState, str], Optional[str]]:
    """A job arm's ``state`` and ``reason`` as a status file holds them. Older drop-ins wrote the state as text
    beginning with its word and the reason after a colon ("waiting for every rank", "armed for call 7",
    "abandoned: rank 1 did not answer ..."): those map too. Text naming no state comes back as it is."""
    value, reason = arm.get("state"), arm.get("reason")
    if isinstance(value, JobArmState):  # read already
        return value, reason
    text = str(value or "")
    head, colon, rest = text.partition(":")
    words = head.split()
    try:
        state = JobArmState(words[0] if words else text)
    except ValueError:
        return text, reason
    if reason is None and colon and rest.strip():
        reason = rest.strip()
    return state, reason


def _clock(epoch: Any) -> str:
    try:
        return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(float(epoch)))
    except (TypeError, ValueError):
        return "?"
