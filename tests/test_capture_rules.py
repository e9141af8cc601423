"""`python -m lightx2v.capture`'s rules on hand-written status files, fast (no torchrun, no profiled process): how
a job's ranks group and read, when a job-arm wait is over (every rank captured, not the first), what the job's line
says while a rank has not joined, how processes are found, chosen, pruned and armed. tests/test_capture_jobs.py
drives real torchrun jobs; tests/test_capture_cli.py real processes."""

from __future__ import annotations

import json
import os
import socket
import threading
import time
from pathlib import Path

import pytest

from lightx2v.capture import control, jobs
from lightx2v.capture.control import NotArmed, Process
from lightx2v.utils import torch_trace_profiler as dropin
from lightx2v.utils.torch_trace_profiler import ArmOutcome, JobArmState

NOW = time.time()


def status(pid: int, rank: int = 0, world: int = 1, **extra) -> dict:
    return {"protocol": 1, "pid": pid, "host": "h", "rank": rank, "world_size": world, "heartbeat_seconds": 2.0,
            "argv": ["infer.py", "--steps", "4"], "captures": 1, **extra}


def process(st: dict, beat_at: float = NOW, read_at: float = NOW, path: str | None = None) -> Process:
    ident = f"{st.get('host', 'h')}_{st['pid']}"
    return Process(ident, path or f"/nowhere/{ident}.status.json", st, beat_at, read_at)


def rank(r: int, arm: dict | None, world: int = 2, job_id: str = "j", **extra) -> Process:
    return process(status(100 + r, r, world, job={"id": job_id, "launcher_pid": 99, "arm": arm}, **extra))


def arm(number: int, state: str, **extra) -> dict:
    return {"number": number, "state": state, "site": "step", "calls": 40, "target": 44, **extra}


# ----------------------------------------------------------------------------------------------- the job's line
def test_a_job_waits_while_a_rank_has_not_joined_its_newest_arm():
    # rank 1 still shows the arm before (captured): it has not joined arm 2
    job = jobs.Job("j", [rank(0, arm(2, "armed")), rank(1, arm(1, "captured"))])
    assert jobs.arm_state(job) == "ARMED: arm 2 waiting for every rank to join"


def test_a_job_waits_while_a_rank_has_no_arm_at_all():
    job = jobs.Job("j", [rank(0, arm(1, "armed")), rank(1, None)])
    assert jobs.arm_state(job) == "ARMED: arm 1 waiting for every rank to join"


def test_a_job_whose_ranks_all_joined_and_are_armed_names_the_call_and_each_ranks_count():
    job = jobs.Job("j", [rank(0, arm(3, "armed", calls=40)), rank(1, arm(3, "capturing", calls=41))])
    assert jobs.arm_state(job) == "ARMED: every rank captures call 44 of 'step' (rank 0 at 40, rank 1 at 41)"


def test_a_job_never_armed_or_whose_arm_every_rank_captured_is_not_armed():
    assert jobs.arm_state(jobs.Job("j", [rank(0, None), rank(1, None)])) == "not armed"
    assert jobs.arm_state(jobs.Job("j", [rank(0, arm(2, "captured")), rank(1, arm(2, "captured"))])) == "not armed"


def test_an_arm_that_ended_without_a_capture_says_which_rank_and_why():
    job = jobs.Job("j", [rank(0, arm(2, "abandoned", reason="rank 1 did not answer")), rank(1, arm(2, "captured"))])
    assert jobs.arm_state(job) == "arm 2 ended: rank 0: abandoned: rank 1 did not answer"


def test_a_jobs_figures_come_from_its_ranks():
    job = jobs.Job("j", [rank(0, None, world=4), process(status(102, 2, 4, host="g", job={"id": "j"}))])
    assert (job.world_size, job.hosts, job.missing_ranks, job.launcher_pid) == (4, ["g", "h"], [1, 3], None)
    assert job.missing_note() == ("ranks 1, 3 not listed here (another node without a shared filesystem, or no "
                                  "capture yet: a rank that never ran the call site makes the arm abandoned)")
    one = jobs.Job("j", [rank(0, None, world=2)])
    assert one.missing_note().startswith("rank 1 not listed here (")
    both = jobs.Job("j", [rank(0, None), rank(1, None)])
    assert (both.missing_ranks, both.missing_note(), both.launcher_pid) == ([], "", 99)


def test_a_job_is_running_exited_or_partly_running():
    exited = {"exited_at": NOW - 5}
    assert jobs.Job("j", [rank(0, None), rank(1, None)]).state == "running"
    assert jobs.Job("j", [rank(0, None, **exited), rank(1, None, **exited)]).state == "exited"
    partly = jobs.Job("j", [rank(0, None), rank(1, None, **exited)])
    assert partly.state == "partly running"
    assert partly.not_running_reason().startswith("job j: rank 1: process 101 on h exited at ")
    assert jobs.Job("j", [rank(0, None), rank(1, None)]).not_running_reason() is None


