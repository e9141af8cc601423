"""Malformed events: every field the summary reads that is malformed is skipped and reported, never counted.

A trace is a good one (kernels, CPU ops, a memcpy, a step) plus one bad copy of an event per class of bad field.
The report must equal the good trace's, except for the ``skipped`` lines that say what was left out and why.
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys

import pytest

from lightx2v.trace_summary.analyze import analyze_trace

from conftest import subprocess_env
from helpers.summary import cpu_op, kernel, step_events, trace_doc, write_json


def good_events() -> list[dict]:
    memcpy = {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD (Pageable -> Device)", "pid": 0, "tid": 7,
              "ts": kernel("k", 0, 1)["ts"] + 500, "dur": 20, "args": {"bytes": 4096}}
    return [*step_events("ProfilerStep#1", 0, 1000, 5, 990), kernel("gemm_kernel", 10, 400),
            kernel("gemm_kernel", 450, 800), cpu_op("aten::mm", 5, 300), cpu_op("aten::add", 310, 320), memcpy]


def broken(template: dict, **fields: object) -> dict:
    event = copy.deepcopy(template)
    for key, value in fields.items():
        if value is DROP:
            del event[key]
        else:
            event[key] = value
    return event


DROP = object()

# (field, problem) -> bad copies of good events; each must be left out and counted under that reason
K, OP = kernel("bad_kernel", 900, 950), cpu_op("aten::bad", 900, 950)
BAD = {
    ("dur", "negative"): [broken(K, dur=-50.0), broken(OP, dur=-1)],
    ("ts", "not a number"): [broken(OP, ts="5130951173000"), broken(K, ts=True), broken(K, ts=None)],
    ("ts", "missing"): [broken(K, ts=DROP)],
    ("dur", "missing"): [broken(OP, dur=DROP)],
    ("dur", "not a number"): [broken(K, dur=[1])],
    ("ts", "not a finite number"): [broken(K, ts=1e400)],  # json.dumps writes Infinity; the parser reads inf
    ("name", "not a string"): [broken(K, name=7), broken(OP, name={"x": 1})],
    ("name", "missing"): [broken(OP, name=DROP)],
    ("pid/tid", "not a number or string"): [broken(OP, tid=[1, 2]), broken(K, pid={"a": 1})],
    ("cat", "not a string"): [broken(K, cat=["kernel"])],
}


def write(tmp_path, name: str, events: list[dict]):
    return write_json(tmp_path / name, trace_doc(events))


def test_each_malformed_field_is_skipped_counted_and_said(tmp_path):
    bad_events = [e for events in BAD.values() for e in events]
    memcpy_bad_bytes = broken(good_events()[-1], args={"bytes": -4096})
    good = analyze_trace(str(write(tmp_path, "good.json", good_events())))
    mixed = analyze_trace(str(write(tmp_path, "mixed.json", [*good_events(), *bad_events, memcpy_bad_bytes])))
    assert good.skipped_events == []
    dropped = {(s.field, s.problem): s.count for s in mixed.skipped_events if s.dropped}
    assert dropped == {reason: len(events) for reason, events in BAD.items()}
    (fields,) = [s for s in mixed.skipped_events if not s.dropped]
    assert (fields.field, fields.count, fields.example) == ("args.bytes", 1, "Memcpy HtoD (Pageable -> Device)")
    # nothing of the bad events reached the figures: they equal the good trace's (plus one more memcpy)
    assert [(k.name, k.calls, k.total_us) for k in mixed.top_kernels] == [("gemm_kernel", 2, 740)]
    assert [(k.name, k.calls, k.total_us) for k in good.top_kernels] == [("gemm_kernel", 2, 740)]
    assert mixed.top_cpu_ops == good.top_cpu_ops and mixed.gpu.memcpy_us == 2 * good.gpu.memcpy_us
    assert mixed.steps[0].kernel_count == good.steps[0].kernel_count == 2
    assert mixed.gpu.kernel_us == good.gpu.kernel_us == 740 and mixed.gpu.kernel_us >= 0
    assert [(m.calls, m.bytes) for m in mixed.memory_ops] == [(2, None)]  # one size unknown: the total is too
    assert mixed.event_count == good.event_count + len(bad_events) + 1


def test_negative_durations_never_make_negative_gpu_time(tmp_path):
    only_bad = [*step_events("ProfilerStep#1", 0, 100), kernel("k", 10, 20), broken(kernel("k", 30, 40), dur=-500)]
    r = analyze_trace(str(write(tmp_path, "neg.json", only_bad)))
    assert r.top_kernels[0].total_us == 10 and r.gpu.busy_us == 10 and r.gpu.activity_us == 10
    assert [(s.field, s.problem, s.count, s.example) for s in r.skipped_events] == [("dur", "negative", 1, "k")]


def cli(*args: object) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "lightx2v.trace_summary", *map(str, args)], capture_output=True,
                          text=True, timeout=120, env=subprocess_env())


def test_the_report_and_json_say_what_was_skipped(tmp_path):
    path = write(tmp_path, "t.json", [*good_events(), *BAD[("ts", "not a number")], *BAD[("dur", "negative")]])
    proc = cli(path)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    skipped = [line.strip() for line in proc.stdout.splitlines() if line.lstrip().startswith("skipped ")]
    assert skipped == ["skipped   3 events whose ts is not a number (e.g. aten::bad)",
                       "skipped   2 events whose dur is negative (e.g. bad_kernel)"]
    doc = json.loads(cli(path, "--json").stdout)
    assert doc["runs"][0]["ranks"][0]["skipped_events"] == [
        {"field": "ts", "problem": "not a number", "count": 3, "example": "aten::bad", "dropped": True},
        {"field": "dur", "problem": "negative", "count": 2, "example": "bad_kernel", "dropped": True}]


@pytest.mark.slow
def test_an_empty_trace_says_so_instead_of_top_0(tmp_path):
    for events in ([], [{"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "x"}}]):
        proc = cli(write(tmp_path, "empty.json", events))
        assert proc.returncode == 0, proc.stderr
        assert "Top 0" not in proc.stdout and "CPU ops: none recorded" in proc.stdout
        assert "no timed events in this trace" in proc.stdout and "wall ms" not in proc.stdout
    only_memcpy = [*step_events("ProfilerStep#1", 0, 100), good_events()[-1]]
    out = cli(write(tmp_path, "memcpy.json", only_memcpy)).stdout
    assert "Top 0" not in out and "GPU kernels: none (GPU activity" in out
