"""One trace file -> its summary (`lightx2v.trace_summary.analyze`), fast: small hand-written traces, each read
once, and the figures the front itself puts in the summary (the file, the worker, its rank, devices, versions,
events, span, notes, skipped events, communication time, what ``top``, ``peak``, ``with_efficiency``,
``with_frames`` and ``folded`` change), each expected value worked out here by hand."""

from __future__ import annotations

import os
from pathlib import Path

from lightx2v.trace_summary import memory
from lightx2v.trace_summary.analyze import analyze_trace, summarize_collected
from lightx2v.trace_summary.collect import Collected
from lightx2v.trace_summary.flops import MODELED
from lightx2v.trace_summary.frames import SKIP_HEAD_FOLDED, keeps
from lightx2v.trace_summary.model import Device, PeakSpec, SkippedEvents
from lightx2v.trace_summary.reader import TraceStream

from helpers.summary import CPU_PID, GPU_PID, STREAM, T0, cpu_op, kernel, step_events, trace_doc, write_json

PEAK = PeakSpec(device="", gpu="--peak", tflops={"bf16": 100.0, "fp32": 10.0}, tbps=1.0, source="given")


def frame(name: str, lo: float, hi: float) -> dict:
    return {"ph": "X", "cat": "python_function", "name": name, "pid": CPU_PID, "tid": CPU_PID, "ts": T0 + lo,
            "dur": hi - lo, "args": {}}


def flow(ph: str, at: float) -> dict:
    return {"ph": ph, "cat": "ac2g", "id": 1, "name": "ac2g", "pid": CPU_PID, "tid": CPU_PID, "ts": T0 + at}


def memory_event(at: float, nbytes: int, total: int) -> dict:
    return {"ph": "i", "cat": "cpu_instant_event", "name": "[memory]", "pid": CPU_PID, "tid": CPU_PID,
            "ts": T0 + at, "args": {"Addr": 1, "Bytes": nbytes, "Total Allocated": total, "Total Reserved": 2 * total,
                                    "Device Type": 1, "Device Id": 0}}


def two_steps() -> list[dict]:
    """Two steps of 1000 us on a GPU: GEMMs, an NCCL all-reduce half inside the second step, two CPU ops."""
    return [*step_events("ProfilerStep#1", 0, 1000), *step_events("ProfilerStep#2", 1000, 2000),
            cpu_op("aten::mm", 100, 400), cpu_op("aten::mm", 1100, 1300), cpu_op("aten::add", 1400, 1450),
            kernel("gemm_a", 200, 700), kernel("gemm_a", 1200, 1500), kernel("gemm_b", 1500, 1600),
            kernel("ncclDevKernel_AllReduce_Sum", 1800, 2200, stream=STREAM + 1)]


def write(tmp_path: Path, events: list[dict], name: str = "w0.pt.trace.json", gz: bool = False,
          **metadata) -> str:
    return str(write_json(tmp_path / name, trace_doc(events, **metadata), gz=gz))


def test_a_gpu_trace_reads_its_file_worker_rank_devices_versions_events_and_span(tmp_path, monkeypatch):
    path = write(tmp_path, two_steps(), name="rank3_node.123.pt.trace.json.gz", gz=True,
                 distributedInfo={"rank": 3, "world_size": 8}, cuda_driver_version=12040)
    monkeypatch.chdir(tmp_path)
    r = analyze_trace("rank3_node.123.pt.trace.json.gz")
    assert r.file == os.path.join(str(tmp_path), "rank3_node.123.pt.trace.json.gz")
    assert r.size_bytes == Path(path).stat().st_size and r.compressed is True
    assert (r.worker, r.rank, r.world_size) == ("rank3_node", 3, 8)
    assert r.devices == [Device(id=0, name="NVIDIA H200", memory_bytes=150109880320, compute_capability="9.0")]
    assert r.versions == {"cuda_runtime": "12.8", "cuda_driver": "12.4"}
    assert r.event_count == 9
    assert r.trace_span_us == 2200.0
    assert [s.name for s in r.steps] == ["ProfilerStep#1", "ProfilerStep#2"]
    assert r.notes == [] and r.skipped_events == [] and r.memory is None and r.frames is None


