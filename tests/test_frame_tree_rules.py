"""The frame tree built from a trace (`lightx2v.trace_summary.frames.frame_tree`, `code_line`), fast: small
hand-written traces of Python frames, CPU ops, runtime calls, GPU work and ``[memory]`` events, read by one pass as
analyze_trace reads them, and the exact tree: which frame encloses which op, launch and allocation, per step and
in each step, the calls, the top-level op of each row, the library frames folded, and the user's line around a
host call. Every expected figure is worked out here by hand from the events written."""

from __future__ import annotations

from pathlib import Path

from lightx2v.trace_summary import memory
from lightx2v.trace_summary.collect import SKIP_HEAD_FRAMES, Collected
from lightx2v.trace_summary.frames import SKIP_HEAD_FOLDED, FrameIndex, code_line, frame_tree, keeps
from lightx2v.trace_summary.kernels import gpu_work
from lightx2v.trace_summary.launch import launch_chain
from lightx2v.trace_summary.model import FrameTree
from lightx2v.trace_summary.optree import op_tree
from lightx2v.trace_summary.reader import TraceStream
from lightx2v.trace_summary.steps import step_stats

from helpers.summary import CPU_PID, GPU_PID, STREAM, T0, cpu_op, step_events, trace_doc, write_json

OTHER_TID = 99  # a second host thread


def frame(name: str, lo: float, hi: float, tid: int = CPU_PID) -> dict:
    return {"ph": "X", "cat": "python_function", "name": name, "pid": CPU_PID, "tid": tid, "ts": T0 + lo,
            "dur": hi - lo, "args": {}}


def runtime(name: str, lo: float, hi: float, corr: int, tid: int = CPU_PID) -> dict:
    return {"ph": "X", "cat": "cuda_runtime", "name": name, "pid": CPU_PID, "tid": tid, "ts": T0 + lo,
            "dur": hi - lo, "args": {"correlation": corr}}


def gpu(cat: str, name: str, lo: float, hi: float, corr: int, ext: int | None = None) -> dict:
    args = {"stream": STREAM, "correlation": corr, "device": 0}
    if ext is not None:
        args["External id"] = ext
    return {"ph": "X", "cat": cat, "name": name, "pid": GPU_PID, "tid": STREAM, "ts": T0 + lo, "dur": hi - lo,
            "args": args}


def alloc(at: float, nbytes: int, device_type: int = 1, device_id: int = 0, tid: int = CPU_PID) -> dict:
    return {"ph": "i", "cat": "cpu_instant_event", "name": "[memory]", "pid": CPU_PID, "tid": tid, "s": "t",
            "ts": T0 + at, "args": {"Addr": 1, "Bytes": nbytes, "Total Allocated": max(nbytes, 0),
                                    "Total Reserved": 2**20, "Device Type": device_type, "Device Id": device_id}}


def two_steps() -> list[dict]:
    return [*step_events("ProfilerStep#1", 0, 1000), *step_events("ProfilerStep#2", 1000, 2000)]


def collected(tmp_path: Path, events: list[dict], keep_all: bool = False) -> tuple[Collected, memory.MemoryEvents]:
    """One pass over the written trace, folding the library frames (as analyze_trace) or keeping them all."""
    path = str(write_json(tmp_path / "w0.pt.trace.json", trace_doc(events)))
    stream = TraceStream(path, skip_head=SKIP_HEAD_FRAMES if keep_all else SKIP_HEAD_FOLDED)
    c = Collected(frames=keeps(not keep_all))
    mem = memory.MemoryEvents(c.count_malformed)
    c.attach(mem)
    for batch in stream.batches():
        c.feed(batch)
    mem.finish()
    return c, mem


