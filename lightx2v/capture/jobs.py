"""Multi-rank jobs as one thing to list and arm: the ranks' status files grouped by job, one request per job.

A torchrun job's ranks each write their own status file (``control.Process``); each names its job (``job.id``:
torchrun's run id and the job's master address, the same on every rank and node). A request placed with *one* rank
arms the whole job: that rank's copy of the profiler module puts it in the job's c10d store, every rank joins, and
all capture at the same call (the drop-in's "remote arming: jobs"; the argument is in docs/capture.md). Here, the
stack's side: grouping, the one line per job, choosing the rank that takes the request, and waiting until every
rank wrote its file.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any, Optional, Union

from lightx2v.capture.control import NotArmed, Process, _clock, arm, outcome_said, read_process, request_outcome
from lightx2v.utils.torch_trace_profiler import ArmOutcome, JobArmState

ENDED_WITHOUT_CAPTURE = (JobArmState.ABANDONED, JobArmState.MISSED)


@dataclasses.dataclass(frozen=True)
class Job:
    """The ranks of one job that write status files under the folder searched, by rank."""

    id: str
    ranks: list[Process]

    @property
    def world_size(self) -> int:
        return max(p.world_size for p in self.ranks)

    @property
    def launcher_pid(self) -> Optional[int]:
        pids = {p.job.get("launcher_pid") for p in self.ranks}
        return pids.pop() if len(pids) == 1 else None  # ranks on several nodes have several launchers

    @property
    def hosts(self) -> list[str]:
        return sorted({p.host for p in self.ranks})

    @property
    def missing_ranks(self) -> list[int]:
        """Ranks with no status file here: on another node without a shared filesystem, or no capture yet."""
        return sorted(set(range(self.world_size)) - {p.rank for p in self.ranks})

    @property
    def state(self) -> str:
        """'running' (every listed rank running), 'exited' (every listed rank exited) or 'partly running'."""
        states = {p.state for p in self.ranks}
        return "running" if states == {"running"} else "exited" if states == {"exited"} else "partly running"

    def not_running_reason(self) -> Optional[str]:
        """Why the job cannot be armed now, or None. Ranks not listed here do not stop an arm: the request reaches
        them through the job's store, and a rank that cannot take part makes the arm abandoned, with the reason."""
        if self.state == "running":
            return None
        problems = [f"rank {p.rank}: {p.not_running_reason()}" for p in self.ranks if p.not_running_reason()]
        return f"job {self.id}: " + "; ".join(problems)

    def missing_note(self) -> str:
        missing = self.missing_ranks
        if not missing:
            return ""
        return (f"rank{'s' if len(missing) > 1 else ''} {', '.join(map(str, missing))} not listed here (another node "
                "without a shared filesystem, or no capture yet: a rank that never ran the call site makes the arm "
                "abandoned)")

    def describe(self) -> str:
        """One line for a person: the job, its ranks and hosts, its state, its arm, its last capture."""
        first = self.ranks[0].status
        ranks = ", ".join(f"{p.rank}: pid {p.pid}" for p in self.ranks)
        count = f"{self.world_size} ranks" if not self.missing_ranks else \
            f"{len(self.ranks)} of {self.world_size} ranks"
        parts = [f"job {self.id}: {count} on {', '.join(self.hosts)} ({ranks})", f"[{self.state}]",
                 " ".join(first.get("argv") or [])[:80] or "?"]
        if self.missing_ranks:
            parts.append(self.missing_note())
        if self.launcher_pid:
            parts.append(f"launcher pid {self.launcher_pid}")
        if self.state == "running":
            parts.append(arm_state(self))
        last = [p.status.get("last_capture") or {} for p in self.ranks]
        run_dirs = sorted({str(c.get("run_dir")) for c in last if c})
        if run_dirs:
            errors = [f"rank {p.rank}: {c['error']}" for p, c in zip(self.ranks, last, strict=True)
                      if c.get("error")]
            parts.append(f"last capture {_clock(max(c.get('finished_at') or 0 for c in last))} -> "
                         f"{' | '.join(run_dirs)}" + (f" (errors: {'; '.join(errors)})" if errors else ""))
        return "; ".join(parts)


def arm_state(job: Job) -> str:
    """What the job's latest arm is doing, from its ranks' status files."""
    arms = [(p.rank, p.job_arm) for p in job.ranks]
    newest = max((a["number"] for _, a in arms if a), default=None)
    if newest is None:
        return "not armed"
    states = [(rank, a) for rank, a in arms if a and a["number"] == newest]
    if len(states) < len(arms) or any(a["state"] == JobArmState.WAITING for _, a in states):
        return f"ARMED: arm {newest} waiting for every rank to join"
    targets = {a["target"] for _, a in states}
    if all(a["state"] == JobArmState.CAPTURED for _, a in states):
        return "not armed"
    under_way = (JobArmState.ARMED, JobArmState.CAPTURING, JobArmState.CAPTURED)
    ended = [f"rank {rank}: {arm_said(a)}" for rank, a in states if a["state"] not in under_way]
    if ended:
        return f"arm {newest} ended: " + "; ".join(ended)
    at = ", ".join(f"rank {rank} at {a['calls']}" for rank, a in states)
    return f"ARMED: every rank captures call {targets.pop()} of {states[0][1]['site']!r} ({at})"


