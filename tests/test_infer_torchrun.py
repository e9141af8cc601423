"""torchrun jobs of the embedded inference: --cfg_parallel (two ranks split the CFG branches) and --seq_p_size
(Ulysses sequence parallelism, alone and beside --cfg_parallel) agree with one process and share one trace run; the
traces show every step's collectives on their named groups, and a rank made late where it was asked to be."""

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


@pytest.fixture(scope="module")
def single(tmp_path_factory):
    """The one-process run every parallel layout must agree with."""
    run = run_infer(tmp_path_factory.mktemp("single"), *FAST, "--no-profile")
    assert run.proc.returncode == 0, run.output
    return run


def test_cfg_parallel_two_ranks_equal_single_process_and_share_one_run_directory(tmp_path, single):
    pair = run_infer(tmp_path / "pair", *FAST, "--cfg_parallel", torchrun=2)
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


# Three traced calls: the capture makes calls 0..3 (wait 0, warmup 1, active 3), the trace keeps ProfilerStep#1..#3
THREE_STEPS = ["--profile_wait", "0", "--profile_warmup", "1", "--profile_active", "3"]
LATE_MS = 80.0
CLOCK_SLACK_US = 1000  # ranks on one host read one clock; kineto's conversion of it may differ by microseconds


def _steps(trace: dict) -> dict[int, list[dict]]:
    """Each ProfilerStep#N's number → the complete events that start within it (every thread)."""
    events = [e for e in trace["traceEvents"] if e.get("ph") == "X"]
    steps = [e for e in events if e["name"].startswith("ProfilerStep#")]
    return {int(s["name"].split("#")[1]): [e for e in events if s["ts"] <= e["ts"] < s["ts"] + s["dur"]]
            for s in steps}


def _named(events: list[dict], name: str) -> list[dict]:
    return sorted((e for e in events if e["name"] == name), key=lambda e: e["ts"])


def _ranks_traces(run) -> dict[int, dict]:
    traces = run.traces()
    assert len({t.parent for t in traces}) == 1, traces  # one run, one worker per rank
    by_rank = {load_trace(t)["distributedInfo"]["rank"]: load_trace(t) for t in traces}
    assert sorted(by_rank) == list(range(len(traces)))
    return by_rank


def _groups(trace: dict) -> dict[str, list[int]]:
    """The rank's process groups as the trace's distributedInfo lists them: description → ranks."""
    return {pg["pg_desc"]: pg["ranks"] for pg in trace["distributedInfo"]["pg_config"]}


def _assert_late_where_asked(by_rank: dict[int, dict], late: int, calls: set[int], waits_for_it: dict[int, str]):
    """The late rank's `late_rank_delay` (>= LATE_MS) sits in exactly the steps `calls`, before its first all-to-all
    there; in those steps each rank of `waits_for_it` leaves the region named there only after the delay ended."""
    late_steps = _steps(by_rank[late])
    for rank, trace in by_rank.items():
        for step, events in _steps(trace).items():
            delays = _named(events, "late_rank_delay")
            if rank != late or step not in calls:
                assert delays == [], (rank, step)
                continue
            assert len(delays) == 1 and delays[0]["dur"] >= LATE_MS * 1000, (rank, step, delays)
    for step in calls:
        delay = _named(late_steps[step], "late_rank_delay")[0]
        delay_end = delay["ts"] + delay["dur"]
        collectives = [e for e in late_steps[step] if e["name"].startswith(("gloo:", "c10d::"))]
        assert min(e["ts"] for e in collectives) >= delay_end, step  # the delay comes before its first collective
        for rank, region in waits_for_it.items():
            first = _named(_steps(by_rank[rank])[step], region)[0]
            assert first["ts"] + first["dur"] >= delay_end - CLOCK_SLACK_US, (rank, step, region)