def tree_of(tmp_path: Path, events: list[dict], folded: bool | None = True, keep_all: bool | None = None,
            with_memory: bool = True, index: bool = False) -> FrameTree | None:
    """frame_tree on one pass over ``events`` (``folded`` None: frame_tree's default; the pass keeps every frame
    when ``keep_all``, by default when the tree is unfolded); ``index``: hand it a frame index built before."""
    c, mem = collected(tmp_path, events, keep_all=folded is False if keep_all is None else keep_all)
    work = gpu_work(c)
    ops = op_tree(c)
    chain = launch_chain(c)
    steps = step_stats(c, work.busy if work.totals is not None else None, work.is_kernel, chain, ops)
    if folded is None:
        return frame_tree(c, chain, steps, ops, mem if with_memory else None)
    return frame_tree(c, chain, steps, ops, mem if with_memory else None, folded,
                      FrameIndex(c) if index else None)


def figures(t: FrameTree | None) -> dict:
    assert t is not None
    return {"names": t.names, "kinds": t.kinds, "parent": t.parent, "calls": t.calls, "gpu": t.gpu_us,
            "kernel": t.kernel_us, "cpu": t.cpu_us, "alloc": t.alloc_bytes, "ops": t.ops, "step_gpu": t.step_gpu_us,
            "step_cpu": t.step_cpu_us, "steps": t.steps, "device": t.memory_device}


# --- which frame the work is charged to ---------------------------------------------------------------------------

MAIN, FORWARD, CALL_IMPL, LINEAR = ("main.py(1): main", "model.py(5): forward",
                                    "torch/nn/modules/module.py(1750): _call_impl", "nn.Module: Linear_0")


def model_steps() -> list[dict]:
    """Two steps: main around both; forward called in each, step 1's through torch's _call_impl into Linear_0.

    Step 1: aten::linear (150-400, its aten::mm 160-390) in Linear_0 launches a 300 us GEMM and a 20 us memcpy;
    an allocation of 4096 bytes at 165 inside aten::mm, its free at 600. Step 2: aten::add (1150-1250) in
    forward launches a 50 us kernel and allocates 1024 bytes. A CPU op on a thread without frames (600-700), and
    an allocation after the last step."""
    return [*two_steps(), frame(MAIN, 0, 2000), frame(FORWARD, 100, 450), frame(CALL_IMPL, 110, 440),
            frame(LINEAR, 120, 430), cpu_op("aten::linear", 150, 400), cpu_op("aten::mm", 160, 390),
            runtime("cudaLaunchKernel", 170, 172, 1), runtime("cudaMemcpyAsync", 180, 181, 2),
            frame(FORWARD, 1100, 1450), cpu_op("aten::add", 1150, 1250), runtime("cudaLaunchKernel", 1160, 1161, 3),
            cpu_op("aten::copy_", 600, 700, tid=OTHER_TID),
            gpu("kernel", "gemm", 200, 500, 1), gpu("gpu_memcpy", "Memcpy HtoD", 500, 520, 2),
            gpu("kernel", "add_k", 1300, 1350, 3),
            alloc(165, 4096), alloc(600, -4096), alloc(1200, 1024), alloc(2500, 8)]


FOLDED_MODEL = {
    "names": ["", MAIN, FORWARD, LINEAR], "kinds": ["user", "user", "user", "module"], "parent": [-1, 0, 1, 2],
    "calls": [0, 1, 2, 1],
    # per step of 2: Linear_0 (300 + 20) / 2 GPU, 300 / 2 kernel, (250 self of linear + mm) / 2 CPU, 4096 / 2
    # bytes; forward 50 / 2 GPU and kernel, 100 / 2 CPU, 1024 / 2 bytes; the root the other thread's 100 / 2
    "gpu": [0.0, 0.0, 25.0, 160.0], "kernel": [0.0, 0.0, 25.0, 150.0], "cpu": [50.0, 0.0, 50.0, 125.0],
    "alloc": [0.0, 0.0, 512.0, 2048.0],
    "ops": {(3, "aten::linear"): [160.0, 150.0, 125.0, 2048.0], (2, "aten::add"): [25.0, 25.0, 50.0, 512.0],
            (0, "aten::copy_"): [0.0, 0.0, 50.0, 0.0]},
    "step_gpu": {3: [320.0, 0.0], 2: [0.0, 50.0]}, "step_cpu": {3: [250.0, 0.0], 0: [100.0, 0.0], 2: [0.0, 100.0]},
    "steps": 2, "device": "cuda"}