def test_a_jobs_line_for_a_person():
    last = {"run_dir": "/tb/20261201-120000_step", "finished_at": NOW, "error": None}
    job = jobs.Job("j", [rank(0, arm(1, "armed"), last_capture=last), rank(1, arm(1, "armed"), last_capture={
        **last, "error": "disk full"})])
    line = job.describe()
    assert line.startswith("job j: 2 ranks on h (0: pid 100, 1: pid 101); [running]; infer.py --steps 4; "
                           "launcher pid 99; ARMED: every rank captures call 44 of 'step' (rank 0 at 40, rank 1 at "
                           "40); last capture ")
    assert line.endswith(" -> /tb/20261201-120000_step (errors: rank 1: disk full)")
    partial = jobs.Job("j", [rank(0, None, world=3)]).describe()
    assert partial.startswith("job j: 1 of 3 ranks on h (0: pid 100); [running]; infer.py --steps 4; ranks 1, 2 "
                              "not listed here")


def test_group_makes_one_job_of_its_ranks_and_leaves_single_processes():
    single = process(status(7))
    lone_rank = process(status(8, 0, 2))  # a rank without a job id is listed as it is
    r1, r0 = rank(1, None), rank(0, None)
    other = rank(0, None, job_id="k")
    entries = jobs.group([single, r1, lone_rank, r0, other])
    assert [e.id for e in entries] == ["h_7", "j", "h_8", "k"]
    assert [p.rank for p in entries[1].ranks] == [0, 1]
    assert jobs.job_of(entries, job_id="k") is entries[3]
    assert jobs.job_of(entries, pid=101) is entries[1]
    assert jobs.job_of(entries, pid=99) is entries[1]  # torchrun's pid
    assert jobs.job_of(entries, ident="h_100") is entries[1]
    assert jobs.job_of(entries, pid=7) is None and jobs.job_of(entries, job_id="x") is None


@pytest.mark.parametrize("state,said", [
    ({"state": "waiting"}, "waiting for every rank"), ({"state": "armed", "target": 7}, "armed for call 7"),
    ({"state": "abandoned", "reason": "different call sites"}, "abandoned: different call sites"),
    ({"state": "captured"}, "captured")])
def test_a_ranks_arm_state_for_a_person(state, said):
    assert jobs.arm_said(state) == said


# ---------------------------------------------------------------------------------------------- the job's wait
def write_rank(folder: Path, r: int, arm_state: dict, captures: int, world: int = 2) -> str:
    path = folder / f"h_{100 + r}.status.json"
    last = {"run_dir": f"/tb/run_{captures}", "finished_at": NOW} if captures else None
    path.write_text(json.dumps(status(100 + r, r, world, captures=captures, last_capture=last,
                                      job={"id": "j", "arm": arm_state})))
    return str(path)


def test_the_job_wait_goes_on_while_only_the_first_rank_captured(tmp_path):
    paths = [write_rank(tmp_path, 0, arm(1, "captured"), 2), write_rank(tmp_path, 1, arm(1, "armed"), 1)]
    job = jobs.Job("j", [control.read_process(p) for p in paths])
    with pytest.raises(NotArmed) as raised:
        jobs.wait_for_job_capture(job, {"job_arm": 1, "captures_before": {0: 1, 1: 1}}, timeout=0.3)
    assert str(raised.value) == ("job j is armed but not every rank captured within 0 s (rank 0: captured -> "
                                 "/tb/run_2; rank 1: arm 1: armed for call 44 of 'step', at call 40)")


def wait_while_rank_1_captures(tmp_path, job: jobs.Job, after: float) -> dict:
    """The job's wait for arm 1, while rank 1's status file says it captured ``after`` seconds from now."""
    later = threading.Timer(after, write_rank, (tmp_path, 1, arm(1, "captured"), 2))
    later.start()
    try:
        return jobs.wait_for_job_capture(job, {"job_arm": 1, "captures_before": {0: 1, 1: 1}}, timeout=20)
    finally:
        later.cancel()


def test_the_job_wait_returns_once_every_rank_captured(tmp_path):
    paths = [write_rank(tmp_path, 0, arm(1, "captured"), 2), write_rank(tmp_path, 1, arm(1, "armed"), 1)]
    job = jobs.Job("j", [control.read_process(p) for p in paths])
    done = wait_while_rank_1_captures(tmp_path, job, after=0.4)
    assert done == {"call": 44, "run_dirs": ["/tb/run_2"],
                    "ranks": {0: {"run_dir": "/tb/run_2", "finished_at": NOW},
                              1: {"run_dir": "/tb/run_2", "finished_at": NOW}}}


