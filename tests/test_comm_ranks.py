"""Real torchrun jobs (gloo, CPU) shaped like LightX2V's parallel denoising (Ulysses all-to-alls and a CFG
all-gather every step), one rank made late on purpose in chosen steps (tests/programs/comm_late_rank.py): the
summary names that rank in exactly those steps, with the others' waits as the ranks' own clocks measured them
(their arrivals at that collective, printed by the program: under load a rank may arrive late itself and wait
less than the delay) within 10% of the delay, the collective,
its call site and what the late rank was doing; it is the straggler by the waits it caused. One job per
configuration (2 ranks late before an all-to-all, 4 ranks late before the all-gather), shared by the tests."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from lightx2v.trace_summary import summarize_paths
from lightx2v.trace_summary.discover import resolve
from lightx2v.trace_summary.summarize import summarize_run

from conftest import REPO_ROOT, subprocess_env
from helpers.torchrun import rows, run_torchrun

pytestmark = pytest.mark.torchrun

PROGRAM = REPO_ROOT / "tests" / "programs" / "comm_late_rank.py"
DELAY_MS = 150.0
JOBS = {  # name: (ranks, late rank, late steps, where the delay is)
    "two": (2, 1, (1, 3), "a2a"),
    "four": (4, 2, (2, 4), "gather"),
}


@pytest.fixture(scope="module", params=list(JOBS))
def job(request, tmp_path_factory):
    ranks, late, steps, where = JOBS[request.param]
    out = tmp_path_factory.mktemp(request.param)
    log = run_torchrun(PROGRAM, str(out), str(late), ",".join(map(str, steps)), str(DELAY_MS), where, cwd=out,
                       nproc=ranks)
    found = rows(log, "LATE")
    assert sorted(found) == list(range(ranks)), log
    spent = {int(k): v for k, v in json.loads(found[late]["spent_ms"]).items()}
    arrived = {r: {int(k): v for k, v in json.loads(row["arrived_s"]).items()} for r, row in found.items()}
    (run_dir,) = {Path(p).parent for row in found.values() for p in row["paths"].split(",")}
    return {"ranks": ranks, "late": late, "steps": steps, "where": where, "dir": run_dir, "spent_ms": spent,
            "arrived_s": arrived}


def measured_waits(arrived: dict[int, dict[int, list[float]]], step: int) -> dict[int, list[float]]:
    """Per rank, per collective of ``step`` (µs): the last rank's arrival there minus its own."""
    ranks = list(arrived)
    count = len(arrived[ranks[0]][step])
    last = [max(arrived[r][step][c] for r in ranks) for c in range(count)]
    return {r: [(last[c] - arrived[r][step][c]) * 1e6 for c in range(count)] for r in ranks}


def summary_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "lightx2v.trace_summary", *args], capture_output=True, text=True,
                          timeout=120, cwd=cwd, env=subprocess_env())


def test_the_late_rank_is_named_in_exactly_its_steps_with_the_others_waits(job):
    (run,) = summarize_paths([str(job["dir"])])
    c = run.communication
    assert [r.rank for r in run.ranks] == list(range(job["ranks"]))
    assert c is not None and not c.on_gpu and c.ranks == job["ranks"]
    assert c.collectives == c.complete == 3 * 4 and c.notes == []  # 3 collectives in each of 4 steps
    named = {s.step: s.late_rank for s in c.steps if s.late_rank is not None}
    assert named == {f"ProfilerStep#{k}": job["late"] for k in job["steps"]}, [
        (s.step, s.late_rank, s.late_wait_us) for s in c.steps]
    arrived = job["arrived_s"]
    for k in job["steps"]:
        delay = job["spent_ms"][k] * 1000
        assert delay >= DELAY_MS * 1000
        step = next(s for s in c.steps if s.step == f"ProfilerStep#{k}")
        waits = measured_waits(arrived, k)  # rank: its waits in the step's collectives, by the ranks' clocks
        at = 0 if job["where"] == "a2a" else 2  # the collective the delay precedes
        there = [(arrived[job["late"]][k][at] - arrived[r][k][at]) * 1e6 for r in arrived if r != job["late"]]
        tolerance = 0.10 * delay
        assert step.collective_wait_us == pytest.approx(sum(there) / len(there), abs=tolerance)
        for r in step.ranks:
            if r.rank != job["late"]:
                assert r.waited_us == pytest.approx(sum(waits[r.rank]), abs=tolerance), (k, r, waits)
        assert step.collective == ("all_to_all" if job["where"] == "a2a" else "all_gather")
        assert ("ulysses_attention" if job["where"] == "a2a" else "cfg_parallel") in step.site
        assert step.doing.startswith("aten::") and "comm_late_rank.py" in step.doing_line
        assert "straggle" in step.doing_line
    assert run.straggler.rank == job["late"] and run.straggler.criterion == "waits_caused"