def test_each_kernel_op_and_allocation_is_charged_per_step_to_the_innermost_kept_frame_around_it(tmp_path):
    assert figures(tree_of(tmp_path, model_steps())) == FOLDED_MODEL


def test_a_frame_index_built_before_gives_the_same_tree(tmp_path):
    assert figures(tree_of(tmp_path, model_steps(), index=True)) == FOLDED_MODEL


def test_the_tree_folds_the_library_frames_even_when_the_pass_kept_them(tmp_path):
    assert figures(tree_of(tmp_path, model_steps(), folded=True, keep_all=True)) == FOLDED_MODEL


def test_the_tree_folds_the_library_frames_by_default(tmp_path):
    assert figures(tree_of(tmp_path, model_steps(), folded=None, keep_all=True)) == FOLDED_MODEL


def test_unfolded_the_library_frames_are_nodes_that_hold_the_work_of_their_own(tmp_path):
    events = [*model_steps(), frame("<built-in method mm>", 155, 395)]
    assert figures(tree_of(tmp_path, events, folded=False)) == {
        "names": ["", MAIN, FORWARD, CALL_IMPL, LINEAR, "<built-in method mm>"],
        "kinds": ["user", "user", "user", "library", "module", "library"], "parent": [-1, 0, 1, 2, 3, 4],
        "calls": [0, 1, 2, 1, 1, 1],
        # the built-in (155-395) starts inside aten::linear (150-400) without enclosing it: aten::linear's self
        # time stays Linear_0's; aten::mm's, the launches from inside it and the allocation at 165 are the built-in's
        "gpu": [0.0, 0.0, 25.0, 0.0, 0.0, 160.0], "kernel": [0.0, 0.0, 25.0, 0.0, 0.0, 150.0],
        "cpu": [50.0, 0.0, 50.0, 0.0, 10.0, 115.0], "alloc": [0.0, 0.0, 512.0, 0.0, 0.0, 2048.0],
        "ops": {(5, "aten::linear"): [160.0, 150.0, 115.0, 2048.0], (2, "aten::add"): [25.0, 25.0, 50.0, 512.0],
                (0, "aten::copy_"): [0.0, 0.0, 50.0, 0.0], (4, "aten::linear"): [0.0, 0.0, 10.0, 0.0]},
        "step_gpu": {5: [320.0, 0.0], 2: [0.0, 50.0]},
        "step_cpu": {4: [20.0, 0.0], 5: [230.0, 0.0], 0: [100.0, 0.0], 2: [0.0, 100.0]},
        "steps": 2, "device": "cuda"}


def test_without_memory_events_handed_over_no_allocation_is_charged(tmp_path):
    no_alloc = {**FOLDED_MODEL, "alloc": [0.0, 0.0, 0.0, 0.0], "device": "",
                "ops": {(3, "aten::linear"): [160.0, 150.0, 125.0, 0.0], (2, "aten::add"): [25.0, 25.0, 50.0, 0.0],
                        (0, "aten::copy_"): [0.0, 0.0, 50.0, 0.0]}}
    assert figures(tree_of(tmp_path, model_steps(), with_memory=False)) == no_alloc


def test_without_python_frames_there_is_no_tree(tmp_path):
    events = [*two_steps(), cpu_op("aten::mm", 100, 400), alloc(150, 4096)]
    assert tree_of(tmp_path, events) is None
    c, _ = collected(tmp_path, events)
    assert code_line(FrameIndex(c)) is None


def test_frames_of_one_name_under_one_parent_are_one_node_on_every_thread(tmp_path):
    events = [*step_events("ProfilerStep#1", 0, 1000), frame(MAIN, 0, 1000), frame(FORWARD, 100, 200),
              frame(MAIN, 0, 900, tid=OTHER_TID), frame(FORWARD, 300, 400, tid=OTHER_TID),
              frame(FORWARD, 500, 600, tid=OTHER_TID), frame("model.py(9): loss", 700, 800, tid=OTHER_TID),
              cpu_op("aten::mul", 310, 330, tid=OTHER_TID), cpu_op("aten::sum", 710, 740, tid=OTHER_TID)]
    t = figures(tree_of(tmp_path, events))
    assert (t["names"], t["parent"], t["calls"]) == (["", MAIN, FORWARD, "model.py(9): loss"], [-1, 0, 1, 1],
                                                     [0, 2, 3, 1])
    assert (t["cpu"], t["ops"], t["step_cpu"]) == (
        [0.0, 0.0, 20.0, 30.0], {(2, "aten::mul"): [0.0, 0.0, 20.0, 0.0], (3, "aten::sum"): [0.0, 0.0, 30.0, 0.0]},
        {2: [20.0], 3: [30.0]})


