"""The Timeline's step index on its own, fast: what the page is told about a trace (``describe``: its steps'
times, the GPU events each launched, the span, the events read and skipped), held against the rule applied to
the hand-made trace of tests/helpers/steps_trace.py by ``json.load``; which correlation ids a step launched;
which pieces of a file a window must read; steps at their boundaries on a trace whose every time and correlation
id is chosen here; the cache folder (an index read back as built, its file's name, its pruning).
tests/test_timeline_window.py and tests/test_window_rules.py check the windows themselves."""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
from dataclasses import asdict
from pathlib import Path

import pytest
from test_timeline_window import CALL_CATS, GPU_CATS, expected_steps

from lightx2v.trace_browser.step_index import (
    INDEX_SUFFIX,
    KEEP_INDEXES,
    Chunk,
    IndexBuilder,
    describe,
    frame_span,
    prune,
    step_index,
)
from lightx2v.trace_summary import reader
from lightx2v.trace_summary.records import EVENTS

from helpers.kineto import GPU_TID, HOST_TID, Kineto
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


@pytest.mark.parametrize("typed", [True, False], ids=["typed", "generic"])
def test_the_page_is_told_the_span_of_the_timed_events_and_how_many_were_read_and_skipped(trace, monkeypatch, typed):
    monkeypatch.setattr(reader, "TYPED", typed)
    path, events = trace
    timed = [e for e in events if e.get("ph") == "X" and e.get("cat") != "python_function"]
    told = describe(step_index(path, None))
    assert told["span"] == [min(e["ts"] for e in timed), max(e["ts"] + e["dur"] for e in timed)]
    # the Python frames are not indexed, however they are written: the generic reader skips those written as
    # kineto writes them ("ph", then "cat") undecoded and reads the one written otherwise, the typed one reads all
    assert told["skipped"] == sum(1 for e in events if e.get("cat") == "python_function")
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


# --- steps at their boundaries, on a trace whose every time and correlation id is chosen here ----------------------

def boundaries(path: Path) -> str:
    """Steps 1 [1000, 2000], 2 [3000, 4000], 3 [5000, 6000] (named three times). In the file's order: an event
    without a time, an instant, step 3's launch (correlation id 1002, the lowest), step 1's launches 1004 and 1007,
    an orphan kernel 1005 between them (no launch carries it), step 1's launch 1009 at its very end (2000), step 1's
    GPU-side span up to 2500, and a CPU op named like step 2 that is not a step span."""
    k = Kineto()
    ev = k.events
    ev.append({"ph": "X", "cat": "cpu_op", "name": "no_time", "pid": 1, "tid": HOST_TID, "dur": 5.0, "args": {}})
    ev.append({"ph": "i", "cat": "cpu_instant_event", "name": "mark", "pid": 1, "tid": HOST_TID, "s": "t",
               "ts": 500.0})
    k.op("aten::third", 5100.0, [("kernel", "k3", 50.0)])  # correlation id 1002, run at 5200
    k.step(1, 1000.0, 1000.0)
    k.step(2, 3000.0, 1000.0)
    k._x("user_annotation", "ProfilerStep#3", HOST_TID, 5100.0, 900.0)
    k._x("user_annotation", "ProfilerStep#3", HOST_TID, 5000.0, 200.0)
    k._x("user_annotation", "ProfilerStep#3", HOST_TID, 5200.0, 100.0)
    k.op("aten::a", 1100.0, [("kernel", "k1a", 50.0)])  # 1004
    k.ids += 1
    k._x("kernel", "k_orphan", GPU_TID, 1300.0, 10.0, correlation=k.ids, stream=GPU_TID, device=0)  # 1005
    k.op("aten::b", 1200.0, [("kernel", "k1b", 50.0)])  # 1007
    k.op("aten::at_the_end", 1999.0, [("kernel", "k1c", 50.0)])  # 1009: launched at 2000, run at 2099..2149
    k._x("gpu_user_annotation", "ProfilerStep#1", GPU_TID, 1050.0, 1450.0)  # to 2500
    k._x("cpu_op", "ProfilerStep#2", HOST_TID, 3000.0, 1900.0)  # to 4900: not a step span
    return k.write(path)


