"""The text of "where in your code" (`lightx2v.trace_summary.render_frames`), fast: hand-made frame figures and
frame trees, and the exact lines a user reads for them (the summary's section, the ``--frames`` tree, the
capture log's line), each written out here by hand: columns, decimals, units, order and what is left out."""

from __future__ import annotations

from lightx2v.trace_summary.model import Frames, FrameStat, FrameTree, ModuleStat
from lightx2v.trace_summary.render_frames import frames_lines, log_line, tree_lines

FOLDED_HEAD = ("Where in your code (Python frames by self time, per step of 4; torch, stdlib, site-packages folded "
               "into their caller; --frames: the tree)")


def stat(frame: str, location: str, function: str, *, gpu: float = 0.0, gpu_self: float = 0.0, cpu: float = 0.0,
         cpu_self: float = 0.0, alloc: float = 0.0, gpu_pct: float | None = None, cpu_pct: float | None = None,
         calls: int = 1, top_op: str = "", line: str = "def") -> FrameStat:
    return FrameStat(frame=frame, kind="user", location=location, function=function, line=line, calls=calls,
                     gpu_us=gpu,
                     gpu_self_us=gpu_self, kernel_us=gpu, cpu_us=cpu, cpu_self_us=cpu_self, alloc_bytes=alloc,
                     alloc_self_bytes=alloc, gpu_pct=gpu_pct, cpu_pct=cpu_pct, top_op=top_op)


FORWARD = stat("model.py(21): forward", "model.py:21", "forward", gpu=12_345.6, gpu_self=2000.0, cpu=500.0,
               cpu_self=300.0, alloc=3 * 2**20, gpu_pct=45.67, cpu_pct=12.34, calls=12, top_op="aten::linear")
LINEAR = stat("nn.Module: Linear_0", "", "Linear_0", gpu=6000.0, gpu_self=6000.0, cpu=200.0, cpu_self=250.0,
              calls=3)
MODULE = ModuleStat(module_class="Linear", instances=2, calls=24, gpu_us=6000.0, kernel_us=6000.0, cpu_us=200.0,
                    alloc_bytes=2**19, gpu_pct=22.2, cpu_pct=7.5)


def frames(**changes) -> Frames:
    fields = dict(frame_events=40, folded=True, steps=4, gpu=True, gpu_us=27_000.0, cpu_us=1000.0, alloc_bytes=0.0,
                  memory_device="", unattributed_gpu_us=0.0, unattributed_cpu_us=0.0, frames=[FORWARD, LINEAR],
                  modules=[])
    fields.update(changes)
    return Frames(**fields)


# --- the summary's section ----------------------------------------------------------------------------------------

def test_no_section_without_python_frames():
    assert frames_lines(None) == []


def test_a_trace_whose_frames_hold_no_work_says_so():
    assert frames_lines(frames(frames=[])) == ["", FOLDED_HEAD, "  no frames of your code around the work in the steps"]
    assert frames_lines(frames(frames=[], folded=False))[1] == \
        "Where in your code (Python frames by self time, per step of 4; every frame; --frames: the tree)"


def test_gpu_frames_read_gpu_self_share_and_cpu_ms_per_step_then_calls_and_the_frame_with_its_top_op():
    assert frames_lines(frames()) == [
        "",
        FOLDED_HEAD,
        "    GPU ms  self ms  % GPU   CPU ms  calls  frame (top op)",
        "    12.346    2.000   45.7    0.500     12  model.py:21 forward  (aten::linear)",
        "     6.000    6.000      -    0.200      3  nn.Module: Linear_0",
    ]


def test_cpu_frames_read_cpu_op_time_self_and_share():
    assert frames_lines(frames(gpu=False))[2:] == [
        "    CPU ms  self ms  % CPU  calls  frame (top op)",
        "     0.500    0.300   12.3     12  model.py:21 forward  (aten::linear)",
        "     0.200    0.250      -      3  nn.Module: Linear_0",
    ]


def test_with_allocations_each_frame_reads_its_mib_allocated():
    assert frames_lines(frames(memory_device="cuda", frames=[FORWARD]))[2:] == [
        "    GPU ms  self ms  % GPU   CPU ms alloc MiB  calls  frame (top op)",
        "    12.346    2.000   45.7    0.500       3.0     12  model.py:21 forward  (aten::linear)",
    ]
    assert frames_lines(frames(memory_device="cpu", gpu=False, frames=[FORWARD]))[2:] == [
        "    CPU ms  self ms  % CPU alloc MiB  calls  frame (top op)",
        "     0.500    0.300   12.3       3.0     12  model.py:21 forward  (aten::linear)",
    ]


