"""Where in your code, on a frame tree (`lightx2v.trace_summary.frames`), fast: which frames are the user's, how a
frame is named, and what a hand-made frame tree gives: inclusive and self per frame (a recursive frame counted
once), per step, the top frames and nn.Module classes with their shares and top ops, the collapsed stacks, each
figure worked out here. Building the tree from a trace is checked on real captures in
tests/test_trace_summary_frames.py."""

from __future__ import annotations

import pytest

from lightx2v.trace_summary.frames import (
    LIBRARY,
    MODULE,
    USER,
    _ancestry,
    _outermost,
    collapsed_stacks,
    frame_kind,
    frame_series,
    frame_summary,
    inclusive,
    keeps,
    label,
    location,
    module_class,
    per_frame,
)
from lightx2v.trace_summary.model import Frames, FrameStat, FrameTree, ModuleStat

# --- which frames are the user's ----------------------------------------------------------------------------------


@pytest.mark.parametrize("name, kind", [
    ("nn.Module: Linear_0", MODULE),
    ("<built-in method view of Tensor object at 0x7f3a>", LIBRARY),
    ("<frozen importlib._bootstrap>(1007): _find_and_load", LIBRARY),
    ("/usr/lib/python3.11/threading.py(1002): run", LIBRARY),
    ("lib/python3/x.py(1): f", LIBRARY),
    ("C:\\Python\\lib\\python3.11\\json\\decoder.py(10): decode", LIBRARY),
    ("/venv/site-packages/diffusers/pipe.py(5): __call__", LIBRARY),
    ("/usr/dist-packages/numpy/core.py(5): f", LIBRARY),
    ("lightx2v/utils/torch_trace_profiler.py(560): run", LIBRARY),
    ("torch/nn/modules/module.py(1783): _call_impl", LIBRARY),
    ("triton/runtime/jit.py(3): run", LIBRARY),
    ("json/decoder.py(10): decode", LIBRARY),
    ("os.py(5): f", LIBRARY),
    ("torch.py(1): f", LIBRARY),
    ("__main__.py(1): <module>", USER),
    ("model.py(21): forward", USER),
    ("examples/model.py(21): forward", USER),
    ("/home/u/proj/model.py(3): f", USER),
    ("osx/model.py(3): f", USER),
    ("os.py/model.py(3): f", USER),  # only a lone file name loses its .py
    ("torchy.py(3): f", USER),
    ("/home/u/lib/pythonic/model.py(3): f", USER),
])
def test_a_frame_is_the_users_unless_it_is_a_module_torch_stdlib_site_packages_a_builtin_or_the_profiler(name,
                                                                                                          kind):
    assert frame_kind(name) == kind


def test_folding_keeps_every_frame_but_librarys():
    assert keeps(True)("model.py(1): f") and keeps(True)("nn.Module: Linear_0")
    assert not keeps(True)("torch/nn/functional.py(9): linear")
    assert keeps(False)("torch/nn/functional.py(9): linear") and keeps(False)("<built-in function x>")


# --- how a frame is named -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("name, where", [
    ("nn.Module: Linear_0", ("", "Linear_0")),
    ("model.py(21): forward", ("model.py:21", "forward")),
    ("/a/b/c/model.py(21): forward", ("c/model.py:21", "forward")),
    ("C:\\proj\\pkg\\m.py(3): f", ("pkg/m.py:3", "f")),
    ("<built-in method view of Tensor object at 0x7f3A>", ("", "<built-in method view of Tensor object>")),
    ("<built-in function linear>", ("", "<built-in function linear>")),
])
def test_a_frames_location_is_its_files_last_two_parts_and_line_with_its_function(name, where):
    assert location(name) == where


@pytest.mark.parametrize("name, text", [
    ("model.py(21): forward", "forward (model.py:21)"),
    ("nn.Module: Linear_0", "nn.Module: Linear_0"),
    ("<built-in function a;b>", "<built-in function a,b>"),
    ("<built-in method view of Tensor object at 0x7f3a>", "<built-in method view of Tensor object>"),
    ("x;y.py(1): f;g", "f,g (x,y.py:1)"),
])
def test_a_frames_label_puts_the_function_first_and_has_no_semicolon(name, text):
    assert label(name) == text