@pytest.mark.parametrize("damage", ["not JSON", "gone"])
def test_the_job_wait_waits_for_a_rank_whose_status_cannot_be_read_this_poll(tmp_path, damage):
    """Rank 1's status file is half written (or being replaced) while rank 0 has captured: the ranks read this
    poll have all captured, the job's ranks have not. The wait goes on until rank 1 has, and returns both."""
    paths = [write_rank(tmp_path, 0, arm(1, "captured"), 2), write_rank(tmp_path, 1, arm(1, "armed"), 1)]
    job = jobs.Job("j", [control.read_process(p) for p in paths])
    if damage == "gone":
        Path(paths[1]).unlink()
    else:
        Path(paths[1]).write_text('{"pid": 101, "ra')
    done = wait_while_rank_1_captures(tmp_path, job, after=0.8)
    assert sorted(done["ranks"]) == [0, 1]


def test_the_job_wait_ends_when_a_rank_exits(tmp_path):
    path = tmp_path / "h_100.status.json"
    path.write_text(json.dumps(status(100, 0, 2, exited_at=NOW, job={"id": "j", "arm": arm(1, "armed")})))
    job = jobs.Job("j", [control.read_process(str(path))])
    with pytest.raises(NotArmed, match=r"^job j: rank 0: process 100 on h exited at .*; it did not capture$"):
        jobs.wait_for_job_capture(job, {"job_arm": 1, "captures_before": {0: 1}}, timeout=5)


def test_an_abandoned_arm_of_an_older_number_does_not_end_the_wait(tmp_path):
    path = write_rank(tmp_path, 0, arm(1, "abandoned", reason="old"), 1, world=1)
    job = jobs.Job("j", [control.read_process(path)])
    with pytest.raises(NotArmed, match="not every rank captured"):
        jobs.wait_for_job_capture(job, {"job_arm": 2, "captures_before": {0: 1}}, timeout=0.2)


def test_a_job_is_explained_with_its_ranks_and_arm_number():
    job = jobs.Job("j", [rank(0, None, world=3), rank(1, None, world=3)])
    assert jobs.explain_job(job, {"outcome": "armed", "job_arm": 4}) == (
        "job j: armed (job arm 4): its 3 ranks agree on a call of their call site and all capture it (rank 2 not "
        "listed here (another node without a shared filesystem, or no capture yet: a rank that never ran the call "
        "site makes the arm abandoned))")
    assert jobs.explain_job(jobs.Job("j", [rank(0, None), rank(1, None)]),
                            {"outcome": "refused", "reason": "off"}) == "job j: refused: off"


def test_a_job_is_not_armed_when_a_rank_exited_or_refuses(tmp_path):
    with pytest.raises(NotArmed, match="^job j: rank 1: process 101 on h exited"):
        jobs.arm_job(jobs.Job("j", [rank(0, None), rank(1, None, exited_at=NOW)]))
    with pytest.raises(NotArmed, match="^job j: refused: no c10d store$"):
        jobs.arm_job(jobs.Job("j", [rank(0, None), rank(1, None, remote_refused="no c10d store")]))


# ------------------------------------------------------------------------------------ one process: its status
def test_a_process_is_running_until_five_heartbeats_are_missed():
    assert process(status(1), beat_at=NOW - 10, read_at=NOW).state == "running"
    gone = process(status(1), beat_at=NOW - 10.5, read_at=NOW)
    assert gone.state == "gone" and gone.silent_for == 10.5
    assert gone.not_running_reason() == ("process 1 on h has not written its status for 10 s: it was killed or is "
                                         "hung; nothing armed")
    assert process(status(1, exited_at=NOW), beat_at=NOW).state == "exited"
    assert process(status(1), beat_at=NOW + 5, read_at=NOW).silent_for == 0.0


def test_a_processs_line_for_a_person():
    p = process(status(5, 1, 2, armed=True, last_capture={"finished_at": NOW, "run_dir": "/tb/r", "error": "x"}))
    line = p.describe()
    assert line.startswith("h_5: pid 5 on h; [running]; infer.py --steps 4; rank 1/2; ARMED: the next run() "
                           "captures; last capture ")
    assert line.endswith(" -> /tb/r (error: x)")
    assert process(status(5, capturing=True)).describe() == "h_5: pid 5 on h; [running]; infer.py --steps 4; " \
                                                            "capturing now"
    assert process(status(5, argv=[])).describe() == "h_5: pid 5 on h; [running]; ?; not armed"


def test_capture_after_is_the_last_capture_once_there_are_more():
    p = process(status(5, captures=3, last_capture={"run_dir": "r"}))
    assert p.capture_after(2) == {"run_dir": "r"} and p.capture_after(3) is None
    assert process(status(5, captures=3)).capture_after(0) is None
    assert p.request_path == "/nowhere/h_5.request"


