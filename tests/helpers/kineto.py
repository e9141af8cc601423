"""A hand-made kineto trace of one rank, every figure chosen by the test: ``ProfilerStep#N`` spans on the host
thread, ops with their runtime calls, and the GPU work each call launched (kernel, memcpy or memset). For the fast
tests whose expected values are worked out by hand from the events they write."""

from __future__ import annotations

import json
from pathlib import Path

HOST_TID, GPU_TID = 1, 7
GPU_CATS = {"kernel": ("kernel", "cudaLaunchKernel"), "memcpy": ("gpu_memcpy", "cudaMemcpyAsync"),
            "memset": ("gpu_memset", "cudaMemsetAsync")}


class Kineto:
    """Events of one trace; ``rank`` writes kineto's ``distributedInfo``."""

    def __init__(self, rank: int | None = None, world: int = 2) -> None:
        self.events: list[dict] = []
        self.ids = 1000
        self.meta = {"distributedInfo": {"backend": "gloo", "rank": rank, "world_size": world}} \
            if rank is not None else {}

    def _x(self, cat: str, name: str, tid: int, ts: float, dur: float, **args) -> None:
        self.events.append({"ph": "X", "cat": cat, "name": name, "pid": 0 if tid == GPU_TID else 1, "tid": tid,
                            "ts": ts, "dur": dur, "args": args})

    def step(self, n: int, ts: float, dur: float = 1000.0) -> None:
        self._x("user_annotation", f"ProfilerStep#{n}", HOST_TID, ts, dur)

    def op(self, name: str, ts: float, gpu: list[tuple[str, str, float]], dur: float = 50.0,
           label: str | None = None, **gpu_args) -> None:
        """``name`` from ``ts`` for ``dur`` us (inside a ``label`` record_function when given), launching ``gpu``:
        (kind, name, duration) each, run back to back from ``ts + 100`` on the GPU stream; ``gpu_args`` go into
        each GPU event's args (``bytes=4096``)."""
        if label is not None:
            self._x("user_annotation", label, HOST_TID, ts - 1, dur + 2)
        self.ids += 1
        ext = self.ids
        self._x("cpu_op", name, HOST_TID, ts, dur, **{"External id": ext})
        at = ts + 100
        for i, (kind, gpu_name, gpu_dur) in enumerate(gpu):
            cat, call = GPU_CATS[kind]
            self.ids += 1
            self._x("cuda_runtime", call, HOST_TID, ts + 1 + i, 0.5, correlation=self.ids, **{"External id": ext})
            self._x(cat, gpu_name, GPU_TID, at, gpu_dur, correlation=self.ids, stream=GPU_TID, device=0,
                    **{"External id": ext}, **gpu_args)
            at += gpu_dur

    def write(self, path: Path) -> str:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"schemaVersion": 1, **self.meta, "traceEvents": self.events}))
        return str(path)
