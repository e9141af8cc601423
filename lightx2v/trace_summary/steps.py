"""Steps and GPU idle time: the ``ProfilerStep#N`` windows, the GPU work each step launched, idle by cause.

- A step is a ``ProfilerStep#N`` annotation. A GPU event belongs to the step whose CPU span holds its launch
  (``launch``: the runtime call with its correlation id), however late the GPU runs it: a well-pipelined GPU
  finishes step N's work inside step N+1's CPU span. Events whose launch is not known are placed by their GPU
  start. Per step: kernels launched, their summed GPU time, and the lag (how long after the CPU step ended its
  last GPU work finished; kineto's GPU-side ``ProfilerStep#N`` span counts as GPU work of the step).
- The step's window (its wall time) is its CPU span, extended over its GPU tail but never past the next step's
  start: windows do not overlap, so step walls add up to at most the trace's span and every idle gap is counted
  once. A trace without step annotations is one step spanning its events; one with only GPU-side spans uses
  those as windows.
- GPU busy is the union of all GPU activity inside the window (whichever step launched it); idle is the rest.
  It is flagged at IDLE_FLAG_RATIO of the window. Each gap is classified by the GPU event that ends it (HTA's
  rule and a step further): launched only after the GPU went idle -> "sync" when the host sat in a
  synchronizing call (SYNC_CALLS, SYNC_OPS) during the gap, else "host wait" (also when nothing more is ever
  launched); already queued -> "short gaps" below SHORT_GAP_US (launch overhead between back-to-back work:
  launch-bound), else "other" (waits on events, other streams); its launch not recorded -> "unknown".
- A GPU event whose time ``gpu_clock`` finds off counts in the step that launched it (kernels, GPU time launched)
  and in nothing that reads its time (tails, busy, idle, lag, gaps); GPU-side step spans, derived from GPU times,
  then extend no tail. When the whole GPU clock is off, busy, idle and lag are not given (None).
"""

from __future__ import annotations

import math
from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import compress, repeat
from operator import le
from typing import TypeAlias

from . import intervals
from .collect import STEP_PREFIX, Collected
from .enclosing import NONE
from .gpu_clock import GpuClock
from .launch import LaunchChain
from .model import IdleCauses, IdleStats, StepStats, SyncWait
from .optree import OpTree
from .ratios import percent

IDLE_FLAG_RATIO = 0.20
GAP_REPORT_US = 10.0
SHORT_GAP_US = 30.0  # HTA's consecutive_kernel_delay: a queued gap shorter than this is launch overhead
WHOLE_TRACE = "(whole trace)"

HOST_WAIT, SYNC, SHORT_GAPS, OTHER, UNKNOWN = "host wait", "sync", "short gaps", "other", "unknown"
CAUSES = (HOST_WAIT, SYNC, SHORT_GAPS, OTHER, UNKNOWN)
# Host calls that block until the GPU catches up (CUDA runtime and driver, HIP); a blocking cudaMemcpy is one.
SYNC_CALLS = frozenset({
    "cudaDeviceSynchronize", "cudaStreamSynchronize", "cudaEventSynchronize", "cudaMemcpy", "cudaMemcpy2D",
    "cuCtxSynchronize", "cuStreamSynchronize", "cuEventSynchronize", "cuMemcpyDtoH", "cuMemcpyDtoH_v2",
    "hipDeviceSynchronize", "hipStreamSynchronize", "hipEventSynchronize", "hipMemcpy", "hipMemcpyWithStream",
})
# Ops that read a GPU value on the host (``tensor.item()``, Python ``if``/``print`` on a GPU scalar): a sync even
# where the trace has no runtime calls.
SYNC_OPS = frozenset({"aten::item", "aten::_local_scalar_dense"})

Intervals: TypeAlias = intervals.Spans | Sequence[tuple[float, float]]  # a list of pairs in the rules' tests


@dataclass
class Steps:
    steps: list[StepStats]
    of_gpu: array  # per GPU event (file order): index into ``steps``, NONE when outside every step
    cpu_spans: list[tuple[float, float]]  # per step: its CPU span (the window for CPU ops)
    of_op: array | None = None  # per CPU op: the step whose CPU span holds its start (``op_steps``, made once)


