"""The Timeline's step index on its own, fast: what the page is told about a trace (``describe``: its steps'
times, the GPU events each launched, the span, the events read and skipped), held against the rule applied to
the hand-made trace of tests/helpers/steps_trace.py by ``json.load``; which correlation ids a step launched;
which pieces of a file a window must read. tests/test_timeline_window.py checks the windows themselves."""

from __future__ import annotations

import json

import pytest
from test_timeline_window import CALL_CATS, GPU_CATS, expected_steps

from lightx2v.trace_browser.step_index import Chunk, describe, step_index

from helpers.steps_trace import steps_trace


@pytest.fixture
def trace(tmp_path):
    path = steps_trace(tmp_path / "rank0.pt.trace.json")
    with open(path) as f:
        return path, json.load(f)["traceEvents"]


def test_the_page_is_told_each_steps_times_and_the_gpu_events_it_launched(trace):
    path, events = trace
    doc = {"traceEvents": events}
    launch = {e["args"]["correlation"]: e["ts"] for e in events if e.get("cat") in CALL_CATS}
    steps = []
    for s in expected_steps(doc):
        hi = next(e["ts"] + e["dur"] for e in events if e.get("cat") == "user_annotation" and e["name"] == s["name"])
        launched = sum(1 for e in events if e.get("cat") in GPU_CATS
                       and s["lo"] <= launch.get(e["args"].get("correlation"), -1) <= hi)
        steps.append({"name": s["name"], "lo": s["lo"], "hi": hi, "end": s["end"], "gpu_events": launched})
    told = describe(step_index(path, None))
    assert told["steps"] == steps
    assert [s["gpu_events"] for s in steps] == [2, 1, 2]  # step 1 launched one more that ran in step 2


def test_the_page_is_told_the_span_of_the_timed_events_and_how_many_were_read_and_skipped(trace):
    path, events = trace
    timed = [e for e in events if e.get("ph") == "X" and e.get("cat") != "python_function"]
    told = describe(step_index(path, None))
    assert told["span"] == [min(e["ts"] for e in timed), max(e["ts"] + e["dur"] for e in timed)]
    frames = sum(1 for e in events if e.get("cat") == "python_function")
    # the Python frames written as kineto writes them ("ph", then "cat") are skipped undecoded; the one written
    # with its keys in another order is read
    assert told["skipped"] == frames - 1
    assert told["events"] == len(events) - told["skipped"]
    assert set(told) == {"span", "events", "skipped", "steps"}


def test_a_trace_without_timed_events_has_no_span_and_no_steps(tmp_path):
    path = tmp_path / "empty.pt.trace.json"
    path.write_text(json.dumps({"traceEvents": [{"ph": "M", "name": "process_name", "pid": 1, "args": {}}]}))
    told = describe(step_index(str(path), None))
    assert (told["span"], told["steps"], told["events"], told["skipped"]) == ([], [], 1, 0)


@pytest.mark.parametrize("t_lo,t_hi,needed", [(10.0, 20.0, True), (20.0, 30.0, False), (0.0, 5.0, True),
                                              (0.0, 4.9, False), (19.9, 25.0, True)])
def test_a_piece_is_read_when_its_events_times_meet_the_window_from_its_start_up_to_before_its_end(t_lo, t_hi,
                                                                                                   needed):
    assert Chunk(start=0, stop=1, t_lo=t_lo, t_hi=t_hi).needed(5.0, 20.0, [], False) is needed


def test_a_piece_outside_the_window_is_read_for_metadata_frames_asked_for_or_a_launch_of_the_step():
    far = dict(start=0, stop=1, t_lo=100.0, t_hi=200.0)
    assert Chunk(**far, meta=True).needed(0.0, 1.0, [], False)
    assert Chunk(**far, frames=True).needed(0.0, 1.0, [], True)
    assert not Chunk(**far, frames=True).needed(0.0, 1.0, [], False)
    assert Chunk(**far, corr_lo=40, corr_hi=50).needed(0.0, 1.0, [[50, 60]], False)
    assert Chunk(**far, corr_lo=40, corr_hi=50).needed(0.0, 1.0, [[30, 40]], False)
    assert not Chunk(**far, corr_lo=40, corr_hi=50).needed(0.0, 1.0, [[51, 60], [1, 39]], False)
