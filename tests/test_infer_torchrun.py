"""torchrun --cfg_parallel: two ranks split the CFG branches, agree with one process, share one trace run."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading

import pytest
import torch

from conftest import REPO_ROOT, subprocess_env
from helpers.infer import FAST, run_infer
from helpers.torchrun import rows, run_torchrun
from helpers.traces import event_names, load_trace

pytestmark = pytest.mark.torchrun


def test_cfg_parallel_two_ranks_equal_single_process_and_share_one_run_directory(tmp_path):
    single = run_infer(tmp_path / "single", *FAST, "--no-profile")
    pair = run_infer(tmp_path / "pair", *FAST, "--cfg_parallel", torchrun=2)
    assert single.proc.returncode == 0, single.output
    assert pair.proc.returncode == 0, pair.output
    assert "gloo threads alive" not in pair.output  # teardown() found the group freed (see the test below)

    torch.testing.assert_close(pair.latents, single.latents, rtol=1e-4, atol=1e-4)
    meta = pair.metadata
    assert meta["world_size"] == 2 and meta["cfg_parallel"] and meta["infer_calls"] == 4 + 4

    traces = pair.traces()
    assert len(traces) == 2, traces
    assert traces[0].parent == traces[1].parent  # one run, two workers
    assert sorted(t.name.split("_")[0] for t in traces) == ["rank0", "rank1"]
    for rank, trace in enumerate(traces):
        data = load_trace(trace)
        names = event_names(data)
        assert data["distributedInfo"]["rank"] == rank and data["distributedInfo"]["world_size"] == 2
        branch, other = ("infer_cond", "infer_uncond") if rank == 0 else ("infer_uncond", "infer_cond")
        assert branch in names and other not in names  # each rank ran only its own branch
        assert "cfg_all_gather" in names

    # only rank 0 writes outputs: one preview, one latents file, no per-rank copies
    written = sorted(p.name for p in (pair.cwd / "save_results").iterdir() if p.is_file())
    assert written == ["qwen_image_t2i.json", "qwen_image_t2i.png", "qwen_image_t2i.pt"]


@pytest.mark.parametrize("mode", ["dynamo", "hold"])
def test_teardown_leaves_no_gloo_thread_and_reports_a_pinned_group(tmp_path, mode):
    """The CLI's setup()/teardown() under torchrun: a later dynamo import does not pin the group (setup imported
    torch.distributed.nn.functional first), and a group something still holds is reported, not left silent."""
    output = run_torchrun(REPO_ROOT / "tests" / "programs" / "teardown_check.py", mode, cwd=tmp_path)
    by_rank = rows(output, "TEARDOWN")
    assert sorted(by_rank) == [0, 1] and all(row["sum"] == "12.0" for row in by_rank.values())
    if mode == "dynamo":
        assert all(row["survivors"] == "-" for row in by_rank.values()), output
        assert "gloo threads alive" not in output
    else:
        assert all("pt_gloo_runloop" in row["survivors"] for row in by_rank.values()), output
        assert output.count("warning: gloo threads alive after destroy_process_group()") == 2


def test_a_rank_whose_peer_raised_does_not_hang_at_teardown(tmp_path):
    """Rank 1 raises while rank 0 waits in a collective; both call teardown() in a finally, as the CLI does. Before
    the fix rank 1 waited in the exit barrier and rank 0 in the all_reduce until gloo's 30-minute timeout. Now the
    failing rank leaves at once: the job ends with the failure (non-zero), well inside this test's limit."""
    program = REPO_ROOT / "tests" / "programs" / "teardown_peer_raises.py"
    proc = subprocess.Popen([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
                             str(program)], cwd=tmp_path, env=subprocess_env(OMP_NUM_THREADS="1"),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        output, _ = proc.communicate(timeout=300)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        output, _ = proc.communicate()
        pytest.fail(f"the job hung at teardown\n{output}")
    assert sorted(rows(output, "UP")) == [0, 1], output  # both ranks were up before rank 1 failed
    assert proc.returncode != 0, output  # the failure is the job's result
    assert "ValueError: rank 1 failed mid-run" in output
    assert "warning: rank 1 is failing (ValueError); leaving without the exit barrier" in output


def _named_thread(name: str, stop: threading.Event):
    """A thread whose kernel name (what /proc/self/task/*/comm shows, as for gloo's C++ threads) is ``name``."""
    import ctypes

    def body():
        ctypes.CDLL(None).prctl(15, name.encode(), 0, 0, 0)  # PR_SET_NAME
        stop.wait()

    thread = threading.Thread(target=body, daemon=True)
    thread.start()
    return thread


def test_a_gloo_thread_ending_a_moment_after_destroy_is_not_reported_but_one_that_stays_is():
    """A freed group's transport loop can end a moment after destroy_process_group() returns (seen in CI): the
    check waits for it instead of warning; a thread that never ends (a pinned group) is still reported."""

    from lightx2v.utils.distributed import gloo_threads, gloo_threads_settled

    ending = threading.Event()
    thread = _named_thread("gloo_tcp_loop", ending)
    while "gloo_tcp_loop" not in gloo_threads():
        pass
    threading.Timer(0.2, ending.set).start()
    assert gloo_threads_settled(settle_s=5.0) == []
    thread.join()

    staying = threading.Event()
    thread = _named_thread("pt_gloo_runloop", staying)
    try:
        while "pt_gloo_runloop" not in gloo_threads():
            pass
        assert gloo_threads_settled(settle_s=0.3) == ["pt_gloo_runloop"]
    finally:
        staying.set()
        thread.join()