def test_a_modules_class_is_its_name_without_the_instance_number():
    assert module_class("nn.Module: Linear_12") == "Linear"
    assert module_class("nn.Module: Conv2d") == "Conv2d"
    assert module_class("nn.Module: Block_1_0") == "Block_1"


# --- a hand-made tree ---------------------------------------------------------------------------------------------

NAMES = ["", "main.py(1): <module>", "model.py(21): forward", "nn.Module: Linear_0", "nn.Module: Linear_1",
         "model.py(40): helper", "nn.Module: Conv2d_0"]


def tree(steps: int = 2) -> FrameTree:
    """(no frame) 100 GPU; <module> -> forward (300) -> Linear_0 (500), Linear_1 (200); <module> -> helper (300)
    -> Conv2d_0 (CPU only). Self values per node, per step."""
    return FrameTree(
        names=list(NAMES), kinds=["", USER, USER, MODULE, MODULE, USER, MODULE], parent=[-1, 0, 1, 2, 2, 1, 5],
        calls=[0, 1, 4, 4, 4, 2, 2],
        gpu_us=[100.0, 0.0, 300.0, 500.0, 200.0, 300.0, 0.0], kernel_us=[100.0, 0.0, 250.0, 500.0, 150.0, 300.0, 0.0],
        cpu_us=[7.0, 0.0, 40.0, 10.0, 5.0, 60.0, 30.0], alloc_bytes=[0.0, 0.0, 1024.0, 2048.0, 0.0, 0.0, 0.0],
        ops={(3, "aten::linear"): [500.0, 500.0, 10.0, 2048.0], (4, "aten::linear"): [200.0, 200.0, 5.0, 0.0],
             (2, "aten::add"): [300.0, 250.0, 40.0, 1024.0], (5, "aten::conv"): [300.0, 300.0, 60.0, 0.0],
             (6, "aten::conv2"): [0.0, 0.0, 30.0, 0.0], (0, ""): [100.0, 100.0, 7.0, 0.0]},
        step_gpu_us={2: [200.0, 400.0], 3: [500.0, 500.0], 5: [300.0, 300.0]},
        step_cpu_us={2: [40.0, 40.0], 6: [20.0, 40.0]}, steps=steps, memory_device="cuda")


def recursive() -> FrameTree:
    """A (10) -> B (20) -> A again (5): A's inclusive counts its outer node only."""
    return FrameTree(names=["", "a.py(1): A", "b.py(1): B", "a.py(1): A"], kinds=["", USER, USER, USER],
                     parent=[-1, 0, 1, 2], calls=[0, 1, 1, 1], gpu_us=[0.0, 10.0, 20.0, 5.0],
                     kernel_us=[0.0, 10.0, 20.0, 5.0], cpu_us=[0.0] * 4, alloc_bytes=[0.0] * 4, ops={},
                     step_gpu_us={1: [10.0], 2: [20.0], 3: [5.0]}, step_cpu_us={}, steps=1, memory_device="")


def test_inclusive_adds_each_nodes_descendants():
    assert inclusive(tree(), tree().gpu_us) == [1400.0, 1300.0, 1000.0, 500.0, 200.0, 300.0, 0.0]


def test_a_frame_repeated_inside_itself_is_not_outermost_and_ancestry_runs_innermost_first():
    assert _outermost(recursive()) == [True, True, True, False]
    assert _outermost(tree()) == [True] * 7
    assert _ancestry(recursive(), 3) == [3, 2, 1] and _ancestry(recursive(), 0) == []


