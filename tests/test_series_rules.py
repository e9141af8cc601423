"""Per-step values of one rank (`lightx2v.trace_summary.series`), fast: a hand-made kineto trace fed to the pass
(no file), then the step series ``--diff`` tells change from noise with: each kernel's, each (label, op) group's
and each CPU op's self time per step (without its runtime calls, 0.5 us each in these traces), every figure worked
out here from the events written."""

from __future__ import annotations

from lightx2v.trace_summary.attribution import group_keys
from lightx2v.trace_summary.collect import Collected
from lightx2v.trace_summary.kernels import gpu_work
from lightx2v.trace_summary.launch import launch_chain
from lightx2v.trace_summary.model import StepSeries
from lightx2v.trace_summary.optree import op_tree
from lightx2v.trace_summary.series import step_series
from lightx2v.trace_summary.steps import step_stats

from helpers.kineto import GPU_TID, Kineto


def series_of(k: Kineto) -> StepSeries:
    c = Collected()
    c.feed(k.events)
    gpu = gpu_work(c)
    tree = op_tree(c)
    chain = launch_chain(c)
    found = step_stats(c, gpu.busy if gpu.totals is not None else None, gpu.is_kernel, chain, tree)
    return step_series(c, found, tree, group_keys(c, tree, chain))


def two_steps() -> Kineto:
    """Steps 0-1000 and 1000-1900 (CPU spans); GPU work launched in each, times in us."""
    k = Kineto()
    k.step(1, 0.0, 1000.0)
    k.step(2, 1000.0, 900.0)
    k.op("aten::mm", 100.0, [("kernel", "gemm", 200.0)], label="attn")  # gemm 200..400
    k.op("aten::add", 1100.0, [("kernel", "add_k", 50.0), ("memcpy", "Memcpy HtoD", 30.0)])
    k.op("aten::mm", 1300.0, [("kernel", "gemm", 100.0)], label="attn")
    return k


def test_each_kernel_has_its_time_launched_in_each_step_and_zero_where_it_did_not_run():
    s = series_of(two_steps())
    assert s.steps == ["ProfilerStep#1", "ProfilerStep#2"]
    assert s.kernel_us == {"gemm": [200.0, 100.0], "add_k": [0.0, 50.0]}  # a memcpy is no kernel


def test_each_label_and_top_level_op_has_the_gpu_time_it_launched_in_each_step_memory_ops_included():
    s = series_of(two_steps())
    assert s.group_us == {("attn", "aten::mm"): [200.0, 100.0], ("", "aten::add"): [0.0, 80.0]}


def test_the_step_wall_times_are_the_steps_windows():
    assert series_of(two_steps()).wall_us == [1000.0, 900.0]


def test_each_cpu_op_has_its_self_time_in_the_step_that_holds_its_start():
    k = two_steps()
    k.op("aten::linear", 400.0, [], dur=200.0)
    k.op("aten::t", 450.0, [], dur=30.0)  # inside aten::linear: 200 - 30 = 170 self
    k.op("aten::tiny", 1880.0, [], dur=0.5)  # starts in step 2, runs past its end
    s = series_of(k)
    # each launch's runtime call (0.5 us) is not its op's self time: mm 50 - 0.5, add 50 - 2 x 0.5
    assert s.cpu_self_us == {"aten::mm": [49.5, 49.5], "aten::add": [0.0, 49.0], "aten::linear": [170.0, 0.0],
                             "aten::t": [30.0, 0.0], "aten::tiny": [0.0, 0.5]}


def test_a_cpu_op_starting_outside_every_step_counts_nowhere():
    k = two_steps()
    k.op("aten::before", -500.0, [], dur=20.0)
    k.op("aten::after", 1950.0, [], dur=20.0)  # after step 2's CPU span (1900)
    assert set(series_of(k).cpu_self_us) == {"aten::mm", "aten::add"}


def test_a_cpu_op_starting_at_a_steps_cpu_end_counts_in_that_step():
    k = two_steps()
    k.op("aten::edge", 1900.0, [], dur=20.0)
    assert series_of(k).cpu_self_us["aten::edge"] == [0.0, 20.0]


def test_gpu_work_launched_outside_every_step_counts_nowhere():
    k = two_steps()
    k.op("aten::late", 2500.0, [("kernel", "late_k", 40.0)])
    s = series_of(k)
    assert "late_k" not in s.kernel_us and ("", "aten::late") not in s.group_us


def test_gpu_work_without_a_launch_record_counts_in_the_step_its_gpu_time_falls_in_under_no_group():
    k = two_steps()
    k._x("kernel", "bare", GPU_TID, 1500.0, 10.0, stream=GPU_TID, device=0)
    s = series_of(k)
    assert s.kernel_us["bare"] == [0.0, 10.0] and s.group_us[("", "")] == [0.0, 10.0]


def test_a_trace_without_steps_is_one_step_of_the_whole_trace():
    k = Kineto()
    k.op("aten::mm", 0.0, [("kernel", "gemm", 20.0)])
    s = series_of(k)
    assert len(s.steps) == 1 and s.kernel_us == {"gemm": [20.0]} and s.cpu_self_us == {"aten::mm": [49.5]}


def test_a_kernel_and_an_op_repeated_in_one_step_add_up():
    k = two_steps()
    k.op("aten::mm", 600.0, [("kernel", "gemm", 70.0)], dur=30.0)  # gemm 700..770, in step 1
    s = series_of(k)
    assert s.kernel_us["gemm"] == [270.0, 100.0] and s.cpu_self_us["aten::mm"] == [79.0, 49.5]
    assert s.group_us[("", "aten::mm")] == [70.0, 0.0]  # outside the attn label: a group of its own


def test_work_outside_every_step_written_first_does_not_stop_the_count_of_the_rest():
    k = two_steps()
    written = len(k.events)
    k.op("aten::early", -900.0, [("kernel", "early_k", 10.0)])  # launched and run before step 1
    k.events = k.events[written:] + k.events[:written]  # its events first in the file
    s = series_of(k)
    assert "early_k" not in s.kernel_us and "aten::early" not in s.cpu_self_us
    assert s.kernel_us["gemm"] == [200.0, 100.0] and s.cpu_self_us["aten::mm"] == [49.5, 49.5]
