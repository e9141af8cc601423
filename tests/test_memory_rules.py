"""Memory answers as pure logic on hand-made inputs whose answers are worked out by hand, fast: the leak rule (a
device leaks when 2 steps keep memory), which allocations are live at the peak (frees replayed up to it), and the
snapshot's rules (its replayed peak, torch's and the libraries' frames skipped for the user's, sites past the tenth
in "other"). tests/test_trace_summary_memory.py and tests/test_memory_snapshot_reader.py check real captures."""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import pytest

from lightx2v.trace_summary import snapshot
from lightx2v.trace_summary.analyze import analyze_trace
from lightx2v.trace_summary.memory import leak_threshold

MIB = 1 << 20


class MemoryTrace:
    """``ProfilerStep#N`` spans and ops on one thread, with kineto's ``[memory]`` events (CUDA device 0)."""

    def __init__(self) -> None:
        self.events: list[dict] = []
        self.allocated = 0
        self.ext = 0

    def step(self, n: int, ts: float, dur: float = 1000.0) -> None:
        self.events.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{n}", "pid": 1, "tid": 1,
                            "ts": ts, "dur": dur, "args": {}})

    def op(self, name: str, ts: float, dur: float = 10.0) -> None:
        self.ext += 1
        self.events.append({"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": dur,
                            "args": {"External id": self.ext}})

    def mem(self, ts: float, addr: int, nbytes: int) -> None:
        """An allocation (``nbytes`` > 0) or a free (< 0) at ``addr``."""
        self.allocated += nbytes
        self.events.append({"ph": "i", "s": "t", "cat": "cpu_instant_event", "name": "[memory]", "pid": 1, "tid": 1,
                            "ts": ts, "args": {"Addr": addr, "Bytes": nbytes, "Total Allocated": self.allocated,
                                               "Total Reserved": 64 * MIB, "Device Type": 1, "Device Id": 0}})

    def device(self, tmp_path: Path):
        path = tmp_path / "m.pt.trace.json"
        path.write_text(json.dumps({"schemaVersion": 1, "traceEvents": self.events}))
        (device,) = analyze_trace(str(path)).memory.devices
        return device


def kept_by_steps(kept: list[bool]) -> MemoryTrace:
    """One 1000 us step per entry, each allocating 2 MiB in aten::empty; a step with False frees it again."""
    t = MemoryTrace()
    for i, keep in enumerate(kept):
        lo = 1000.0 * i
        t.step(i + 1, lo)
        t.op("aten::empty", lo + 10)
        t.mem(lo + 15, 0x1000 + i, 2 * MIB)
        if not keep:
            t.mem(lo + 500, 0x1000 + i, -2 * MIB)
    return t


@pytest.mark.parametrize("kept,grew,leak", [
    ([True, True, False], [True, True, False], True),
    ([True, False, True], [True, False, True], True),
    ([True, False, False], [True, False, False], False),
    ([False, False, False], [False, False, False], False),
])
def test_a_device_leaks_when_two_steps_keep_memory(tmp_path, kept, grew, leak):
    d = kept_by_steps(kept).device(tmp_path)
    assert [s.grew for s in d.steps] == grew
    assert d.leak is leak
    assert d.leak_threshold_bytes == MIB


def test_each_steps_growth_is_what_it_kept(tmp_path):
    d = kept_by_steps([True, False, True]).device(tmp_path)
    assert [(s.allocated_start_bytes, s.allocated_end_bytes, s.growth_bytes, s.peak_allocated_bytes)
            for s in d.steps] == [(0, 2 * MIB, 2 * MIB, 2 * MIB), (2 * MIB, 2 * MIB, 0, 4 * MIB),
                                  (2 * MIB, 4 * MIB, 2 * MIB, 4 * MIB)]
    assert (d.peak_allocated_bytes, d.peak_step, d.allocations, d.allocated_bytes) == (4 * MIB, "ProfilerStep#2",
                                                                                      3, 6 * MIB)