def test_per_frame_sums_a_names_nodes_self_and_counts_a_recursive_frames_inclusive_once():
    rows = per_frame(recursive())
    assert rows["a.py(1): A"] == {"calls": 2.0, "gpu": 35.0, "gpu_self": 15.0, "kernel": 35.0, "cpu": 0.0,
                                  "cpu_self": 0.0, "alloc": 0.0, "alloc_self": 0.0}
    assert rows["b.py(1): B"]["gpu"] == 25.0 and rows["b.py(1): B"]["gpu_self"] == 20.0
    fwd = per_frame(tree())["model.py(21): forward"]
    assert fwd == {"calls": 4.0, "gpu": 1000.0, "gpu_self": 300.0, "kernel": 900.0, "cpu": 55.0, "cpu_self": 40.0,
                   "alloc": 3072.0, "alloc_self": 1024.0}


def test_frame_series_gives_inclusive_and_self_per_step_of_gpu_or_cpu_time():
    s = frame_series(tree(), gpu=True)
    assert s["model.py(21): forward"] == ([700.0, 900.0], [200.0, 400.0])
    assert s["main.py(1): <module>"] == ([1000.0, 1200.0], [0.0, 0.0])
    assert s["nn.Module: Linear_1"] == ([0.0, 0.0], [0.0, 0.0])
    c = frame_series(tree(), gpu=False)
    assert c["model.py(40): helper"] == ([20.0, 40.0], [0.0, 0.0])
    assert c["main.py(1): <module>"] == ([60.0, 80.0], [0.0, 0.0])
    assert frame_series(recursive(), gpu=True)["a.py(1): A"] == ([35.0], [15.0])


def test_the_summary_ranks_the_users_frames_by_self_then_inclusive_time_with_shares_and_top_ops():
    f = frame_summary(tree(), frame_events=40, folded=True, has_gpu=True, top=2)
    assert f.frames == [
        FrameStat(frame="model.py(21): forward", kind=USER, location="model.py:21", function="forward", line="def",
                  calls=4,
                  gpu_us=1000.0, gpu_self_us=300.0, kernel_us=900.0, cpu_us=55.0, cpu_self_us=40.0,
                  alloc_bytes=3072.0, alloc_self_bytes=1024.0, gpu_pct=pytest.approx(100 * 1000 / 1400),
                  cpu_pct=pytest.approx(100 * 55 / 152), top_op="aten::linear"),
        FrameStat(frame="model.py(40): helper", kind=USER, location="model.py:40", function="helper", line="def",
                  calls=2,
                  gpu_us=300.0, gpu_self_us=300.0, kernel_us=300.0, cpu_us=90.0, cpu_self_us=60.0, alloc_bytes=0.0,
                  alloc_self_bytes=0.0, gpu_pct=pytest.approx(100 * 300 / 1400), cpu_pct=pytest.approx(100 * 90 / 152),
                  top_op="aten::conv"),
    ]


def test_the_summary_groups_module_frames_by_class_most_gpu_time_first():
    f = frame_summary(tree(), frame_events=40, folded=True, has_gpu=True, top=5)
    assert f.modules == [
        ModuleStat(module_class="Linear", instances=2, calls=8, gpu_us=700.0, kernel_us=650.0, cpu_us=15.0,
                   alloc_bytes=2048.0, gpu_pct=50.0, cpu_pct=pytest.approx(100 * 15 / 152)),
        ModuleStat(module_class="Conv2d", instances=1, calls=2, gpu_us=0.0, kernel_us=0.0, cpu_us=30.0,
                   alloc_bytes=0.0, gpu_pct=0.0, cpu_pct=pytest.approx(100 * 30 / 152)),
    ]
    assert [r.function for r in f.frames] == ["forward", "helper", "<module>"]
    assert [m.module_class for m in frame_summary(tree(), 40, True, True, top=1).modules] == ["Linear"]


def test_the_summary_holds_the_totals_per_step_and_the_work_with_no_frame():
    f = frame_summary(tree(steps=3), frame_events=40, folded=False, has_gpu=True, top=1)
    assert (f.frame_events, f.folded, f.steps, f.gpu, f.gpu_us, f.cpu_us, f.alloc_bytes, f.memory_device,
            f.unattributed_gpu_us, f.unattributed_cpu_us) == (40, False, 3, True, 1400.0, 152.0, 3072.0, "cuda",
                                                              100.0, 7.0)