def test_a_plain_trace_reads_uncompressed_and_its_rank_from_the_file_name(tmp_path):
    r = analyze_trace(write(tmp_path, two_steps(), name="rank5_host.pt.trace.json"))
    assert r.compressed is False and (r.rank, r.world_size) == (5, None)
    assert r.file == str(tmp_path / "rank5_host.pt.trace.json") and r.worker == "rank5_host"


def test_communication_time_is_the_nccl_kernels_time_inside_the_steps(tmp_path):
    r = analyze_trace(write(tmp_path, two_steps()))
    assert r.gpu_comm_us == 200.0
    assert r.gpu is not None and r.gpu.kernel_count == 4 and r.launch_links is not None
    assert r.launch_links.gpu_events == 4


def test_communication_time_adds_up_over_the_steps(tmp_path):
    events = [*step_events("ProfilerStep#1", 0, 1000), *step_events("ProfilerStep#2", 1000, 2000),
              kernel("nccl_a", 100, 400), kernel("nccl_b", 1100, 1150)]
    assert analyze_trace(write(tmp_path, events)).gpu_comm_us == 350.0


def test_top_keeps_the_first_kernels_and_cpu_ops_while_the_tables_keep_every_one(tmp_path):
    r = analyze_trace(write(tmp_path, two_steps()), top=1)
    assert [k.short_name for k in r.top_kernels] == ["gemm_a"]
    assert [op.name for op in r.top_cpu_ops] == ["aten::mm"]
    assert r.tables is not None
    assert [k.short_name for k in r.tables.kernels] == ["gemm_a", "ncclDevKernel_AllReduce_Sum", "gemm_b"]
    assert [op.name for op in r.tables.cpu_ops] == ["aten::mm", "aten::add"]
    assert r.cpu_self_total_us == 550.0
    default = analyze_trace(write(tmp_path, two_steps()))
    assert len(default.top_kernels) == 3 and len(default.top_cpu_ops) == 2


def test_the_tables_hold_the_launches_series_and_no_frames_without_python_frames(tmp_path):
    r = analyze_trace(write(tmp_path, two_steps()))
    assert r.tables is not None and r.tables.series is not None
    assert r.tables.series.steps == ["ProfilerStep#1", "ProfilerStep#2"]
    assert r.tables.series.wall_us == [1000.0, 1000.0]
    assert r.tables.frames is None


def test_a_cpu_only_trace_without_steps_says_both_and_has_no_gpu_figures(tmp_path):
    r = analyze_trace(write(tmp_path, [cpu_op("aten::mm", 0, 100), cpu_op("aten::add", 200, 250)],
                            deviceProperties=[]))
    assert r.notes == [
        "no GPU activity in this trace (CPU-only capture, or CUDA activity was not recorded)",
        "no ProfilerStep annotations (profiler ran without a schedule): the whole trace is one step",
    ]
    assert r.gpu is None and r.gpu_comm_us is None and r.launch_links is None and r.devices == []
    assert r.trace_span_us == 250.0 and [s.name for s in r.steps] == ["(whole trace)"]
    assert r.idle is None


def test_a_trace_without_timed_events_says_there_is_nothing_to_summarize(tmp_path):
    r = analyze_trace(write(tmp_path, [flow("s", 0), flow("f", 5)]))
    assert r.notes == [
        "no GPU activity in this trace (CPU-only capture, or CUDA activity was not recorded)",
        "no timed events in this trace (complete 'X' events with a ts and a dur): nothing to summarize",
    ]
    assert r.steps == [] and r.trace_span_us == 0.0 and r.event_count == 2


