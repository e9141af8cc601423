"""The terminal summary (`lightx2v.trace_summary.render`), fast: hand-made summaries and the exact lines a user
reads for them (the header, the step table, the idle and memory sections, the kernel and CPU op tables, a run of
several ranks), each written out here by hand: columns, decimals, units, order and what is left out."""

from __future__ import annotations

import pytest

from lightx2v.trace_summary.model import (
    CpuOpStat,
    DamagedFile,
    Device,
    DeviceMemory,
    Efficiency,
    Frames,
    FrameTree,
    GpuTotals,
    IdleCauses,
    IdleStats,
    KernelStat,
    MemOpStat,
    MemoryCurve,
    MemoryOp,
    MemorySummary,
    RankRow,
    RankSummary,
    RankTables,
    RunSummary,
    SkippedEvents,
    SnapshotSite,
    SnapshotSummary,
    StepMemory,
    StepStats,
    Straggler,
    SyncWait,
)
from lightx2v.trace_summary.render import (
    format_bytes,
    format_duration,
    format_ms,
    format_pct,
    format_signed_bytes,
    render_rank,
    render_run,
    render_runs,
    skipped_line,
    snapshot_device,
    snapshot_holders,
)


def rank(**changes) -> RankSummary:
    """A CPU-only trace with no steps, no devices and no ops; ``changes`` sets the fields a test is about."""
    fields = dict(file="/runs/a/w0.pt.trace.json", size_bytes=2048, compressed=False, worker="w0", rank=None,
                  world_size=None, devices=[], versions={}, event_count=1234, trace_span_us=1500.0, steps=[],
                  gpu=None, idle=None, top_kernels=[], top_cpu_ops=[], cpu_self_total_us=0.0, memory_ops=[],
                  gpu_comm_us=None)
    fields.update(changes)
    return RankSummary(**fields)


def lines_of(r: RankSummary) -> list[str]:
    return render_rank(r).split("\n")


def device_line(*devices: Device) -> str:
    (line,) = [x for x in lines_of(rank(devices=list(devices))) if x.startswith("  devices ")]
    return line


# --- the header -----------------------------------------------------------------------------------------------------

def test_a_device_reads_its_id_name_compute_capability_and_memory_in_gib():
    assert device_line(Device(id=0, name="NVIDIA H200", memory_bytes=150_109_880_320, compute_capability="9.0")) \
        == "  devices   0: NVIDIA H200 (sm 9.0, 139.8 GiB)"


def test_a_device_with_memory_but_no_compute_capability_reads_only_its_memory():
    assert device_line(Device(id=1, name="B", memory_bytes=2 * 2**30, compute_capability=None)) \
        == "  devices   1: B (2.0 GiB)"
    assert device_line(Device(id=1, name="B", memory_bytes=2 * 2**30, compute_capability="")) \
        == "  devices   1: B (2.0 GiB)"


def test_a_device_with_a_compute_capability_but_no_memory_reads_only_its_sm():
    assert device_line(Device(id=2, name="C", memory_bytes=None, compute_capability="8.6")) \
        == "  devices   2: C (sm 8.6)"
    assert device_line(Device(id=2, name="C", memory_bytes=0, compute_capability="8.6")) == "  devices   2: C (sm 8.6)"


def test_a_device_with_neither_reads_its_id_and_name_alone_and_an_unknown_id_reads_a_question_mark():
    assert device_line(Device(id=3, name="D", memory_bytes=None, compute_capability=None)) == "  devices   3: D"
    assert device_line(Device(id=None, name="?", memory_bytes=None, compute_capability=None)) == "  devices   ?: ?"


def test_several_devices_are_one_line_apart_by_semicolons():
    assert device_line(Device(id=0, name="A", memory_bytes=None, compute_capability="9.0"),
                       Device(id=1, name="B", memory_bytes=2**30, compute_capability=None)) \
        == "  devices   0: A (sm 9.0); 1: B (1.0 GiB)"


def test_the_title_names_the_worker_its_rank_and_world_size_when_known():
    assert lines_of(rank())[0] == "Trace summary: w0"
    assert lines_of(rank(rank=0))[0] == "Trace summary: w0 (rank 0)"
    assert lines_of(rank(rank=3, world_size=8))[0] == "Trace summary: w0 (rank 3 of 8)"


def test_the_file_line_reads_the_path_size_gzip_events_and_span():
    assert lines_of(rank())[1] == "  file      /runs/a/w0.pt.trace.json (2.0 KB, 1,234 events, span 1.500 ms)"
    assert lines_of(rank(compressed=True, size_bytes=999, event_count=12, trace_span_us=0.0))[1] == \
        "  file      /runs/a/w0.pt.trace.json (999 B, gzip, 12 events, span 0.000 ms)"


def test_a_cpu_only_trace_reads_its_whole_report_with_every_absent_section_said():
    assert render_rank(rank()) == "\n".join([
        "Trace summary: w0",
        "  file      /runs/a/w0.pt.trace.json (2.0 KB, 1,234 events, span 1.500 ms)",
        "  devices   none recorded (CPU-only trace)",
        "  steps     none",
        "",
        "Memory: no memory events in this trace: record them with profile_memory=True in the profiler's config "
        "(the embedded inference: --profile_memory)",
        "",
        "GPU: no kernels, copies or sets in this trace",
        "",
        "CPU ops: none recorded",
    ])


def section(r: RankSummary, first: str) -> list[str]:
    """The lines of ``r``'s report from the one starting with ``first`` up to the next empty line."""
    lines = lines_of(r)
    at = next(i for i, line in enumerate(lines) if line.startswith(first))
    end = next((i for i in range(at, len(lines)) if not lines[i]), len(lines))
    return lines[at:end]