def test_a_cpu_trace_ranks_by_cpu_time_gives_no_gpu_share_and_top_ops_by_cpu_time():
    t = tree()
    t.gpu_us = [0.0] * 7
    f = frame_summary(t, frame_events=40, folded=True, has_gpu=False, top=3)
    assert [(r.function, r.gpu_pct, r.top_op) for r in f.frames] == [("helper", None, "aten::conv"),
                                                                    ("forward", None, "aten::add"),
                                                                    ("<module>", None, "aten::conv")]
    assert [(m.module_class, m.gpu_pct) for m in f.modules] == [("Conv2d", None), ("Linear", None)]


def test_a_gpu_trace_without_gpu_time_in_its_frames_picks_top_ops_by_cpu_time():
    t = tree()
    t.gpu_us = [0.0] * 7
    f = frame_summary(t, frame_events=40, folded=True, has_gpu=True, top=2)
    assert [(r.function, r.top_op, r.gpu_pct) for r in f.frames] == [("helper", "aten::conv", None),
                                                                     ("forward", "aten::add", None)]


def test_frames_equal_in_every_time_are_ranked_by_name():
    t = FrameTree(names=["", "b.py(1): f", "a.py(1): f"], kinds=["", USER, USER], parent=[-1, 0, 0], calls=[0, 1, 1],
                  gpu_us=[0.0, 5.0, 5.0], kernel_us=[0.0, 5.0, 5.0], cpu_us=[0.0, 1.0, 1.0], alloc_bytes=[0.0] * 3,
                  ops={}, step_gpu_us={}, step_cpu_us={}, steps=1, memory_device="")
    assert [r.frame for r in frame_summary(t, 2, True, True, 5).frames] == ["a.py(1): f", "b.py(1): f"]


def test_modules_equal_in_gpu_time_are_ranked_by_cpu_time_then_class():
    t = FrameTree(names=["", "nn.Module: B_0", "nn.Module: A_0", "nn.Module: C_0"], kinds=["", MODULE, MODULE, MODULE],
                  parent=[-1, 0, 0, 0], calls=[0, 1, 1, 1], gpu_us=[0.0, 5.0, 5.0, 5.0], kernel_us=[0.0] * 4,
                  cpu_us=[0.0, 1.0, 1.0, 2.0], alloc_bytes=[0.0] * 4, ops={}, step_gpu_us={}, step_cpu_us={},
                  steps=1, memory_device="")
    assert [m.module_class for m in frame_summary(t, 3, True, True, 5).modules] == ["C", "A", "B"]


def test_a_frames_top_op_counts_a_recursive_frames_op_once():
    t = recursive()
    t.ops = {(3, "aten::mm"): [5.0, 5.0, 0.0, 0.0], (2, "aten::add"): [4.0, 4.0, 0.0, 0.0]}
    f = frame_summary(t, 3, True, True, 5)
    assert {r.function: r.top_op for r in f.frames} == {"A": "aten::mm", "B": "aten::mm"}
    t.ops[(1, "aten::add")] = [1.5, 1.5, 0.0, 0.0]  # A: add 4 + 1.5 against mm 5, counted once though A is twice
    assert {r.function: r.top_op for r in frame_summary(t, 3, True, True, 5).frames}["A"] == "aten::add"


def test_a_frame_without_ops_has_no_top_op():
    assert all(r.top_op == "" for r in frame_summary(recursive(), 3, True, True, 5).frames)


# --- collapsed stacks ---------------------------------------------------------------------------------------------

def test_collapsed_stacks_give_each_stack_and_top_level_op_in_nanoseconds_per_step():
    assert collapsed_stacks(tree(), "gpu") == [
        "(no Python frame);(no op) 100000",
        "<module> (main.py:1);forward (model.py:21);aten::add 300000",
        "<module> (main.py:1);forward (model.py:21);nn.Module: Linear_0;aten::linear 500000",
        "<module> (main.py:1);forward (model.py:21);nn.Module: Linear_1;aten::linear 200000",
        "<module> (main.py:1);helper (model.py:40);aten::conv 300000",
    ]
    assert collapsed_stacks(tree(), "cpu")[-1] == \
        "<module> (main.py:1);helper (model.py:40);nn.Module: Conv2d_0;aten::conv2 30000"


