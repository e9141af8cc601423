"""The per-capture hook (`lightx2v.trace_summary.hook`), fast: the few lines it gives the capture log (the step,
the top kernels or CPU ops, memory, efficiency, the user frame, the report's path) and the report it writes beside
the trace, on small hand-made traces (tests/helpers/small_trace.py) and a few hand-made summaries; every line
written by hand."""

from __future__ import annotations

import dataclasses

import pytest

from lightx2v.trace_summary.__main__ import main
from lightx2v.trace_summary.hook import log_lines, write_capture_summary
from lightx2v.trace_summary.model import MemorySummary, RankSummary, SnapshotSite, SnapshotSummary
from lightx2v.trace_summary.summarize import summarize_paths

from helpers.small_trace import small_trace, tqdm_without_threads

MB = 1 << 20
NO_SHAPES = "efficiency: no op shapes: record_shapes=True (inference: --record_shapes) for MFU, headroom"
TOP_KERNELS = "top GPU kernels (share of GPU time, total, calls):"
TOP_CPU_OPS = "top CPU ops by self time (share, self, calls):"


@pytest.fixture(autouse=True)
def no_tqdm_threads(monkeypatch):
    tqdm_without_threads(monkeypatch)


def summary_of(tmp_path, **trace) -> RankSummary:
    (run,) = summarize_paths([small_trace(tmp_path / "rank0_a.pt.trace.json", **trace)])
    (rank,) = run.ranks
    return rank


def test_one_step_gives_its_time_gpu_busy_idle_warning_and_three_top_kernels(tmp_path):
    # 12 kernels of 10..21 us (186 us) in one 2 ms step
    assert log_lines(summary_of(tmp_path), "out.txt") == [
        "ProfilerStep#1: 2.00 ms, GPU busy 0.19 ms (9.3%) - GPU idle 91% of the step!",
        TOP_KERNELS,
        "   11.3%     0.021 ms x1     kern11",
        "   10.8%     0.020 ms x1     kern10",
        "   10.2%     0.019 ms x1     kern09",
        NO_SHAPES,
        "where in your code: app.py:3 main (line running at start) 0.186 ms/step self (100% of GPU time)",
        "summary: out.txt"]


def test_several_steps_give_their_mean_and_a_step_without_gpu_work_counts_as_idle(tmp_path):
    # two 100 us steps; the one kernel (10 us) runs in the second
    assert log_lines(summary_of(tmp_path, steps=2, step_us=100.0, ops=1), "out.txt")[:3] == [
        "2 steps, mean: 0.10 ms, GPU busy 0.01 ms (5.0%) - GPU idle 95% of the step!",
        TOP_KERNELS,
        "  100.0%     0.010 ms x1     kern00"]


def test_steps_of_different_lengths_give_the_mean_wall_time(tmp_path):
    r = summary_of(tmp_path, gpu=False, frames=False, ops=1)
    steps = [dataclasses.replace(r.steps[0], name="ProfilerStep#1", wall_us=100_000.0),
             dataclasses.replace(r.steps[0], name="ProfilerStep#2", wall_us=300_000.0)]
    assert log_lines(dataclasses.replace(r, steps=steps), "out.txt")[0] == "2 steps, mean: 200.00 ms"


def test_a_step_of_no_time_reads_zero_percent_busy(tmp_path):
    r = summary_of(tmp_path, ops=1)
    step = dataclasses.replace(r.steps[0], wall_us=0.0, gpu_busy_us=0.0)
    assert log_lines(dataclasses.replace(r, steps=[step], idle=None), "out.txt")[0] == \
        "ProfilerStep#1: 0.00 ms, GPU busy 0.00 ms (0.0%)"


def test_no_idle_warning_when_the_gpu_is_not_idle_too_long_or_idle_is_unknown(tmp_path):
    r = summary_of(tmp_path)
    busy = dataclasses.replace(r, idle=dataclasses.replace(r.idle, flagged=False))
    assert log_lines(busy, "out.txt")[0] == "ProfilerStep#1: 2.00 ms, GPU busy 0.19 ms (9.3%)"
    assert log_lines(dataclasses.replace(r, idle=None), "out.txt")[0] == \
        "ProfilerStep#1: 2.00 ms, GPU busy 0.19 ms (9.3%)"


def test_a_cpu_only_trace_gives_its_step_and_three_top_cpu_ops(tmp_path):
    # 12 ops of 20..31 us self time (306 us)
    assert log_lines(summary_of(tmp_path, gpu=False, frames=False), "out.txt") == [
        "ProfilerStep#1: 2.00 ms",
        TOP_CPU_OPS,
        "   10.1%     0.031 ms x1     aten::op11",
        "    9.8%     0.030 ms x1     aten::op10",
        "    9.5%     0.029 ms x1     aten::op09",
        "summary: out.txt"]  # no efficiency line: a CPU-only trace has no roofline to hold its ops against


def test_gpu_work_without_kernels_gives_the_top_cpu_ops(tmp_path):
    r = dataclasses.replace(summary_of(tmp_path, ops=2), top_kernels=[])
    # self 20.5 and 19.5 us: 21 and 20 us less each op's launch call (0.5 us)
    assert log_lines(r, "out.txt")[1:4] == [TOP_CPU_OPS,
                                            "   51.2%     0.021 ms x1     aten::op01",
                                            "   48.8%     0.019 ms x1     aten::op00"]