def test_a_gpu_trace_without_step_annotations_notes_only_that(tmp_path):
    r = analyze_trace(write(tmp_path, [cpu_op("aten::mm", 0, 100), kernel("gemm", 10, 60)]))
    assert r.notes == ["no ProfilerStep annotations (profiler ran without a schedule): the whole trace is one "
                       "step"]
    assert r.gpu_comm_us == 0.0


def test_flow_events_count_as_events_though_they_are_never_decoded(tmp_path):
    r = analyze_trace(write(tmp_path, [*two_steps(), flow("s", 150), flow("f", 250)]))
    assert r.event_count == 11


def test_malformed_events_are_listed_by_field_problem_and_whether_the_event_was_dropped(tmp_path):
    bad_dur = cpu_op("aten::bad", 10, 20)
    bad_dur["dur"] = -5
    bad_dur2 = cpu_op("aten::worse", 30, 40)
    bad_dur2["dur"] = -1
    copy = {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD (Pageable -> Device)", "pid": GPU_PID,
            "tid": STREAM, "ts": T0 + 50, "dur": 10, "args": {"bytes": "many"}}
    r = analyze_trace(write(tmp_path, [*two_steps(), bad_dur, bad_dur2, copy]))
    assert r.skipped_events == [
        SkippedEvents(field="dur", problem="negative", count=2, example="aten::bad", dropped=True),
        SkippedEvents(field="args.bytes", problem="not a non-negative integer (size left unknown)", count=1,
                      example="Memcpy HtoD (Pageable -> Device)", dropped=False),
    ]


def test_memory_events_are_charged_to_the_op_they_were_made_in(tmp_path):
    events = [*two_steps(), memory_event(150, 4096, 4096), memory_event(1150, 1000, 5096),
              memory_event(1900, -5096, 0)]
    r = analyze_trace(write(tmp_path, events))
    assert r.memory is not None and r.memory.snapshots == []
    (device,) = r.memory.devices
    assert device.device == "cuda:0" and device.peak_allocated_bytes == 5096 and device.allocations == 2
    assert [(op.name, op.allocations, op.self_bytes) for op in device.top_ops] == [("aten::mm", 2, 5096)]
    assert device.unattributed_bytes == 0 and device.peak_step == "ProfilerStep#2"
    assert device.peak_allocated_at_us == T0 + 1150


def test_top_keeps_the_first_ops_by_memory(tmp_path):
    events = [*two_steps(), memory_event(150, 4096, 4096), memory_event(1420, 100, 4196)]
    (device,) = analyze_trace(write(tmp_path, events), top=1).memory.devices
    assert [op.name for op in device.top_ops] == ["aten::mm"]
    (device,) = analyze_trace(write(tmp_path, events)).memory.devices
    assert [op.name for op in device.top_ops] == ["aten::mm", "aten::add"]


def test_an_unreadable_memory_snapshot_of_the_traces_rank_is_a_note(tmp_path):
    (tmp_path / "rank3_h.memory_snapshot.pickle").write_bytes(b"not a pickle")
    (tmp_path / "rank0_h.memory_snapshot.pickle").write_bytes(b"not one either")
    r = analyze_trace(write(tmp_path, two_steps(), distributedInfo={"rank": 3}))
    (note,) = r.notes
    assert note.startswith("memory snapshot left out: " + str(tmp_path / "rank3_h.memory_snapshot.pickle"))
    assert r.memory is None


def test_efficiency_is_measured_against_the_given_peak_and_target_unless_left_out(tmp_path):
    path = write(tmp_path, two_steps())
    r = analyze_trace(path, peak=PEAK, target_pct=50.0)
    assert r.efficiency is not None and r.efficiency.peak == PEAK and r.efficiency.target_pct == 50.0
    assert r.efficiency.steps == 2 and r.efficiency.step_wall_us == 2000.0
    assert analyze_trace(path).efficiency.target_pct == 80.0
    assert analyze_trace(path).efficiency.peak.gpu == "H200 SXM"
    assert analyze_trace(path, with_efficiency=False).efficiency is None