def test_steps_at_their_boundaries_own_their_launch_runs_and_end_over_their_gpu_side_span(tmp_path):
    index = step_index(boundaries(tmp_path / "rank0.pt.trace.json"), None)
    assert [asdict(s) for s in index.steps] == [
        {"name": "ProfilerStep#1", "lo": 1000.0, "hi": 2000.0, "end": 2500.0, "launches": [[1004, 1004], [1007, 1009]],
         "gpu_events": 3},
        {"name": "ProfilerStep#2", "lo": 3000.0, "hi": 4000.0, "end": 4000.0, "launches": [], "gpu_events": 0},
        {"name": "ProfilerStep#3", "lo": 5000.0, "hi": 6000.0, "end": 6000.0, "launches": [[1002, 1002]],
         "gpu_events": 1},
    ]
    assert index.span == [500.0, 6000.0]


def test_a_trace_of_one_instant_spans_that_instant(tmp_path):
    path = tmp_path / "instant.pt.trace.json"
    path.write_text(json.dumps({"traceEvents": [{"ph": "i", "name": "mark", "pid": 1, "tid": 1, "ts": 7.5}]}))
    assert describe(step_index(str(path), None))["span"] == [7.5, 7.5]


def test_a_pieces_python_frames_are_read_from_the_windows_start_up_to_before_its_end():
    def needed(f_lo: float, f_hi: float) -> bool:
        return Chunk(start=0, stop=1, frames=True, f_lo=f_lo, f_hi=f_hi).needed(5.0, 20.0, [], True)

    assert (needed(20.0, 30.0), needed(19.9, 30.0), needed(0.0, 5.0), needed(0.0, 4.9)) == (False, True, True, False)


# --- the cache folder ----------------------------------------------------------------------------------------------

def test_an_index_read_back_from_the_cache_is_the_one_built(tmp_path):
    trace = steps_trace(tmp_path / "rank0.pt.trace.json", steps=20)
    cache = str(tmp_path / "cache")
    built = step_index(trace, cache, 256)
    assert len(built.chunks) > 10
    assert step_index(trace, cache, 256) == built


def test_the_cache_file_is_named_by_a_hash_of_the_path_even_one_not_valid_utf8(tmp_path):
    trace = os.path.join(str(tmp_path), os.fsdecode(b"rank0_\xff.pt.trace.json"))
    steps_trace(Path(trace))
    cache = tmp_path / "cache"
    step_index(trace, str(cache))
    (cached,) = cache.iterdir()
    assert re.fullmatch(r"[0-9a-f]{32}\.steps\.json", cached.name)
    data = json.loads(cached.read_text())
    data["steps"][0]["name"] = "from the cache"
    cached.write_text(json.dumps(data))
    assert step_index(trace, str(cache)).steps[0].name == "from the cache"


def test_writing_a_new_index_prunes_the_cache_to_its_bound_dropping_the_least_recently_used(tmp_path):
    cache = tmp_path / "cache"
    cache.mkdir()
    for i in range(KEEP_INDEXES):
        old = cache / f"{i:032x}{INDEX_SUFFIX}"
        old.write_text("{}")
        os.utime(old, ns=(10**9 * (100 + i),) * 2)  # index 0 the least recently used
    step_index(steps_trace(tmp_path / "rank0.pt.trace.json"), str(cache))
    left = {p.name for p in cache.iterdir()}
    assert len(left) == KEEP_INDEXES and f"{0:032x}{INDEX_SUFFIX}" not in left and f"{1:032x}{INDEX_SUFFIX}" in left