def test_versions_read_their_names_with_spaces_and_are_left_out_when_none_are_known():
    assert lines_of(rank(versions={"cuda_runtime": "12.4", "torch": "2.13.0"}))[3] == \
        "  versions  cuda runtime 12.4, torch 2.13.0"
    assert not any(line.startswith("  versions") for line in lines_of(rank()))


def step(name: str, wall: float, *, start: float = 0.0, busy: float | None = None, pct: float | None = None,
         kernels: int | None = None, idle: IdleStats | None = None, lag: float | None = None) -> StepStats:
    return StepStats(name=name, number=None, start_us=start, wall_us=wall, cpu_us=wall, gpu_busy_us=busy,
                     gpu_busy_pct=pct, kernel_count=kernels, idle=idle, gpu_lag_us=lag)


def steps_line(n: int) -> str:
    (line,) = [x for x in lines_of(rank(steps=[step(f"ProfilerStep#{i}", 1000.0) for i in range(n)]))
               if x.startswith("  steps ")]
    return line


def test_up_to_six_steps_are_named_each_and_more_by_the_first_and_last_with_the_count():
    assert steps_line(1) == "  steps     ProfilerStep#0"
    assert steps_line(6) == ("  steps     ProfilerStep#0, ProfilerStep#1, ProfilerStep#2, ProfilerStep#3, "
                             "ProfilerStep#4, ProfilerStep#5")
    assert steps_line(7) == "  steps     ProfilerStep#0 ... ProfilerStep#6 (7 steps)"


def test_notes_and_skipped_events_follow_the_steps_line_one_a_line():
    skipped = [SkippedEvents(field="dur", problem="negative", count=3, example="aten::mm", dropped=True),
               SkippedEvents(field="args.bytes", problem="not a number", count=1, example="", dropped=False)]
    assert lines_of(rank(notes=["first note", "second note"], skipped_events=skipped))[3:8] == [
        "  steps     none",
        "  note      first note",
        "  note      second note",
        "  skipped   3 events whose dur is negative (e.g. aten::mm)",
        "  skipped   the args.bytes of 1 event: not a number",
    ]


def test_a_skipped_line_says_how_many_events_and_cuts_a_long_example_name_to_sixty_characters():
    assert skipped_line(SkippedEvents(field="ts", problem="not a number", count=1234, example="", dropped=True)) \
        == "1,234 events whose ts is not a number"
    assert skipped_line(SkippedEvents(field="ts", problem="missing", count=1, example="x" * 60, dropped=True)) \
        == "1 event whose ts is missing (e.g. " + "x" * 60 + ")"
    assert skipped_line(SkippedEvents(field="name", problem="empty", count=2, example="y" * 61, dropped=False)) \
        == "the name of 2 events: empty (e.g. " + "y" * 57 + "...)"


STEP_HEAD = ("  step                    wall ms  GPU busy ms  busy %  kernels  idle %  largest gap ms  "
             "GPU lag ms")


def idle(ratio: float = 0.25, **changes) -> IdleStats:
    fields = dict(window_us=40_000.0, idle_us=10_000.0, ratio=ratio, largest_gap_us=1500.0,
                  largest_gap_at_us=250.0, largest_gap_step="ProfilerStep#2", gaps_over_10us=7, flagged=False,
                  causes=None)
    fields.update(changes)
    return IdleStats(**fields)


GPU = GpuTotals(busy_us=8000.0, activity_us=9000.0, kernel_count=1234, kernel_us=8500.0, memcpy_us=400.0,
                memset_us=100.0, streams=2, devices=1)


def test_one_step_is_one_row_of_the_step_table_without_a_mean():
    one = step("ProfilerStep#1", 20_000.0, busy=15_000.0, pct=75.0, kernels=42, idle=idle(0.25), lag=300.0)
    assert section(rank(steps=[one], gpu=GPU), "  step  ") == [
        STEP_HEAD,
        "  ProfilerStep#1           20.000       15.000    75.0       42    25.0           1.500       0.300",
    ]


def test_a_step_without_gpu_figures_reads_dashes_and_a_long_name_is_cut_to_twenty_characters():
    assert section(rank(steps=[step("a_rather_long_step_name_indeed", 1234.0)], gpu=GPU), "  step  ") == [
        STEP_HEAD,
        "  a_rather_long_ste...      1.234            -       -        -       -               -           -",
    ]


def test_a_cpu_only_trace_has_no_gpu_columns():
    assert section(rank(steps=[step("a_rather_long_step_name_indeed", 1234.0)]), "  step  ") == [
        "  step                    wall ms",
        "  a_rather_long_ste...      1.234",
    ]


def test_several_steps_end_in_their_mean_and_the_slowest_step():
    steps = [step("ProfilerStep#1", 20_000.0, busy=15_000.0, pct=75.0, kernels=40, lag=300.0),
             step("ProfilerStep#2", 30_000.0, busy=None, pct=None, kernels=None, lag=None),
             step("ProfilerStep#3", 30_000.0, busy=9_000.0, pct=30.0, kernels=3, lag=500.0)]
    r = rank(steps=steps, gpu=GPU, idle=idle(0.125))
    assert section(r, "  step  ")[-2:] == [
        "  mean of 3                26.667        8.000    30.0       14    12.5               -       0.400",
        "  slowest step: ProfilerStep#2 (30.000 ms)",
    ]


