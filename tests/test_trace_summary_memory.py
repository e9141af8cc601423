"""Memory answers from ``[memory]`` events: real CPU captures with known allocations, and a CUDA-format trace.

CPU allocations produce the same ``[memory]`` events as CUDA ones (Device Type 0). The CPU allocator reports the
bytes asked for (no rounding: a 3,000,000-byte tensor is ``Bytes: 3000000``), so the figures must match to the
byte. The CUDA caching allocator would round each block up to 512 bytes; the synthetic CUDA trace states its
own totals, as kineto does.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from lightx2v.trace_summary import write_capture_summary
from lightx2v.trace_summary.analyze import analyze_trace
from lightx2v.trace_summary.memory import CURVE_POINTS, HINT, LEAK_MIN_BYTES
from lightx2v.trace_summary.render import render_rank

from conftest import subprocess_env
from helpers.summary import CPU_PID, T0, cpu_op, kernel, step_events, trace_doc, write_json

A, B, C, KEEP = 3_000_000, 5_000_000, 2_000_000, 2_000_000  # bytes; B via torch.ones (aten::ones > aten::empty)
ACTIVE = 3


def capture(path: Path, *, leak: bool, profile_memory: bool = True) -> Path:
    """A real torch.profiler capture (schedule wait 1, warmup 1, active 3) of allocations of known sizes."""
    import torch
    from torch.profiler import ProfilerActivity, profile, schedule

    kept = []
    with profile(activities=[ProfilerActivity.CPU], profile_memory=profile_memory,
                 schedule=schedule(wait=1, warmup=1, active=ACTIVE),
                 on_trace_ready=lambda p: p.export_chrome_trace(str(path))) as prof:
        for _ in range(2 + ACTIVE):
            a = torch.empty(A, dtype=torch.uint8)
            b = torch.ones(B, dtype=torch.uint8)
            del a
            c = torch.empty(C, dtype=torch.uint8)  # b + c < a + b: the step's peak is a + b
            del b, c
            if leak:
                kept.append(torch.empty(KEEP, dtype=torch.uint8))
            prof.step()
    return path


@pytest.fixture(scope="module")
def traces(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("memory")
    return {"steady": capture(d / "steady.pt.trace.json", leak=False),
            "leak": capture(d / "leak.pt.trace.json", leak=True),
            "off": capture(d / "off.pt.trace.json", leak=False, profile_memory=False)}


def test_known_allocations_peak_growth_and_top_op_to_the_byte(traces):
    r = analyze_trace(str(traces["steady"]))
    assert r.memory is not None
    (cpu,) = r.memory.devices
    assert (cpu.device, cpu.device_type, cpu.device_id, cpu.peak_reserved_bytes) == ("cpu", 0, None, None)
    assert [s.name for s in cpu.steps] == [s.name for s in r.steps] and len(cpu.steps) == ACTIVE
    for s in cpu.steps:
        assert s.growth_bytes == 0 and not s.grew  # every step gives back what it took
        assert s.peak_allocated_bytes - s.allocated_start_bytes == A + B  # a and b alive together
    assert cpu.peak_allocated_bytes - cpu.steps[0].allocated_start_bytes == A + B
    assert cpu.peak_step in {s.name for s in cpu.steps} and not cpu.leak
    top = cpu.top_ops[0]
    assert top.name == "aten::empty" and top.self_bytes == ACTIVE * (A + B + C) and top.allocations == 3 * ACTIVE
    ones = next(op for op in cpu.top_ops if op.name == "aten::ones")
    assert (ones.self_bytes, ones.total_bytes) == (0, ACTIVE * B)  # allocated by its child aten::empty
    assert top.live_at_peak_bytes == A + B  # the peak holds a and b, both from aten::empty
    assert cpu.allocated_bytes >= ACTIVE * (A + B + C)
    text = render_rank(r)
    assert "Memory cpu: peak allocated" in text and "no step grew" in text and HINT not in text


def test_a_leak_is_flagged_with_its_growth_per_step(traces):
    r = analyze_trace(str(traces["leak"]))
    (cpu,) = r.memory.devices
    assert [s.growth_bytes for s in cpu.steps] == [KEEP] * ACTIVE
    assert all(s.grew for s in cpu.steps) and cpu.leak
    assert cpu.leak_threshold_bytes == LEAK_MIN_BYTES  # 1% of a ~16 MB peak is below the 1 MiB floor
    starts = [s.allocated_start_bytes for s in cpu.steps]
    assert [b - a for a, b in zip(starts, starts[1:], strict=False)] == [KEEP] * (ACTIVE - 1)
    assert "!! LEAK: allocated memory grows in 3 of 3 steps (+2.0 MB per step" in render_rank(r)


def test_without_memory_events_one_line_says_how_to_record_them(traces, tmp_path):
    r = analyze_trace(str(traces["off"]))
    assert r.memory is None
    text = render_rank(r)
    assert text.count("profile_memory=True") == 1 and f"Memory: {HINT}" in text
    assert "--profile_memory" in text
    on = render_rank(analyze_trace(str(traces["steady"])))
    assert "profile_memory=True" not in on


@pytest.mark.slow
def test_json_and_the_capture_summary_file_carry_the_memory_answers(traces):
    proc = subprocess.run([sys.executable, "-m", "lightx2v.trace_summary", str(traces["leak"]), "--json"],
                          capture_output=True, text=True, timeout=120, env=subprocess_env())
    assert proc.returncode == 0, proc.stderr
    (rank,) = json.loads(proc.stdout)["runs"][0]["ranks"]
    (dev,) = rank["memory"]["devices"]
    assert set(dev) == {"device", "device_type", "device_id", "events", "allocations", "allocated_bytes",
                        "peak_allocated_bytes", "peak_allocated_at_us", "peak_step", "peak_reserved_bytes",
                        "leak_threshold_bytes", "leak", "steps", "top_ops", "unattributed_bytes",
                        "out_of_memory_events", "curve"}
    assert dev["leak"] is True and [s["growth_bytes"] for s in dev["steps"]] == [KEEP] * ACTIVE
    assert set(dev["steps"][0]) == {"name", "number", "start_us", "end_us", "allocated_start_bytes",
                                    "allocated_end_bytes", "growth_bytes", "peak_allocated_bytes",
                                    "peak_reserved_bytes", "grew"}
    assert set(dev["top_ops"][0]) == {"name", "allocations", "self_bytes", "total_bytes", "live_at_peak_bytes"}
    assert set(dev["curve"]) == {"ts_us", "allocated_bytes", "reserved_bytes", "peak_index"}
    assert dev["curve"]["allocated_bytes"][dev["curve"]["peak_index"]] == dev["peak_allocated_bytes"]
    assert rank["memory"]["snapshots"] == []
    off = subprocess.run([sys.executable, "-m", "lightx2v.trace_summary", str(traces["off"]), "--json"],
                         capture_output=True, text=True, timeout=120, env=subprocess_env())
    assert json.loads(off.stdout)["runs"][0]["ranks"][0]["memory"] is None

    lines = write_capture_summary(str(traces["leak"]))
    report = Path(str(traces["leak"]) + ".summary.txt").read_text()
    assert "Memory cpu: peak allocated" in report and "!! LEAK" in report
    assert any("memory" in line and "LEAK" in line for line in lines)


# -- a CUDA-format trace: Device Type 1 on devices 0 and 1, CPU events beside them ------------------------------

def mem(at: float, nbytes: int, total: int, reserved: int, addr: int, device_type: int = 1, device: int = 0,
        tid: int = CPU_PID) -> dict:
    return {"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": CPU_PID, "tid": tid,
            "ts": T0 + at, "args": {"Total Reserved": reserved, "Total Allocated": total, "Bytes": nbytes,
                                    "Device Id": device, "Device Type": device_type, "Addr": addr}}


MIB = 1 << 20


def cuda_trace_events() -> list[dict]:
    """Two steps. cuda:0: 100 MiB weights before the steps (outside any op), per step a 40 MiB activation in
    aten::mm (under aten::linear) and 10 MiB in aten::add, freed by the step's end. cuda:1: a 64 MiB buffer in
    step 2's aten::mm kept (growth in one step only). CPU: 1 MiB pinned staging in aten::empty."""
    ops, memory = [], []
    memory += [mem(1, 100 * MIB, 100 * MIB, 128 * MIB, 0x1000)]
    total0, total1 = 100 * MIB, 0
    for k, base in enumerate((100.0, 300.0)):
        ops += [*step_events(f"ProfilerStep#{k + 1}", base, base + 150, base + 10, base + 190),
                cpu_op("aten::linear", base + 10, base + 60), cpu_op("aten::mm", base + 20, base + 50),
                cpu_op("aten::add", base + 70, base + 80), kernel("gemm", base + 30, base + 90)]
        total0 += 40 * MIB
        memory.append(mem(base + 30, 40 * MIB, total0, 192 * MIB, 0x2000))
        total0 += 10 * MIB
        memory.append(mem(base + 75, 10 * MIB, total0, 192 * MIB, 0x3000))
        total0 -= 40 * MIB
        memory.append(mem(base + 100, -40 * MIB, total0, 192 * MIB, 0x2000))
        total0 -= 10 * MIB
        memory.append(mem(base + 110, -10 * MIB, total0, 192 * MIB, 0x3000))
        if k == 1:
            total1 += 64 * MIB
            memory.append(mem(base + 40, 64 * MIB, total1, 64 * MIB, 0x9000, device=1))
        memory.append(mem(base + 72, MIB, MIB, 0, 0x7000, device_type=0, device=-1))
        memory.append(mem(base + 120, -MIB, 0, 0, 0x7000, device_type=0, device=-1))
    # kineto writes the memory events after the ops, each kind in its own order: the file is not time-sorted
    return ops + sorted(memory, key=lambda e: (e["args"]["Device Id"], e["ts"]))