def test_frames_written_out_of_time_order_nest_by_their_times(tmp_path):
    events = [*step_events("ProfilerStep#1", 0, 1000), frame("model.py(2): second", 500, 600),
              frame("model.py(1): first", 0, 100), cpu_op("aten::a", 520, 530), cpu_op("aten::b", 10, 30)]
    t = figures(tree_of(tmp_path, events))
    assert (t["names"], t["parent"], t["cpu"]) == (["", "model.py(1): first", "model.py(2): second"], [-1, 0, 0],
                                                   [0.0, 20.0, 10.0])


# --- Python called back from inside an op -------------------------------------------------------------------------

CALLBACK, HOOK, AFTER = "model.py(30): callback", "model.py(40): hook", "model.py(50): after"


def op(name: str, lo: float, hi: float, ext: int, tid: int = CPU_PID) -> dict:
    return {"ph": "X", "cat": "cpu_op", "name": name, "pid": CPU_PID, "tid": tid, "ts": T0 + lo, "dur": hi - lo,
            "args": {"External id": ext}}


def test_inside_an_op_that_calls_back_into_python_each_op_and_launch_has_its_own_frame(tmp_path):
    """aten::custom (100-500) calls back into Python (callback, 200-300), which runs aten::mul (220-280) and
    launches a 10 us kernel; custom itself launches a 30 us one at 400. aten::relu (600-650) has no frame inside:
    it and its 5 us kernel are main's."""
    events = [*step_events("ProfilerStep#1", 0, 1000), frame(MAIN, 0, 1000), frame(CALLBACK, 200, 300),
              op("aten::custom", 100, 500, 1), op("aten::mul", 220, 280, 2), op("aten::relu", 600, 650, 3),
              runtime("cudaLaunchKernel", 230, 231, 11), runtime("cudaLaunchKernel", 400, 401, 12),
              runtime("cudaLaunchKernel", 610, 611, 13), gpu("kernel", "k_cb", 600, 610, 11),
              gpu("kernel", "k_custom", 610, 640, 12), gpu("kernel", "k_relu", 700, 705, 13)]
    assert figures(tree_of(tmp_path, events)) == {
        "names": ["", MAIN, CALLBACK], "kinds": ["user", "user", "user"], "parent": [-1, 0, 1], "calls": [0, 1, 1],
        "gpu": [0.0, 35.0, 10.0], "kernel": [0.0, 35.0, 10.0], "cpu": [0.0, 390.0, 60.0], "alloc": [0.0, 0.0, 0.0],
        "ops": {(2, "aten::custom"): [10.0, 10.0, 60.0, 0.0], (1, "aten::custom"): [30.0, 30.0, 340.0, 0.0],
                (1, "aten::relu"): [5.0, 5.0, 50.0, 0.0]},
        "step_gpu": {2: [10.0], 1: [35.0]}, "step_cpu": {1: [390.0], 2: [60.0]}, "steps": 1, "device": ""}