def test_the_mean_of_a_cpu_trace_has_no_gpu_figures_and_no_idle_share_without_idle_figures():
    steps = [step("ProfilerStep#1", 2_000.0, lag=100.0), step("ProfilerStep#2", 4_000.0)]
    assert section(rank(steps=steps), "  step  ")[-2:] == [
        "  mean of 2                 3.000",
        "  slowest step: ProfilerStep#2 (4.000 ms)",
    ]
    on_gpu = [step("ProfilerStep#1", 2_000.0, busy=0.0, lag=100.0), step("ProfilerStep#2", 4_000.0, busy=0.0)]
    assert section(rank(steps=on_gpu, gpu=GPU), "  step  ")[-2:] == [
        "  mean of 2                 3.000        0.000     0.0        0       -               -       0.100",
        "  slowest step: ProfilerStep#2 (4.000 ms)",
    ]
    assert section(rank(steps=[step("s1", 5_000.0, busy=0.0), step("s2", 1_000.0, busy=0.0)], gpu=GPU),
                   "  step  ")[-2:] == [
        "  mean of 2                 3.000        0.000     0.0        0       -               -           -",
        "  slowest step: s1 (5.000 ms)",
    ]


def test_a_gpu_trace_whose_steps_ran_no_gpu_work_reads_zero_busy_and_kernels_in_the_mean():
    steps = [step("s1", 2_000.0, busy=0.0), step("s2", 2_000.0, busy=0.0)]
    assert section(rank(steps=steps, gpu=GPU), "  step  ")[-2] == \
        "  mean of 2                 2.000        0.000     0.0        0       -               -           -"


def test_a_gpu_trace_whose_steps_busy_is_not_known_reads_no_busy_in_the_mean():
    steps = [step("s1", 2_000.0, kernels=3), step("s2", 2_000.0, kernels=5)]  # the GPU clock off the CPU's
    assert section(rank(steps=steps, gpu=GPU), "  step  ")[-2] == \
        "  mean of 2                 2.000            -       -        4       -               -           -"


def test_the_kernel_mean_is_rounded_to_a_whole_kernel():
    steps = [step("s1", 2_000.0, busy=1.0, kernels=3), step("s2", 2_000.0, busy=1.0, kernels=4),
             step("s3", 2_000.0, busy=1.0, kernels=4)]
    assert section(rank(steps=steps, gpu=GPU), "  step  ")[-2] == \
        "  mean of 3                 2.000        0.001     0.1        4       -               -           -"


def test_twelve_steps_are_twelve_rows_and_more_the_first_ten_the_count_left_out_and_the_last_two():
    twelve = section(rank(steps=[step(f"s{i}", 1000.0) for i in range(12)]), "  step  ")
    assert [row.split()[0] for row in twelve[1:13]] == [f"s{i}" for i in range(12)]
    assert twelve[13].startswith("  mean of 12 ")
    rows = section(rank(steps=[step(f"s{i}", 1000.0) for i in range(15)]), "  step  ")
    assert [row.split()[0] for row in rows[1:11]] == [f"s{i}" for i in range(10)]
    assert rows[11:14] == [
        "  ... 3 more steps ...",
        "  s13                       1.000",
        "  s14                       1.000",
    ]
    assert rows[14].startswith("  mean of 15 ")


# --- GPU idle ---------------------------------------------------------------------------------------------------

CAUSES = IdleCauses(host_wait_us=6000.0, sync_us=3000.0, short_gaps_us=1000.0, other_us=0.0, unknown_us=0.0,
                    dominant="host wait",
                    syncs=[SyncWait(op="aten::item", call="cudaStreamSynchronize", idle_us=2000.0, gaps=3,
                                    line="model.py:41 main"),
                           SyncWait(op="", call="cudaDeviceSynchronize", idle_us=600.0, gaps=1),
                           SyncWait(op="aten::nonzero", call="cudaMemcpy", idle_us=300.0, gaps=2),
                           SyncWait(op="aten::item", call="cudaEventSynchronize", idle_us=100.0, gaps=1)])


def test_idle_under_the_flag_reads_its_share_the_largest_gap_and_ok():
    assert section(rank(idle=idle()), "GPU idle") == [
        "GPU idle inside steps: 10.000 of 40.000 ms (25.0%) - ok (flagged at >= 20%)",
        "  largest gap 1.500 ms at +0.250 ms into ProfilerStep#2; 7 gaps >= 10 us",
    ]


def test_flagged_idle_reads_its_causes_the_first_three_syncs_and_the_advice_for_the_dominant_cause():
    assert section(rank(idle=idle(flagged=True, causes=CAUSES)), "GPU idle") == [
        "GPU idle inside steps: 10.000 of 40.000 ms (25.0%) - !! HIGH GPU IDLE (>= 20% of step time)",
        "  largest gap 1.500 ms at +0.250 ms into ProfilerStep#2; 7 gaps >= 10 us",
        "  by cause: host wait 6.000 ms (60%), sync 3.000 ms (30%), short gaps 1.000 ms (10%)",
        "    sync  2.000 ms in 3 gaps: aten::item -> cudaStreamSynchronize at model.py:41 main",
        "    sync  0.600 ms in 1 gap: cudaDeviceSynchronize",
        "    sync  0.300 ms in 2 gaps: aten::nonzero -> cudaMemcpy",
        "  the GPU waits for the host to launch work (60% of idle): CPU time between launches (Python, CPU ops, "
        "data); see the CPU ops at the largest gap; CUDA graphs or torch.compile cut per-launch host cost",
    ]


def test_causes_of_no_idle_time_and_flagged_idle_without_a_dominant_cause_add_no_lines():
    none = IdleCauses(host_wait_us=0.0, sync_us=0.0, short_gaps_us=0.0, other_us=0.0, unknown_us=0.0, dominant="")
    assert len(section(rank(idle=idle(ratio=0.0, idle_us=0.0, causes=none, flagged=True)), "GPU idle")) == 2
    assert section(rank(idle=idle(flagged=True, causes=None)), "GPU idle")[2:] == []


def test_the_idle_section_follows_the_step_table_after_an_empty_line():
    lines = lines_of(rank(steps=[step("s1", 1000.0)], idle=idle(), gpu=GPU))
    at = lines.index("GPU idle inside steps: 10.000 of 40.000 ms (25.0%) - ok (flagged at >= 20%)")
    assert lines[at - 2:at] == [
        "  s1                        1.000            -       -        -       -               -           -", ""]


