"""Two real ranks (torchrun, gloo) captured by the project's profiler: the summary names the slower rank, and the
profiler's per-capture hook leaves a summary next to every trace and logs its top lines."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from lightx2v.trace_summary import summarize_paths
from lightx2v.trace_summary.names import PLUGIN_TRACE_RE

from conftest import REPO_ROOT, subprocess_env
from helpers.torchrun import run_torchrun

pytestmark = pytest.mark.torchrun

PROGRAM = REPO_ROOT / "tests" / "programs" / "summary_straggler.py"


@pytest.fixture(scope="module")
def straggler_job(tmp_path_factory):
    out = tmp_path_factory.mktemp("straggler")
    return out, run_torchrun(PROGRAM, str(out), cwd=out)


def summary_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "lightx2v.trace_summary", *args], capture_output=True, text=True,
                          timeout=120, cwd=cwd, env=subprocess_env())


@pytest.mark.parametrize("where", ["tb", "tb_run", "chrome", "chrome_files"])
def test_slower_rank_is_named_the_straggler(straggler_job, where):
    out, _ = straggler_job
    (run_dir,) = [p for p in (out / "tb").iterdir() if p.name != ".capture"]  # beside the remote-arming folder
    paths = {"tb": [out / "tb"], "tb_run": [run_dir], "chrome": [out / "chrome"],
             "chrome_files": [out / "chrome" / "trace.rank0.json", out / "chrome" / "trace.rank1.json"]}[where]
    (run,) = summarize_paths([str(p) for p in paths])
    assert [r.rank for r in run.ranks] == [0, 1] and all(r.world_size == 2 for r in run.ranks)
    rows = {row.rank: row for row in run.comparison}
    assert rows[1].step_wall_us > rows[0].step_wall_us + 30_000  # rank 1 sleeps 40 ms per step
    assert run.straggler.rank == 1 and run.straggler.criterion == "step_wall"
    assert run.straggler.slower_than_fastest_pct > 100

    proc = summary_cli(*map(str, paths), cwd=out)
    assert proc.returncode == 0, proc.stderr
    assert "2 ranks" in proc.stdout and "straggler: rank 1" in proc.stdout
    assert proc.stdout.count("Trace summary: ") == 2 and "aten::mm" in proc.stdout

    proc = summary_cli(*map(str, paths), "--json", "--top", "2", cwd=out)
    doc = json.loads(proc.stdout)
    (run_json,) = doc["runs"]
    assert run_json["straggler"]["rank"] == 1 and [r["rank"] for r in run_json["comparison"]] == [0, 1]
    assert all(len(r["top_cpu_ops"]) == 2 for r in run_json["ranks"])


def test_profiler_hook_writes_a_summary_beside_each_trace_and_logs_top_ops(straggler_job):
    out, log = straggler_job
    traces = sorted((out / "tb").rglob("*.pt.trace.json")) + sorted((out / "chrome").glob("trace.rank*.json"))
    assert len(traces) == 4
    for trace in traces:
        summary = Path(str(trace) + ".summary.txt")
        text = summary.read_text()
        assert text.startswith("Trace summary: ") and "Top " in text and "aten::mm" in text
        assert not PLUGIN_TRACE_RE.match(summary.name)  # TensorBoard does not take it for a worker
        assert f"summary: {summary}" in log
    leftovers = [p.name for p in out.rglob(".*") if p.name != ".capture"]  # the processes' status folder
    assert leftovers == []  # no temp files from the atomic writes
    assert log.count("top CPU ops by self time") == 4
    for rank in (0, 1):
        assert f"[rank {rank}/2]: wrote" in log


def test_lockstep_ranks_blame_the_one_with_most_gpu_compute(tmp_path):
    """With collectives every rank's step lasts as long as the slowest; NCCL kernels fill the fast ranks' wait."""
    from helpers.summary import back_to_back, kernel, step_events, trace_doc, write_json

    for rank, compute_us in ((0, 4_000), (1, 9_000), (2, 5_000)):
        events = step_events("ProfilerStep#3", 0, 10_000, 0, 10_000) + back_to_back("gemm", 0, compute_us, 100)
        events.append(kernel("ncclDevKernel_AllReduce_Sum_bf16_RING_LL", compute_us, 10_000))
        write_json(tmp_path / f"rank{rank}_node.pt.trace.json",
                   trace_doc(events, distributedInfo={"backend": "nccl", "rank": rank, "world_size": 3,
                                                      "nccl_version": "2.21.5"}))
    (run,) = summarize_paths([str(tmp_path)])
    assert [r.rank for r in run.ranks] == [0, 1, 2] and run.ranks[0].versions["nccl"] == "2.21.5"
    assert [round(row.gpu_comm_us) for row in run.comparison] == [6_000, 1_000, 5_000]
    # the all-reduces match across the ranks: rank 1 is named by the waits it caused (ranks 0 and 2 waited 5 and
    # 4 ms for it); the GPU-compute rule is the fallback when no waits are known (tests/test_ranks_rules.py)
    assert run.straggler.rank == 1 and run.straggler.criterion == "waits_caused"
    assert run.straggler.spread_pct < 5 and run.straggler.waits_caused_us == 4_500
    proc = summary_cli(str(tmp_path), cwd=tmp_path)
    assert "straggler: rank 1" in proc.stdout and "the others waited 4.500 ms per step for it" in proc.stdout