def test_a_frame_starting_with_an_op_or_at_its_end_is_inside_it(tmp_path):
    """hook starts with aten::outer (100-300): aten::inner (120-180) is the hook's; after starts as aten::tail
    (400-500) ends: the launch at its very end (500) is after's."""
    events = [*step_events("ProfilerStep#1", 0, 1000), frame(MAIN, 0, 1000), frame(HOOK, 100, 200),
              frame(AFTER, 500, 600), op("aten::outer", 100, 300, 1), op("aten::inner", 120, 180, 2),
              op("aten::tail", 400, 500, 3), runtime("cudaLaunchKernel", 500, 500, 11),
              gpu("kernel", "k_tail", 700, 710, 11)]
    t = figures(tree_of(tmp_path, events))
    assert t["names"] == ["", MAIN, HOOK, AFTER]
    assert (t["cpu"], t["gpu"]) == ([0.0, 240.0, 60.0, 0.0], [0.0, 0.0, 0.0, 10.0])
    assert t["ops"] == {(3, "aten::tail"): [10.0, 10.0, 0.0, 0.0], (1, "aten::outer"): [0.0, 0.0, 140.0, 0.0],
                        (2, "aten::outer"): [0.0, 0.0, 60.0, 0.0], (1, "aten::tail"): [0.0, 0.0, 100.0, 0.0]}


ENDS_EARLY, LATER = "model.py(90): ends_early", "model.py(91): later"


def test_a_frame_ending_inside_an_op_takes_none_of_the_ops_work(tmp_path):
    """ends_early (50-200) ends inside aten::straddle (100-300), which no frame starts in: aten::early
    (110-150), though inside ends_early, and its two launches (15 us of kernels) are main's, as straddle is; so
    is a launch outside every op (590-610) that later (500-600) ends during."""
    events = [*step_events("ProfilerStep#1", 0, 1000), frame(MAIN, 0, 1000), frame(ENDS_EARLY, 50, 200),
              frame(LATER, 500, 600), op("aten::straddle", 100, 300, 1), op("aten::early", 110, 150, 2),
              runtime("cudaLaunchKernel", 120, 121, 11), runtime("cudaLaunchKernel", 125, 126, 12),
              runtime("cudaLaunchKernel", 590, 610, 13), gpu("kernel", "k1", 400, 410, 11),
              gpu("kernel", "k2", 410, 415, 12), gpu("kernel", "k3", 700, 720, 13)]
    assert figures(tree_of(tmp_path, events)) == {
        "names": ["", MAIN, ENDS_EARLY, LATER], "kinds": ["user"] * 4, "parent": [-1, 0, 1, 1],
        "calls": [0, 1, 1, 1], "gpu": [0.0, 35.0, 0.0, 0.0], "kernel": [0.0, 35.0, 0.0, 0.0],
        "cpu": [0.0, 200.0, 0.0, 0.0], "alloc": [0.0] * 4,
        "ops": {(1, "aten::straddle"): [15.0, 15.0, 200.0, 0.0], (1, ""): [20.0, 20.0, 0.0, 0.0]},
        "step_gpu": {1: [35.0]}, "step_cpu": {1: [200.0]}, "steps": 1, "device": ""}


def test_an_op_without_a_name_shares_its_frames_row_with_the_work_outside_every_op(tmp_path):
    events = [*step_events("ProfilerStep#1", 0, 1000), frame(MAIN, 0, 1000), op("", 100, 150, 1),
              runtime("cudaLaunchKernel", 110, 111, 11), runtime("cudaLaunchKernel", 200, 201, 12),
              gpu("kernel", "k_in_op", 300, 310, 11), gpu("gpu_memcpy", "Memcpy DtoH", 310, 330, 12)]
    t = figures(tree_of(tmp_path, events))
    assert (t["gpu"], t["kernel"], t["ops"]) == ([0.0, 30.0], [0.0, 10.0], {(1, ""): [30.0, 10.0, 50.0, 0.0]})


# --- GPU work: by its launch --------------------------------------------------------------------------------------

LAUNCHER = "model.py(60): launcher"


