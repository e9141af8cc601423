"""Arming a running torchrun job from outside (gloo, CPU, real torchrun): every rank captures at the same call,
nothing hangs, and the stack lists and arms the job as one thing (`python -m lightx2v.capture`, the button's POST).

The jobs run tests/programs/distributed_arms.py: a new context per call, an ``all_reduce`` inside the target, the
ranks out of phase, each traced call labelled ``call#<its index>``; a test fails on a hang through its timeouts.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lightx2v.capture import jobs
from lightx2v.capture.control import NotArmed, find_processes

from conftest import REPO_ROOT, free_port, subprocess_env
from helpers.procs import Server, answers, get_json, wait_until
from helpers.traces import PLUGIN_TRACE_RE, load_trace

pytestmark = pytest.mark.torchrun

PROGRAM = REPO_ROOT / "tests" / "programs" / "distributed_arms.py"
ARMS = 6  # each arm at a random moment of skewed ranks; 6 per size cover arming in and between calls


def capture_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "lightx2v.capture", *args], capture_output=True, text=True,
                          timeout=180, cwd=cwd, env=subprocess_env())


class TorchrunJob:
    """distributed_arms.py under torchrun in ``base``; its logdir is ``base/tb``."""

    def __init__(self, base: Path, nproc: int, mode: str) -> None:
        self.base, self.nproc = base, nproc
        self.logdir = base / "tb"
        self.control = base / "control"
        self.control.mkdir()
        self.server = Server([sys.executable, "-m", "torch.distributed.run", "--standalone",
                              f"--nproc_per_node={nproc}", str(PROGRAM), str(self.control), mode],
                             cwd=base, OMP_NUM_THREADS="1")
        self.lines("READY", nproc)

    def lines(self, prefix: str, count: int, timeout: float = 180) -> list[dict[str, str]]:
        found = wait_until(lambda: len(got := [x for x in self.server.lines if x.startswith(prefix + " ")]) >= count
                           and got, timeout, what=f"{count} {prefix} lines; output:\n{self.server.output()[-3000:]}")
        return [dict(kv.split("=", 1) for kv in line.split()[1:]) for line in found]

    def job(self, ranks: int | None = None) -> jobs.Job:
        """The job as the stack lists it, once ``ranks`` ranks (default: all) have written their status."""
        want = self.nproc if ranks is None else ranks

        def listed():
            entries = jobs.group(find_processes(str(self.logdir)))
            return len(entries) == 1 and isinstance(entries[0], jobs.Job) and len(entries[0].ranks) == want \
                and entries[0]
        return wait_until(listed, 60, what=f"the job listed with {want} ranks")

    def signal(self, name: str) -> None:
        (self.control / name).touch()

    def finish(self) -> list[dict[str, str]]:
        """Stop it; it must exit 0 (docs/torchrun.md); the DONE lines."""
        self.signal("stop")
        assert self.server.proc.wait(120) == 0, self.server.output()[-4000:]
        return self.lines("DONE", self.nproc)


@pytest.fixture
def make_job(tmp_path):
    made: list[TorchrunJob] = []

    def make(nproc: int, mode: str) -> TorchrunJob:
        made.append(TorchrunJob(tmp_path, nproc, mode))
        return made[-1]
    yield make
    for job in made:
        job.server.stop()


def traced_calls(run_dir: Path) -> dict[str, set[str]]:
    """{rank file: the call#<i> labels in its trace} for every trace in a run directory."""
    found = {}
    for path in sorted(run_dir.iterdir()):
        if PLUGIN_TRACE_RE.match(path.name):
            events = load_trace(path)["traceEvents"]
            found[path.name.split("_")[0]] = {e["name"] for e in events if str(e.get("name", "")).startswith("call#")}
    return found


@pytest.mark.timeout(600)
@pytest.mark.parametrize("nproc", [2, 4])
def test_every_arm_captures_every_rank_at_the_same_call(make_job, tmp_path, nproc):
    """ARMS arms at random moments of a job whose ranks are out of phase: each arm ends in exactly one capture on
    every rank, all at the same call (the traces' call#<i> labels), in one run directory; the job exits 0."""
    seed = random.randrange(1 << 30)
    print(f"seed {seed}")
    rng = random.Random(seed)
    job = make_job(nproc, "skew")
    entry = job.job()
    assert entry.world_size == nproc and entry.state == "running"

    # The first arm through the command, --wait: it prints the call and the one run directory.
    armed = capture_cli("arm", "--job", entry.id, "--wait", "120", str(job.logdir), cwd=tmp_path)
    assert armed.returncode == 0, armed.stdout + armed.stderr
    assert f"job {entry.id}: armed" in armed.stdout and f"on {nproc} ranks -> " in armed.stdout
    run_dirs = [Path(armed.stdout.rsplit(" -> ", 1)[1].strip())]
    calls = [int(armed.stdout.split("captured call ")[1].split()[0])]
    for _ in range(ARMS - 1):
        time.sleep(rng.uniform(0, 0.4))  # arm at a random moment of the job's loop (not a synchronisation)
        entry = job.job()
        answer = jobs.arm_job(entry, by="the skew test")
        assert answer["outcome"] == "armed", answer
        done = jobs.wait_for_job_capture(entry, answer, 120)
        (run_dir,) = done["run_dirs"]
        run_dirs.append(Path(run_dir))
        calls.append(done["call"])
    assert len(set(run_dirs)) == ARMS and calls == sorted(calls)
    for run_dir, call in zip(run_dirs, calls, strict=True):
        seen = traced_calls(run_dir)
        assert sorted(seen) == [f"rank{r}" for r in range(nproc)], (seed, run_dir)
        assert all(labels == {f"call#{call}"} for labels in seen.values()), (seed, call, seen)
    done = job.finish()
    assert {d["captures"] for d in done} == {str(ARMS + 1)} and len({d["calls"] for d in done}) == 1


@pytest.mark.timeout(300)
def test_a_job_is_one_line_armed_once_from_the_command_and_the_button(make_job, tmp_path):
    """The list shows the job as one line; the button's POST arms it; arming it again by torchrun's pid, by the
    folder (every job once) and by a rank's id says "already armed"; one capture per rank, at the same call."""
    job = make_job(2, "gate")  # after the first call every rank waits for `go`
    entry = job.job()
    listed = capture_cli("list", str(job.logdir), cwd=tmp_path).stdout.splitlines()
    assert len(listed) == 1 and listed[0].startswith(f"job {entry.id}: 2 ranks on "), listed
    assert "[running]" in listed[0] and "not armed" in listed[0]
    assert f"launcher pid {job.server.pid}" in listed[0]

    port = free_port()
    browser = Server([sys.executable, "-m", "lightx2v.trace_browser", "--root", str(tmp_path), "--port", str(port),
                      "--host", "127.0.0.1"])
    try:
        wait_until(lambda: answers(port), 30, what="the trace browser")
        (row,) = get_json(f"http://127.0.0.1:{port}/api/capture")
        assert row["id"] == f"job:{entry.id}" and row["world_size"] == 2 and row["state"] == "running"
        assert not row["refused"] and len(row["ranks"]) == 2
        import urllib.request

        body = json.dumps({"id": row["id"]}).encode()
        request = urllib.request.Request(f"http://127.0.0.1:{port}/api/capture", data=body, method="POST", headers={
            "Content-Type": "application/json", "Origin": f"http://127.0.0.1:{port}"})
        with urllib.request.urlopen(request, timeout=60) as response:
            answer = json.loads(response.read())
        assert answer["ok"] and answer["outcome"] == "armed", answer
        wait_until(lambda: get_json(f"http://127.0.0.1:{port}/api/capture")[0]["armed"], 30,
                   what="the row showing the arm")
    finally:
        browser.stop()

    by_launcher = capture_cli("arm", "--pid", str(job.server.pid), str(job.logdir), cwd=tmp_path)
    assert by_launcher.returncode == 0 and f"job {entry.id}: already armed" in by_launcher.stdout, by_launcher.stderr
    by_folder = capture_cli("arm", str(tmp_path), cwd=tmp_path)
    assert by_folder.returncode == 0 and by_folder.stdout.count("already armed") == 1, by_folder.stdout
    by_rank = capture_cli("arm", "--id", entry.ranks[1].id, str(job.logdir), cwd=tmp_path)
    assert by_rank.returncode == 0 and "already armed" in by_rank.stdout
    shown = wait_until(lambda: "every rank captures call 4 of 'step'" in (line := capture_cli(
        "list", str(job.logdir), cwd=tmp_path).stdout) and line, 30, what="the list showing the agreed call")
    assert "ARMED" in shown

    job.signal("go")
    wait_until(lambda: all(p.status["captures"] == 2 for p in job.job().ranks), 120, what="the job's capture")
    run_dirs = {p.status["last_capture"]["run_dir"] for p in job.job().ranks}
    (run_dir,) = run_dirs
    assert traced_calls(Path(run_dir)) == {"rank0": {"call#4"}, "rank1": {"call#4"}}
    done = job.finish()
    assert {d["captures"] for d in done} == {"2"}
    assert "[exited]" in capture_cli("list", str(job.logdir), cwd=tmp_path).stdout


@pytest.mark.timeout(300)
def test_a_job_that_ends_while_armed_exits_0_and_the_wait_says_why(make_job, tmp_path):
    job = make_job(2, "gate")
    entry = job.job()
    waiting = subprocess.Popen([sys.executable, "-m", "lightx2v.capture", "arm", "--job", entry.id, "--wait", "120",
                                str(job.logdir)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               cwd=tmp_path, env=subprocess_env())
    wait_until(lambda: all(((p.status.get("job") or {}).get("arm") or {}).get("target") for p in job.job().ranks),
               60, what="both ranks armed for a call")
    done = job.finish()  # the ranks leave at the gate: the agreed call never comes
    assert {d["captures"] for d in done} == {"1"}
    out, err = waiting.communicate(timeout=60)
    assert waiting.returncode == 1, out + err
    assert "exited at" in err and "it did not capture" in err
    again = capture_cli("arm", "--job", entry.id, str(job.logdir), cwd=tmp_path)
    assert again.returncode == 1 and "exited at" in again.stderr


@pytest.mark.timeout(300)
def test_a_rank_that_never_reaches_the_call_site_means_nobody_captures(make_job, tmp_path):
    """Rank 1 never runs the call site (so it has no watcher, no status): the list says so, the arm is abandoned by
    its deadline with the reason, nobody captures, and the job exits 0."""
    job = make_job(2, "absent")
    entry = job.job(ranks=1)
    listed = capture_cli("list", str(job.logdir), cwd=tmp_path).stdout
    assert "1 of 2 ranks" in listed and "rank 1 not listed here" in listed, listed
    armed = capture_cli("arm", "--job", entry.id, "--wait", "120", str(job.logdir), cwd=tmp_path)
    assert armed.returncode == 1, armed.stdout + armed.stderr
    assert f"job {entry.id}: armed" in armed.stdout and "rank 1 not listed here" in armed.stdout
    assert "abandoned: rank 1 did not answer within 10 s" in armed.stderr, armed.stderr
    (rank0,) = find_processes(str(job.logdir))
    arm = rank0.status["job"]["arm"]
    assert rank0.status["captures"] == 1 and arm["state"] == "abandoned", arm  # the bare word, the reason apart
    assert arm["reason"].startswith("rank 1 did not answer within 10 s"), arm
    done = job.finish()
    assert [d["captures"] for d in done if d["rank"] == "0"] == ["1"]


@pytest.mark.timeout(300)
def test_a_rank_that_dies_ends_the_job_and_the_wait_says_so(make_job, tmp_path):
    """A rank killed while the job is armed: torchrun ends the job (its rule: one failed worker stops all), nothing
    hangs, and waiting for the capture ends with the ranks' state."""
    job = make_job(2, "gate")
    entry = job.job()
    answer = jobs.arm_job(entry, by="the dying test")
    os.kill(entry.ranks[1].pid, signal.SIGKILL)
    assert job.server.proc.wait(120) != 0  # torchrun reports the failed worker
    with pytest.raises(NotArmed, match="killed or is hung|exited at"):
        jobs.wait_for_job_capture(entry, answer, 120)
