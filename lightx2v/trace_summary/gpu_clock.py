"""Whether the GPU's times can be laid on the CPU's timeline, and which GPU events' times cannot.

    clock = gpu_clock(c, chain)    # GpuClock: the answer (``check``) and which events' times are trusted

Kineto converts every GPU timestamp to the host's clock. Where that went wrong, a GPU event's time contradicts
what the host recorded of the same work, by more than clock rounding or any queue explains. An event is **off**:

- **before its launch**: it starts more than TOLERANCE_US before the runtime or driver call that launched it (the
  same correlation id) began. CUPTI records stamped in another clock domain read so (pytorch/pytorch#192021: ~1e14
  ns early, the first kernels of every capture after the first in a process).
- **after a device sync**: it ends more than TOLERANCE_US after a device-wide synchronize returned
  (DEVICE_SYNC_CALLS) that the host called once its launch call had returned, though that call waits for all of
  the device's work: GPU times later than they were (pytorch/pytorch#175790: a later capture in one process, its
  GPU activity further and further right of its CPU ops). One-device traces only (the call waits for its own).
- **far off**: it lies more than FAR_US before the first or after the last CPU event (op, label, runtime call, CPU
  step): a clock offset, not a queue, whether its launch is recorded or not.

An off event's duration and launch stay right: it counts in the kernel and memory tables, GPU activity, the
launches, each step's kernels and GPU time launched (by launch), efficiency and frames. Its place in time does not:
it is left out of the union of GPU activity (busy), the steps' GPU tails, busy, idle and lag, communication kernels'
time in steps, and the trace's span.

The **whole GPU clock** is off the CPU's when one offset of every GPU time explains what is off: the GPU times are
late by at least the most a GPU event ends after a device sync returned, and every launched event started at least
that long after its launch (a late capture's GPU activity, shifted as a whole); or WHOLE_CLOCK_SHARE or more of the
GPU events are off. The GPU times then still agree among themselves (busy, the kernels' times stand), but nothing
that lays them on the CPU's timeline (per-step busy, idle, lag, communication) can be given; ``offset_us`` says
the least offset the trace proves (late > 0, early < 0).
"""

from __future__ import annotations

import math
from array import array
from bisect import bisect_right
from dataclasses import dataclass
from functools import cached_property
from itertools import compress, repeat
from operator import add, lt, sub

from .collect import NO_ID, Collected
from .launch import LaunchChain
from .model import GpuClockCheck

TOLERANCE_US = 5.0  # clock rounding between the GPU's and the CPU's times (the corpora's launches: >= 2 us ahead)
FAR_US = 60e6  # outside the CPU events' span by this much: no queue is that deep
WHOLE_CLOCK_SHARE = 0.5
DEVICE_SYNC_CALLS = frozenset({"cudaDeviceSynchronize", "cuCtxSynchronize", "hipDeviceSynchronize"})


@dataclass
class GpuClock:
    check: GpuClockCheck | None  # None without GPU events
    off: list[bool] | None = None  # per GPU event (file order): its time is contradicted; None: none is
    whole: bool = False  # the GPU clock itself is off the CPU's
    span: tuple[float, float] | None = None  # the trace's span without the off events (None: nothing off)

    @cached_property
    def placed(self) -> list[bool] | None:
        """Per GPU event: its time lies on the CPU's timeline (None: every one's does)."""
        if self.off is None:
            return None
        return [False] * len(self.off) if self.whole else [not o for o in self.off]

    @cached_property
    def on_gpu(self) -> list[bool] | None:
        """Per GPU event: its time is right among the GPU's own (None: every one's is; so too when only the whole
        clock is off)."""
        return None if self.off is None or self.whole else [not o for o in self.off]


def gpu_clock(c: Collected, chain: LaunchChain) -> GpuClock:
    n = len(c.g_lo)
    if not n:
        return GpuClock(check=None)
    ends = array("d", map(add, c.g_lo, c.g_dur))
    before = list(map(lt, c.g_lo, map(sub, chain.launch_ts, repeat(TOLERANCE_US))))  # NaN (no launch): False
    late = _past_device_sync(c, chain, ends)  # by how much each event ends after a sync it preceded returned
    after = [x > TOLERANCE_US for x in late]
    far = _far_off(c, ends)
    off = [b or a or f for b, a, f in zip(before, after, far, strict=True)]
    count = sum(off)
    whole, offset = _whole_clock(c, chain, max(late), count >= WHOLE_CLOCK_SHARE * n) if count else (False, None)
    check = GpuClockCheck(gpu_events=n, before_launch=sum(before), after_sync=sum(after), far_off=sum(far),
                          off=count, whole_clock=whole, offset_us=offset,
                          example=_name(c, off.index(True)) if count else "")
    if not count:
        return GpuClock(check=check)
    return GpuClock(check=check, off=off, whole=check.whole_clock, span=_span(c, ends, off, check.whole_clock))