def test_gpu_work_is_charged_by_its_launch_call_or_op_and_to_the_root_when_neither_is_known(tmp_path):
    """A kernel launched after the only step (left out; written first); one launched outside every op in
    launcher (its op ""); two without a launch record, linked by their External id to aten::inner, inside hook
    called back from aten::outer, and to aten::outer itself; one linked to nothing (the root's, by its GPU
    start)."""
    events = [*step_events("ProfilerStep#1", 0, 1000), frame(MAIN, 0, 1500), frame(LAUNCHER, 100, 200),
              frame(HOOK, 450, 550), op("aten::outer", 400, 600, 11), op("aten::inner", 460, 540, 12),
              runtime("cudaLaunchKernel", 1200, 1201, 1), runtime("cudaLaunchKernel", 150, 151, 2),
              gpu("kernel", "k_late", 1300, 1400, 1), gpu("kernel", "k_free", 300, 310, 2),
              gpu("kernel", "k_ext", 620, 640, 88, ext=12), gpu("gpu_memset", "Memset", 640, 680, 89, ext=11),
              gpu("kernel", "k_lost", 800, 805, 90)]
    assert figures(tree_of(tmp_path, events)) == {
        "names": ["", MAIN, LAUNCHER, HOOK], "kinds": ["user"] * 4, "parent": [-1, 0, 1, 1], "calls": [0, 1, 1, 1],
        "gpu": [5.0, 40.0, 10.0, 20.0], "kernel": [5.0, 0.0, 10.0, 20.0], "cpu": [0.0, 120.0, 0.0, 80.0],
        "alloc": [0.0] * 4,
        "ops": {(2, ""): [10.0, 10.0, 0.0, 0.0], (3, "aten::outer"): [20.0, 20.0, 80.0, 0.0],
                (1, "aten::outer"): [40.0, 0.0, 120.0, 0.0], (0, ""): [5.0, 5.0, 0.0, 0.0]},
        "step_gpu": {2: [10.0], 3: [20.0], 1: [40.0], 0: [5.0]}, "step_cpu": {1: [120.0], 3: [80.0]}, "steps": 1,
        "device": ""}


# --- what is inside the steps -------------------------------------------------------------------------------------

def gap_steps() -> list[dict]:
    """Two steps with a gap between them (1000-1200), main around all of it."""
    return [*step_events("ProfilerStep#1", 0, 1000), *step_events("ProfilerStep#2", 1200, 2000),
            frame(MAIN, -100, 2500)]


def test_a_cpu_op_counts_in_the_step_its_start_is_in_ends_included(tmp_path):
    """Before the first step, in the gap and after the last: left out; at a step's start or end: in it; a self
    time of 1 us or half of one: counted; an op whose children take all of its time: nothing of its own, even
    though they run in other frames (h1, h2)."""
    events = [*gap_steps(), frame("model.py(71): h1", 1400, 1450), frame("model.py(72): h2", 1450, 1500),
              op("aten::before", -50, -10, 1), op("aten::at_start", 0, 10, 2), op("aten::at_end", 1000, 1005, 3),
              op("aten::in_gap", 1100, 1110, 4), op("aten::step2", 1200, 1201, 5), op("aten::half", 1300, 1300.5, 6),
              op("aten::zero", 1400, 1500, 7), op("aten::c1", 1400, 1450, 8), op("aten::c2", 1450, 1500, 9),
              op("aten::after", 2100, 2110, 10)]
    t = figures(tree_of(tmp_path, events))
    assert (t["names"], t["steps"]) == (["", MAIN, "model.py(71): h1", "model.py(72): h2"], 2)
    assert t["cpu"] == [0.0, 8.25, 25.0, 25.0]
    assert t["ops"] == {(1, "aten::at_start"): [0.0, 0.0, 5.0, 0.0], (1, "aten::at_end"): [0.0, 0.0, 2.5, 0.0],
                        (1, "aten::step2"): [0.0, 0.0, 0.5, 0.0], (1, "aten::half"): [0.0, 0.0, 0.25, 0.0],
                        (2, "aten::zero"): [0.0, 0.0, 25.0, 0.0], (3, "aten::zero"): [0.0, 0.0, 25.0, 0.0]}
    assert t["step_cpu"] == {1: [15.0, 1.5], 2: [0.0, 50.0], 3: [0.0, 50.0]}
    assert t["step_gpu"] == {}


ALLOC_HERE = "model.py(80): alloc_here"


