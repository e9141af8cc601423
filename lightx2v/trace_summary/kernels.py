"""GPU kernels and memory operations: per-name totals, GPU busy time, communication kernels.

- GPU activity: events of category ``kernel``, ``gpu_memcpy``, ``gpu_memset`` (older: ``memcpy``/``memset``) on
  any device and stream of the file. GPU busy time is the length of their union, not their sum.
- A kernel's share is of the summed GPU activity (kernels + memcpy + memset).
- Communication kernels (NCCL/RCCL: ``comm.is_comm_kernel``) are measured apart for the rank comparison.
- Busy time and the communication kernels' union leave out the events whose times ``gpu_clock`` finds wrong
  (``on_gpu``); their durations count everywhere else.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from itertools import compress

from . import intervals
from .collect import Collected
from .comm import is_comm_kernel
from .model import GpuTotals, KernelStat, MemOpStat
from .names import short_name
from .ratios import percent


@dataclass
class GpuWork:
    """The per-name and interval figures the summary needs, computed once from the pass's arrays."""

    kernels: list[KernelStat]  # every kernel name, most time first
    memory_ops: list[MemOpStat]  # every memcpy/memset name, most time first
    totals: GpuTotals | None  # None without any GPU activity
    busy: intervals.Spans  # union of all GPU activity
    comm: intervals.Spans  # union of communication kernels
    is_kernel: list[bool]  # per GPU name id: a kernel (not a memcpy/memset)


def gpu_work(c: Collected, on_gpu: Sequence[bool] | None = None) -> GpuWork:
    """``on_gpu``: per GPU event, whether its time is right (``GpuClock.on_gpu``; None: every one's is)."""
    keys = list(c.gpu_names)
    calls = [0] * len(keys)
    total = [0.0] * len(keys)
    for g, d in zip(c.g_name, c.g_dur, strict=True):
        calls[g] += 1
        total[g] += d
    is_kernel = [k.__class__ is str for k in keys]
    is_comm = [is_kernel[g] and is_comm_kernel(k) for g, k in enumerate(keys)]
    kernel_us = sum((total[g] for g in range(len(keys)) if is_kernel[g]), 0.0)
    activity_us = kernel_us + sum((total[g] for g in range(len(keys)) if not is_kernel[g]), 0.0)
    ranked = sorted((g for g in range(len(keys)) if is_kernel[g]), key=lambda g: -total[g])
    kernels = [KernelStat(name=keys[g], short_name=short_name(keys[g]), calls=calls[g], total_us=total[g],
                          mean_us=total[g] / calls[g], pct_of_gpu_time=percent(total[g], activity_us) or 0.0)
               for g in ranked]
    memory = sorted((g for g in range(len(keys)) if not is_kernel[g]), key=lambda g: -total[g])
    memory_ops = [MemOpStat(kind=keys[g][0], name=keys[g][1], calls=calls[g], total_us=total[g],
                            bytes=c.mem_bytes[g]) for g in memory]
    def timed() -> Iterator[tuple[float, float, int]]:
        events = zip(c.g_lo, c.g_dur, c.g_name, strict=True)
        return events if on_gpu is None else compress(events, on_gpu)

    busy = intervals.merge((lo, lo + d) for lo, d, _ in timed())
    comm = intervals.merge((lo, lo + d) for lo, d, g in timed() if is_comm[g]) if any(is_comm) else intervals.Spans()
    totals = None
    if len(c.g_lo):
        totals = GpuTotals(
            busy_us=sum(b - a for a, b in busy),
            activity_us=activity_us,
            kernel_count=sum(calls[g] for g in range(len(keys)) if is_kernel[g]),
            kernel_us=kernel_us,
            memcpy_us=sum((m.total_us for m in memory_ops if m.kind == "memcpy"), 0.0),
            memset_us=sum((m.total_us for m in memory_ops if m.kind == "memset"), 0.0),
            streams=len(c.streams),
            devices=len({pid for pid, _ in c.streams}),
        )
    return GpuWork(kernels=kernels, memory_ops=memory_ops, totals=totals, busy=busy, comm=comm,
                   is_kernel=is_kernel)