def op_steps(c: Collected, steps: Steps) -> array:
    """Per CPU op (file order): the index of the step whose CPU span holds its start, NONE outside every step;
    made once (the frame tree and the per-step series both read it), the bisects at C level."""
    if steps.of_op is None:
        starts = [lo for lo, _ in steps.cpu_spans]
        ends = [-math.inf, *(hi for _, hi in steps.cpu_spans)]  # by bisect_right's answer: before every step
        after = array("l", map(bisect_right, repeat(starts), c.op_ts))  # an array: no int object per op
        inside = map(le, c.op_ts, map(ends.__getitem__, after))
        steps.of_op = array("l", (k - 1 if ok else NONE for k, ok in zip(after, inside, strict=True)))
    return steps.of_op


# Where in the user's code a host call sat: (thread, start, end) -> "file.py:29 mlp" ("" unknown); frames.py
# builds it from a with_stack capture's Python frames (steps cannot import frames: frames builds on Steps)
CodeLine = Callable[[int, float, float], str]


def step_stats(c: Collected, busy: Intervals | None, is_kernel: list[bool], chain: LaunchChain,
               tree: OpTree, where: CodeLine | None = None, clock: GpuClock | None = None) -> Steps:
    """The steps in time order; GPU fields stay None when ``busy`` is None (no GPU activity). ``where`` names
    each sync cause's line in the user's code (with_stack captures); ``clock``: which GPU events' times lie on the
    CPU's timeline (``gpu_clock``; None: all)."""
    n = len(c.g_lo)
    g_lo, g_dur, g_name, launch_ts = c.g_lo, c.g_dur, c.g_name, chain.launch_ts
    of_gpu = array("l", [NONE]) * n
    placed = clock.placed if clock is not None else None
    span_lo, span_hi = clock.span if clock is not None and clock.span is not None else (c.span_lo, c.span_hi)
    if c.cpu_steps:
        spans = sorted((lo, hi, name) for name, (lo, hi) in c.cpu_steps.items())
        by_launch = True
    elif c.gpu_steps:
        spans = sorted((lo, hi, name) for name, (lo, hi) in c.gpu_steps.items())
        by_launch = False
    elif span_hi > span_lo:
        spans = [(span_lo, span_hi, WHOLE_TRACE)]
        by_launch = False
    else:
        return Steps(steps=[], of_gpu=of_gpu, cpu_spans=[])
    starts = [lo for lo, _, _ in spans]
    k_count = [0] * len(spans)
    launched = [0.0] * len(spans)
    gpu_end = [-math.inf] * len(spans)
    if by_launch:
        for g in range(n):
            t = launch_ts[g]
            if t == t:  # not NaN: the launch is known
                k = bisect_right(starts, t) - 1
                if k >= 0 and t <= spans[k][1]:
                    of_gpu[g] = k
                    end = g_lo[g] + g_dur[g]
                    if end > gpu_end[k] and (placed is None or placed[g]):
                        gpu_end[k] = end
        for k, (_, _, name) in enumerate(spans):
            tail = c.gpu_steps.get(name) if placed is None else None
            if tail is not None and tail[1] > gpu_end[k]:
                gpu_end[k] = tail[1]
        ends = [max(hi, min(gpu_end[k], starts[k + 1] if k + 1 < len(spans) else math.inf))
                for k, (_, hi, _) in enumerate(spans)]
    else:
        ends = [hi for _, hi, _ in spans]
    for g in range(n):
        k = of_gpu[g]
        off = placed is not None and not placed[g]
        if k == NONE:
            if by_launch and launch_ts[g] == launch_ts[g]:
                continue  # launched outside every step
            if off:  # no known launch, nor a time to place it by: only the whole trace holds it
                if spans[0][2] != WHOLE_TRACE:
                    continue
                k = 0
            else:
                k = bisect_right(starts, g_lo[g]) - 1  # no known launch: by its GPU start in the disjoint windows
                if k < 0 or g_lo[g] > ends[k]:
                    continue
            of_gpu[g] = k
        launched[k] += g_dur[g]
        if is_kernel[g_name[g]]:
            k_count[k] += 1
        end = g_lo[g] + g_dur[g]
        if end > gpu_end[k] and not off:
            gpu_end[k] = end
    timed = busy is not None and (clock is None or not clock.whole)  # GPU times lie on the CPU's timeline
    gaps = _GapCauses(c, chain, tree, where, placed) if timed else None
    out = []
    for k, (lo, hi, name) in enumerate(spans):
        wall = ends[k] - lo
        step = StepStats(name=name, number=step_number(name), start_us=lo + (c.base or 0.0), wall_us=wall,
                         cpu_us=hi - lo if by_launch or name == WHOLE_TRACE else 0.0,
                         gpu_busy_us=None, gpu_busy_pct=None, kernel_count=None, idle=None)
        if busy is not None:
            step.kernel_count = k_count[k]
            step.gpu_launched_us = launched[k]
        if busy is not None and gaps is not None:
            step.gpu_busy_us = intervals.covered(busy, lo, ends[k])
            step.gpu_busy_pct = percent(step.gpu_busy_us, wall)
            step.gpu_lag_us = max(0.0, gpu_end[k] - hi) if gpu_end[k] > -math.inf and by_launch else None
            step.idle = idle_in(busy, lo, ends[k], name, gaps)
        out.append(step)
    return Steps(steps=out, of_gpu=of_gpu, cpu_spans=[(lo, hi) for lo, hi, _ in spans])