def test_read_process_takes_only_our_protocols_status(tmp_path):
    good = tmp_path / "h_1.status.json"
    good.write_text(json.dumps(status(1)))
    p = control.read_process(str(good))
    assert (p.id, p.pid, p.beat_at) == ("h_1", 1, os.stat(good).st_mtime)
    for name, text in (("a.status.json", json.dumps({**status(1), "protocol": 2})), ("b.status.json", "[1]"),
                       ("c.status.json", "{not json")):
        (tmp_path / name).write_text(text)
        assert control.read_process(str(tmp_path / name)) is None
    assert control.read_process(str(tmp_path / "missing.status.json")) is None


def logdir_with(root: Path, sub: str, *statuses: dict) -> Path:
    folder = root / sub / ".capture"
    folder.mkdir(parents=True)
    for st in statuses:
        (folder / f"{st.get('host', 'h')}_{st['pid']}.status.json").write_text(json.dumps(st))
    return folder


def test_processes_are_found_under_a_folder_newest_first_and_not_inside_runs_or_hidden_folders(tmp_path):
    logdir_with(tmp_path, "svc/save_results/torch_profile", status(1))
    logdir_with(tmp_path, "svc/save_results/torch_profile/run_1", status(2))  # inside a logdir: a run
    logdir_with(tmp_path, ".hidden", status(3))
    logdir_with(tmp_path, "venv/site-packages/x", status(4))
    logdir_with(tmp_path, "b", status(5))
    now = time.time()
    os.utime(tmp_path / "svc/save_results/torch_profile/.capture/h_1.status.json", (now - 10, now - 10))
    os.utime(tmp_path / "b/.capture/h_5.status.json", (now, now))
    found, search = control.search_processes(str(tmp_path), prune=False)
    assert [p.pid for p in found] == [5, 1] and search.truncated is False
    assert control.find_control_dirs(str(tmp_path), depth=1).control_dirs == [str(tmp_path / "b" / ".capture")]
    assert control.find_control_dirs(str(tmp_path), limit=2).truncated is True


def test_a_process_is_chosen_by_pid_or_id_with_a_reason_when_not():
    a, b, c = process(status(1)), process(status(2, host="g")), process(status(2, host="k"))
    assert control.select([a, b, c]) == [a, b, c]
    assert control.select([a, b, c], pid=1) == [a]
    assert control.select([a, b, c], ident="g_2") == [b]
    with pytest.raises(NotArmed, match="^pid 2 is on several hosts: g_2, k_2; name one by id$"):
        control.select([a, b, c], pid=2)
    with pytest.raises(NotArmed, match="^no process with pid 3 writes captures here: a process shows up after"):
        control.select([a], pid=3)
    with pytest.raises(NotArmed, match="^no process with id 'x_1' writes captures here$"):
        control.select([a], ident="x_1")


def test_exited_processes_past_the_newest_kept_or_a_day_old_are_pruned(tmp_path):
    folder = logdir_with(tmp_path, "tb", *[status(i, exited_at=NOW - i) for i in range(1, 5)],
                         status(9, exited_at=NOW - 2 * 24 * 3600), status(10))
    processes = control.search_processes(str(tmp_path), prune=False)[0]
    kept = control.prune_exited(processes, now=NOW, keep=2)
    assert sorted(p.pid for p in kept) == [1, 2, 10]
    assert sorted(os.listdir(folder)) == ["h_1.status.json", "h_10.status.json", "h_2.status.json"]


def test_a_gone_process_is_pruned_only_when_its_pid_is_surely_dead_here(tmp_path):
    here = socket.gethostname()
    dead_pid = 2 ** 22 + 12345  # above Linux's pid_max default: no such process
    old = NOW - 3 * 24 * 3600
    folder = logdir_with(tmp_path, "tb", status(dead_pid, host=here), status(os.getpid(), host=here),
                         status(dead_pid, host="elsewhere"))
    for name in os.listdir(folder):
        os.utime(folder / name, (old, old))
    processes = control.search_processes(str(tmp_path), prune=False)[0]
    kept = control.prune_exited(processes, now=NOW)
    assert sorted((p.host, p.pid) for p in kept) == sorted([(here, os.getpid()), ("elsewhere", dead_pid)])


