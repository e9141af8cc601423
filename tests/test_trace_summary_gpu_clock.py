"""GPU times that contradict the host's record of the same work (``gpu_clock``), on real traces made wrong the ways
kineto gets them wrong: a kernel that starts before its own launch call (pytorch/pytorch#192021's records), every GPU
time 1e14 ns off the CPU's (1e11 us: kineto writes microseconds), a later capture whose GPU activity runs late
(pytorch/pytorch#175790). Each is said in one line with its count, in ``--json`` as ``gpu_clock``, and kept out of
the answers that lay GPU times on the CPU's timeline: those equal the figures of the same trace without the
events, while the answers from durations and launches equal the unchanged trace's.
"""

from __future__ import annotations

import copy
import gzip
import json
import subprocess
import sys

import pytest

from lightx2v.trace_summary.analyze import analyze_trace

from conftest import FIXTURES, H200_TRACE, subprocess_env

CONTROL = FIXTURES / "hta" / "trace_diff" / "control" / "control.json.gz"  # A100, NCCL, 6 steps
GPU_CATS = {"kernel", "gpu_memcpy", "gpu_memset"}
LAUNCH_CATS = {"cuda_runtime", "cuda_driver"}
SHIFTED_CATS = GPU_CATS | {"gpu_user_annotation"}  # kineto's GPU-side step spans are GPU times too
E14_NS = 1e11  # us


def load(path) -> dict:
    return json.loads(gzip.decompress(path.read_bytes()))


def write(tmp_path, name: str, doc: dict):
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    return path


def middle_kernel(doc: dict) -> dict:
    kernels = [e for e in doc["traceEvents"] if e.get("cat") == "kernel"]
    return kernels[len(kernels) // 2]


def before_its_launch(doc: dict) -> dict:
    """One kernel halfway through the trace moved to the start of its first CPU op, where the GPU sat idle, long
    before its own launch call began."""
    doc = copy.deepcopy(doc)
    k = middle_kernel(doc)
    (call,) = [e for e in doc["traceEvents"] if e.get("cat") in LAUNCH_CATS
               and e.get("args", {}).get("correlation") == k["args"]["correlation"]]
    k["ts"] = min(e["ts"] for e in doc["traceEvents"] if e.get("cat") == "cpu_op")
    assert k["ts"] < call["ts"] - 1000.0
    return doc


def without(doc: dict, gone) -> dict:
    return {**doc, "traceEvents": [e for e in doc["traceEvents"] if not gone(e)]}


def shifted(doc: dict, by: float) -> dict:
    """Every GPU time ``by`` us later (earlier when negative)."""
    doc = copy.deepcopy(doc)
    for e in doc["traceEvents"]:
        if e.get("cat") in SHIFTED_CATS:
            e["ts"] += by
    return doc


def timed(r) -> list:
    """The answers that lay GPU times on the CPU's timeline."""
    return [r.trace_span_us, r.trace_start_us, r.gpu.busy_us, r.idle, r.gpu_comm_us,
            [(s.start_us, s.wall_us, s.gpu_busy_us, s.gpu_busy_pct, s.idle, s.gpu_lag_us) for s in r.steps]]


def untimed(r) -> list:
    """The answers from GPU durations and launches."""
    g = r.gpu
    return [r.tables.kernels, r.memory_ops, r.tables.launches, r.launch_links, r.efficiency,
            (g.activity_us, g.kernel_us, g.kernel_count, g.memcpy_us, g.memset_us, g.streams),
            [(s.name, s.cpu_us, s.kernel_count, s.gpu_launched_us) for s in r.steps]]


def cli(*args: object) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "lightx2v.trace_summary", *map(str, args)], capture_output=True,
                          text=True, timeout=120, env=subprocess_env())


def skipped_lines(out: str) -> list[str]:
    return [line for line in out.splitlines() if line.startswith("  skipped ")]


@pytest.mark.parametrize("source", [H200_TRACE, pytest.param(CONTROL, marks=pytest.mark.slow)], ids=lambda p: p.name)
def test_a_kernel_before_its_launch_is_counted_and_left_out_of_the_timed_answers_only(tmp_path, source):
    doc = load(source)
    kernel = middle_kernel(doc)
    name = kernel["name"]
    moved = analyze_trace(str(write(tmp_path, "moved.json", before_its_launch(doc))))
    gone = analyze_trace(str(write(tmp_path, "gone.json", without(doc, lambda e: e is kernel))))
    same = analyze_trace(str(source))
    c = moved.gpu_clock
    assert (c.gpu_events, c.before_launch, c.after_sync, c.far_off, c.off, c.whole_clock, c.offset_us,
            c.example) == (same.gpu_clock.gpu_events, 1, 0, 0, 1, False, None, name)
    assert same.gpu_clock.off == 0
    assert timed(moved) == timed(gone) and timed(moved) != timed(same)
    assert untimed(moved) == untimed(same) and untimed(moved) != untimed(gone)