def test_work_with_no_frame_around_it_is_counted_per_step():
    assert frames_lines(frames(unattributed_gpu_us=1500.0, unattributed_cpu_us=7.0))[-1] == \
        "  (1.500 ms of GPU work per step ran with no Python frame around it)"
    assert frames_lines(frames(gpu=False, unattributed_gpu_us=1500.0, unattributed_cpu_us=7.0))[-1] == \
        "  (0.007 ms of CPU op time per step ran with no Python frame around it)"
    assert frames_lines(frames(gpu=False, unattributed_gpu_us=1500.0))[-1].endswith("nn.Module: Linear_0")


def test_module_classes_follow_the_frames_with_instances_and_calls():
    assert frames_lines(frames(modules=[MODULE]))[3:] == [
        "    12.346    2.000   45.7    0.500     12  model.py:21 forward  (aten::linear)",
        "     6.000    6.000      -    0.200      3  nn.Module: Linear_0",
        "",
        "  nn.Module frames by class",
        "    GPU ms  % GPU   CPU ms instances  calls  class",
        "     6.000   22.2    0.200         2     24  Linear",
    ]
    assert frames_lines(frames(gpu=False, memory_device="cpu", modules=[MODULE]))[-2:] == [
        "    CPU ms  % CPU alloc MiB instances  calls  class",
        "     0.200    7.5       0.5         2     24  Linear",
    ]
    assert frames_lines(frames(memory_device="cuda", modules=[MODULE]))[-2:] == [
        "    GPU ms  % GPU   CPU ms alloc MiB instances  calls  class",
        "     6.000   22.2    0.200       0.5         2     24  Linear",
    ]


# --- the capture log's line ---------------------------------------------------------------------------------------

def test_the_log_line_names_the_frame_with_most_self_time_and_its_share():
    assert log_line(frames(gpu_us=10_000.0)) == \
        "where in your code: nn.Module: Linear_0 6.000 ms/step self (60% of GPU time)"
    assert log_line(frames(gpu=False)) == \
        "where in your code: model.py:21 forward 0.300 ms/step self (30% of CPU op time)"


def test_the_log_line_without_a_total_gives_no_share_and_without_frames_says_nothing():
    assert log_line(frames(gpu=False, cpu_us=0.0)) == "where in your code: model.py:21 forward 0.300 ms/step self"
    assert log_line(frames(frames=[])) == "" and log_line(None) == ""


# --- the --frames tree --------------------------------------------------------------------------------------------

def tree() -> FrameTree:
    """(no frame) -> <module> -> forward -> Linear_0 (one op); <module> -> big (two ops), noop (work outside any op),
    and tiny (9 us) and tiny2 (3 us) below 0.05% of all GPU time (18312 us: 9.156 us)."""
    return FrameTree(
        names=["", "main.py(1): <module>", "model.py(21): forward", "nn.Module: Linear_0", "model.py(40): tiny",
               "model.py(50): big", "model.py(60): noop", "model.py(70): tiny2"],
        kinds=["", "user", "user", "module", "user", "user", "user", "user"], parent=[-1, 0, 1, 2, 1, 1, 1, 1],
        calls=[0, 1, 4, 4, 1, 1, 1, 1],
        gpu_us=[1000.0, 0.0, 2000.0, 6000.0, 9.0, 9000.0, 300.0, 3.0],
        kernel_us=[1000.0, 0.0, 1700.0, 6000.0, 9.0, 9000.0, 300.0, 3.0],
        cpu_us=[100.0, 0.0, 300.0, 200.0, 0.0, 0.0, 0.0, 0.0], alloc_bytes=[0.0] * 8,
        ops={(3, "aten::linear"): [6000.0, 6000.0, 200.0, 0.0], (2, "aten::mul"): [496.0, 496.0, 200.0, 0.0],
             (2, "aten::add"): [1500.0, 1200.0, 100.0, 0.0], (2, "aten::tiny_op"): [2.0, 2.0, 0.0, 0.0],
             (2, "aten::tiny_op2"): [2.0, 2.0, 0.0, 0.0], (0, ""): [1000.0, 1000.0, 100.0, 0.0],
             (4, "aten::zero"): [9.0, 9.0, 0.0, 0.0], (5, "aten::bmm"): [8000.0, 8000.0, 0.0, 0.0],
             (5, "aten::softmax"): [1000.0, 1000.0, 0.0, 0.0], (6, ""): [300.0, 300.0, 0.0, 0.0],
             (7, "aten::t"): [3.0, 3.0, 0.0, 0.0]},
        step_gpu_us={}, step_cpu_us={}, steps=1, memory_device="")