# ------------------------------------------------------------------------------------------- arming one process
def test_arm_writes_a_request_and_returns_the_processs_answer(tmp_path):
    folder = logdir_with(tmp_path, "tb", status(1))
    path = str(folder / "h_1.status.json")
    p = control.read_process(path)

    def answer():
        request = json.loads(Path(p.request_path).read_text())
        Path(path).write_text(json.dumps(status(1, last_request={"id": request["id"], "outcome": "armed",
                                                                 "captures_before": 1})))

    def answer_when_asked():
        deadline = time.monotonic() + 10
        while not os.path.exists(p.request_path) and time.monotonic() < deadline:
            time.sleep(0.02)
        answer()

    t = threading.Thread(target=answer_when_asked)
    t.start()
    got = control.arm(p, by="a test", ack_seconds=10)
    t.join()
    assert (got["outcome"], got["reason"], got["captures_before"]) == (ArmOutcome.ARMED, None, 1)
    request = json.loads(Path(p.request_path).read_text())
    assert (request["protocol"], request["by"], len(request["id"])) == (1, "a test", 16)
    assert control.explain(p, got) == "h_1: armed: pid 1 captures at its next first run()"


def test_arm_says_why_a_process_cannot_be_armed(tmp_path):
    with pytest.raises(NotArmed, match="exited at .*; nothing armed$"):
        control.arm(process(status(1, exited_at=NOW)))
    with pytest.raises(NotArmed, match="^h_1: refused: a job without a store$"):
        control.arm(process(status(1, remote_refused="a job without a store")))
    folder = logdir_with(tmp_path, "tb", status(1))
    silent = control.read_process(str(folder / "h_1.status.json"))
    with pytest.raises(NotArmed, match=r"^h_1 did not answer within 0 s \(busy in a long call"):
        control.arm(silent, ack_seconds=0.3)
    assert os.path.exists(silent.request_path)  # the request stays


@pytest.mark.parametrize("answer,read", [
    ({"outcome": "armed"}, (ArmOutcome.ARMED, None)), ({"outcome": "already armed"}, (ArmOutcome.ALREADY_ARMED, None)),
    ({"outcome": "refused", "reason": "off"}, (ArmOutcome.REFUSED, "off")),
    ({"outcome": "refused: profiling is off"}, (ArmOutcome.REFUSED, "profiling is off")),
    ({"outcome": "exploded"}, ("exploded", None)), ({}, ("?", None)),
    ({"outcome": ArmOutcome.CAPTURING_NOW, "reason": "r"}, (ArmOutcome.CAPTURING_NOW, "r")),
])
def test_a_requests_outcome_reads_from_new_and_old_files(answer, read):
    assert control.request_outcome(answer) == read


def test_an_outcome_or_a_state_for_a_person():
    assert control.outcome_said(ArmOutcome.REFUSED, "off") == "refused: off"
    assert control.outcome_said(JobArmState.MISSED) == "missed"
    assert control.outcome_said("odd") == "odd"


# ------------------------------------------------------------------------------- the drop-in's plan for a job arm
def test_ranks_at_one_call_site_plan_the_call_three_past_the_furthest_rank():
    published = [{"index": 40, "site": "step"}, {"index": 43, "site": "step"}, {"index": 41, "site": "step"}]
    assert dropin._job_plan(published) == "call 46"
    assert dropin._read_plan("call 46") == (46, None)


def test_ranks_at_different_call_sites_abandon_the_arm_naming_the_sites():
    published = [{"index": 40, "site": "step"}, {"index": 2, "site": "vae"}, {"index": 40, "site": "step"}]
    plan = dropin._job_plan(published)
    assert plan == "abandoned: the ranks' last captures were at different call sites (step, vae)"
    assert dropin._read_plan(plan) == (None, "the ranks' last captures were at different call sites (step, vae)")


@pytest.mark.parametrize("plan,read", [("call x", (None, "call x")), ("call 7 ", (7, None)),
                                       ("call  7", (7, None)), ("nonsense", (None, "nonsense")),
                                       ("call ¹", (None, "call ¹")), ("wait 7", (None, "wait 7"))])
def test_a_plan_that_is_no_call_reads_as_the_reason_nobody_captures(plan, read):
    assert dropin._read_plan(plan) == read


def test_arming_a_job_places_one_request_with_its_lowest_rank_and_keeps_each_ranks_captures(tmp_path):
    folder = logdir_with(tmp_path, "tb", status(100, 0, 2, captures=3, job={"id": "j"}),
                         status(101, 1, 2, captures=5, job={"id": "j"}))
    ranks = [control.read_process(str(folder / f"h_{pid}.status.json")) for pid in (100, 101)]

    def answer_when_asked():
        deadline = time.monotonic() + 10
        while not os.path.exists(ranks[0].request_path) and time.monotonic() < deadline:
            time.sleep(0.02)
        request = json.loads(Path(ranks[0].request_path).read_text())
        Path(ranks[0].status_path).write_text(json.dumps(status(100, 0, 2, captures=3, job={"id": "j"}, last_request={
            "id": request["id"], "outcome": "armed", "job_arm": 7})))

    t = threading.Thread(target=answer_when_asked)
    t.start()
    got = jobs.arm_job(jobs.Job("j", ranks), by="the button")
    t.join()
    assert (got["outcome"], got["job_arm"], got["captures_before"]) == (ArmOutcome.ARMED, 7, {0: 3, 1: 5})
    assert json.loads(Path(ranks[0].request_path).read_text())["by"] == "the button"
    assert not os.path.exists(ranks[1].request_path)