def test_a_step_that_keeps_just_under_the_threshold_does_not_grow(tmp_path):
    t = MemoryTrace()
    for i, nbytes in enumerate((MIB - 1, MIB, MIB - 1)):
        t.step(i + 1, 1000.0 * i)
        t.mem(1000.0 * i + 5, 0x10 + i, nbytes)
    d = t.device(tmp_path)
    assert [s.grew for s in d.steps] == [False, True, False] and d.leak is False


def test_a_steps_memory_window_is_its_cpu_span_not_its_wall_that_runs_on_while_the_gpu_lags(tmp_path):
    """Step 1's CPU span is 0-1000; its kernel runs until 1800, so its wall runs to 1800, towards step 2 (2000).
    The CPU allocates: what the CPU allocates after 1000 (3 MiB at 1500, the peak) is no step's."""
    t = MemoryTrace()
    t.step(1, 0.0)
    t.step(2, 2000.0)
    t.op("aten::empty", 10.0)
    t.mem(15.0, 0x10, 2 * MIB)
    t.events += [{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 100.0,
                  "dur": 5.0, "args": {"correlation": 1}},
                 {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 200.0, "dur": 1600.0,
                  "args": {"correlation": 1, "stream": 7, "device": 0}}]
    t.mem(1500.0, 0x20, 3 * MIB)
    t.mem(1600.0, 0x20, -3 * MIB)
    t.mem(2100.0, 0x30, MIB)
    path = tmp_path / "m.pt.trace.json"
    path.write_text(json.dumps({"schemaVersion": 1, "traceEvents": t.events}))
    summary = analyze_trace(str(path))
    assert [(s.cpu_us, s.wall_us) for s in summary.steps] == [(1000.0, 1800.0), (1000.0, 1000.0)]
    (d,) = summary.memory.devices
    assert [(s.end_us, s.allocated_start_bytes, s.allocated_end_bytes, s.peak_allocated_bytes) for s in d.steps] == [
        (1000.0, 0, 2 * MIB, 2 * MIB), (3000.0, 2 * MIB, 3 * MIB, 3 * MIB)]
    assert (d.peak_allocated_bytes, d.peak_step) == (5 * MIB, None)


@pytest.mark.parametrize("peak,threshold", [(0, MIB), (100 * MIB, MIB), (101 * MIB, 1059061),
                                            (1 << 40, 10995116277)])
def test_the_leak_threshold_is_1_mib_or_1_percent_of_the_peak(peak, threshold):
    assert leak_threshold(peak) == threshold


def test_frees_before_the_peak_are_replayed_so_only_what_is_live_then_counts(tmp_path):
    """aten::empty allocates 1 MiB and frees it; then aten::ones allocates 3 MiB (the peak) and aten::zeros 1 MiB
    after a free of 3 MiB: at the peak only aten::ones's 3 MiB is live."""
    t = MemoryTrace()
    t.step(1, 0.0)
    t.op("aten::empty", 10)
    t.mem(12, 0xA, MIB)
    t.mem(100, 0xA, -MIB)
    t.op("aten::ones", 200)
    t.mem(205, 0xB, 3 * MIB)
    t.mem(300, 0xB, -3 * MIB)
    t.op("aten::zeros", 400)
    t.mem(405, 0xC, MIB)
    d = t.device(tmp_path)
    assert d.peak_allocated_bytes == 3 * MIB and d.peak_allocated_at_us == 205
    assert sorted((o.name, o.self_bytes, o.live_at_peak_bytes) for o in d.top_ops) == [
        ("aten::empty", MIB, 0), ("aten::ones", 3 * MIB, 3 * MIB), ("aten::zeros", MIB, 0)]


