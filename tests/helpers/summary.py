"""Helpers for the trace-summary tests: synthetic kineto-shaped traces and real CPU captures."""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path

T0 = 5_130_951_173_000.0  # a realistic kineto timestamp (us), so float precision matches real traces
GPU_PID, STREAM, CPU_PID = 0, 7, 4242


def step_events(name: str, lo: float, hi: float, gpu_lo: float | None = None, gpu_hi: float | None = None) -> list:
    events = [{"ph": "X", "cat": "user_annotation", "name": name, "pid": CPU_PID, "tid": CPU_PID,
               "ts": T0 + lo, "dur": hi - lo, "args": {"External id": 1}}]
    if gpu_lo is not None:
        events.append({"ph": "X", "cat": "gpu_user_annotation", "name": name, "pid": GPU_PID, "tid": STREAM,
                       "ts": T0 + gpu_lo, "dur": gpu_hi - gpu_lo, "args": {"External id": 1}})
    return events


def kernel(name: str, lo: float, hi: float, stream: int = STREAM) -> dict:
    return {"ph": "X", "cat": "kernel", "name": name, "pid": GPU_PID, "tid": stream, "ts": T0 + lo,
            "dur": hi - lo, "args": {"device": 0, "stream": stream, "correlation": 1}}


def cpu_op(name: str, lo: float, hi: float, tid: int = CPU_PID) -> dict:
    return {"ph": "X", "cat": "cpu_op", "name": name, "pid": CPU_PID, "tid": tid, "ts": T0 + lo, "dur": hi - lo,
            "args": {"External id": 2}}


def back_to_back(name: str, lo: float, hi: float, size: float, gap: float = 0.0) -> list:
    """Kernels of ``size`` us from lo to hi, ``gap`` us apart."""
    out, at = [], lo
    while at + size <= hi + 1e-9:
        out.append(kernel(name, at, at + size))
        at += size + gap
    return out


def trace_doc(events: list, **metadata) -> dict:
    doc = {"schemaVersion": 1,
           "deviceProperties": [{"id": 0, "name": "NVIDIA H200", "totalGlobalMem": 150109880320,
                                 "computeMajor": 9, "computeMinor": 0}],
           "cuda_runtime_version": 12080, "displayTimeUnit": "ms", **metadata}
    doc["traceEvents"] = events
    return doc


def write_json(path: os.PathLike | str, doc: dict, *, gz: bool = False, indent: int | None = 2) -> Path:
    path = Path(path)
    data = json.dumps(doc, indent=indent).encode()
    path.write_bytes(gzip.compress(data) if gz else data)
    return path


def capture_cpu_trace(out_dir: os.PathLike | str, worker: str, *, steps: int = 2, use_gzip: bool = False) -> Path:
    """A real torch.profiler capture (schedule + tensorboard_trace_handler) of a small CPU workload."""
    import torch
    from torch.profiler import ProfilerActivity, profile, record_function, schedule, tensorboard_trace_handler

    x = torch.randn(128, 128)
    with profile(activities=[ProfilerActivity.CPU], schedule=schedule(wait=1, warmup=1, active=steps),
                 on_trace_ready=tensorboard_trace_handler(str(out_dir), worker_name=worker, use_gzip=use_gzip),
                 with_stack=True) as prof:
        for _ in range(2 + steps):
            with record_function("denoise"):
                y = torch.nn.functional.gelu(x @ x)
                torch.nn.functional.layer_norm(y, (128,)).sum()
            prof.step()
    suffix = ".pt.trace.json.gz" if use_gzip else ".pt.trace.json"
    (path,) = [p for p in Path(out_dir).iterdir() if p.name.startswith(worker) and p.name.endswith(suffix)]
    return path