def test_a_rank_listed_twice_keeps_its_newest_status_first():
    old, new = process(status(100, 0, 2, job={"id": "j"}), beat_at=NOW - 50), \
        process(status(200, 0, 2, job={"id": "j"}), beat_at=NOW)
    (job,) = jobs.group([old, new])
    assert [p.pid for p in job.ranks] == [200, 100]
    # a process of one rank is never a job, whatever its status says
    single = process(status(7, 0, 1, job={"id": "j"}))
    assert jobs.group([single]) == [single]
    assert jobs.job_of([single], ident="h_7") is None
    assert jobs.job_of(jobs.group([old, new]), ident="h_999") is None


# ------------------------------------------------------------------------------------------ more of one process
def clock(epoch: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(epoch))


def test_a_processs_line_cuts_its_command_at_80_characters_and_says_when_it_last_captured():
    at = 1_764_000_000.0
    long = process(status(5, argv=["x" * 50, "y" * 50], last_capture={"finished_at": at, "run_dir": "/tb/r"}))
    assert long.describe() == f"h_5: pid 5 on h; [running]; {'x' * 50} {'y' * 29}; not armed; last capture " \
                              f"{clock(at)} -> /tb/r"
    gone = process(status(5, exited_at=at))
    assert gone.not_running_reason() == f"process 5 on h exited at {clock(at)}; nothing armed"


def test_wait_for_capture_returns_the_capture_made_after_the_arm(tmp_path):
    folder = logdir_with(tmp_path, "tb", status(1, captures=1))
    path = folder / "h_1.status.json"
    p = control.read_process(str(path))
    later = threading.Timer(0.3, lambda: path.write_text(json.dumps(status(1, captures=2, last_capture={
        "run_dir": "/tb/new"}))))
    later.start()
    try:
        assert control.wait_for_capture(p, 1, timeout=20) == {"run_dir": "/tb/new"}
    finally:
        later.cancel()


@pytest.mark.slow
def test_wait_for_capture_says_why_when_the_process_exits_or_nothing_runs(tmp_path):
    folder = logdir_with(tmp_path, "tb", status(1, captures=1), status(2, captures=1, exited_at=NOW))
    quiet, ended = (control.read_process(str(folder / f"h_{pid}.status.json")) for pid in (1, 2))
    with pytest.raises(NotArmed) as raised:
        control.wait_for_capture(ended, 1, timeout=20)
    assert str(raised.value) == f"process 2 on h exited at {clock(NOW)}; it did not capture"
    with pytest.raises(NotArmed) as raised:
        control.wait_for_capture(quiet, 1, timeout=0.3)
    assert str(raised.value) == ("h_1 is armed but has not captured within 0 s: its call site has not run since (it "
                                 "captures at the next run())")
    os.unlink(folder / "h_1.status.json")  # a status being rewritten, or gone: the wait goes on to its end
    with pytest.raises(NotArmed, match="has not captured within 0 s"):
        control.wait_for_capture(quiet, 1, timeout=0.3)


def test_arm_says_so_when_the_process_exits_before_it_answers(tmp_path):
    folder = logdir_with(tmp_path, "tb", status(1))
    path = folder / "h_1.status.json"
    p = control.read_process(str(path))
    later = threading.Timer(0.2, lambda: path.write_text(json.dumps(status(1, exited_at=NOW))))
    later.start()
    try:
        with pytest.raises(NotArmed) as raised:
            control.arm(p, ack_seconds=20)
    finally:
        later.cancel()
    assert str(raised.value) == f"process 1 on h exited at {clock(NOW)}; nothing armed"


def test_arm_writes_when_and_by_whom_and_says_when_it_cannot_write(tmp_path):
    p = process(status(1), path=str(tmp_path / "no" / "such" / "h_1.status.json"))
    with pytest.raises(NotArmed) as raised:
        control.arm(p, ack_seconds=0.1)
    assert str(raised.value) == f"cannot write {tmp_path / 'no' / 'such' / 'h_1.request'}: No such file or directory"
    folder = logdir_with(tmp_path, "tb", status(1))
    silent = control.read_process(str(folder / "h_1.status.json"))
    before = time.time()
    with pytest.raises(NotArmed) as raised:
        control.arm(silent, ack_seconds=0.2)
    assert str(raised.value) == ("h_1 did not answer within 0 s (busy in a long call without releasing the GIL, or "
                                 "hung); the request stays and arms it when it next looks")
    request = json.loads(Path(silent.request_path).read_text())
    assert before <= request["at"] <= time.time()
    assert request["by"] == f"python -m lightx2v.capture (pid {os.getpid()} on {socket.gethostname()})"