def test_ulysses_two_ranks_equal_single_process_with_the_all_to_alls_and_the_late_rank_in_every_step(
    tmp_path, single
):
    """2 gloo ranks, --seq_p_size 2, rank 1 late by 80 ms in calls 1 and 3 (ProfilerStep#1 and #3)."""
    late = ["--late_rank", "1", "--late_ms", str(LATE_MS), "--late_steps", "1,3"]
    run = run_infer(tmp_path / "ulysses", *FAST, "--seq_p_size", "2", *THREE_STEPS, *late, torchrun=2)
    assert run.proc.returncode == 0, run.output
    assert "gloo threads alive" not in run.output  # the model's groups were freed by destroy_process_group()

    torch.testing.assert_close(run.latents, single.latents, rtol=1e-4, atol=1e-4)
    meta = run.metadata
    assert meta["parallel"] == {"seq_p_size": 2, "seq_p_attn_type": "ulysses", "cfg_p_size": 1}
    assert meta["late_rank"] == {"rank": 1, "ms": LATE_MS, "calls": [1, 3]}
    assert meta["world_size"] == 2 and meta["infer_calls"] == 4 + 3

    by_rank = _ranks_traces(run)
    assert sorted(by_rank) == [0, 1]
    layers = single.metadata["arch"]["num_layers"]
    for trace in by_rank.values():
        assert _groups(trace)["mesh_seq_p"] == [0, 1], trace["distributedInfo"]
        steps = _steps(trace)
        assert sorted(steps) == [1, 2, 3]
        for step, events in steps.items():
            names = [e["name"] for e in events]
            # per branch (cond, uncond) and block: q, k, v before the attention, the output after it
            assert names.count("c10d::alltoall_base_") == names.count("gloo:all_to_all") == 2 * layers * 4, step
            # per branch: the text heads after every block's attention, the velocity's shares at the end
            assert names.count("c10d::allgather_") == names.count("gloo:all_gather") == 2 * (layers + 1), step
            assert {"seq_p_all_to_all_qkv", "seq_p_all_to_all_out", "seq_p_all_gather_txt", "seq_p_all_gather"} <= set(
                names
            )
    _assert_late_where_asked(by_rank, late=1, calls={1, 3}, waits_for_it={0: "gloo:all_to_all"})


def test_ulysses_beside_cfg_parallel_on_four_ranks_equals_single_process_on_the_mesh_groups(tmp_path, single):
    """4 gloo ranks: --seq_p_size 2 --cfg_parallel (LightX2V's cfg_p x seq_p mesh), rank 3 late in call 2."""
    late = ["--late_rank", "3", "--late_ms", str(LATE_MS), "--late_steps", "2"]
    run = run_infer(tmp_path / "mesh", *FAST, "--seq_p_size", "2", "--cfg_parallel", *THREE_STEPS, *late, torchrun=4)
    assert run.proc.returncode == 0, run.output
    assert "gloo threads alive" not in run.output

    torch.testing.assert_close(run.latents, single.latents, rtol=1e-4, atol=1e-4)
    assert run.metadata["parallel"] == {"seq_p_size": 2, "seq_p_attn_type": "ulysses", "cfg_p_size": 2}

    by_rank = _ranks_traces(run)
    assert sorted(by_rank) == [0, 1, 2, 3]
    layers = single.metadata["arch"]["num_layers"]
    for rank, trace in by_rank.items():
        # rank = cfg_p_rank * seq_p_size + seq_p_rank: pairs of consecutive ranks split the tokens
        assert _groups(trace)["mesh_seq_p"] == [rank // 2 * 2, rank // 2 * 2 + 1], trace["distributedInfo"]
        assert _groups(trace)["mesh_cfg_p"] == [rank % 2, rank % 2 + 2], trace["distributedInfo"]
        names = event_names(trace)
        branch, other = ("infer_cond", "infer_uncond") if rank < 2 else ("infer_uncond", "infer_cond")
        assert branch in names and other not in names
        for step, events in _steps(trace).items():
            step_names = [e["name"] for e in events]
            assert step_names.count("gloo:all_to_all") == layers * 4, (rank, step)  # one branch per rank
            assert step_names.count("gloo:all_gather") == layers + 1 + 1, (rank, step)  # + the CFG pair's
            assert "cfg_all_gather" in step_names
    # rank 2 waits in its all-to-all with rank 3; ranks 0 and 1 wait at the CFG all-gather for ranks 2 and 3
    waits = {2: "gloo:all_to_all", 0: "cfg_all_gather", 1: "cfg_all_gather"}
    _assert_late_where_asked(by_rank, late=3, calls={2}, waits_for_it=waits)


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