def test_no_steps_no_ops_no_efficiency_and_no_frames_leave_only_the_report_path(tmp_path):
    r = summary_of(tmp_path, ops=0, frames=False)
    assert log_lines(dataclasses.replace(r, steps=[], efficiency=None), "out.txt") == ["summary: out.txt"]
    assert log_lines(r, "out.txt") == ["ProfilerStep#1: 2.00 ms", "summary: out.txt"]  # no GPU work: no roofline


def test_names_longer_than_sixty_characters_are_cut(tmp_path):
    # kernel names of 61 characters (59 k + 2 digits), op names of 61 (57 a + "op" + 2 digits)
    lines = log_lines(summary_of(tmp_path, ops=2, kernel_prefix="k" * 59), "out.txt")
    assert lines[2] == "   52.4%     0.011 ms x1     " + "k" * 57 + "..."
    lines = log_lines(summary_of(tmp_path, ops=2, op_prefix="a" * 57, gpu=False, frames=False), "out.txt")
    assert lines[2] == "   51.2%     0.021 ms x1     " + "a" * 57 + "..."
    lines = log_lines(summary_of(tmp_path, ops=2, kernel_prefix="k" * 58), "out.txt")  # 60: kept whole
    assert lines[2] == "   52.4%     0.011 ms x1     " + "k" * 58 + "01"


def test_a_kernel_or_op_called_many_times_gives_its_calls_and_total(tmp_path):
    r = summary_of(tmp_path, ops=1)
    r = dataclasses.replace(r, top_kernels=[dataclasses.replace(r.top_kernels[0], calls=12345, total_us=45_678.0)])
    assert log_lines(r, "out.txt")[2] == "  100.0%    45.678 ms x12345 kern00"
    r = summary_of(tmp_path, ops=1, gpu=False, frames=False)
    r = dataclasses.replace(r, top_cpu_ops=[dataclasses.replace(r.top_cpu_ops[0], calls=123, self_us=45_678.0)])
    assert log_lines(r, "out.txt")[2] == "  100.0%    45.678 ms x123   aten::op00"


def test_memory_gives_the_peak_its_step_and_a_leak_over_two_steps_or_more(tmp_path):
    # 5 MiB allocated in step 1 and again in step 2 of three: grows in two steps, a leak
    lines = log_lines(summary_of(tmp_path, steps=3, ops=1, memory=((100, 5 * MB), (2100, 5 * MB))), "out.txt")
    assert lines[3] == "memory cuda:0: peak allocated 10.5 MB in ProfilerStep#2 - LEAK: allocated grows in 2 of 3 steps"
    lines = log_lines(summary_of(tmp_path, steps=3, ops=1, memory=((100, 5 * MB),)), "out.txt")
    assert lines[3] == "memory cuda:0: peak allocated 5.2 MB in ProfilerStep#1"
    assert lines[4] == NO_SHAPES


def test_a_memory_peak_outside_every_step_names_no_step(tmp_path):
    lines = log_lines(summary_of(tmp_path, ops=1, memory=((100, 5 * MB), (2100, 6 * MB))), "out.txt")
    assert lines[3] == "memory cuda:0: peak allocated 11.5 MB"


def site(location: str, function: str, nbytes: int) -> SnapshotSite:
    return SnapshotSite(location=location, function=function, filename="/src/" + location.split(":")[0],
                        line=int(location.split(":")[1]), bytes=nbytes, blocks=1)


def snapshot(device: int | None, sites: list[SnapshotSite]) -> SnapshotSummary:
    return SnapshotSummary(file="rank0_a.memory_snapshot.pickle", device=device, source="device_traces",
                           peak_bytes=3_000_000_000, peak_at_us=1.0, reserved_bytes=4_000_000_000, sites=sites,
                           other_bytes=0)


def test_a_memory_snapshot_gives_its_peak_and_the_two_places_holding_most(tmp_path):
    r = summary_of(tmp_path, ops=1, frames=False)
    snaps = [snapshot(1, [site("model.py:40", "forward", 2_000_000_000), site("model.py:50", "attn", 600_000_000),
                          site("model.py:60", "mlp", 400_000_000)]),
             snapshot(None, [])]
    lines = log_lines(dataclasses.replace(r, memory=MemorySummary(devices=[], snapshots=snaps)), "out.txt")
    assert lines[3:6] == [
        "memory snapshot cuda:1: peak 3.0 GB: 2.0 GB at model.py:40 forward, 600.0 MB at model.py:50 attn",
        "memory snapshot cuda: peak 3.0 GB",
        NO_SHAPES]


def test_the_report_beside_the_trace_is_the_commands_and_the_log_names_it(tmp_path, capsys):
    trace = small_trace(tmp_path / "rank0_a.pt.trace.json", ops=1, frames=False, gpu=False)
    lines = write_capture_summary(trace)
    assert lines == ["ProfilerStep#1: 2.00 ms", TOP_CPU_OPS, "  100.0%     0.020 ms x1     aten::op00",
                     f"summary: {trace}.summary.txt"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rank0_a.pt.trace.json",
                                                          "rank0_a.pt.trace.json.summary.txt"]
    report = (tmp_path / "rank0_a.pt.trace.json.summary.txt").read_text()
    assert report.startswith("Trace summary: rank0_a (rank 0)\n")
    assert report.endswith("\n   100.0      0.020      0.020       1  aten::op00\n")
    assert main([trace]) == 0
    assert capsys.readouterr().out == report