def shaped_mm(lo: float, hi: float) -> dict:
    op = cpu_op("aten::mm", lo, hi)
    op["args"] = {"External id": 2, "Input Dims": [[64, 128], [128, 32]], "Input type": ["float", "float"]}
    return op


def test_shapes_are_read_for_efficiency_only_when_it_is_measured(tmp_path):
    path = write(tmp_path, [*step_events("ProfilerStep#1", 0, 1000), shaped_mm(100, 400), shaped_mm(500, 600)])
    e = analyze_trace(path).efficiency
    assert e is not None and e.shapes_recorded is True
    assert e.matrix_flops == 2 * 2 * 64 * 128 * 32
    assert [(o.op, o.calls, o.flops) for o in e.ops] == [("aten::mm", 2, 2 * 2 * 64 * 128 * 32)]
    assert len(analyze_trace(path, top=1).efficiency.ops) == 1


FRAMES = [frame("model.py(10): main", 0, 1000), frame("model.py(21): forward", 100, 450),
          frame("torch/nn/modules/module.py(1750): _call_impl", 110, 440),
          frame("threading.py(10): run", 900, 950), frame("<built-in method mm>", 120, 390)]


def test_python_frames_give_where_in_your_code_with_library_frames_folded(tmp_path):
    r = analyze_trace(write(tmp_path, [*two_steps(), *FRAMES]))
    assert r.frames is not None and r.frames.folded is True and r.frames.frame_events == 2
    assert [f.frame for f in r.frames.frames] == ["model.py(21): forward", "model.py(10): main"]
    assert r.frames.gpu is True and r.frames.steps == 2
    assert r.tables is not None and r.tables.frames is not None
    assert r.tables.frames.names == ["", "model.py(10): main", "model.py(21): forward"]
    assert r.event_count == 14


def test_unfolded_frames_keep_the_library_frames(tmp_path):
    r = analyze_trace(write(tmp_path, [*two_steps(), *FRAMES]), folded=False)
    assert r.frames is not None and r.frames.folded is False and r.frames.frame_events == 5
    assert r.tables.frames.names == ["", "model.py(10): main", "model.py(21): forward",
                                     "torch/nn/modules/module.py(1750): _call_impl", "<built-in method mm>",
                                     "threading.py(10): run"]
    assert r.event_count == 14


def test_without_frames_the_python_frames_are_left_out(tmp_path):
    r = analyze_trace(write(tmp_path, [*two_steps(), *FRAMES]), with_frames=False)
    assert r.frames is None and r.tables.frames is None and r.event_count == 14


def test_a_cpu_traces_frames_are_measured_by_cpu_time(tmp_path):
    events = [*step_events("ProfilerStep#1", 0, 1000), cpu_op("aten::mm", 100, 400),
              frame("model.py(21): forward", 50, 450)]
    r = analyze_trace(write(tmp_path, events))
    assert r.frames is not None and r.frames.gpu is False
    assert [(f.frame, f.cpu_self_us) for f in r.frames.frames] == [("model.py(21): forward", 300.0)]


def test_top_keeps_the_first_frames(tmp_path):
    r = analyze_trace(write(tmp_path, [*two_steps(), *FRAMES]), top=1)
    assert [f.frame for f in r.frames.frames] == ["model.py(21): forward"]


def test_progress_reports_every_byte_read_from_the_file(tmp_path):
    path = write(tmp_path, two_steps())
    seen: list[int] = []
    analyze_trace(path, on_read=seen.append)
    assert sum(seen) == len(Path(path).read_bytes())


def test_a_gpu_traces_steps_read_their_gpu_busy_time_and_the_whole_trace_its_idle_time(tmp_path):
    r = analyze_trace(write(tmp_path, two_steps()))
    assert [s.gpu_busy_us for s in r.steps] == [500.0, 600.0]
    assert [s.gpu_busy_pct for s in r.steps] == [50.0, 60.0]
    assert r.idle is not None and r.idle.window_us == 2000.0 and r.idle.idle_us == 900.0