def test_memory_stacks_are_in_bytes_and_stacks_that_round_to_nothing_are_left_out():
    assert collapsed_stacks(tree(), "memory") == [
        "<module> (main.py:1);forward (model.py:21);aten::add 1024",
        "<module> (main.py:1);forward (model.py:21);nn.Module: Linear_0;aten::linear 2048",
    ]
    t = recursive()
    t.ops = {(1, "a;b"): [0.0006, 0.0, 0.0, 0.0], (2, "aten::x"): [0.0004, 0.0, 0.0, 0.0]}
    assert collapsed_stacks(t, "gpu") == ["A (a.py:1);a,b 1"]


def test_a_frames_summary_of_a_tree_is_a_frames_answer():
    assert isinstance(frame_summary(tree(), 1, True, True, 1), Frames)


def shared() -> FrameTree:
    """util under A and under B (two outermost nodes of one name); a nameless frame under B."""
    return FrameTree(names=["", "a.py(1): A", "u.py(1): util", "b.py(1): B", "u.py(1): util", ""],
                     kinds=["", USER, USER, USER, USER, LIBRARY], parent=[-1, 0, 1, 0, 3, 3], calls=[0, 1, 2, 1, 3, 1],
                     gpu_us=[0.0, 1.0, 10.0, 2.0, 20.0, 4.0], kernel_us=[0.0, 1.0, 10.0, 2.0, 20.0, 4.0],
                     cpu_us=[0.0, 0.0, 3.0, 0.0, 5.0, 0.0], alloc_bytes=[0.0, 0.0, 64.0, 0.0, 32.0, 0.0], ops={},
                     step_gpu_us={2: [10.0], 4: [20.0], 5: [4.0]}, step_cpu_us={}, steps=1, memory_device="")


def test_a_frame_called_from_two_places_adds_up_both_its_self_and_inclusive_figures():
    assert per_frame(shared())["u.py(1): util"] == {"calls": 5.0, "gpu": 30.0, "gpu_self": 30.0, "kernel": 30.0,
                                                    "cpu": 8.0, "cpu_self": 8.0, "alloc": 96.0, "alloc_self": 96.0}


def test_a_nameless_frame_is_a_frame_of_its_own_and_the_root_is_none():
    assert per_frame(shared())[""]["gpu"] == 4.0 and _outermost(shared())[5]
    assert set(frame_series(shared(), gpu=True)) == {"a.py(1): A", "u.py(1): util", "b.py(1): B", ""}
    assert frame_series(shared(), gpu=True)["b.py(1): B"] == ([24.0], [0.0])  # its per-step self is not recorded
    assert frame_series(shared(), gpu=True)[""] == ([4.0], [4.0])  # the nameless frame's alone, not the root's
    assert "" not in frame_series(tree(), gpu=True)


def ops_tree(ops: dict) -> FrameTree:
    return FrameTree(names=["", "a.py(1): A"], kinds=["", USER], parent=[-1, 0], calls=[0, 1], gpu_us=[0.0, 100.0],
                     kernel_us=[0.0, 100.0], cpu_us=[0.0, 10.0], alloc_bytes=[0.0, 0.0], ops=ops, step_gpu_us={},
                     step_cpu_us={}, steps=1, memory_device="")


def top_op(ops: dict, has_gpu: bool = True) -> str:
    return frame_summary(ops_tree(ops), 1, True, has_gpu, 1).frames[0].top_op