def test_the_search_stops_at_its_depth_and_folder_limit_and_does_not_follow_links(tmp_path):
    logdir_with(tmp_path, "a/b", status(1))  # root, a, a/b: three folders, the logdir two below the root
    (tmp_path / "link").symlink_to(tmp_path / "a", target_is_directory=True)
    assert control.find_control_dirs(str(tmp_path), depth=1).control_dirs == []
    found = control.find_control_dirs(str(tmp_path), depth=2)
    assert (found.control_dirs, found.truncated) == ([str(tmp_path / "a" / "b" / ".capture")], False)
    assert control.find_control_dirs(str(tmp_path), limit=3) == control.Search([str(tmp_path / "a/b/.capture")],
                                                                               False)
    assert control.find_control_dirs(str(tmp_path), limit=2) == control.Search([], True)
    logdir_with(tmp_path, "c", status(2))  # root, a, c, a/b: c's logdir is found before the limit stops
    assert control.find_control_dirs(str(tmp_path), limit=3) == control.Search([str(tmp_path / "c/.capture")], True)
    assert control.find_control_dirs(str(tmp_path / "missing")) == control.Search([], False)


def test_finding_processes_prunes_long_exited_ones_by_default(tmp_path):
    folder = logdir_with(tmp_path, "tb", status(1, exited_at=NOW - 2 * 24 * 3600), status(2))
    assert sorted(p.pid for p in control.find_processes(str(tmp_path), prune=False)) == [1, 2]
    assert [p.pid for p in control.find_processes(str(tmp_path))] == [2]
    assert os.listdir(folder) == ["h_2.status.json"]
    logdir_with(tmp_path, "tb2", status(3, exited_at=NOW - 2 * 24 * 3600))
    assert [p.pid for p in control.search_processes(str(tmp_path))[0]] == [2]


def test_pruning_keeps_what_is_exactly_at_the_age_limit_and_a_status_rewritten_since(tmp_path):
    folder = logdir_with(tmp_path, "tb", status(1, exited_at=NOW - 100), status(2, exited_at=NOW - 101),
                         status(3, exited_at=NOW - 500))
    processes = control.search_processes(str(tmp_path), prune=False)[0]
    os.utime(folder / "h_3.status.json", (NOW + 5, NOW + 5))  # rewritten after it was read: a new process
    kept = control.prune_exited(processes, now=NOW, max_age=100)
    assert sorted(p.pid for p in kept) == [1, 3]
    assert sorted(os.listdir(folder)) == ["h_1.status.json", "h_3.status.json"]
    os.unlink(folder / "h_1.status.json")  # removed by someone else meanwhile: gone either way
    assert [p.pid for p in control.prune_exited([p for p in kept if p.pid == 1], now=NOW + 1000, max_age=100)] == []


def test_pruning_uses_the_time_now_by_default(tmp_path):
    logdir_with(tmp_path, "tb", status(1, exited_at=time.time() - 2 * 24 * 3600), status(2, exited_at=time.time()))
    processes = control.search_processes(str(tmp_path), prune=False)[0]
    assert [p.pid for p in control.prune_exited(processes)] == [2]


def test_a_gone_process_is_kept_until_it_has_been_silent_longer_than_the_age_limit(tmp_path):
    here = socket.gethostname()
    dead = 2 ** 22 + 54321
    folder = logdir_with(tmp_path, "tb", status(dead, host=here), status(dead + 1, host=here), status(0, host=here))
    for pid, age in ((dead, 3600), (dead + 1, 7200), (0, 7200)):
        path = folder / f"{here}_{pid}.status.json"
        os.utime(path, (NOW - age, NOW - age))
    processes = control.search_processes(str(tmp_path), prune=False)[0]
    kept = control.prune_exited(processes, now=NOW, max_age=3600)
    assert sorted(p.pid for p in kept) == [0, dead]  # exactly the limit: kept; pid 0 is never "surely dead"