# --- memory -------------------------------------------------------------------------------------------------------

MEM_HEAD = "  step                 allocated at start     at end     growth  peak alloc peak reserved"
RULE = "a step is flagged when it keeps 1.0 MB or more"


def step_memory(name: str, growth: int, grew: bool, reserved: int | None = 4_000_000) -> StepMemory:
    return StepMemory(name=name, number=None, start_us=1000.0, end_us=5000.0, allocated_start_bytes=1_000_000,
                      allocated_end_bytes=1_000_000 + growth, growth_bytes=growth, peak_allocated_bytes=3_000_000,
                      peak_reserved_bytes=reserved, grew=grew)


def device_memory(**changes) -> DeviceMemory:
    fields = dict(device="cuda:0", device_type=1, device_id=0, events=10, allocations=1234,
                  allocated_bytes=5_000_000, peak_allocated_bytes=3_000_000, peak_allocated_at_us=2500.0,
                  peak_step="ProfilerStep#1", peak_reserved_bytes=4_000_000, leak_threshold_bytes=1_000_000,
                  leak=False, steps=[step_memory("ProfilerStep#1", 1_500_000, True)], top_ops=[],
                  unattributed_bytes=0, out_of_memory_events=0,
                  curve=MemoryCurve(ts_us=[], allocated_bytes=[], reserved_bytes=[], peak_index=0))
    fields.update(changes)
    return DeviceMemory(**fields)


def memory_lines(*devices: DeviceMemory, snapshots: list[SnapshotSummary] | None = None) -> list[str]:
    lines = lines_of(rank(memory=MemorySummary(devices=list(devices), snapshots=snapshots or [])))
    return lines[lines.index("  steps     none") + 1:lines.index("GPU: no kernels, copies or sets in this trace") - 1]


def test_a_device_that_grew_in_one_step_reads_its_peak_where_it_was_and_a_note_to_capture_more_steps():
    assert memory_lines(device_memory()) == [
        "",
        "Memory cuda:0: peak allocated 3.0 MB in ProfilerStep#1 (+1.500 ms), peak reserved 4.0 MB; 1,234 "
        "allocations, 5.0 MB in all",
        MEM_HEAD,
        "  ProfilerStep#1                   1.0 MB     2.5 MB    +1.5 MB      3.0 MB        4.0 MB  grew",
        "  note: ProfilerStep#1 kept +1.5 MB: a leak if it repeats; capture 2 or more steps to tell",
        f"     ({RULE})",
    ]


def test_a_peak_outside_the_steps_and_without_reserved_totals_reads_the_peak_alone():
    steps = [step_memory("s1", 0, False, reserved=None), step_memory("s2", -2_000, False, reserved=None)]
    assert memory_lines(device_memory(device="cpu", peak_step=None, peak_reserved_bytes=None, steps=steps)) == [
        "",
        "Memory cpu: peak allocated 3.0 MB; 1,234 allocations, 5.0 MB in all",
        MEM_HEAD,
        "  s1                               1.0 MB     1.0 MB        0 B      3.0 MB             -",
        "  s2                               1.0 MB   998.0 KB    -2.0 KB      3.0 MB             -",
        f"  no step grew ({RULE})",
    ]


def test_a_peak_step_not_in_the_table_says_no_step():
    assert memory_lines(device_memory(peak_step="ProfilerStep#9"))[1] == \
        "Memory cuda:0: peak allocated 3.0 MB, peak reserved 4.0 MB; 1,234 allocations, 5.0 MB in all"


def test_a_leak_reads_how_many_steps_grew_and_their_mean_growth_in_whole_bytes():
    steps = [step_memory("s1", 501, True), step_memory("s2", 100, False), step_memory("s3", 500, True)]
    assert memory_lines(device_memory(leak=True, steps=steps, peak_step=None))[-2:] == [
        "  !! LEAK: allocated memory grows in 2 of 3 steps (+500 B per step on average)",
        f"     something keeps tensors across steps ({RULE})",
    ]


def test_out_of_memory_events_top_ops_and_memory_outside_any_op_are_reported():
    ops = [MemoryOp(name="aten::empty", allocations=12, self_bytes=2_000_000, total_bytes=2_500_000,
                    live_at_peak_bytes=1_000_000),
           MemoryOp(name="aten::cat", allocations=1, self_bytes=500, total_bytes=500, live_at_peak_bytes=0)]
    lines = memory_lines(device_memory(out_of_memory_events=2, top_ops=ops, unattributed_bytes=700))
    assert lines[2] == "  !! 2 out-of-memory event(s) on cuda:0"
    assert lines[-5:] == [
        "  Top 2 ops by bytes allocated (self: in the op itself; live: not freed at the peak)",
        "        self  with children  live at peak  allocs  op",
        "      2.0 MB         2.5 MB        1.0 MB      12  aten::empty",
        "       500 B          500 B           0 B       1  aten::cat",
        "  700 B allocated outside any CPU op",
    ]


def test_each_device_has_its_own_section():
    lines = memory_lines(device_memory(), device_memory(device="cuda:1", peak_step=None))
    assert [line for line in lines if line.startswith("Memory ")] == [
        "Memory cuda:0: peak allocated 3.0 MB in ProfilerStep#1 (+1.500 ms), peak reserved 4.0 MB; 1,234 "
        "allocations, 5.0 MB in all",
        "Memory cuda:1: peak allocated 3.0 MB, peak reserved 4.0 MB; 1,234 allocations, 5.0 MB in all"]


def test_the_memory_table_shows_at_most_twelve_steps():
    steps = [step_memory(f"s{i}", 0, False) for i in range(13)]
    lines = memory_lines(device_memory(steps=steps, peak_step=None))
    assert lines[13] == "  ... 1 more steps ..."
    assert [line.split()[0] for line in lines[3:13] + lines[14:16]] == [f"s{i}" for i in (*range(10), 11, 12)]


