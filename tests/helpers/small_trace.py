"""A small hand-made kineto trace of one rank for the fast tests of the summary's entry points (the hook, the
command line, the run summaries): ``ProfilerStep`` spans, one op per kernel (each its own name, CPU time and
GPU time), and optionally two Python frames (a user frame around torch's ``_call_impl``, a library frame). Every
figure is set here, so a test can write the expected report lines by hand."""

from __future__ import annotations

from pathlib import Path

from helpers.kineto import HOST_TID, Kineto

T0 = 1000.0
STEP_US = 2000.0
USER_FRAME = "app.py(3): main"
LIBRARY_FRAME = "torch/nn/modules/module.py(1): _call_impl"


def small_trace(path: Path, *, ops: int = 12, steps: int = 1, rank: int | None = None, frames: bool = True,
                gpu: bool = True, step_us: float = STEP_US, op_prefix: str = "aten::",
                kernel_prefix: str = "kern", matmuls: int = 0, memory: tuple[tuple[float, int], ...] = (),
                start: float = T0) -> str:
    """Writes the trace to ``path``: ``steps`` steps of ``step_us`` from ``start``; op i (``<op_prefix>opNN``)
    starts at start + 10 + 100 i, lasts 20 + i us and launches kernel ``<kernel_prefix>NN`` of 10 + i us (none
    without ``gpu``); ``matmuls``: that many ``aten::mm`` of two float 512x512 matrices (268,435,456 FLOPs) after
    them, each with its shapes recorded and a 100 us kernel ``gemm``; ``memory``: (time after ``start``, bytes) of
    each cuda:0 allocation (> 0) or free (< 0), in time order."""
    k = Kineto(rank=rank)
    for n in range(1, steps + 1):
        k.step(n, start + (n - 1) * step_us, step_us)
    if frames:
        for name, ts, dur in ((USER_FRAME, start + 1, step_us - 10), (LIBRARY_FRAME, start + 2, step_us - 20)):
            k.events.append({"ph": "X", "cat": "python_function", "name": name, "pid": 1, "tid": HOST_TID,
                             "ts": ts, "dur": dur, "args": {}})
    for i in range(ops):
        launched = [("kernel", f"{kernel_prefix}{i:02}", 10.0 + i)] if gpu else []
        k.op(f"{op_prefix}op{i:02}", start + 10 + i * 100, launched, dur=20.0 + i)
    for i in range(matmuls):
        k.op("aten::mm", start + 10 + (ops + i) * 100, [("kernel", "gemm", 100.0)], dur=20.0)
        cpu_op = next(e for e in reversed(k.events) if e["cat"] == "cpu_op")
        cpu_op["args"].update({"Input Dims": [[512, 512], [512, 512]], "Input type": ["float", "float"]})
    total = 0
    for n, (at, nbytes) in enumerate(memory):
        total += nbytes
        k.events.append({"ph": "i", "cat": "cpu_instant_event", "name": "[memory]", "pid": 1, "tid": HOST_TID,
                         "s": "t", "ts": start + at, "args": {"Addr": 1 + n, "Bytes": nbytes,
                                                             "Total Allocated": total, "Total Reserved": 1 << 30,
                                                             "Device Type": 1, "Device Id": 0}})
    return k.write(path)


def tqdm_without_threads(monkeypatch) -> None:
    """tqdm with no monitor thread and no lock shared across processes, for the tests of code that shows a progress
    bar: mutmut forks a process per mutant, and a fork taken while tqdm's monitor thread holds its lock, or a
    process killed holding the multiprocessing lock, leaves every later run waiting on that lock (a timeout)."""
    import threading

    import tqdm.std

    monkeypatch.setattr(tqdm.std.tqdm, "monitor_interval", 0)
    monkeypatch.setattr(tqdm.std.tqdm, "_lock", threading.RLock(), raising=False)