def group(processes: list[Process]) -> list[Union[Process, Job]]:
    """Single processes as they are, the ranks of each job as one Job (ordered by its newest heartbeat)."""
    jobs: dict[str, list[Process]] = {}
    entries: list[Union[Process, Job]] = []
    for p in processes:
        job_id = p.job.get("id") if p.world_size > 1 else None
        if not job_id:
            entries.append(p)
            continue
        if job_id not in jobs:
            jobs[job_id] = []
            entries.append(Job(job_id, jobs[job_id]))
        jobs[job_id].append(p)
    for ranks in jobs.values():
        ranks.sort(key=lambda p: (p.rank, -p.beat_at))
    return entries


def job_of(entries: list[Union[Process, Job]], job_id: Optional[str] = None, pid: Optional[int] = None,
           ident: Optional[str] = None) -> Optional[Job]:
    """The job named by its id, by one of its ranks' pids or ids, or by its launcher's (torchrun's) pid."""
    for entry in entries:
        if not isinstance(entry, Job):
            continue
        if job_id is not None and entry.id == job_id:
            return entry
        if pid is not None and any(pid in (p.pid, p.job.get("launcher_pid")) for p in entry.ranks):
            return entry
        if ident is not None and any(p.id == ident for p in entry.ranks):
            return entry
    return None


def arm_job(job: Job, by: Optional[str] = None) -> dict[str, Any]:
    """Arm every rank of ``job`` with one request, placed with its lowest running rank; returns that rank's answer
    with ``captures_before`` per rank (``{rank: captures}``). Raises NotArmed saying why not."""
    reason = job.not_running_reason()
    if reason:
        raise NotArmed(reason)
    refused = next((p.remote_refused for p in job.ranks if p.remote_refused), None)
    if refused:
        raise NotArmed(f"job {job.id}: refused: {refused}")
    before = {p.rank: p.captures for p in job.ranks}
    try:
        answer = arm(job.ranks[0], by=by)
    except NotArmed as exc:
        raise NotArmed(f"job {job.id}: {exc}") from None
    return {**answer, "captures_before": before}


def explain_job(job: Job, answer: dict[str, Any]) -> str:
    outcome, reason = request_outcome(answer)
    arm_number = f" (job arm {answer['job_arm']})" if answer.get("job_arm") else ""
    note = f" ({job.missing_note()})" if job.missing_ranks else ""
    if outcome in (ArmOutcome.ARMED, ArmOutcome.ALREADY_ARMED):
        return (f"job {job.id}: {outcome_said(outcome)}{arm_number}: its {job.world_size} ranks agree on a call of "
                f"their call site and all capture it{note}")
    return f"job {job.id}: {outcome_said(outcome, reason)}{arm_number}{note}"


def wait_for_job_capture(job: Job, answer: dict[str, Any], timeout: float) -> dict[str, Any]:
    """Block until every rank of ``job`` finished a capture after the arm; returns ``{"call", "run_dirs",
    "ranks": {rank: last_capture}}``. NotArmed when the arm was abandoned, a rank stopped, or on timeout, saying
    where each rank stands. A rank whose status file cannot be read (gone, not JSON, another protocol) has not
    captured, as far as anyone here can tell: it is waited for, and named at the end."""
    before: dict[int, int] = answer.get("captures_before") or {}
    number = answer.get("job_arm")
    deadline = time.monotonic() + timeout
    while True:
        now = [(p, read_process(p.status_path)) for p in job.ranks]
        ranks = [n for _, n in now if n is not None]
        unreadable = [p for p, n in now if n is None]
        for p in ranks:
            reason = p.not_running_reason()
            if reason:
                raise NotArmed(f"job {job.id}: rank {p.rank}: " + reason.replace("nothing armed", "it did not capture"))
            state = p.job_arm
            if state.get("number") == number and state.get("state") in ENDED_WITHOUT_CAPTURE:
                raise NotArmed(f"job {job.id}: arm {number}: rank {p.rank}: {arm_said(state)}")
        done = {p.rank: c for p in ranks if (c := p.capture_after(before.get(p.rank, 0)))}
        if not unreadable and len(done) == len(job.ranks):
            return {"call": ranks[0].job_arm.get("target"), "ranks": done,
                    "run_dirs": sorted({str(c.get("run_dir")) for c in done.values()})}
        if time.monotonic() >= deadline:
            said = [(p.rank, f"captured -> {done[p.rank].get('run_dir')}" if p.rank in done else _rank_arm(p))
                    for p in ranks]
            said += [(p.rank, f"its status file cannot be read: {p.status_path}") for p in unreadable]
            where = "; ".join(f"rank {rank}: {what}" for rank, what in sorted(said))
            raise NotArmed(f"job {job.id} is armed but not every rank captured within {timeout:.0f} s ({where})")
        time.sleep(0.2)


def _rank_arm(p: Process) -> str:
    state = p.job_arm
    if not state:
        return "not armed"
    return f"arm {state.get('number')}: {arm_said(state)} of {state.get('site')!r}, at call {state.get('calls')}"


def arm_said(arm: dict[str, Any]) -> str:
    """A rank's job arm state (``Process.job_arm``) for a person: "waiting for every rank", "armed for call 7",
    "abandoned: rank 1 did not answer ..."."""
    state, reason = arm.get("state") or "", arm.get("reason")
    if state == JobArmState.WAITING:
        return "waiting for every rank"
    if state == JobArmState.ARMED:
        return f"armed for call {arm.get('target')}"
    return outcome_said(state, reason)