# ------------------------------------------------------------------------------------------------ the snapshot
USER = {"filename": "/home/me/proj/model.py", "line": 12, "name": "forward"}
TORCH_SOURCE = {"filename": "/home/me/src/pytorch/torch/nn/modules/linear.py", "line": 125, "name": "forward"}
TORCH_WHEEL = {"filename": "/usr/lib/python3/dist-packages/torch/functional.py", "line": 1, "name": "f"}
LIBRARY = {"filename": "/venv/lib/python3.11/site-packages/diffusers/attention.py", "line": 7, "name": "attn"}
STDLIB = {"filename": "/usr/lib/python3.11/contextlib.py", "line": 81, "name": "inner"}
NATIVE = {"filename": "??", "line": 0, "name": "at::native::empty_cuda"}
FROZEN = {"filename": "<frozen runpy>", "line": 88, "name": "_run_code"}


@pytest.mark.parametrize("frames,expected", [
    ([TORCH_SOURCE, USER], USER), ([TORCH_WHEEL, LIBRARY, STDLIB, NATIVE, FROZEN, USER], USER),
    ([TORCH_SOURCE, TORCH_WHEEL], None), ([], None), (["not a frame", USER], USER),
    ([{"filename": "/home/me/torchvision_app/run.py", "line": 3, "name": "main"}],
     {"filename": "/home/me/torchvision_app/run.py", "line": 3, "name": "main"}),
    ([{"filename": "C:\\work\\torch\\x.py"}, {"filename": "C:\\Python311\\lib\\python3.11\\os.py"}, USER], USER),
    ([{"filename": "<console>.py", "line": 1}, USER], USER),  # generated code, whatever its name ends with
])
def test_the_users_frame_is_the_innermost_outside_torch_libraries_and_the_standard_library(frames, expected):
    assert snapshot.user_frame(frames) == expected


def write_snapshot(tmp_path: Path, doc: dict) -> str:
    path = tmp_path / "rank0_box.memory_snapshot.pickle"
    path.write_bytes(pickle.dumps(doc))
    return str(path)


def block(addr: int, size: int, frames: list, state: str = "active_allocated") -> dict:
    return {"address": addr, "size": size, "state": state, "frames": frames}


def test_the_snapshots_peak_is_replayed_with_frees_and_its_blocks_grouped_by_the_users_frame(tmp_path):
    """History: alloc a 100 (user), alloc b 200 (torch only), free a, alloc c 50 (user): the peak is 300 after b,
    with a and b live; at the end b and c are live (the segments' blocks)."""
    trace = [{"action": "alloc", "addr": 1, "size": 100, "frames": [TORCH_SOURCE, USER], "time_us": 10},
             {"action": "alloc", "addr": 2, "size": 200, "frames": [TORCH_WHEEL], "time_us": 20},
             {"action": "free_requested", "addr": 1, "size": 100, "time_us": 30},
             {"action": "free_completed", "addr": 1, "size": 100, "time_us": 31},
             {"action": "alloc", "addr": 3, "size": 50, "frames": [USER], "time_us": 40}]
    doc = {"segments": [{"device": 0, "total_size": 1024, "blocks": [block(2, 200, [TORCH_WHEEL]),
                                                                     block(3, 50, [USER]),
                                                                     block(4, 500, [], state="inactive")]}],
           "device_traces": [trace]}
    (s,) = snapshot.read_snapshot(write_snapshot(tmp_path, doc))
    assert (s.device, s.source, s.peak_bytes, s.peak_at_us, s.reserved_bytes) == (0, "device_traces", 300, 20.0, 1024)
    assert [(x.location, x.function, x.bytes, x.blocks) for x in s.sites] == [("proj/model.py:12", "forward", 100, 1)]
    assert s.other_bytes == 200


def test_a_block_freed_after_the_peak_keeps_the_site_that_allocated_it(tmp_path):
    # as the drop-in records (context="alloc"): a free carries no frames, the alloc does
    trace = [{"action": "alloc", "addr": 1, "size": 100, "frames": [USER], "time_us": 1},
             {"action": "alloc", "addr": 2, "size": 10, "frames": [LIBRARY], "time_us": 2},
             {"action": "free_completed", "addr": 1, "size": 100, "frames": [], "time_us": 3},
             {"action": "free_completed", "addr": 2, "size": 10, "frames": [], "time_us": 4}]
    doc = {"segments": [{"device": 0, "total_size": 512, "blocks": []}], "device_traces": [trace]}
    (s,) = snapshot.read_snapshot(write_snapshot(tmp_path, doc))
    assert (s.peak_bytes, [(x.location, x.bytes) for x in s.sites], s.other_bytes) == (
        110, [("proj/model.py:12", 100)], 10)