class _GapCauses:
    """What ended each gap: the GPU events in start order with their launch times, and the host's syncs."""

    def __init__(self, c: Collected, chain: LaunchChain, tree: OpTree, where: CodeLine | None = None,
                 placed: Sequence[bool] | None = None) -> None:
        order = sorted(range(len(c.g_lo)) if placed is None else compress(range(len(c.g_lo)), placed),
                       key=c.g_lo.__getitem__)
        self.starts = [c.g_lo[g] for g in order]
        self.launch = [chain.launch_ts[g] for g in order]
        syncs: list[tuple[float, float, str, str, str]] = []  # (start, end, top-level op, call, line in the code)
        line = where or (lambda thread, lo, hi: "")
        names, op_name, root = list(c.names), c.op_name, tree.root
        sync_ids = {i for name, i in c.rt_names.items() if name in SYNC_CALLS}
        if sync_ids:
            rt_names = list(c.rt_names)
            for i, n_id in enumerate(c.rt_name):
                if n_id in sync_ids:
                    lo = c.rt_ts[i]
                    hi = lo + c.rt_dur[i]
                    t = c.rt_thread[i]
                    o = chain.call_op[i]
                    syncs.append((lo, hi, names[op_name[root[o]]] if o != NONE else "", rt_names[n_id],
                                  line(t, lo, hi)))
        sync_ops = {c.names[name] for name in SYNC_OPS if name in c.names}
        if sync_ops:
            for i, n_id in enumerate(op_name):
                if n_id in sync_ops:
                    lo, hi = c.op_ts[i], c.op_ts[i] + c.op_dur[i]
                    syncs.append((lo, hi, names[op_name[root[i]]], names[n_id], line(c.op_thread[i], lo, hi)))
        syncs.sort()
        self.syncs = syncs
        self.sync_starts = [s[0] for s in syncs]

    def classify(self, a: float, b: float) -> tuple[str, int]:
        """The cause of the GPU gap [a, b] and, for SYNC, the index of the sync call in ``syncs``."""
        nxt = bisect_left(self.starts, b)
        if nxt == len(self.starts):  # nothing more reaches the GPU: it waits for a host that launches no more
            return HOST_WAIT, NONE
        t = self.launch[nxt]
        if t != t:  # NaN: the event that ends the gap has no known launch
            return UNKNOWN, NONE
        if t > a:
            last = bisect_right(self.sync_starts, min(b, t)) - 1
            for j in range(last, max(last - 8, -1), -1):  # syncs overlapping the gap, begun before the launch
                if self.syncs[j][1] >= a:
                    return SYNC, j
            return HOST_WAIT, NONE
        return (SHORT_GAPS if b - a < SHORT_GAP_US else OTHER), NONE


def idle_in(busy: Intervals, lo: float, hi: float, step: str, causes: _GapCauses) -> IdleStats:
    gaps = intervals.gaps(busy, lo, hi)
    window = hi - lo
    idle = sum(b - a for a, b in gaps)
    largest = max(gaps, key=lambda g: g[1] - g[0], default=(lo, lo))
    ratio = idle / window if window > 0 else 0.0
    by_cause = dict.fromkeys(CAUSES, 0.0)
    syncs: dict[tuple[str, str, str], list[float]] = {}
    for a, b in gaps:
        cause, j = causes.classify(a, b)
        by_cause[cause] += b - a
        if j != NONE:
            _, _, op, call, line = causes.syncs[j]
            entry = syncs.setdefault((op, call, line), [0.0, 0])
            entry[0] += b - a
            entry[1] += 1
    return IdleStats(
        window_us=window,
        idle_us=idle,
        ratio=ratio,
        largest_gap_us=largest[1] - largest[0],
        largest_gap_at_us=largest[0] - lo,
        largest_gap_step=step,
        gaps_over_10us=sum(1 for a, b in gaps if b - a >= GAP_REPORT_US),
        flagged=ratio >= IDLE_FLAG_RATIO,
        causes=_causes(by_cause, {key: (us, int(count)) for key, (us, count) in syncs.items()}),
    )