def test_memory_copies_and_the_launches_are_in_the_summary(tmp_path):
    copy = {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD (Pageable -> Device)", "pid": GPU_PID,
            "tid": STREAM, "ts": T0 + 50, "dur": 10, "args": {"bytes": 4096}}
    r = analyze_trace(write(tmp_path, [*two_steps(), copy]))
    assert [(m.kind, m.name, m.calls, m.total_us, m.bytes) for m in r.memory_ops] == [
        ("memcpy", "Memcpy HtoD (Pageable -> Device)", 1, 10.0, 4096)]
    assert r.tables is not None
    assert [(x.kind, x.name, x.calls, x.total_us) for x in r.tables.launches] == [
        ("kernel", "gemm_a", 2, 800.0), ("kernel", "ncclDevKernel_AllReduce_Sum", 1, 400.0),
        ("kernel", "gemm_b", 1, 100.0), ("memcpy", "Memcpy HtoD (Pageable -> Device)", 1, 10.0)]


def test_the_default_top_is_ten(tmp_path):
    kernels = [kernel(f"k{i:02d}", 100 * i, 100 * i + 50 - i) for i in range(11)]
    r = analyze_trace(write(tmp_path, [*step_events("ProfilerStep#1", 0, 1100), *kernels]))
    assert [k.short_name for k in r.top_kernels] == [f"k{i:02d}" for i in range(10)]


def test_the_span_runs_from_the_first_timed_event_to_the_last_end(tmp_path):
    events = [cpu_op("aten::mm", 0.5, 100), cpu_op("aten::add", 200, 250.25)]
    assert analyze_trace(write(tmp_path, events)).trace_span_us == 249.75


def test_a_trace_whose_clock_starts_at_zero_counts_communication_on_its_own_times(tmp_path):
    events = [{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": CPU_PID, "tid": CPU_PID,
               "ts": 0, "dur": 1000, "args": {}},
              {"ph": "X", "cat": "kernel", "name": "nccl_allreduce", "pid": GPU_PID, "tid": STREAM, "ts": 990,
               "dur": 20, "args": {"stream": STREAM}}]
    assert analyze_trace(write(tmp_path, events)).gpu_comm_us == 10.0


def test_allocations_are_charged_to_the_op_on_their_own_thread(tmp_path):
    other = cpu_op("aten::empty", 100, 400, tid=99)
    alloc = memory_event(150, 4096, 4096)
    alloc["tid"] = 99
    r = analyze_trace(write(tmp_path, [*two_steps(), other, alloc]))
    (device,) = r.memory.devices
    assert [(op.name, op.self_bytes) for op in device.top_ops] == [("aten::empty", 4096)]


def test_a_malformed_memory_event_is_listed_with_the_skipped_events(tmp_path):
    bad = memory_event(150, 4096, 4096)
    bad["args"]["Bytes"] = "4096"
    r = analyze_trace(write(tmp_path, [*two_steps(), bad]))
    assert [(s.field, s.count, s.example, s.dropped) for s in r.skipped_events] == [
        ("args.Bytes", 1, "[memory]", True)]


def test_allocations_inside_a_frame_are_that_frames(tmp_path):
    events = [*two_steps(), frame("model.py(21): forward", 100, 450), memory_event(150, 4096, 4096)]
    r = analyze_trace(write(tmp_path, events))
    assert r.frames is not None and r.frames.memory_device == "cuda"
    assert [(f.frame, f.alloc_self_bytes) for f in r.frames.frames] == [("model.py(21): forward", 2048.0)]


def test_a_folded_library_frame_is_never_read_so_not_even_a_malformed_one_is_reported(tmp_path):
    bad = frame("torch/nn/modules/module.py(1750): _call_impl", 110, 440)
    bad["dur"] = -3
    path = write(tmp_path, [bad, *two_steps()])  # not last: the reader decodes an array's last event whatever it is
    assert analyze_trace(path).skipped_events == []
    assert analyze_trace(path, folded=False).skipped_events == [
        SkippedEvents(field="dur", problem="negative", count=1, example="torch/nn/modules/module.py(1750): _call_impl",
                      dropped=True)]