def test_a_history_without_free_completed_frees_at_free_requested(tmp_path):
    trace = [{"action": "alloc", "addr": 1, "size": 100, "frames": [USER], "time_us": 1},
             {"action": "free_requested", "addr": 1, "size": 100, "time_us": 2},
             {"action": "alloc", "addr": 2, "size": 60, "frames": [USER], "time_us": 3}]
    doc = {"segments": [{"device": 0, "total_size": 512, "blocks": [block(2, 60, [USER])]}], "device_traces": [trace]}
    (s,) = snapshot.read_snapshot(write_snapshot(tmp_path, doc))
    assert (s.peak_bytes, s.peak_at_us, [x.bytes for x in s.sites]) == (100, 1.0, [100])


def test_blocks_live_before_the_history_began_count_toward_the_peak(tmp_path):
    trace = [{"action": "alloc", "addr": 2, "size": 30, "frames": [USER], "time_us": 5}]
    doc = {"segments": [{"device": 0, "total_size": 512, "blocks": [block(1, 70, [USER]), block(2, 30, [USER])]}],
           "device_traces": [trace]}
    (s,) = snapshot.read_snapshot(write_snapshot(tmp_path, doc))
    assert (s.peak_bytes, [(x.bytes, x.blocks) for x in s.sites]) == (100, [(100, 2)])


def test_without_a_history_the_segments_live_blocks_are_the_answer(tmp_path):
    doc = {"segments": [{"device": 1, "total_size": 4096, "blocks": [block(1, 70, [USER]),
                                                                     block(2, 30, [LIBRARY]),
                                                                     block(3, 900, [USER], state="inactive")]}]}
    (s,) = snapshot.read_snapshot(write_snapshot(tmp_path, doc))
    assert (s.device, s.source, s.peak_bytes, s.peak_at_us, s.reserved_bytes, s.other_bytes) == (
        1, "segments", 100, None, 4096, 30)


def test_sites_past_the_tenth_are_counted_in_other(tmp_path):
    # twelve user sites of 1200, 1100, ..., 100 bytes and 7 bytes without a user frame
    blocks = [block(i, 100 * (12 - i), [{"filename": f"/p/app/m{i}.py", "line": i, "name": f"f{i}"}])
              for i in range(12)]
    doc = {"segments": [{"device": 0, "total_size": 10000, "blocks": [*blocks, block(99, 7, [TORCH_WHEEL]),
                                                                      block(98, 3, [])]}]}
    (s,) = snapshot.read_snapshot(write_snapshot(tmp_path, doc))
    assert [x.bytes for x in s.sites] == [1200, 1100, 1000, 900, 800, 700, 600, 500, 400, 300]
    assert s.sites[0].location == "app/m0.py:0" and s.sites[0].filename == "/p/app/m0.py"
    assert s.other_bytes == 200 + 100 + 7 + 3
    assert s.peak_bytes == 7810


def test_a_frame_without_a_line_or_a_name_is_line_0_of_function_unknown(tmp_path):
    blocks = [block(1, 10, [{"filename": "/a/b/run.py"}])]
    (s,) = snapshot.read_snapshot(write_snapshot(tmp_path, {"segments": [{"device": 0, "total_size": 64,
                                                                           "blocks": blocks}]}))
    assert [(x.location, x.function, x.line, x.bytes) for x in s.sites] == [("b/run.py:0", "?", 0, 10)]