def test_a_jobs_line_joins_hosts_and_errors_and_cuts_the_command_at_80_characters():
    at, later = 1_764_000_000.0, 1_764_000_100.0
    r0 = process(status(100, 0, 2, host="a", argv=["z" * 90], job={"id": "j"},
                        last_capture={"run_dir": "/tb/r", "finished_at": at, "error": "x"}))
    r1 = process(status(101, 1, 2, host="b", job={"id": "j"},
                        last_capture={"run_dir": "/tb/s", "finished_at": later, "error": "y"}))
    assert jobs.Job("j", [r0, r1]).describe() == (
        f"job j: 2 ranks on a, b (0: pid 100, 1: pid 101); [running]; {'z' * 80}; not armed; last capture "
        f"{clock(later)} -> /tb/r | /tb/s (errors: rank 0: x; rank 1: y)")
    bare = jobs.Job("j", [process(status(100, 0, 2, argv=None, job={"id": "j"},
                                         last_capture={"run_dir": "/tb/r"}), ),
                          process(status(101, 1, 2, job={"id": "j"}, exited_at=at))])
    assert bare.describe() == (f"job j: 2 ranks on h (0: pid 100, 1: pid 101); [partly running]; ?; last capture "
                               f"{clock(0)} -> /tb/r")
    ended = jobs.Job("j", [rank(0, arm(1, "abandoned", reason="a")), rank(1, arm(1, "missed", reason="b"))])
    assert jobs.arm_state(ended) == "arm 1 ended: rank 0: abandoned: a; rank 1: missed: b"
    assert ended.not_running_reason() is None
    both = jobs.Job("j", [rank(0, None, exited_at=at), rank(1, None, exited_at=at)])
    assert both.not_running_reason() == (f"job j: rank 0: process 100 on h exited at {clock(at)}; nothing armed; "
                                         f"rank 1: process 101 on h exited at {clock(at)}; nothing armed")


def test_a_ranks_place_in_the_wait_without_an_arm_and_an_arm_without_a_state():
    assert jobs._rank_arm(process(status(1, 0, 2, job={"id": "j"}))) == "not armed"
    assert jobs.arm_said({}) == ""


def test_the_job_wait_counts_a_rank_without_a_recorded_before_from_zero(tmp_path):
    paths = [write_rank(tmp_path, 0, arm(1, "captured"), 1), write_rank(tmp_path, 1, arm(1, "captured", target=44),
                                                                          1)]
    job = jobs.Job("j", [control.read_process(p) for p in paths])
    done = jobs.wait_for_job_capture(job, {"job_arm": 1, "captures_before": {}}, timeout=5)
    assert sorted(done["ranks"]) == [0, 1] and done["call"] == 44


def test_a_job_with_one_rank_listed_here_names_its_call_and_site():
    # rank 1 runs on another node without a shared filesystem: the arm's line comes from rank 0 alone
    job = jobs.Job("j", [rank(0, arm(5, "armed", calls=12, target=15, site="denoise"))])
    assert jobs.arm_state(job) == "ARMED: every rank captures call 15 of 'denoise' (rank 0 at 12)"


def test_the_job_wait_of_a_job_with_one_rank_listed_here_returns_its_capture(tmp_path):
    path = write_rank(tmp_path, 0, arm(1, "captured", target=47), 2)
    job = jobs.Job("j", [control.read_process(path)])
    done = jobs.wait_for_job_capture(job, {"job_arm": 1, "captures_before": {0: 1}}, timeout=5)
    assert done == {"call": 47, "run_dirs": ["/tb/run_2"], "ranks": {0: {"run_dir": "/tb/run_2", "finished_at": NOW}}}


def test_a_job_arm_its_first_rank_cannot_take_says_which_job_and_why():
    # both ranks running, nothing refused: the request for rank 0 cannot be written (its folder is not there)
    job = jobs.Job("j", [rank(0, None), rank(1, None)])
    with pytest.raises(NotArmed) as raised:
        jobs.arm_job(job)
    assert str(raised.value).startswith("job j: cannot write /nowhere/h_100.")


def test_an_old_style_reason_after_the_colon_may_hold_colons_and_never_replaces_a_reason_written_apart():
    assert control.request_outcome({"outcome": "refused: env: LIGHTX2V_TORCH_PROFILE=0"}) == (
        ArmOutcome.REFUSED, "env: LIGHTX2V_TORCH_PROFILE=0")
    assert control.request_outcome({"outcome": "refused: old words", "reason": "profiling is off"}) == (
        ArmOutcome.REFUSED, "profiling is off")
    assert control.job_arm_state({"state": "abandoned: old words", "reason": "rank 1 did not answer"}) == (
        JobArmState.ABANDONED, "rank 1 did not answer")


def test_a_time_that_is_no_number_is_shown_as_a_question_mark():
    assert control._clock("soon") == "?"
    assert control._clock(None) == "?"


def test_sibling_logdirs_are_all_found_not_only_the_first(tmp_path):
    for name in ("a", "b", "c"):
        (tmp_path / name / ".capture").mkdir(parents=True)
    assert control.find_control_dirs(str(tmp_path)).control_dirs == [
        str(tmp_path / name / ".capture") for name in ("a", "b", "c")]