def test_without_frames_no_python_frame_is_kept_however_its_fields_are_ordered(tmp_path):
    late = {"cat": "python_function", "ph": "X", "name": "model.py(21): forward", "pid": CPU_PID, "tid": CPU_PID,
            "ts": T0 + 100, "dur": 350, "args": {}}
    path = write(tmp_path, [*two_steps(), late])
    assert analyze_trace(path).frames is not None
    r = analyze_trace(path, with_frames=False)
    assert r.frames is None and r.tables.frames is None


def runtime(name: str, lo: float, hi: float, corr: int) -> dict:
    return {"ph": "X", "cat": "cuda_runtime", "name": name, "pid": CPU_PID, "tid": CPU_PID, "ts": T0 + lo,
            "dur": hi - lo, "args": {"correlation": corr}}


def launched(name: str, lo: float, hi: float, corr: int) -> dict:
    return {"ph": "X", "cat": "kernel", "name": name, "pid": GPU_PID, "tid": STREAM, "ts": T0 + lo, "dur": hi - lo,
            "args": {"stream": STREAM, "correlation": corr}}


def test_a_sync_names_the_line_of_the_users_code_it_sat_in(tmp_path):
    events = [*step_events("ProfilerStep#1", 0, 1000), frame("/home/me/proj/run.py(9): <module>", 0, 1000),
              frame("/home/me/proj/denoise.py(41): log_loss", 100, 410),  # entered during the capture: def line
              cpu_op("aten::mm", 80, 100), runtime("cudaLaunchKernel", 90, 92, 1), launched("k", 100, 150, 1),
              cpu_op("aten::item", 130, 400), runtime("cudaStreamSynchronize", 140, 390, 2),
              cpu_op("aten::add", 415, 425), runtime("cudaLaunchKernel", 420, 422, 3), launched("k", 430, 450, 3)]
    causes = analyze_trace(write(tmp_path, events)).idle.causes
    assert [(w.op, w.call, w.line) for w in causes.syncs] == [
        ("aten::item", "cudaStreamSynchronize", "proj/denoise.py:41 log_loss")]


def test_efficiency_keeps_the_top_ops_by_headroom(tmp_path):
    small = shaped_mm(700, 720)
    small["args"]["Input Dims"] = [[8, 16], [16, 8]]
    path = write(tmp_path, [*step_events("ProfilerStep#1", 0, 1000), shaped_mm(100, 400), small])
    assert len(analyze_trace(path).efficiency.ops) == 2
    assert len(analyze_trace(path, top=1).efficiency.ops) == 1


def collected(path: str) -> tuple[Collected, TraceStream, memory.MemoryEvents]:
    """One pass over ``path`` as analyze_trace makes it, for summarize_collected's own defaults."""
    stream = TraceStream(path, skip_head=SKIP_HEAD_FOLDED)
    c = Collected(shapes_of=MODELED, frames=keeps(True))
    mem = memory.MemoryEvents(c.count_malformed)
    c.attach(mem)
    for batch in stream.batches():
        c.feed(batch)
    return c, stream, mem


def test_summarizing_a_pass_measures_efficiency_and_folds_frames_by_default(tmp_path):
    path = write(tmp_path, [*two_steps(), *FRAMES])
    c, stream, mem = collected(path)
    r = summarize_collected(c, path, stream, 10, mem)
    assert r.efficiency is not None and r.frames is not None and r.frames.folded is True
    assert [f.frame for f in r.frames.frames] == ["model.py(21): forward", "model.py(10): main"]


def test_summarizing_a_pass_without_its_memory_events_has_no_memory_section(tmp_path):
    path = write(tmp_path, [*two_steps(), memory_event(150, 4096, 4096)])
    c, stream, _ = collected(path)
    r = summarize_collected(c, path, stream, 10)
    assert r.memory is None and r.top_kernels[0].short_name == "gemm_a"