def test_sites_of_equal_bytes_are_ordered_by_location(tmp_path):
    blocks = [block(1, 10, [{"filename": "/a/z.py", "line": 2, "name": "g"}]),
              block(2, 10, [{"filename": "/a/b.py", "line": 9, "name": "h"}]),
              block(3, 5, [{"filename": "/a/b.py", "line": 9, "name": "h"}])]
    (s,) = snapshot.read_snapshot(write_snapshot(tmp_path, {"segments": [{"device": 0, "total_size": 64,
                                                                           "blocks": blocks}]}))
    assert [(x.location, x.bytes, x.blocks) for x in s.sites] == [("a/b.py:9", 15, 2), ("a/z.py:2", 10, 1)]


def test_a_pickle_that_names_a_class_is_refused_not_run(tmp_path):
    path = tmp_path / "rank0_x.memory_snapshot.pickle"
    path.write_bytes(pickle.dumps({"segments": [], "x": Path("/")}))
    with pytest.raises(snapshot.SnapshotError, match="not a plain memory snapshot: it names pathlib"):
        snapshot.load_snapshot(str(path))


@pytest.mark.parametrize("doc,problem", [([], "expected a dict with a 'segments' list"),
                                         ({"segments": {}}, "expected a dict with a 'segments' list")])
def test_a_pickle_that_is_not_a_snapshot_is_a_clear_error(tmp_path, doc, problem):
    with pytest.raises(snapshot.SnapshotError, match=problem):
        snapshot.read_snapshot(write_snapshot(tmp_path, doc))


def test_a_trace_finds_its_snapshot_by_worker_name_else_by_rank(tmp_path):
    trace = tmp_path / "rank1_box.123.pt.trace.json"
    trace.write_text("{}")
    for name in ("rank0_box.memory_snapshot.pickle", "rank1_other.memory_snapshot.pickle", "notes.txt"):
        (tmp_path / name).write_bytes(b"")
    assert snapshot.snapshot_files(str(trace), 1) == [str(tmp_path / "rank1_other.memory_snapshot.pickle")]
    assert snapshot.snapshot_files(str(trace), None) == [str(tmp_path / "rank0_box.memory_snapshot.pickle")]
    (tmp_path / "rank1_box.memory_snapshot.pickle").write_bytes(b"")  # the trace's worker name: rank1_box
    assert snapshot.snapshot_files(str(trace), 1) == [str(tmp_path / "rank1_box.memory_snapshot.pickle")]


def history(tmp_path: Path, trace: list[dict], blocks: list[dict] | None = None, device: int = 0):
    doc = {"segments": [{"device": device, "total_size": 4096, "blocks": blocks or []}], "device_traces": [trace]}
    (s,) = snapshot.read_snapshot(write_snapshot(tmp_path, doc))
    return s


def test_the_first_of_two_equal_peaks_is_the_peak(tmp_path):
    s = history(tmp_path, [{"action": "alloc", "addr": 1, "size": 100, "frames": [USER], "time_us": 1},
                           {"action": "free_completed", "addr": 1, "size": 100, "time_us": 2},
                           {"action": "alloc", "addr": 2, "size": 100, "frames": [LIBRARY], "time_us": 3}],
                [block(2, 100, [LIBRARY])])
    assert (s.peak_bytes, s.peak_at_us, [x.location for x in s.sites], s.other_bytes) == (
        100, 1.0, ["proj/model.py:12"], 0)


def test_a_block_allocated_before_the_history_and_freed_in_it_counts_toward_the_peak(tmp_path):
    s = history(tmp_path, [{"action": "alloc", "addr": 2, "size": 30, "frames": [USER], "time_us": 5},
                           {"action": "free_completed", "addr": 1, "size": 70, "frames": [], "time_us": 6}],
                [block(2, 30, [USER])])
    assert (s.peak_bytes, s.peak_at_us, [x.bytes for x in s.sites], s.other_bytes) == (100, 5.0, [30], 70)


def test_a_history_that_only_frees_peaks_before_it_with_the_frees_frames(tmp_path):
    # context="all" records a free's stack: the only one known for a block allocated before the history
    s = history(tmp_path, [{"action": "free_completed", "addr": 1, "size": 70, "frames": [USER], "time_us": 1},
                           {"action": "free_completed", "addr": 2, "size": 30, "frames": [USER], "time_us": 2}])
    assert (s.peak_bytes, s.peak_at_us, [(x.bytes, x.blocks) for x in s.sites], s.other_bytes) == (
        100, None, [(100, 2)], 0)