@pytest.mark.parametrize("by", [-E14_NS, E14_NS], ids=["early", "late"])
def test_gpu_times_1e14_ns_off_are_the_whole_gpu_clock_off(tmp_path, by):
    doc = load(H200_TRACE)
    off = analyze_trace(str(write(tmp_path, "off.json", shifted(doc, by))))
    same = analyze_trace(str(H200_TRACE))
    cpu_only = analyze_trace(str(write(tmp_path, "cpu.json", without(doc, lambda e: e.get("cat") in SHIFTED_CATS))))
    c = off.gpu_clock
    assert (c.off, c.gpu_events, c.whole_clock, c.far_off) == (180, 180, True, 180)
    assert (c.before_launch, c.after_sync) == ((180, 0) if by < 0 else (0, 180))
    assert c.offset_us == pytest.approx(by, abs=100.0)  # within the launches' queueing
    assert untimed(off) == untimed(same)
    assert off.gpu.busy_us == pytest.approx(same.gpu.busy_us, abs=0.01)  # the GPU times agree among themselves
    assert (off.trace_span_us, off.trace_start_us) == (cpu_only.trace_span_us, cpu_only.trace_start_us)
    assert [(s.wall_us, s.gpu_busy_us, s.idle, s.gpu_lag_us) for s in off.steps] == \
        [(s.wall_us, None, None, None) for s in cpu_only.steps]
    assert (off.idle, off.gpu_comm_us) == (None, None)


def test_a_later_capture_whose_gpu_activity_runs_late_is_the_whole_gpu_clock_off(tmp_path):
    late = analyze_trace(str(write(tmp_path, "late.json", shifted(load(H200_TRACE), 5000.0))))
    same = analyze_trace(str(H200_TRACE))
    c = late.gpu_clock
    assert (c.before_launch, c.far_off, c.whole_clock) == (0, 0, True)
    assert c.after_sync == c.off > 0  # the work that ran past the device sync that waited for it
    assert 4900.0 < c.offset_us <= 5000.0  # at least this late: the sync's own slack is the rest
    assert untimed(late) == untimed(same)
    assert [(s.gpu_busy_us, s.idle, s.gpu_lag_us) for s in late.steps] == [(None, None, None)]


def test_gpu_work_late_behind_the_host_is_no_clock_offset(tmp_path):
    """A GPU that lags its host is not late on its clock: only work that outlives a device sync is."""
    doc = load(H200_TRACE)
    syncs = [e for e in doc["traceEvents"] if e.get("name") == "cudaDeviceSynchronize"]
    assert syncs and analyze_trace(str(H200_TRACE)).gpu_clock.off == 0
    for e in syncs:  # the host waited longer: the GPU's work ends well inside its syncs
        e["dur"] += 5000.0
    assert analyze_trace(str(write(tmp_path, "slow_sync.json", doc))).gpu_clock.off == 0


CORPORA = sorted(str(p.relative_to(FIXTURES)) for p in FIXTURES.rglob("*.json.gz")
                 if not p.name.endswith("_et.json.gz"))  # an execution trace, no kineto


@pytest.mark.slow
@pytest.mark.parametrize("rel", CORPORA)
def test_no_trace_of_the_corpora_has_gpu_times_off(rel):
    """The rules hold on every real trace we have: V100, A100, H200, MI250, kineto 2021-2026 (no false alarm)."""
    r = analyze_trace(str(FIXTURES / rel))
    assert r.gpu_clock is None if r.gpu is None else r.gpu_clock.off == 0


@pytest.mark.slow
def test_the_summary_and_json_say_it_in_one_line_with_the_count(tmp_path):
    doc = load(H200_TRACE)
    moved = write(tmp_path, "moved.json", before_its_launch(doc))
    off = write(tmp_path, "off.json", shifted(doc, E14_NS))
    name = middle_kernel(doc)["name"]
    out = cli(moved, "--top", "1")
    assert out.returncode == 0 and out.stderr == ""
    assert skipped_lines(out.stdout) == [
        "  skipped   1 GPU event whose times contradict the host's (1 starting before the launch call; e.g. "
        f"{name[:57]}...): left out of busy, idle, lag and the span"]
    assert out.stdout.splitlines().index(skipped_lines(out.stdout)[0]) < out.stdout.splitlines().index("")
    assert skipped_lines(cli(off, "--top", "1").stdout) == [
        "  skipped   the GPU clock is off the CPU's (GPU times >= 27 h 46 min late): 180 of 180 GPU events contradict "
        "the host's (180 ending after a device sync returned, 180 over 60 s outside the CPU's events; e.g. "
        f"{name[:57]}...); per-step GPU busy, idle and lag not given, kernel times and launches stand"]
    (rank,) = json.loads(cli(moved, "--json").stdout)["runs"][0]["ranks"]
    assert rank["gpu_clock"] == {"gpu_events": 180, "before_launch": 1, "after_sync": 0, "far_off": 0, "off": 1,
                                 "whole_clock": False, "offset_us": None, "example": name}
    assert skipped_lines(cli(H200_TRACE).stdout) == []