def test_an_allocation_is_charged_to_the_frame_and_top_level_op_around_it_on_the_cuda_devices(tmp_path):
    """CUDA allocations inside the steps (ends included) on both CUDA devices; not frees, not 0 bytes, not the
    CPU's (there are CUDA ones), not in the gap, nor before or after the steps. One on a thread with an op but
    no frame, one on a thread the trace has nothing else on: the root's."""
    events = [*gap_steps(), frame(ALLOC_HERE, 300, 400), op("aten::empty", 310, 320, 1),
              op("aten::fill_", 1500, 1510, 2, tid=OTHER_TID),
              alloc(-50, 64), alloc(0, 1), alloc(315, 4096), alloc(350, 0), alloc(1000, 8), alloc(1100, 16),
              alloc(1200, 32), alloc(1300, -4096), alloc(1400, 128, tid=98), alloc(1505, 64, tid=OTHER_TID),
              alloc(1600, 256, device_type=0), alloc(1700, 512, device_id=1), alloc(2100, 1024)]
    assert figures(tree_of(tmp_path, events)) == {
        "names": ["", MAIN, ALLOC_HERE], "kinds": ["user"] * 3, "parent": [-1, 0, 1], "calls": [0, 1, 1],
        "gpu": [0.0] * 3, "kernel": [0.0] * 3, "cpu": [5.0, 0.0, 5.0],
        # main: 1 + 8 + 32 + 512 over 2 steps; alloc_here: 4096 / 2; the root: (128 + 64) / 2
        "alloc": [96.0, 276.5, 2048.0],
        "ops": {(1, ""): [0.0, 0.0, 0.0, 276.5], (2, "aten::empty"): [0.0, 0.0, 5.0, 2048.0],
                (0, ""): [0.0, 0.0, 0.0, 64.0], (0, "aten::fill_"): [0.0, 0.0, 5.0, 32.0]},
        "step_gpu": {}, "step_cpu": {2: [10.0, 0.0], 0: [0.0, 10.0]}, "steps": 2, "device": "cuda"}


def test_without_cuda_allocations_the_lowest_device_types_are_charged(tmp_path):
    events = [*step_events("ProfilerStep#1", 0, 1000), frame(MAIN, 0, 1000), alloc(100, 100, device_type=0),
              alloc(200, 7, device_type=12), alloc(300, 50, device_type=0, device_id=1)]
    t = figures(tree_of(tmp_path, events))
    assert (t["alloc"], t["ops"], t["device"]) == ([0.0, 150.0], {(1, ""): [0.0, 0.0, 0.0, 150.0]}, "cpu")


def test_a_trace_whose_times_start_at_zero_places_allocations_by_their_own_time(tmp_path):
    events = [*step_events("ProfilerStep#1", 0, 1000), frame(MAIN, 0, 1000), frame(ALLOC_HERE, 100, 200),
              alloc(150, 32), alloc(200.5, 64)]
    for e in events:
        e["ts"] -= T0
    t = figures(tree_of(tmp_path, events))
    assert (t["names"], t["alloc"]) == (["", MAIN, ALLOC_HERE], [0.0, 64.0, 32.0])


# --- the user's line around a host call ---------------------------------------------------------------------------

def test_a_host_call_is_placed_on_the_innermost_users_frame_around_it_on_its_thread(tmp_path):
    events = [*step_events("ProfilerStep#1", 0, 1000), frame(MAIN, 0, 1000), frame(CALL_IMPL, 100, 500),
              frame(LINEAR, 150, 450), frame("<built-in method mm>", 200, 300), frame(FORWARD, 600, 800),
              frame("torch/nn/functional.py(9): linear", 650, 700),
              frame("/home/me/proj/worker.py(12): loop", 0, 1000, tid=OTHER_TID)]
    c, _ = collected(tmp_path, events, keep_all=True)
    where = code_line(FrameIndex(c))
    assert where is not None
    host, other = c.threads[(CPU_PID, CPU_PID)], c.threads[(CPU_PID, OTHER_TID)]
    # through a built-in, a module and torch's _call_impl
    assert where(host, 210, 290) == "main.py:1 main (line running at start)"
    assert where(host, 660, 690) == "model.py:5 forward"
    assert where(host, 610, 620) == "model.py:5 forward"
    assert where(host, 900, 950) == "main.py:1 main (line running at start)"
    assert where(other, 10, 20) == "proj/worker.py:12 loop (line running at start)"
    assert where(host, 50, 1100) == "" and where(host, 1200, 1300) == ""