def test_a_peak_without_a_time_has_none(tmp_path):
    s = history(tmp_path, [{"action": "alloc", "addr": 1, "size": 10, "frames": [USER]}])
    assert (s.peak_bytes, s.peak_at_us) == (10, None)


def test_a_damaged_history_is_read_without_an_error(tmp_path):
    # an alloc whose block the segments no longer hold (and no free recorded); a block freed twice
    s = history(tmp_path, [{"action": "alloc", "addr": 1, "size": 50, "frames": [USER], "time_us": 1},
                           {"action": "alloc", "addr": 2, "size": 20, "frames": [USER], "time_us": 2},
                           {"action": "free_completed", "addr": 2, "size": 20, "time_us": 3},
                           {"action": "free_completed", "addr": 2, "size": 20, "time_us": 4},
                           {"action": "alloc", "addr": 3, "size": 25, "frames": [USER], "time_us": 5}])
    # the second free gives nothing back again: the peak is 50 + 25 at the end; no block list holds blocks 1 or 3
    # (the segments are empty), so no site is named
    assert (s.peak_bytes, s.peak_at_us, [x.bytes for x in s.sites]) == (75, 5.0, [])


def test_a_device_with_a_history_and_no_segments_and_defaults_of_missing_fields(tmp_path):
    doc = {"segments": [{"total_size": 100}],  # no device (0), no blocks
           "device_traces": [[], [{"action": "alloc", "addr": 1, "size": 8, "frames": [USER], "time_us": 3}]]}
    path = write_snapshot(tmp_path, doc)
    s0, s1 = snapshot.read_snapshot(path)
    assert (s0.file, s0.device, s0.source, s0.peak_bytes, s0.reserved_bytes) == (path, 0, "segments", 0, 100)
    assert (s1.device, s1.source, s1.peak_bytes, s1.reserved_bytes, s1.peak_at_us) == (1, "device_traces", 8, 0, 3.0)


def test_an_unreadable_or_odd_snapshot_is_one_line_naming_the_file(tmp_path):
    missing = str(tmp_path / "rank0_x.memory_snapshot.pickle")
    with pytest.raises(snapshot.SnapshotError) as raised:
        snapshot.load_snapshot(missing)
    assert str(raised.value) == f"{missing}: cannot read (No such file or directory)"
    path = write_snapshot(tmp_path, [])
    with pytest.raises(snapshot.SnapshotError) as raised:
        snapshot.load_snapshot(path)
    assert str(raised.value) == (f"{path}: not a memory snapshot: expected a dict with a 'segments' list "
                                 "(torch.cuda.memory._snapshot())")
    path = write_snapshot(tmp_path, {"segments": [{"device": 0, "blocks": []}]})  # no total_size
    with pytest.raises(snapshot.SnapshotError) as raised:
        snapshot.read_snapshot(path)
    assert str(raised.value) == f"{path}: not a memory snapshot: unexpected structure (KeyError: 'total_size')"
    (tmp_path / "cut.pickle").write_bytes(b"\x80")
    with pytest.raises(snapshot.SnapshotError) as raised:
        snapshot.load_snapshot(str(tmp_path / "cut.pickle"))
    assert str(raised.value) == (f"{tmp_path / 'cut.pickle'}: not a memory snapshot pickle (truncated or corrupt: "
                                 "pickle data was truncated)")
    (tmp_path / "code.pickle").write_bytes(pickle.dumps(Path("/")))
    with pytest.raises(snapshot.SnapshotError) as raised:
        snapshot.load_snapshot(str(tmp_path / "code.pickle"))
    assert str(raised.value).endswith(": not a plain memory snapshot: it names pathlib.PosixPath; only plain data "
                                      "(dicts, lists, strings, numbers) is loaded, since a pickle can run code")