def site(location: str, nbytes: int, blocks: int) -> SnapshotSite:
    return SnapshotSite(location=location, function="forward", filename="/src/" + location, line=40, bytes=nbytes,
                        blocks=blocks)


SITES = [site("model.py:40", 2_000_000, 3), site("model.py:50", 300_000, 1), site("attn.py:7", 2_000, 12),
         site("mlp.py:9", 500, 1)]


def snapshot(**changes) -> SnapshotSummary:
    fields = dict(file="/runs/a/rank0_h.memory_snapshot.pickle", device=0, source="device_traces",
                  peak_bytes=3_000_000, peak_at_us=None, reserved_bytes=0, sites=SITES, other_bytes=500_000)
    fields.update(changes)
    return SnapshotSummary(**fields)


def test_a_snapshot_reads_its_peak_the_three_largest_holders_what_is_elsewhere_and_every_site():
    assert memory_lines(snapshots=[snapshot()]) == [
        "",
        "Memory snapshot cuda:0 (from the allocator's history; rank0_h.memory_snapshot.pickle): peak 3.0 MB: "
        "2.0 MB at model.py:40 forward, 300.0 KB at model.py:50 forward, 2.0 KB at attn.py:7 forward, "
        "500.0 KB elsewhere",
        "       bytes  blocks  where (innermost frame in your code)",
        "      2.0 MB       3  model.py:40 forward",
        "    300.0 KB       1  model.py:50 forward",
        "      2.0 KB      12  attn.py:7 forward",
        "       500 B       1  mlp.py:9 forward",
    ]


def test_a_snapshot_without_history_says_so_and_one_with_no_sites_or_nothing_elsewhere_reads_cleanly():
    assert memory_lines(snapshots=[snapshot(device=None, source="segments", sites=[])])[1] == \
        ("Memory snapshot cuda (no history recorded: the blocks live when the snapshot was taken; "
         "rank0_h.memory_snapshot.pickle): peak 3.0 MB: 500.0 KB elsewhere")
    assert memory_lines(snapshots=[snapshot(sites=SITES[:1], other_bytes=0)])[1] == \
        ("Memory snapshot cuda:0 (from the allocator's history; rank0_h.memory_snapshot.pickle): peak 3.0 MB: "
         "2.0 MB at model.py:40 forward")


def test_snapshot_device_and_holders():
    assert snapshot_device(snapshot(device=3)) == "cuda:3" and snapshot_device(snapshot(device=0)) == "cuda:0"
    assert snapshot_device(snapshot(device=None)) == "cuda"
    assert snapshot_holders(snapshot(), 1) == "2.0 MB at model.py:40 forward"
    assert snapshot_holders(snapshot(sites=[]), 3) == ""


# --- GPU kernels, memory operations, CPU ops --------------------------------------------------------------------

TOTALS = "GPU activity 9.000 ms, busy 8.000 ms, 1,234 kernels on 2 stream(s)"


def kernel(short: str, total: float, calls: int, mean: float, pct: float) -> KernelStat:
    return KernelStat(name="void " + short + "<128>()", short_name=short, calls=calls, total_us=total, mean_us=mean,
                      pct_of_gpu_time=pct)


def test_the_top_kernels_read_their_share_total_calls_mean_and_whole_short_name():
    kernels = [kernel("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1", 6000.0,
                      10, 600.04, 66.66),
               kernel("elementwise_kernel", 12.5, 1234567, 0.05, 0.14)]
    assert section(rank(gpu=GPU, top_kernels=kernels), "Top 2 GPU") == [
        f"Top 2 GPU kernels by total time ({TOTALS})",
        "   % GPU   total ms   calls   mean us  kernel",
        "    66.7      6.000      10     600.0  sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_"
        "warpgroupsize1x1x1",
        "     0.1      0.013 1234567       0.1  elementwise_kernel",
    ]


def test_a_gpu_trace_without_kernels_or_memory_operations_says_none_with_its_totals():
    lines = lines_of(rank(gpu=GPU))
    at = lines.index(f"GPU kernels: none ({TOTALS})")
    assert lines[at - 1:at + 3] == ["", f"GPU kernels: none ({TOTALS})", "", "Memory copies and sets: none"]


def test_memory_operations_read_their_kind_cut_name_calls_time_and_bytes_when_known():
    ops = [MemOpStat(kind="memcpy", name="Memcpy HtoD (Pageable -> Device)", calls=4, total_us=1500.0, bytes=4096),
           MemOpStat(kind="memset", name="Memset (Device) with a name much longer than forty chars", calls=1,
                     total_us=2.0, bytes=None)]
    assert section(rank(gpu=GPU, memory_ops=ops), "Memory copies") == [
        "Memory copies and sets",
        "  memcpy  Memcpy HtoD (Pageable -> Device)               4 calls      1.500 ms  4.1 KB",
        "  memset  Memset (Device) with a name much long...       1 calls      0.002 ms",
    ]


def test_the_top_cpu_ops_read_their_self_share_self_and_total_time_calls_and_name():
    ops = [CpuOpStat(name="aten::mm", calls=5, self_us=3000.0, total_us=4500.0, mean_self_us=600.0,
                     pct_of_cpu_self=75.0),
           CpuOpStat(name="aten::add_", calls=12, self_us=1000.0, total_us=1000.0, mean_self_us=83.3,
                     pct_of_cpu_self=25.04)]
    assert lines_of(rank(top_cpu_ops=ops, cpu_self_total_us=4000.0))[-5:] == [
        "",
        "Top 2 CPU ops by self time (all CPU ops: 4.000 ms self)",
        "  % self    self ms   total ms   calls  op",
        "    75.0      3.000      4.500       5  aten::mm",
        "    25.0      1.000      1.000      12  aten::add_",
    ]