def test_cuda_format_trace_with_two_devices(tmp_path):
    r = analyze_trace(str(write_json(tmp_path / "cuda.pt.trace.json", trace_doc(cuda_trace_events()))))
    d0, d1, cpu = r.memory.devices
    assert (d0.device, d1.device, cpu.device) == ("cuda:0", "cuda:1", "cpu")
    assert (d0.device_type, d0.device_id, d1.device_id) == (1, 0, 1)
    assert d0.peak_allocated_bytes == 150 * MIB and d0.peak_reserved_bytes == 192 * MIB
    assert d0.peak_step == "ProfilerStep#1"  # the first time 150 MiB is reached
    assert [(s.allocated_start_bytes, s.allocated_end_bytes, s.peak_allocated_bytes, s.peak_reserved_bytes)
            for s in d0.steps] == [(100 * MIB, 100 * MIB, 150 * MIB, 192 * MIB)] * 2
    assert not d0.leak and d0.unattributed_bytes == 100 * MIB  # the weights came before any op
    mm, linear = d0.top_ops[0], next(op for op in d0.top_ops if op.name == "aten::linear")
    assert (mm.name, mm.self_bytes, mm.total_bytes, mm.allocations) == ("aten::mm", 80 * MIB, 80 * MIB, 2)
    assert (linear.self_bytes, linear.total_bytes) == (0, 80 * MIB)
    assert mm.live_at_peak_bytes == 40 * MIB  # step 1's activation, with step 1's add
    assert next(op for op in d0.top_ops if op.name == "aten::add").live_at_peak_bytes == 10 * MIB
    assert [s.growth_bytes for s in d1.steps] == [0, 64 * MIB] and d1.steps[1].grew and not d1.leak
    assert d1.peak_allocated_bytes == 64 * MIB and d1.top_ops[0].name == "aten::mm"
    assert cpu.peak_allocated_bytes == MIB and cpu.peak_reserved_bytes is None
    assert cpu.top_ops[0].name == "aten::add"  # the staging buffer was allocated inside aten::add's span
    text = render_rank(r)
    assert "Memory cuda:0: peak allocated 157.3 MB in ProfilerStep#1 (+0.075 ms), peak reserved 201.3 MB" in text
    assert "Memory cuda:1" in text and "ProfilerStep#2 kept +67.1 MB" in text