def test_each_rank_has_its_exposed_communication_per_step(job):
    (run,) = summarize_paths([str(job["dir"])])
    for r in run.ranks:
        comm = r.communication
        assert comm is not None and not comm.on_gpu and comm.kinds == {"all_to_all": 8, "all_gather": 4}
        assert [s.calls for s in comm.steps] == [3, 3, 3, 3]
        for s in comm.steps:
            assert 0 < s.exposed_us <= s.comm_us <= s.wall_us
            assert s.compute_us + s.exposed_us <= s.wall_us + 1  # a CPU rank: compute or waiting in collectives
    top = {t.kind: t for t in run.communication.top}
    n = job["ranks"]
    assert top["all_to_all"].bytes == 4 * 64 * 2 * n * 16  # its slice of the sequence, all heads: float32
    assert top["all_gather"].bytes == 4 * 64 * (2 * n * 16) * n  # each rank's branch, times the ranks
    assert top["all_to_all"].busbw_gbps == pytest.approx(top["all_to_all"].algbw_gbps * (n - 1) / n)


def test_the_cli_says_it_in_text_and_json(job):
    late = job["late"]
    proc = summary_cli(str(job["dir"]), cwd=job["dir"])
    assert proc.returncode == 0, proc.stderr
    assert f"straggler: rank {late} (rank{late}_" in proc.stdout and "the others waited" in proc.stdout
    assert f"Communication across {job['ranks']} ranks (gloo on CPU" in proc.stdout
    assert f"rank {late} " in proc.stdout and "before it: aten::" in proc.stdout
    proc = summary_cli(str(job["dir"]), "--json", cwd=job["dir"])
    (doc,) = json.loads(proc.stdout)["runs"]
    assert [s["late_rank"] for s in doc["communication"]["steps"]] == [
        late if k in job["steps"] else None for k in (1, 2, 3, 4)]
    assert doc["straggler"]["criterion"] == "waits_caused" and doc["straggler"]["rank"] == late
    proc = summary_cli("--diff", str(job["dir"]), str(job["dir"]), cwd=job["dir"])
    assert proc.returncode == 0, proc.stderr
    assert "communication: exposed " in proc.stdout and "(+0.0%, within noise); waits " in proc.stdout
    named = f"rank {late} in 2 of 4 steps"
    assert f"late rank: {named} -> {named}" in proc.stdout