def test_the_frame_tree_is_shown_only_when_asked_for():
    r = rank()
    assert "Frame tree: no Python frames in this trace (capture with with_stack=True)" not in lines_of(r)
    lines = render_rank(r, frame_tree=True).split("\n")
    at = lines.index("Frame tree: no Python frames in this trace (capture with with_stack=True)")
    assert lines[at - 1] == "" and lines[at + 2] == "GPU: no kernels, copies or sets in this trace"


def test_the_frame_tree_reads_the_ranks_tables_gpu_time_on_a_gpu_trace():
    tree = FrameTree(names=["", "model.py(21): forward"], kinds=["user", "user"], parent=[-1, 0], calls=[0, 2],
                     gpu_us=[0.0, 3000.0], kernel_us=[0.0, 3000.0], cpu_us=[0.0, 20.0], alloc_bytes=[0.0, 0.0],
                     ops={}, step_gpu_us={}, step_cpu_us={}, steps=1, memory_device="")
    tables = RankTables(kernels=[], cpu_ops=[], launches=[], frames=tree)
    gpu_tree = render_rank(rank(gpu=GPU, tables=tables), frame_tree=True)
    cpu_tree = render_rank(rank(tables=tables), frame_tree=True)
    assert "Frame tree (GPU ms (inclusive, self), CPU ms per step" in gpu_tree
    assert "Frame tree (CPU op ms (inclusive, self) per step" in cpu_tree
    assert "     3.000    3.000    0.020  forward (model.py:21)" in gpu_tree.split("\n")
    assert "     0.020    0.020  forward (model.py:21)" in cpu_tree.split("\n")


# --- a run of several ranks -------------------------------------------------------------------------------------

def row(rank_: int | None, worker: str, busy: float | None = 15_000.0) -> RankRow:
    return RankRow(rank=rank_, worker=worker, steps=3, step_wall_us=20_000.0, gpu_busy_us=busy,
                   gpu_busy_pct=75.0 if busy is not None else None, gpu_comm_us=1250.0 if busy is not None else None)


RUN_HEAD = "  rank  worker                   steps    step ms  GPU busy ms  busy %   comm ms"


def run(ranks: list[RankSummary], **changes) -> RunSummary:
    fields = dict(label="run-1", path="/runs/a", ranks=ranks, comparison=None, straggler=None)
    fields.update(changes)
    return RunSummary(**fields)


def test_a_run_of_one_rank_is_that_ranks_report():
    assert render_run(run([rank()])) == render_rank(rank())
    assert render_runs([run([rank()])]) == render_rank(rank()) + "\n"


def test_runs_are_an_empty_line_apart_and_end_in_a_newline():
    one, two = run([rank()]), run([rank(worker="w9")])
    assert render_runs([one, two]) == render_rank(rank()) + "\n\n" + render_rank(rank(worker="w9")) + "\n"


def test_a_run_of_ranks_compares_them_row_by_row_then_reports_each():
    r0, r1 = rank(rank=0, worker="w0"), rank(rank=1, worker="w1")
    out = render_run(run([r0, r1], comparison=[row(0, "w0"), row(1, "w1", busy=None)]))
    assert out.split("\n")[:5] == [
        "Run run-1: 2 ranks (/runs/a)",
        "",
        RUN_HEAD,
        "     0  w0                           3     20.000       15.000    75.0     1.250",
        "     1  w1                           3     20.000            -       -         -",
    ]
    assert out.endswith("\n".join(["", "=" * 100, render_rank(r0), "", "=" * 100, render_rank(r1)]))
    assert out.count("=" * 100) == 2


def test_files_without_ranks_or_with_one_rank_twice_are_trace_files_and_a_long_worker_is_cut():
    long = "worker-with-a-very-long-host-name"
    out = render_run(run([rank(), rank(worker=long)], comparison=[row(None, long)]))
    assert out.split("\n")[0] == "Run run-1: 2 trace files (workers or spans) (/runs/a)"
    assert out.split("\n")[3] == "     -  worker-with-a-very-lo...     3     20.000       15.000    75.0     1.250"
    assert render_run(run([rank(rank=0), rank(rank=0)])).split("\n")[0] == \
        "Run run-1: 2 trace files (workers or spans) (/runs/a)"
    assert render_run(run([rank(rank=0), rank(rank=None)])).split("\n")[0] == \
        "Run run-1: 2 trace files (workers or spans) (/runs/a)"


def test_spans_say_so_with_when_each_started_and_no_straggler_and_each_report_says_which_span_it_is():
    s1, s2 = rank(worker="worker0", trace_start_us=1e9), rank(worker="worker0", trace_start_us=1e9 + 470_400_000)
    out = render_run(run([s1, s2], comparison=[row(None, "worker0"), row(None, "worker0", busy=None)], spans=True))
    assert out.split("\n")[:6] == [
        "Run run-1: 2 spans of worker0 (/runs/a)",
        "  spans: captures at different times (none overlaps another, no rank recorded), side by side; not ranks, "
        "no straggler",
        "",
        "  span  worker                        started steps    step ms  GPU busy ms  busy %   comm ms",
        "     1  worker0                        +0.0 s     3     20.000       15.000    75.0     1.250",
        "     2  worker0                   +7 min 50 s     3     20.000            -       -         -",
    ]
    assert "straggler:" not in out
    assert out.endswith("\n".join(["", "=" * 100, render_rank(s1, span="span 1 of 2"), "", "=" * 100,
                                   render_rank(s2, span="span 2 of 2")]))
    assert render_rank(s2, span="span 2 of 2").split("\n")[0] == "Trace summary: worker0, span 2 of 2"
    three = [rank(worker=w, rank=0, trace_start_us=t) for w, t in (("a", 0.0), ("b", 59_960_000.0), ("a", 7.3e9))]
    out = render_run(run(three, comparison=[row(0, "a"), row(0, "b"), row(0, "a")], spans=True)).split("\n")
    assert out[0] == "Run run-1: 3 spans of a, b (/runs/a)"
    assert "no distinct ranks recorded" in out[1]  # rank 0 three times
    assert [line[:45] for line in out[4:7]] == ["     1  a                              +0.0 s",
                                                "     2  b                             +60.0 s",
                                                "     3  a                          +2 h 1 min"]