def test_an_index_removed_while_the_cache_is_pruned_leaves_the_others_pruned(tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    cache.mkdir()
    for i in range(4):
        p = cache / f"{i:032x}{INDEX_SUFFIX}"
        p.write_text("{}")
        os.utime(p, ns=(10**9 * (100 + i),) * 2)
    scandir = os.scandir
    gone = []

    def listed_then_one_removed(path):  # another server pruning the same folder between our listing and stat
        with scandir(path) as entries:
            listed = list(entries)
        os.unlink(listed[0].path)
        gone.append(listed[0].name)
        return contextlib.nullcontext(listed)

    monkeypatch.setattr(os, "scandir", listed_then_one_removed)
    prune(str(cache), keep=1)
    newest = max(set(range(4)) - {int(gone[0].split(".")[0], 16)})
    assert {p.name for p in cache.iterdir()} == {f"{newest:032x}{INDEX_SUFFIX}"}


# --- the times of a piece's skipped Python frames, from their bytes ------------------------------------------------

KINETO_FRAME = '{{"ph": "X", "cat": "python_function", "name": "{name}", "pid": 1, "tid": 1, "ts": {ts}, "dur": {dur}}}'


def test_a_pieces_frames_cover_from_their_earliest_start_to_their_latest_end():
    piece = ", ".join([KINETO_FRAME.format(name="a.py(1): f", ts=30.0, dur=5.0),
                       KINETO_FRAME.format(name="a.py(2): g", ts=10.5, dur=100.0)])
    assert frame_span(memoryview(piece.encode())) == (10.5, 110.5)


def test_a_piece_with_one_frame_whose_times_are_written_otherwise_has_no_frame_times():
    odd = '{"ph": "X", "cat": "python_function", "name": "b.py(3): h", "pid": 1, "tid": 1, "dur": 5.0, "ts": 50.0}'
    piece = ", ".join([KINETO_FRAME.format(name="a.py(1): f", ts=30.0, dur=5.0), odd])
    assert frame_span(memoryview(piece.encode())) == ()


# --- an index made along another pass: its batches merged into pieces -------------------------------------------

class Batches:
    """What IndexBuilder reads of a stream, set by hand: where the batch starts, the frames skipped so far."""

    def __init__(self, typed: bool) -> None:
        self.typed, self.generic, self.skipped, self.batch_start = typed, [], 0, 0
        self.events_end, self.metadata, self.compressed = 0, {}, False


def frame(ts, dur):
    return {"ph": "X", "cat": "python_function", "name": "f", "pid": 1, "tid": 1, "ts": ts, "dur": dur}


def op(ts, dur):
    return {"ph": "X", "cat": "cpu_op", "name": "op", "pid": 1, "tid": 1, "ts": ts, "dur": dur}


@pytest.mark.parametrize("typed", [True, False])
def test_batches_closer_than_a_piece_are_one_piece_with_their_frames_and_times_together(typed):
    builder, stream = IndexBuilder(merge_below=200), Batches(typed)
    as_read = (lambda events: EVENTS.decode(json.dumps(events).encode())) if typed else list
    for start, events in ((0, [frame(10, 10), op(100, 1)]), (100, [frame(5, 10), op(50, 1)]),
                          (300, [op(400, 1)]), (350, [frame(30, 1), {"ph": "X", "cat": "python_function"}])):
        stream.batch_start = start
        builder.feed(as_read(events), stream)
    stream.events_end = 500
    index = builder.finish(stream)
    pieces = [(c.start, c.stop, c.frames, c.f_lo, c.f_hi, c.t_lo, c.t_hi) for c in index.chunks]
    # the last piece's second frame has no times: its frames may lie anywhere
    assert pieces == [(0, 300, True, 5.0, 20.0, 50, 101), (300, 500, True, -math.inf, math.inf, 400, 401)]
    assert (index.events, index.skipped, index.span) == (3, 4, [50, 401])


def test_frames_skipped_undecoded_count_and_widen_the_piece_they_lie_in():
    builder, stream = IndexBuilder(merge_below=200), Batches(False)
    builder.skipped_bytes(memoryview(KINETO_FRAME.format(name="a.py(1): f", ts=7.0, dur=1.0).encode()))
    stream.skipped = 1
    builder.feed([op(100, 1)], stream)
    stream.batch_start = 150
    builder.feed([frame(3, 1)], stream)
    index = builder.finish(stream)
    assert [(c.frames, c.f_lo, c.f_hi) for c in index.chunks] == [(True, 3.0, 8.0)]
    assert (index.events, index.skipped) == (1, 2)