def test_a_folded_pass_places_a_host_call_on_the_frames_it_kept(tmp_path):
    events = [*step_events("ProfilerStep#1", 0, 1000), frame(MAIN, 0, 1000), frame(CALL_IMPL, 100, 500),
              frame(FORWARD, 150, 450), frame("<built-in method mm>", 200, 300)]
    c, _ = collected(tmp_path, events)
    where = code_line(FrameIndex(c))
    assert where is not None
    host = c.threads[(CPU_PID, CPU_PID)]
    assert (where(host, 210, 290), where(host, 120, 130), where(host, 20, 30)) == (
        "model.py:5 forward", "main.py:1 main (line running at start)", "main.py:1 main (line running at start)")


# --- frames that overlap without nesting (a faulty tracer's, a replay's) -------------------------------------------

SCRIPT = "run.py(1): <module>"


def script_steps(steps: int, overrun: float) -> list[dict]:
    """``steps`` steps of 1000 us, each run by a ``<module>`` frame (1-991 us into it) that lasts ``overrun`` us
    longer, into the next step's: forward (100-400) in it, with aten::mm (150-350, a 100 us kernel launched at
    160), and aten::add (500-520) in <module> itself."""
    events: list[dict] = []
    for k in range(steps):
        at = 1000.0 * k
        events += [*step_events(f"ProfilerStep#{k + 1}", at, at + 1000), frame(SCRIPT, at + 1, at + 991 + overrun),
                   frame(FORWARD, at + 100, at + 400), op("aten::mm", at + 150, at + 350, 2 * k + 1),
                   runtime("cudaLaunchKernel", at + 160, at + 161, k + 1),
                   gpu("kernel", "gemm", at + 400, at + 500, k + 1), op("aten::add", at + 500, at + 520, 2 * k + 2)]
    return events


def test_frames_running_into_the_next_steps_give_the_tree_of_frames_that_do_not(tmp_path):
    nested = figures(tree_of(tmp_path, script_steps(3, 0.0)))
    assert (nested["names"], nested["parent"], nested["calls"]) == (["", SCRIPT, FORWARD], [-1, 0, 1], [0, 3, 3])
    assert figures(tree_of(tmp_path, script_steps(3, 600.0))) == nested


def test_the_tree_of_frames_that_overlap_without_nesting_does_not_grow_with_the_steps(tmp_path):
    # each <module> frame would otherwise be the child of the one before: a chain as long as the trace
    t = figures(tree_of(tmp_path, script_steps(40, 600.0)))
    assert (t["names"], t["parent"], t["calls"]) == (["", SCRIPT, FORWARD], [-1, 0, 1], [0, 40, 40])
    assert (t["gpu"], t["cpu"]) == ([0.0, 0.0, 100.0], [0.0, 20.0, 200.0])


FIRST, SECOND = "model.py(1): first", "model.py(2): second"


def test_a_frame_starting_inside_another_and_ending_after_it_closes_it_and_takes_the_work_after_its_start(
        tmp_path):
    """second (500-1000) starts inside first (0-600) and ends after it: first is taken as ended at 500, second
    as first's sibling. aten::b (550-560) is second's though first was still open as written; aten::c (450-520)
    runs across second's start, so first, ended at 500, does not hold it (nor its children's frames: no frame
    does, as a frame ending inside an op takes none of its work)."""
    events = [*step_events("ProfilerStep#1", 0, 1000), frame(FIRST, 0, 600), frame(SECOND, 500, 1000),
              op("aten::a", 100, 110, 1), op("aten::c", 450, 520, 2), op("aten::b", 550, 560, 3)]
    t = figures(tree_of(tmp_path, events))
    assert (t["names"], t["parent"], t["calls"]) == (["", FIRST, SECOND], [-1, 0, 0], [0, 1, 1])
    assert (t["cpu"], t["step_cpu"]) == ([70.0, 10.0, 10.0], {1: [10.0], 0: [70.0], 2: [10.0]})