def _causes(by_cause: dict[str, float], syncs: dict[tuple[str, str, str], tuple[float, int]]) -> IdleCauses:
    total = sum(by_cause.values())
    dominant = max(by_cause, key=lambda cause: by_cause[cause]) if total > 0 else ""
    return IdleCauses(host_wait_us=by_cause[HOST_WAIT], sync_us=by_cause[SYNC], short_gaps_us=by_cause[SHORT_GAPS],
                      other_us=by_cause[OTHER], unknown_us=by_cause[UNKNOWN], dominant=dominant,
                      syncs=[SyncWait(op=op, call=call, idle_us=us, gaps=count, line=line)
                             for (op, call, line), (us, count) in sorted(syncs.items(),
                                                                         key=lambda item: -item[1][0])])


def idle_total(steps: list[StepStats]) -> IdleStats | None:
    """All steps' idle together (None without GPU activity)."""
    measured = [s.idle for s in steps if s.idle is not None]
    if not measured:
        return None
    window = sum(i.window_us for i in measured)
    idle = sum(i.idle_us for i in measured)
    worst_step = max(range(len(measured)), key=lambda i: measured[i].largest_gap_us)
    worst = measured[worst_step]
    ratio = idle / window if window > 0 else 0.0
    by_cause = dict.fromkeys(CAUSES, 0.0)
    syncs: dict[tuple[str, str, str], tuple[float, int]] = {}
    for i in measured:
        if i.causes is None:
            continue
        for cause, us in cause_times(i.causes):
            by_cause[cause] += us
        for w in i.causes.syncs:
            us, count = syncs.get((w.op, w.call, w.line), (0.0, 0))
            syncs[(w.op, w.call, w.line)] = (us + w.idle_us, count + w.gaps)
    return IdleStats(window_us=window, idle_us=idle, ratio=ratio, largest_gap_us=worst.largest_gap_us,
                     largest_gap_at_us=worst.largest_gap_at_us, largest_gap_step=worst.largest_gap_step,
                     gaps_over_10us=sum(i.gaps_over_10us for i in measured), flagged=ratio >= IDLE_FLAG_RATIO,
                     causes=_causes(by_cause, syncs))


def cause_times(causes: IdleCauses) -> list[tuple[str, float]]:
    """(cause, idle us) in CAUSES order."""
    return [(HOST_WAIT, causes.host_wait_us), (SYNC, causes.sync_us), (SHORT_GAPS, causes.short_gaps_us),
            (OTHER, causes.other_us), (UNKNOWN, causes.unknown_us)]


def idle_advice(idle: IdleStats) -> str:
    """One line for the dominant cause of the idle time, with its share: what to look at first."""
    causes = idle.causes
    if causes is None or not causes.dominant or idle.idle_us <= 0:
        return ""
    share = dict(cause_times(causes))[causes.dominant] / idle.idle_us * 100
    if causes.dominant == SYNC:
        top = causes.syncs[0] if causes.syncs else None
        where = f": {top.op + ' -> ' if top.op else ''}{top.call} {top.idle_us / 1000:.3f} ms" if top else ""
        return (f"host syncs hold the GPU ({share:.0f}% of idle{where}); move .item()/.cpu()/printing of GPU "
                "tensors out of the step")
    if causes.dominant == HOST_WAIT:
        return (f"the GPU waits for the host to launch work ({share:.0f}% of idle): CPU time between launches "
                "(Python, CPU ops, data); see the CPU ops at the largest gap; CUDA graphs or torch.compile cut "
                "per-launch host cost")
    if causes.dominant == SHORT_GAPS:
        return (f"short gaps between queued kernels ({share:.0f}% of idle): launch-bound (many small kernels); "
                "CUDA graphs or torch.compile (fusion) may help")
    if causes.dominant == OTHER:
        return (f"long gaps with work already queued ({share:.0f}% of idle): waits on events or other streams "
                "(communication, copies)")
    return (f"the trace records no launch for the work after most gaps ({share:.0f}% of idle): the cause cannot "
            "be told; look for a host sync, data loading or CPU work at the largest gap")


def step_number(name: str) -> int | None:
    try:
        return int(name[len(STEP_PREFIX):]) if name.startswith(STEP_PREFIX) else None
    except ValueError:
        return None