def test_the_gpu_tree_gives_inclusive_and_self_gpu_and_inclusive_cpu_ms_ops_last_small_frames_left_out():
    # children by inclusive GPU time, most first; an op's GPU time (not its kernels' alone); tiny, tiny2 and the
    # two 2 us ops below 9.156 us
    assert tree_lines(tree(), gpu=True) == [
        "",
        "Frame tree (GPU ms (inclusive, self), CPU ms per step; the top-level ops under each frame last; below "
        "0.05% left out)",
        "     1.000    1.000    0.600  (no Python frame)",
        "     1.000             0.100  (no op)",
        "    17.312    0.000    0.500  <module> (main.py:1)",
        "     9.000    9.000    0.000    big (model.py:50)",
        "     8.000             0.000      aten::bmm",
        "     1.000             0.000      aten::softmax",
        "     8.000    2.000    0.500    forward (model.py:21)",
        "     1.500             0.100      aten::add",
        "     0.496             0.200      aten::mul",
        "     6.000    6.000    0.200      nn.Module: Linear_0  <- aten::linear",
        "     0.300    0.300    0.000    noop (model.py:60)",
        "  (4 frames and ops below 0.05% left out)",
    ]


def test_the_cpu_tree_gives_inclusive_and_self_cpu_op_ms_and_leaves_out_frames_and_ops_without_time():
    assert tree_lines(tree(), gpu=False) == [
        "",
        "Frame tree (CPU op ms (inclusive, self) per step; the top-level ops under each frame last; below 0.05% "
        "left out)",
        "     0.100    0.100  (no Python frame)",
        "     0.100           (no op)",
        "     0.500    0.000  <module> (main.py:1)",
        "     0.500    0.300    forward (model.py:21)",
        "     0.200               aten::mul",
        "     0.100               aten::add",
        "     0.200    0.200      nn.Module: Linear_0  <- aten::linear",
        "  (6 frames and ops below 0.05% left out)",
    ]


def test_a_frame_or_op_of_exactly_the_smallest_share_shown_is_shown():
    # 0.05% of 10000 us: 5 us
    t = FrameTree(names=["", "a.py(1): a", "b.py(1): b"], kinds=["", "user", "user"], parent=[-1, 0, 0],
                  calls=[0, 1, 1], gpu_us=[0.0, 9995.0, 5.0], kernel_us=[0.0, 9995.0, 5.0], cpu_us=[0.0] * 3,
                  alloc_bytes=[0.0] * 3,
                  ops={(1, "aten::big"): [9990.0, 9990.0, 0.0, 0.0], (1, "aten::edge"): [5.0, 5.0, 0.0, 0.0],
                       (2, "aten::b"): [5.0, 5.0, 0.0, 0.0]},
                  step_gpu_us={}, step_cpu_us={}, steps=1, memory_device="")
    assert tree_lines(t, gpu=True)[2:] == [
        "     9.995    9.995    0.000  a (a.py:1)",
        "     9.990             0.000    aten::big",
        "     0.005             0.000    aten::edge",
        "     0.005    0.005    0.000  b (b.py:1)  <- aten::b",
    ]


def test_a_frame_with_one_op_and_a_child_lists_its_op_under_it_and_then_its_child():
    t = FrameTree(names=["", "a.py(1): a", "b.py(1): b"], kinds=["", "user", "user"], parent=[-1, 0, 1],
                  calls=[0, 1, 1], gpu_us=[0.0, 30.0, 70.0], kernel_us=[0.0, 30.0, 70.0], cpu_us=[0.0] * 3,
                  alloc_bytes=[0.0] * 3,
                  ops={(1, "aten::mm"): [30.0, 30.0, 0.0, 0.0], (2, "aten::add"): [70.0, 70.0, 0.0, 0.0]},
                  step_gpu_us={}, step_cpu_us={}, steps=1, memory_device="")
    assert tree_lines(t, gpu=True)[2:] == [
        "     0.100    0.030    0.000  a (a.py:1)",
        "     0.030             0.000    aten::mm",
        "     0.070    0.070    0.000    b (b.py:1)  <- aten::add",
    ]


def test_without_work_outside_the_frames_there_is_no_line_for_it():
    t = tree()
    t.gpu_us[0] = 0.0
    del t.ops[(0, "")]
    lines = tree_lines(t, gpu=True)
    assert "(no Python frame)" not in "\n".join(lines) and "(no op)" not in "\n".join(lines)
    assert lines[2] == "    17.312    0.000    0.500  <module> (main.py:1)"


def test_a_trace_without_frames_says_how_to_capture_them():
    assert tree_lines(None, gpu=True) == ["", "Frame tree: no Python frames in this trace (capture with "
                                              "with_stack=True)"]
