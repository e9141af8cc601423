"""torchrun for real (gloo, 2 ranks): one run directory per job, one file per rank, nothing skipped or clobbered."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO_ROOT, subprocess_env
from helpers.torchrun import rows, run_torchrun
from helpers.traces import PLUGIN_TRACE_RE, load_trace, run_dirs

pytestmark = pytest.mark.torchrun

PROGRAM = REPO_ROOT / "tests" / "programs" / "distributed_capture.py"


def torchrun(cwd: Path, *args: str) -> str:
    return run_torchrun(PROGRAM, *args, cwd=cwd)


def results(output: str) -> dict[int, dict[str, str]]:
    return rows(output, "RESULT")


@pytest.fixture(scope="module")
def two_tensorboard_jobs(tmp_path_factory):
    cwd = tmp_path_factory.mktemp("torchrun")
    return cwd, torchrun(cwd, "tensorboard"), torchrun(cwd, "tensorboard")


def test_all_ranks_write_one_run_directory_one_file_each(two_tensorboard_jobs):
    cwd, first_job, _ = two_tensorboard_jobs
    by_rank = results(first_job)
    assert sorted(by_rank) == [0, 1]
    assert all(row["world"] == "2" and row["calls"] == "5" for row in by_rank.values())
    # The collective in the target ran on both ranks: x = rank + 1, all_reduce(relu(x @ x)) over a 16x16 matrix.
    expected = sum(16 * (rank + 1) ** 2 for rank in (0, 1)) * 16 * 16
    assert {row["sum"] for row in by_rank.values()} == {str(float(expected))}

    first_run = Path(by_rank[0]["paths"]).parent
    assert Path(by_rank[1]["paths"]).parent == first_run
    files = sorted(p.name for p in first_run.iterdir() if PLUGIN_TRACE_RE.match(p.name))  # + *.summary.txt
    assert len(files) == 2 and files[0].startswith("rank0_") and files[1].startswith("rank1_")
    for rank in (0, 1):
        trace = load_trace(by_rank[rank]["paths"])
        assert trace["distributedInfo"]["rank"] == rank
        assert trace["distributedInfo"]["world_size"] == 2
        names = {e.get("name") for e in trace["traceEvents"]}
        assert {"ProfilerStep#4", "rank_work"} <= names

    # Logs name the rank that wrote each file; the viewing hint comes once, from rank 0.
    for rank in (0, 1):
        assert f"[rank {rank}/2]: wrote {by_rank[rank]['paths']}" in first_job
    assert first_job.count("trace ready") == 1
    assert first_job.count("#pytorch_profiler") == 1


def test_capture_leaves_no_process_group_alive_after_destroy(two_tensorboard_jobs):
    """The capture imported torch.distributed.nn.functional while the group lived (its inductor probe does); after
    destroy_process_group() no collective's default still holds the group and no gloo thread runs for it, so
    nothing is left for interpreter shutdown to tear down (where a rank used to abort; docs/torchrun.md)."""
    _, first_job, second_job = two_tensorboard_jobs
    for job in (first_job, second_job):
        exits = rows(job, "EXIT")
        assert sorted(exits) == [0, 1], job
        for row in exits.values():
            assert row["functional_imported"] == "True", (
                "the capture no longer imports torch.distributed.nn.functional (torch changed?): re-measure with "
                "benchmarks/bench_torchrun_exit.py; the mitigation may no longer be needed")
            assert row["pinned"] == "-", f"collectives still holding the group: {row['pinned']}"
            assert row["gloo_threads"] == "-", f"gloo threads alive after destroy: {row['gloo_threads']}"


def test_successive_jobs_get_their_own_run_directories(two_tensorboard_jobs):
    cwd, first_job, second_job = two_tensorboard_jobs
    runs = run_dirs(cwd / "tb")
    assert len(runs) == 2
    assert Path(results(first_job)[0]["paths"]).parent != Path(results(second_job)[0]["paths"]).parent
    assert all(len([p for p in run.iterdir() if PLUGIN_TRACE_RE.match(p.name)]) == 2 for run in runs)
    assert all(re.fullmatch(r"\d{8}-\d{6}_infer_main(_\d+)?", run.name) for run in runs)


def test_chrome_format_writes_one_file_per_rank(tmp_path):
    by_rank = results(torchrun(tmp_path, "chrome"))
    assert by_rank[0]["paths"] == str(tmp_path / "chrome" / "trace.rank0.json")
    assert by_rank[1]["paths"] == str(tmp_path / "chrome" / "trace.rank1.json")
    for rank in (0, 1):
        assert load_trace(by_rank[rank]["paths"])["distributedInfo"]["rank"] == rank
    assert not (tmp_path / "chrome" / "trace.json").exists()


def test_ranks_without_a_process_group_still_share_a_run_directory(tmp_path):
    by_rank = results(torchrun(tmp_path, "tensorboard", "--no-init"))
    assert Path(by_rank[0]["paths"]).parent == Path(by_rank[1]["paths"]).parent
    assert len(run_dirs(tmp_path / "tb")) == 1


UNPIN_PROGRAM = """
import sys
import types

import torch
import torch.distributed as dist
from lightx2v.utils import torch_trace_profiler as ttp

ttp._unpin_process_group_defaults()
assert "torch.distributed.nn.functional" not in sys.modules, "the helper imported the module"
dist.init_process_group("gloo", init_method=sys.argv[1], rank=0, world_size=1)
import torch.distributed.nn.functional as F

assert F.all_reduce.__defaults__[1] is dist.group.WORLD and F.gather.__defaults__[1] is dist.group.WORLD
ttp._unpin_process_group_defaults()
print("all_reduce", F.all_reduce.__defaults__, "gather", F.gather.__defaults__, "broadcast", F.broadcast.__defaults__)
print("sum", float(F.all_reduce(torch.ones(3)).sum()))  # group=None is the default group: still works

sys.modules["torch.distributed.nn.functional"] = types.ModuleType("torch.distributed.nn.functional")
ttp._unpin_process_group_defaults()
ttp._unpin_process_group_defaults()
sys.modules["torch.distributed.nn.functional"] = F
dist.destroy_process_group()
"""


def test_unpinning_resets_only_group_defaults_never_imports_and_skips_an_unexpected_torch(tmp_path):
    proc = subprocess.run([sys.executable, "-c", UNPIN_PROGRAM, (tmp_path / "store").as_uri()], capture_output=True,
                          text=True, timeout=120, env=subprocess_env())
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "all_reduce (<RedOpType.SUM: 0>, None) gather (0, None) broadcast (None,)" in proc.stdout
    assert "sum 3.0" in proc.stdout
    # torch that no longer looks as expected: left alone, said once
    assert proc.stderr.count("group defaults left alone (it does not look as expected)") == 1, proc.stderr