@pytest.mark.parametrize("us, text", [(0.0, "0.0 s"), (59_949_999.0, "59.9 s"), (59_950_000.0, "60.0 s"),
                                      (60_000_000.0, "1 min 0 s"), (470_400_000.0, "7 min 50 s"),
                                      (3_599_400_000.0, "59 min 59 s"), (7_260_000_000.0, "2 h 1 min")])
def test_a_time_between_captures_reads_in_seconds_then_minutes_then_hours(us, text):
    assert format_duration(us) == text


def test_the_top_cpu_ops_of_a_gpu_trace_show_the_cuda_api_time_each_op_spent_beside_its_self_time():
    ops = [CpuOpStat(name="aten::mm", calls=5, self_us=3000.0, total_us=4500.0, mean_self_us=600.0,
                     pct_of_cpu_self=75.0, self_with_runtime_us=3100.0),
           CpuOpStat(name="aten::empty", calls=12, self_us=1000.0, total_us=1000.0, mean_self_us=83.3,
                     pct_of_cpu_self=25.0, self_with_runtime_us=1000.0)]
    assert lines_of(rank(top_cpu_ops=ops, cpu_self_total_us=4000.0))[-5:] == [
        "",
        "Top 2 CPU ops by self time (all CPU ops: 4.000 ms self; as TensorBoard's, without the CUDA API calls the op "
        "made itself)",
        "  % self    self ms CUDA API ms   total ms   calls  op",
        "    75.0      3.000       0.100      4.500       5  aten::mm",
        "    25.0      1.000       0.000      1.000      12  aten::empty",
    ]


def test_damaged_files_are_listed_under_the_title_even_beside_a_single_rank():
    damaged = [DamagedFile(file="/runs/a/w1.pt.trace.json", problem="truncated")]
    assert render_run(run([rank(rank=0)], damaged_files=damaged)) == "\n".join([
        "Run run-1: 1 rank, 1 more damaged (/runs/a)",
        "  damaged   /runs/a/w1.pt.trace.json: truncated (left out of this report)",
        "",
        render_rank(rank(rank=0)),
    ])
    out = render_run(run([rank(rank=0), rank(rank=1)], damaged_files=damaged * 2)).split("\n")
    assert out[:4] == ["Run run-1: 2 ranks, 2 more damaged (/runs/a)",
                       "  damaged   /runs/a/w1.pt.trace.json: truncated (left out of this report)",
                       "  damaged   /runs/a/w1.pt.trace.json: truncated (left out of this report)", ""]
    assert out[4] == RUN_HEAD
    assert render_run(run([rank(rank=None)], damaged_files=damaged)).split("\n")[0] == \
        "Run run-1: 1 trace file (a worker or span), 1 more damaged (/runs/a)"


def straggler_line(s: Straggler) -> str:
    out = render_run(run([rank(rank=0), rank(rank=1)], straggler=s)).split("\n")
    return out[3]


def test_a_straggler_by_step_time_reads_how_much_slower_than_the_fastest_rank():
    assert straggler_line(Straggler(rank=1, worker="w1", criterion="step_wall", step_wall_us=30_000.0,
                                    slower_than_fastest_pct=50.0, spread_pct=50.0)) == \
        "  straggler: rank 1 (w1): step 30.000 ms, +50.0% vs the fastest rank's 20.000 ms"
    assert straggler_line(Straggler(rank=0, worker="w0", criterion="step_wall", step_wall_us=40_000.0,
                                    slower_than_fastest_pct=100.0, spread_pct=100.0)) == \
        "  straggler: rank 0 (w0): step 40.000 ms, 2.0x the fastest rank's 20.000 ms"
    assert straggler_line(Straggler(rank=None, worker="w1", criterion="step_wall", step_wall_us=35_000.0,
                                    slower_than_fastest_pct=250.0, spread_pct=250.0)) == \
        "  straggler: w1: step 35.000 ms, 3.5x the fastest rank's 10.000 ms"


def test_a_straggler_in_lockstep_reads_its_extra_gpu_compute():
    assert straggler_line(Straggler(rank=1, worker="w1", criterion="gpu_compute", step_wall_us=20_000.0,
                                    slower_than_fastest_pct=12.5, spread_pct=1.0)) == \
        ("  straggler: rank 1 (w1): step times are within 5% (ranks wait for each other in collectives); it has the "
         "most GPU compute per step, +12.5% vs the least")


# --- numbers --------------------------------------------------------------------------------------------------------

def test_times_are_milliseconds_to_three_decimals_and_a_missing_one_a_dash_or_what_is_given():
    assert format_ms(1234.0) == "1.234" and format_ms(0.0) == "0.000" and format_ms(-500.0) == "-0.500"
    assert format_ms(None) == "-" and format_ms(None, "n/a") == "n/a"


def test_percentages_have_one_decimal_and_a_missing_one_a_dash_or_what_is_given():
    assert format_pct(12.34) == "12.3" and format_pct(0.0) == "0.0" and format_pct(100.0) == "100.0"
    assert format_pct(None) == "-" and format_pct(None, "") == ""