def test_a_missing_or_cut_rank_file_is_said_and_the_rest_kept(job, tmp_path):
    missing, cut = tmp_path / "missing", tmp_path / "cut"
    shutil.copytree(job["dir"], missing)
    shutil.copytree(job["dir"], cut)
    last = job["ranks"] - 1
    (gone,) = missing.glob(f"rank{last}_*.pt.trace.json")
    gone.unlink()
    (run,) = summarize_paths([str(missing)])
    assert [r.rank for r in run.ranks] == list(range(last))
    if last > 1:
        assert run.communication.notes[0].startswith(f"rank {last} of {job['ranks']}: no trace in this run")
        assert run.communication.complete == 0  # gloo records no group: any collective may need the missing rank
    assert all(r.communication is not None for r in run.ranks)
    (damaged,) = cut.glob(f"rank{last}_*.pt.trace.json")
    damaged.write_bytes(damaged.read_bytes()[: damaged.stat().st_size // 2])
    (run,) = [summarize_run(r, keep_going=True) for r in resolve([str(cut)])]
    assert [d.file for d in run.damaged_files] == [str(damaged)]
    if last > 1:
        assert f"1 damaged file ({damaged})" in run.communication.notes[0]


@pytest.mark.parametrize("job", ["four"], indirect=True)  # one mix is enough: the 4-rank job's ranks beside a file
def test_ranks_of_another_run_are_said(job, tmp_path):  # of another world size
    mixed = tmp_path / "mixed"
    shutil.copytree(job["dir"], mixed)
    (rank0,) = mixed.glob("rank0_*.pt.trace.json")
    doc = json.loads(rank0.read_text())
    doc["distributedInfo"]["world_size"] = 8
    rank0.write_text(json.dumps(doc))
    (run,) = summarize_paths([str(mixed)])
    assert run.communication.notes[0] == ("rank 0: world size 8, the others' 4: another run's file? its collectives "
                                          "are not matched")
    assert run.communication.ranks == 3 and len(run.ranks) == 4


def test_the_overview_shows_each_ranks_exposed_communication_and_the_late_rank(job):
    from lightx2v.trace_browser import offline

    from helpers.html_tree import parse

    run_dir = job["dir"]
    page = offline.overview_page(str(run_dir.parent), f"{run_dir.name}/")
    html = page.body.decode()
    (section,) = [e for e in parse(html).elements() if e.tag == "section" and e.id == "communication"]
    bars = [e for e in section.elements() if e.tag == "svg"]
    assert len(bars) == 4 * job["ranks"]  # a bar per step and rank
    late = [e.text() for e in section.elements() if e.tag == "p" and "late" in e.classes]
    assert [t.split(":")[0] for t in late] == [f"ProfilerStep#{k}" for k in job["steps"]]
    assert all(f"for rank {job['late']}, " in t and "straggle" in t for t in late)
    assert f"Straggler: rank {job['late']} (rank{job['late']}_" in html


def test_a_late_step_merged_for_perfetto_lines_the_ranks_up(job):
    """The step's file of every rank on one clock: each collective's ends line up within the reported clock offset
    and spread, and arrows go from the late rank to each rank that waited for it."""
    from lightx2v.trace_browser import offline

    run_dir, late, k = job["dir"], job["late"], job["steps"][0]
    page = offline.merged_page(str(run_dir.parent), f"{run_dir.name}/", f"step=ProfilerStep%23{k}")
    assert page.status == 200, page.body[:300]
    events = json.loads(page.body)["traceEvents"]
    slices: dict[int, list[dict]] = {}
    for e in sorted((e for e in events if e.get("cat") == "collective" and e["ph"] == "X"), key=lambda e: e["ts"]):
        slices.setdefault(e["pid"] // 10_000 - 1, []).append(e)
    assert sorted(slices) == list(range(job["ranks"])) and {len(v) for v in slices.values()} == {3}
    (run,) = summarize_paths([str(run_dir)])
    clocks = {x.rank: x for x in run.communication.clocks}
    for i in range(3):
        end0 = slices[0][i]["ts"] + slices[0][i]["dur"]
        for p in range(1, job["ranks"]):
            end = slices[p][i]["ts"] + slices[p][i]["dur"]
            allowed = clocks[p].spread_us + (0 if clocks[p].applied else abs(clocks[p].offset_us)) + 1
            assert abs(end - end0) <= allowed, (i, p, end - end0, clocks[p])
    arrows = [e for e in events if e.get("ph") == "s" and e.get("cat") == "collective"]
    late_pid = (late + 1) * 10_000 + 9_999
    assert sum(1 for e in arrows if e["pid"] == late_pid) >= job["ranks"] - 1


@pytest.mark.parametrize("job", ["two"], indirect=True)  # the job the docs show
def test_the_many_gpus_pages_sample_cites_the_lines_a_real_run_prints(job):
    """docs/many_gpus.md (and its Chinese twin) show this job's report: every `comm_late_rank.py:N function` they
    cite is one the summary of a real run of the same command prints (the program's lines move as it changes:
    61/77 stayed in the docs after they became 65/83)."""
    printed = summary_cli(str(job["dir"]), cwd=job["dir"]).stdout
    real = set(re.findall(r"comm_late_rank\.py:\d+ \w+", printed))
    assert real, printed
    for page in ("docs/many_gpus.md", "docs/zh/many_gpus.md"):
        cited = set(re.findall(r"comm_late_rank\.py:\d+ \w+", (REPO_ROOT / page).read_text()))
        assert cited and cited <= real, (page, sorted(cited - real), sorted(real))
