"""Which events a Timeline window keeps (`lightx2v.trace_browser.window`), fast, at its boundaries: a hand-made trace
of two steps whose every time and correlation id is chosen here, and the exact events of each window written out by
hand. Step 1 launches a burst of three kernels (correlation ids 1002, 1003, 1004: one launch run) that all run in
step 2's time; GPU events and flow arrows without a correlation id, an event without a time and one holding a NaN
sit among them. tests/test_timeline_window.py holds the windows against a filter of whole files."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from test_timeline_window import SMALL_PIECES, bytes_read, expected_range_events, expected_step_events, load

from lightx2v.trace_browser.step_index import step_index
from lightx2v.trace_browser.window import range_window, step_window
from lightx2v.trace_summary import reader

from helpers.kineto import GPU_TID, HOST_TID, Kineto
from helpers.steps_trace import STEP_US, T0, steps_trace

# the events of the trace below, in file order, by name
STEP_1_EVENTS = ["process_name", "ProfilerStep#1", "aten::burst", "cudaLaunchKernel", "k_first", "cudaLaunchKernel",
                 "k_middle", "cudaLaunchKernel", "k_last", "k_no_args", "k_no_correlation", "flow_no_id",
                 "nan_counter", "flow_of_k_first"]
STEP_2_EVENTS = ["process_name", "ProfilerStep#1", "ProfilerStep#2", "aten::own", "cudaLaunchKernel", "k_step2"]


def two_steps(path: Path) -> str:
    k = Kineto()
    ev = k.events
    ev.append({"ph": "M", "name": "process_name", "pid": 1, "tid": 0, "args": {"name": "python3"}})
    k.step(1, 1000.0, 1000.0)  # [1000, 2000]
    k.step(2, 2000.0, 1000.0)  # [2000, 3000]
    ev.append({"ph": "X", "cat": "python_function", "name": "model.py(1): forward", "pid": 1, "tid": HOST_TID,
               "ts": 1050.0, "dur": 900.0, "args": {}})
    # launched at 1901..1903 (step 1), run at 2000..2300 (step 2's time); correlation ids 1002, 1003, 1004
    k.op("aten::burst", 1900.0, [("kernel", "k_first", 100.0), ("kernel", "k_middle", 100.0),
                                 ("kernel", "k_last", 100.0)])
    k.op("aten::own", 2100.0, [("kernel", "k_step2", 50.0)])  # correlation id 1006, run at 2200
    ev.append({"ph": "X", "cat": "kernel", "name": "k_no_args", "pid": 0, "tid": GPU_TID, "ts": 1500.0,
               "dur": 10.0})
    ev.append({"ph": "X", "cat": "kernel", "name": "k_no_correlation", "pid": 0, "tid": GPU_TID, "ts": 1600.0,
               "dur": 10.0, "args": {"stream": GPU_TID}})
    ev.append({"ph": "s", "cat": "ac2g", "name": "flow_no_id", "pid": 1, "tid": HOST_TID, "ts": 1700.0})
    ev.append({"ph": "X", "cat": "cpu_op", "name": "no_time", "pid": 1, "tid": HOST_TID, "dur": 5.0, "args": {}})
    ev.append({"ph": "i", "cat": "cpu_instant_event", "name": "nan_counter", "pid": 1, "tid": HOST_TID, "s": "t",
               "ts": 1800.0, "args": {"value": math.nan}})  # written NaN: orjson refuses it, json reads it
    ev.append({"ph": "f", "cat": "ac2g", "name": "flow_of_k_first", "id": 1002, "pid": 0, "tid": GPU_TID,
               "ts": 2000.0, "bp": "e"})
    return k.write(path)


def window_names(data: bytes) -> list[str]:
    return [e["name"] for e in json.loads(data)["traceEvents"]]


def test_a_step_keeps_every_kernel_of_its_launch_run_first_middle_and_last_though_all_ran_in_the_next(tmp_path):
    path = two_steps(tmp_path / "rank0.pt.trace.json")
    index = step_index(path, None)
    assert [(s.name, s.lo, s.end, s.launches) for s in index.steps] == [
        ("ProfilerStep#1", 1000.0, 2000.0, [[1002, 1004]]), ("ProfilerStep#2", 2000.0, 3000.0, [[1006, 1006]])]
    assert window_names(step_window(path, index, 0)) == STEP_1_EVENTS
    assert window_names(step_window(path, index, 1)) == STEP_2_EVENTS


def test_gpu_events_and_flows_without_a_correlation_id_and_the_nan_event_are_kept_by_their_time(tmp_path):
    path = two_steps(tmp_path / "rank0.pt.trace.json")
    index = step_index(path, None)
    first = json.loads(step_window(path, index, 0))["traceEvents"]
    nan = next(e for e in first if e["name"] == "nan_counter")
    assert nan["args"]["value"] is None or math.isnan(nan["args"]["value"])  # orjson writes NaN as null
    for name in ("k_no_args", "k_no_correlation", "flow_no_id", "nan_counter"):
        assert name not in window_names(step_window(path, index, 1)), name


def test_an_event_without_a_time_is_in_no_window(tmp_path):
    path = two_steps(tmp_path / "rank0.pt.trace.json")
    index = step_index(path, None)
    assert all("no_time" not in window_names(step_window(path, index, k)) for k in (0, 1))
    assert "no_time" not in window_names(range_window(path, 0.0, 10_000.0, True))


def test_a_range_window_leaves_python_frames_out_unless_asked_for(tmp_path):
    path = two_steps(tmp_path / "rank0.pt.trace.json")
    assert window_names(range_window(path, 1000.0, 1100.0)) == ["process_name", "ProfilerStep#1"]
    assert window_names(range_window(path, 1000.0, 1100.0, frames=True)) == [
        "process_name", "ProfilerStep#1", "model.py(1): forward"]
    index = step_index(path, None)
    assert window_names(range_window(path, 1000.0, 1100.0, index=index)) == ["process_name", "ProfilerStep#1"]


def test_a_range_of_a_plain_trace_is_read_where_it_lies_not_the_whole_file(tmp_path):
    trace = steps_trace(tmp_path / "rank0_host.pt.trace.json", steps=120)
    doc = load(trace)
    index = step_index(trace, None, SMALL_PIECES)
    size = Path(trace).stat().st_size
    lo, end = T0 + 60 * STEP_US + 50, T0 + 60 * STEP_US + 300
    before = bytes_read()
    window = range_window(trace, lo, end, False, index)
    read = bytes_read() - before
    assert json.loads(window)["traceEvents"] == expected_range_events(doc, lo, end, frames=False)
    assert "k_step61" in window_names(window)
    assert read < size / 4, f"read {read} of {size} bytes for a range in one step of 120"


@pytest.mark.parametrize("typed", [True, False], ids=["typed", "generic"])
def test_frames_written_with_their_cat_first_are_read_where_they_lie_not_the_whole_file(tmp_path, monkeypatch, typed):
    """Python frames whose "cat" comes before "ph" are decoded at indexing (the generic reader skips undecoded only
    those written as kineto writes them), their times read: their pieces are read for the windows their times meet,
    not for every frames window. They are counted as frames, not indexed, either way."""
    monkeypatch.setattr(reader, "TYPED", typed)
    path = tmp_path / "rank0_host.pt.trace.json"
    steps_trace(path, steps=120)
    doc = load(str(path))
    doc["traceEvents"] = [{"cat": e["cat"], **e} if e.get("cat") == "python_function" else e
                          for e in doc["traceEvents"]]
    path.write_text(json.dumps(doc))
    index = step_index(str(path), None, SMALL_PIECES)
    assert index.skipped == sum(1 for e in doc["traceEvents"] if e.get("cat") == "python_function") > 100
    size = path.stat().st_size
    before = bytes_read()
    framed = json.loads(step_window(str(path), index, 60, frames=True))["traceEvents"]
    read = bytes_read() - before
    assert framed == expected_step_events(doc, 60, frames=True)
    assert {"model.py(61): forward", "main.py(1): <module>"} <= {e["name"] for e in framed}
    assert read < size / 4, f"read {read} of {size} bytes for one step's frames of 120"


def test_a_window_holding_an_integer_past_64_bits_is_written_with_it_exact(tmp_path):
    path = tmp_path / "big.json"
    path.write_text('{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "op", "pid": 1, "tid": 1, "ts": 10, '
                    '"dur": 5, "args": {"External id": 1180591620717411303424}}]}')
    window = json.loads(range_window(str(path), 0.0, 100.0))
    assert [e["args"]["External id"] for e in window["traceEvents"]] == [2**70]