def test_the_top_op_is_a_named_op_with_time_the_first_met_of_equals_by_gpu_not_kernel_time():
    assert top_op({(1, "aten::zero"): [0.0, 0.0, 0.0, 0.0], (1, ""): [90.0, 90.0, 0.0, 0.0],
                   (1, "aten::mm"): [10.0, 10.0, 0.0, 0.0]}) == "aten::mm"
    assert top_op({(1, "aten::zero"): [0.0, 0.0, 0.0, 0.0]}) == ""
    assert top_op({(1, "aten::b"): [5.0, 5.0, 0.0, 0.0], (1, "aten::a"): [5.0, 5.0, 0.0, 0.0]}) == "aten::b"
    assert top_op({(1, "aten::copy_"): [60.0, 0.0, 0.0, 0.0], (1, "aten::mm"): [40.0, 40.0, 0.0, 0.0]}) == \
        "aten::copy_"


def test_frames_equal_in_gpu_and_cpu_self_time_rank_by_inclusive_cpu_time():
    t = FrameTree(names=["", "b.py(1): f", "a.py(1): f", "c.py(1): g"], kinds=["", USER, USER, USER],
                  parent=[-1, 0, 0, 1], calls=[0, 1, 1, 1], gpu_us=[0.0, 5.0, 5.0, 0.0], kernel_us=[0.0, 5.0, 5.0, 0.0],
                  cpu_us=[0.0, 1.0, 1.0, 0.0], alloc_bytes=[0.0] * 4, ops={}, step_gpu_us={}, step_cpu_us={}, steps=1,
                  memory_device="")
    t.cpu_us[3] = 2.0  # b's child: b's inclusive CPU 3 against a's 1
    assert [r.frame for r in frame_summary(t, 3, True, True, 2).frames] == ["b.py(1): f", "a.py(1): f"]


def test_collapsed_stacks_of_one_frame_go_by_op_name():
    t = ops_tree({(1, "b_op"): [1.0, 1.0, 0.0, 0.0], (1, "a_op"): [1.0, 5.0, 0.0, 0.0]})
    assert collapsed_stacks(t, "gpu") == ["A (a.py:1);a_op 1000", "A (a.py:1);b_op 1000"]


def test_the_frames_on_the_stack_at_the_start_are_the_first_recorded_each_threads_stack_in_turn():
    """As torch records them (tests/test_trace_summary_frames.py holds it on real captures): each thread's stack,
    outermost first, 1-10 us apart, one thread after another; then the first frame entered, 70 us or more later on
    the thread that started the profiler. A built-in is a call, never such a frame."""
    from types import SimpleNamespace

    from lightx2v.trace_summary.frames import DEF_LINE, RUNNING_LINE, line_kind, running_at_start

    names = ["w.py(5): loop", "s.py(17): <module>", "s.py(15): main", "<built-in function perf_counter>",
             "s.py(4): work"]
    c = SimpleNamespace(fr_ts=[0.0, 40.0, 41.5, 43.0, 200.0, 201.0], fr_dur=[900.0, 800.0, 790.0, 1.0, 5.0, 5.0],
                        fr_thread=[2, 1, 1, 1, 1, 1], fr_name=[0, 1, 2, 3, 4, 2], frame_kept=names)
    running = running_at_start(c)  # thread 2's stack, then thread 1's (43 us later: a new thread), not work
    assert running == {"w.py(5): loop", "s.py(17): <module>", "s.py(15): main"}
    assert [line_kind(n, running) for n in names] == [RUNNING_LINE, RUNNING_LINE, RUNNING_LINE, "", DEF_LINE]
    empty = SimpleNamespace(fr_ts=[], fr_dur=[], fr_thread=[], fr_name=[], frame_kept=[])
    assert running_at_start(empty) == frozenset()
    late = SimpleNamespace(fr_ts=[0.0, 25.0], fr_dur=[100.0, 10.0], fr_thread=[1, 1], fr_name=[1, 2],
                           frame_kept=names)  # past STARTUP_GAP_US on its thread: entered
    assert running_at_start(late) == {"s.py(17): <module>"}
    beside = SimpleNamespace(fr_ts=[0.0, 5.0], fr_dur=[4.0, 10.0], fr_thread=[1, 1], fr_name=[1, 2],
                             frame_kept=names)  # not inside the one before it: entered after it returned
    assert running_at_start(beside) == {"s.py(17): <module>"}
