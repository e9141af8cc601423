"""A hand-made kineto trace of ``ProfilerStep``s (three by default) for the Timeline's windows: each step
launches its own kernel, step 1 also one that runs in step 2's time, and around them the events a real capture
has (metadata, Python frames, flow arrows, a GPU-side step span, a kernel without a launch record, one launched
after the last step, a memory instant), a kernel without a launch record in the last step's GPU tail, a Python
frame written with its keys in another order and two written at the end of the file. Every time is chosen here,
so a test can say by hand which window holds what."""

from __future__ import annotations

from pathlib import Path

from helpers.kineto import GPU_TID, HOST_TID, Kineto

T0 = 1_700_000_000_000.125  # epoch microseconds with a fraction, as kineto writes them
STEP_US = 1000.0
ORPHAN_CORRELATION = 999_999  # no runtime call carries it: placed by its time


def steps_trace(path: Path, steps: int = 3, spans: bool = False) -> str:
    """The trace at ``path``; ``steps`` > 3 adds more steps like the first ones before the last step's tail;
    ``spans``: with kineto's "Process Spans" event over the whole capture (20 steps' time, from before the first
    step), which every window holds, being in each step's time."""
    k = Kineto()
    ev = k.events
    if spans:
        ev.append({"ph": "X", "cat": "Trace", "name": "PyTorch Profiler (0)", "pid": "Spans",
                   "tid": "PyTorch Profiler", "ts": T0 - 5 * STEP_US, "dur": 20 * STEP_US, "args": {}})
    for pid, name in ((1, "python3"), (0, "GPU 0")):
        ev.append({"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": name}})
    ev.append({"ph": "M", "name": "thread_name", "pid": 1, "tid": HOST_TID, "args": {"name": "thread 1"}})
    ev.append({"ph": "X", "cat": "python_function", "name": "main.py(1): <module>", "pid": 1, "tid": HOST_TID,
               "ts": T0 - 100, "dur": steps * STEP_US + 2000, "args": {}})
    for n in range(1, steps + 1):
        lo = T0 + (n - 1) * STEP_US
        k.step(n, lo, STEP_US)
        ev.append({"ph": "X", "cat": "python_function", "name": f"model.py({n}): forward", "pid": 1,
                   "tid": HOST_TID, "ts": lo + 50, "dur": 800, "args": {}})
        k.op(f"aten::op{n}", lo + 100, [("kernel", f"k_step{n}", 50.0)])
    k.op("aten::late", T0 + 900, [("kernel", "k_late_from_step1", 300.0)])  # runs T0+1000..1300: step 2's time
    last = T0 + steps * STEP_US  # the last step's end
    k.op(f"aten::late{steps}", last - 100, [("kernel", f"k_late_from_step{steps}", 300.0)])  # its GPU tail: +200
    k._x("gpu_user_annotation", "ProfilerStep#1", GPU_TID, T0 + 200, 1100)
    k._x("kernel", "k_orphan", GPU_TID, T0 + 2500, 10, correlation=ORPHAN_CORRELATION, stream=GPU_TID, device=0)
    k._x("kernel", "k_orphan_in_tail", GPU_TID, last + 250, 10, correlation=ORPHAN_CORRELATION + 1,
         stream=GPU_TID, device=0)
    ev.append({"cat": "python_function", "ph": "X", "name": "other_writer.py(7): keys in another order",
               "pid": 1, "tid": HOST_TID, "ts": T0 + 1200, "dur": 10, "args": {}})
    k.op("aten::after", last + 500, [("memset", "k_after_steps", 5.0)])
    ev.append({"ph": "i", "cat": "cpu_instant_event", "name": "[memory]", "pid": 1, "tid": HOST_TID, "s": "t",
               "ts": T0 + 1500, "args": {"Bytes": 4096}})
    with_flows = []
    for e in ev:  # kineto's flow arrows: launch call -> GPU event, by correlation id, each after its event, so
        with_flows.append(e)  # pieces of Python frames hold flows too (events with a "ts" and no "dur")
        corr = (e.get("args") or {}).get("correlation")
        if corr is None or corr >= ORPHAN_CORRELATION:
            continue
        flow = {"ph": "s" if e["cat"] == "cuda_runtime" else "f", "id": corr, "pid": e["pid"], "tid": e["tid"],
                "ts": e["ts"], "cat": "ac2g", "name": "ac2g"}
        if flow["ph"] == "f":
            flow["bp"] = "e"
        with_flows.append(flow)
    ev[:] = with_flows
    # Python frames written at the end of the file, each among events of no step, so a window finds them by its
    # piece's flag, not by time: one followed by more events, one by the file's last event only.
    for n, at in ((1, T0 + 300), (2, T0 + STEP_US + 300)):
        ev.append({"ph": "X", "cat": "python_function", "name": f"late_writer.py({n}): written last", "pid": 1,
                   "tid": HOST_TID, "ts": at, "dur": 10, "args": {}})
        for i in range(3 - n):
            ev.append({"ph": "i", "cat": "cpu_instant_event", "name": f"after_everything_{n}_{i}", "pid": 1,
                       "tid": HOST_TID, "s": "t", "ts": last + 600 + n, "args": {}})
    return k.write(path)