def test_byte_sizes_use_decimal_units_up_to_gigabytes():
    assert [format_bytes(n) for n in (0, 999, 1000, 1500, 999_949, 1_000_000, 2_500_000_000, 10**12, 5 * 10**12)] \
        == ["0 B", "999 B", "1.0 KB", "1.5 KB", "999.9 KB", "1.0 MB", "2.5 GB", "1000.0 GB", "5000.0 GB"]
    assert format_bytes(None) == "-" and format_bytes(None, "?") == "?"


def test_a_change_in_bytes_carries_its_sign():
    assert format_signed_bytes(65_500) == "+65.5 KB" and format_signed_bytes(-5_000_000) == "-5.0 MB"
    assert format_signed_bytes(0) == "0 B" and format_signed_bytes(1) == "+1 B" and format_signed_bytes(-1) == "-1 B"


# --- the whole report: its sections in order, each after an empty line -----------------------------------------

TREE = FrameTree(names=["", "model.py(21): forward"], kinds=["user", "user"], parent=[-1, 0], calls=[0, 2],
                 gpu_us=[0.0, 3000.0], kernel_us=[0.0, 3000.0], cpu_us=[0.0, 20.0], alloc_bytes=[0.0, 0.0], ops={},
                 step_gpu_us={}, step_cpu_us={}, steps=1, memory_device="")
EFFICIENCY = Efficiency(shapes_recorded=False, hint="", peak=None, target_pct=80.0, steps=1, step_wall_us=20_000.0,
                        gpu=True, modeled_us=0.0, unmodeled_us=0.0, matrix_flops=0.0, step_tflops_per_s=None,
                        mfu_pct=None, headline="no shapes", classes=[], ops=[])
FRAMES = Frames(frame_events=2, folded=True, steps=1, gpu=True, gpu_us=3000.0, cpu_us=20.0, alloc_bytes=0.0,
                memory_device="", unattributed_gpu_us=0.0, unattributed_cpu_us=0.0, frames=[], modules=[])


def full_rank() -> RankSummary:
    return rank(rank=0, world_size=2, gpu=GPU, steps=[step("ProfilerStep#1", 20_000.0, busy=8000.0)], idle=idle(),
                memory=MemorySummary(devices=[device_memory(leak=True)], snapshots=[snapshot()]),
                efficiency=EFFICIENCY, frames=FRAMES, tables=RankTables(kernels=[], cpu_ops=[], launches=[],
                                                                          frames=TREE),
                top_kernels=[kernel("gemm", 6000.0, 10, 600.0, 66.7)],
                memory_ops=[MemOpStat(kind="memcpy", name="Memcpy HtoD", calls=4, total_us=1500.0, bytes=None)],
                top_cpu_ops=[CpuOpStat(name="aten::mm", calls=5, self_us=3000.0, total_us=4500.0, mean_self_us=600.0,
                                       pct_of_cpu_self=75.0)], cpu_self_total_us=4000.0)


HEADS = ["  step  ", "GPU idle inside steps", "Memory cuda:0", "Memory snapshot", "How far from the limit",
         "Where in your code", "Frame tree (GPU ms", "Top 1 GPU kernels", "Memory copies and sets",
         "Top 1 CPU ops"]


def test_a_full_report_has_every_section_in_order_each_after_an_empty_line():
    lines = render_rank(full_rank(), frame_tree=True).split("\n")
    assert lines[:3] == ["Trace summary: w0 (rank 0 of 2)",
                         "  file      /runs/a/w0.pt.trace.json (2.0 KB, 1,234 events, span 1.500 ms)",
                         "  devices   not recorded in the trace (GPU activity seen on 1 device, 2 streams)"]
    at = [next(i for i, line in enumerate(lines) if line.startswith(head)) for head in HEADS]
    assert at == sorted(at)
    assert [lines[i - 1] for i in at] == [""] * len(HEADS)
    assert lines[at[2] + 3:at[2] + 5] == [
        "  !! LEAK: allocated memory grows in 1 of 1 steps (+1.5 MB per step on average)",
        f"     something keeps tensors across steps ({RULE})"]
    assert lines[at[-1] - 3:at[-1]] == [
        "Memory copies and sets",
        "  memcpy  Memcpy HtoD                                    4 calls      1.500 ms", ""]


def test_the_frame_tree_is_passed_on_for_every_rank_of_a_run():
    tree_line = "Frame tree: no Python frames in this trace (capture with with_stack=True)"
    for ranks, damaged in (([rank()], []), ([rank(rank=0)], [DamagedFile(file="x", problem="y")]),
                           ([rank(rank=0), rank(rank=1)], [])):
        one = run(ranks, damaged_files=damaged)
        assert render_runs([one], frame_tree=True).split("\n").count(tree_line) == len(ranks)
        assert render_run(one, frame_tree=True).split("\n").count(tree_line) == len(ranks)
        assert tree_line not in render_runs([one]).split("\n")


def test_a_step_name_longer_than_twenty_characters_is_cut_in_the_memory_table():
    lines = memory_lines(device_memory(steps=[step_memory("a_step_named_21_chars", 0, False)], peak_step=None))
    assert lines[3] == "  a_step_named_21_c...             1.0 MB     1.0 MB        0 B      3.0 MB        4.0 MB"


def test_a_snapshot_follows_the_devices_memory_section():
    lines = memory_lines(device_memory(), snapshots=[snapshot()])
    assert lines[1].startswith("Memory cuda:0: ") and lines[7].startswith("Memory snapshot cuda:0 ")


def test_idle_causes_under_a_microsecond_are_still_split():
    causes = IdleCauses(host_wait_us=0.6, sync_us=0.2, short_gaps_us=0.0, other_us=0.0, unknown_us=0.0,
                        dominant="host wait")
    assert section(rank(idle=idle(idle_us=0.8, causes=causes)), "GPU idle")[2] == \
        "  by cause: host wait 0.001 ms (75%), sync 0.000 ms (25%)"