def test_the_curve_is_downsampled_and_keeps_the_peak(tmp_path):
    events = step_events("ProfilerStep#1", 0, 100_000)
    total = 0
    for i in range(20_000):  # a saw tooth with one tall spike in the middle
        size = 10 * MIB if i == 12_345 else 1000 + i % 7
        total += size
        events.append(mem(1 + i * 2, size, total, total + MIB, 0x10_0000 + i))
        total -= size
        events.append(mem(2 + i * 2, -size, total, total + MIB, 0x10_0000 + i))
    r = analyze_trace(str(write_json(tmp_path / "saw.pt.trace.json", trace_doc(events), indent=None)))
    (d,) = r.memory.devices
    curve = d.curve
    assert len(curve.ts_us) <= CURVE_POINTS and curve.ts_us == sorted(curve.ts_us)
    assert curve.allocated_bytes[curve.peak_index] == d.peak_allocated_bytes == 10 * MIB
    assert curve.ts_us[curve.peak_index] == d.peak_allocated_at_us == T0 + 1 + 12_345 * 2
    assert min(curve.allocated_bytes) == 0 and curve.reserved_bytes[0] == curve.allocated_bytes[0] + MIB


def test_malformed_memory_args_are_reported_like_other_malformed_events(tmp_path):
    good = cuda_trace_events()
    bad = [
        {**mem(5, 1, 1, 1, 1), "args": {**mem(5, 1, 1, 1, 1)["args"], "Bytes": "4096"}},
        {**mem(6, 1, 1, 1, 1), "args": {k: v for k, v in mem(6, 1, 1, 1, 1)["args"].items() if k != "Addr"}},
        {**mem(7, 1, 1, 1, 1), "args": [1, 2]},
        {**mem(8, 1, 1, 1, 1), "ts": "soon"},
        {**mem(9, 1, 1, 1, 1), "args": {**mem(9, 1, 1, 1, 1)["args"], "Total Allocated": 1.5}},
        {**mem(10, 1, 1, 1, 1), "args": {**mem(10, 1, 1, 1, 1)["args"], "Addr": 1 << 64}},  # beyond 64 bits
    ]
    clean = analyze_trace(str(write_json(tmp_path / "clean.pt.trace.json", trace_doc(good))))
    r = analyze_trace(str(write_json(tmp_path / "bad.pt.trace.json", trace_doc(good + bad))))
    got = {(s.field, s.problem): (s.count, s.example, s.dropped) for s in r.skipped_events}
    assert got == {("args.Bytes", "not an integer"): (1, "[memory]", True),
                   ("args.Addr", "missing"): (1, "[memory]", True),
                   ("args", "not an object"): (1, "[memory]", True),
                   ("ts", "not a number"): (1, "[memory]", True),
                   ("args.Total Allocated", "not an integer"): (1, "[memory]", True),
                   ("args.Addr", "out of range"): (1, "[memory]", True)}
    assert r.memory == clean.memory  # left out, never counted
    text = render_rank(r)
    assert "skipped   1 event whose args.Bytes is not an integer (e.g. [memory])" in text