def _whole_clock(c: Collected, chain: LaunchChain, late: float, most_off: bool) -> tuple[bool, float | None]:
    """Whether the whole GPU clock is off (see the docstring), and the least offset the trace proves (None: it
    proves none). ``late``: the most an event ends after a device sync it preceded returned."""
    first = min((t for t in map(sub, c.g_lo, chain.launch_ts) if t == t), default=math.inf)  # start - launch
    if late > TOLERANCE_US and first >= late - TOLERANCE_US:
        return True, late  # every event at least that late: one offset
    if most_off and late <= first + TOLERANCE_US:  # the constraints agree with one offset
        return True, first if first < -TOLERANCE_US else None
    return False, None


def _past_device_sync(c: Collected, chain: LaunchChain, ends: array) -> list[float]:
    """Per GPU event: how long after a device-wide sync, begun once its launch had returned, returned it ends
    (-inf when no such sync follows it, or the trace's GPU events are on several devices)."""
    sync_ids = {i for name, i in c.rt_names.items() if name in DEVICE_SYNC_CALLS}
    devices = {d for d in c.g_dev if d != NO_ID} or {pid for pid, _ in c.streams}
    if not sync_ids or len(devices) > 1:
        return [-math.inf] * len(ends)
    syncs = sorted((c.rt_ts[i], c.rt_ts[i] + c.rt_dur[i]) for i, name in enumerate(c.rt_name) if name in sync_ids)
    starts = [a for a, _ in syncs]
    returned = [math.inf] * (len(syncs) + 1)  # from the k-th sync on, the earliest return
    for k in range(len(syncs) - 1, -1, -1):
        returned[k] = min(returned[k + 1], syncs[k][1])
    call_dur = array("d", c.rt_dur)
    call_dur.append(math.nan)  # chain.call is NONE (-1) without a launch record: its launch ends at NaN
    launched = map(add, chain.launch_ts, map(call_dur.__getitem__, chain.call))
    first = map(bisect_right, repeat(starts), launched)  # the first sync begun after the launch returned (NaN: none)
    return list(map(sub, ends, map(returned.__getitem__, first)))


def _far_off(c: Collected, ends: array) -> list[bool]:
    """Per GPU event: more than FAR_US outside the CPU events' span (all False without CPU events)."""
    lo, hi = _cpu_span(c)
    if lo > hi or (min(c.g_lo) >= lo - FAR_US and max(ends) <= hi + FAR_US):
        return [False] * len(ends)
    early, late = lo - FAR_US, hi + FAR_US
    return [b < early or a > late for a, b in zip(c.g_lo, ends, strict=True)]


def _cpu_span(c: Collected) -> tuple[float, float]:
    """(first start, last end) of the ops, labels, runtime calls and CPU steps; (inf, -inf) without any."""
    starts = [min(ts) for ts in (c.op_ts, c.lab_ts, c.rt_ts) if len(ts)] + [lo for lo, _ in c.cpu_steps.values()]
    stops = [max(map(add, ts, dur)) for ts, dur in ((c.op_ts, c.op_dur), (c.lab_ts, c.lab_dur), (c.rt_ts, c.rt_dur))
             if len(ts)] + [hi for _, hi in c.cpu_steps.values()]
    return min(starts, default=math.inf), max(stops, default=-math.inf)


def _span(c: Collected, ends: array, off: list[bool], whole: bool) -> tuple[float, float]:
    """The trace's span as ``collect`` keeps it (ops, labels, steps, GPU events), without the off GPU events, and
    without the GPU-side steps kineto derives from the GPU's times; without any GPU event when the whole clock is
    off."""
    starts = [min(ts) for ts in (c.op_ts, c.lab_ts) if len(ts)] + [lo for lo, _ in c.cpu_steps.values()]
    stops = [max(map(add, ts, dur)) for ts, dur in ((c.op_ts, c.op_dur), (c.lab_ts, c.lab_dur)) if len(ts)] + [
        hi for _, hi in c.cpu_steps.values()]
    if not whole:
        keep = [not o for o in off]
        starts += list(compress(c.g_lo, keep))
        stops += list(compress(ends, keep))
    return min(starts, default=math.inf), max(stops, default=-math.inf)


def _name(c: Collected, g: int) -> str:
    key = list(c.gpu_names)[c.g_name[g]]
    return key if isinstance(key, str) else key[1]