def test_a_step_that_gives_memory_back_prints_its_growth_as_negative_bytes(tmp_path):
    """Growth is signed: a step that frees 5 MB it did not allocate shows -5.0 MB in the text and on the Overview
    (format_bytes scales only sizes; the Overview once printed it raw, -5000000 B)."""
    from lightx2v.trace_browser.overview import render_overview
    from lightx2v.trace_summary.summarize import summarize_paths

    events = [*step_events("ProfilerStep#1", 100, 250), cpu_op("aten::empty", 10, 20), cpu_op("aten::add", 110, 120),
              mem(15, 5_000_000, 5_000_000, 8 * MIB, 0x1000), mem(115, -5_000_000, 0, 8 * MIB, 0x1000)]
    path = write_json(tmp_path / "shrink.pt.trace.json", trace_doc(events))
    (run,) = summarize_paths([str(path)])
    (step,) = run.ranks[0].memory.devices[0].steps
    assert step.growth_bytes == -5_000_000
    assert re.search(r"ProfilerStep#1 +5\.0 MB +0 B +-5\.0 MB ", render_rank(run.ranks[0]))
    assert "<td class=num>-5.0 MB</td>" in render_overview(run)


def test_a_capture_without_steps_is_one_whole_trace_window(tmp_path):
    """No schedule, no prof.step(): the memory answers span the whole trace, from its first event."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    path = tmp_path / "nosteps.pt.trace.json"
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        a = torch.empty(A, dtype=torch.uint8)
        b = torch.ones(B, dtype=torch.uint8)
        del a, b
    prof.export_chrome_trace(str(path))
    r = analyze_trace(str(path))
    assert [s.name for s in r.steps] == ["(whole trace)"] and r.memory is not None
    (cpu,) = r.memory.devices
    (whole,) = cpu.steps
    assert whole.name == "(whole trace)" and cpu.peak_step == "(whole trace)"
    assert whole.peak_allocated_bytes - whole.allocated_start_bytes == A + B and whole.growth_bytes == 0
    assert whole.start_us <= whole.end_us


def test_long_captures_show_the_first_and_last_steps_in_both_tables(tmp_path):
    """15 steps: the step table and the memory table each show 10 + 2 rows and count the 3 left out between."""
    import torch
    from torch.profiler import ProfilerActivity, profile, schedule

    from lightx2v.trace_summary.render import MAX_STEP_ROWS

    path, steps = tmp_path / "long.pt.trace.json", MAX_STEP_ROWS + 3
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True, schedule=schedule(wait=0, warmup=1, repeat=1,
                 active=steps), on_trace_ready=lambda p: p.export_chrome_trace(str(path))) as prof:
        for _ in range(1 + steps):
            torch.empty(A, dtype=torch.uint8)  # one allocation per step, freed at once
            prof.step()
    r = analyze_trace(str(path))
    assert len(r.steps) == steps and r.memory is not None and len(r.memory.devices[0].steps) == steps
    lines = render_rank(r).splitlines()
    assert [line.strip() for line in lines].count("... 3 more steps ...") == 2
    names = [s.name for s in r.steps]
    for table_start in (i for i, line in enumerate(lines) if line.lstrip().startswith("step ")):
        rows = [line.split()[0] for line in lines[table_start + 1:table_start + 2 + MAX_STEP_ROWS]]
        assert rows == names[:MAX_STEP_ROWS - 2] + ["..."] + names[-2:], rows
