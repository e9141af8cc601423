"""One pass over one trace file -> :class:`RankSummary`: steps, GPU busy time, idle gaps, top kernels and CPU ops.

Only compact numbers are kept per event (arrays of floats, interned names), so memory grows with the number of
kernels and CPU ops, not with the JSON text. Definitions (also in docs/trace_summary.md):

- GPU activity: events of category ``kernel``, ``gpu_memcpy``, ``gpu_memset`` (older: ``memcpy``/``memset``) on
  any device and stream of the file. GPU busy time is the length of their union, not their sum.
- A step is a ``ProfilerStep#N`` annotation. Its window runs from the CPU-side step start to the later of the
  CPU step end and the end of the GPU-side ``ProfilerStep#N`` (kineto's ``gpu_user_annotation``, which spans
  the GPU work launched in the step). Busy and idle are measured inside that window; kernel count = kernels
  starting in it. A trace without step annotations is treated as one step spanning its CPU ops and GPU work.
- Idle = window minus busy. It is flagged when it reaches IDLE_FLAG_RATIO of the window: a GPU idle for a fifth
  of a step is starved (launch-bound small kernels, host syncs, CPU work between kernels).
- CPU op self time = duration minus the durations of the ``cpu_op`` events directly nested in it on the same
  thread (TensorBoard's "self host duration").
"""

from __future__ import annotations

import os
import sys
from array import array
from bisect import bisect_left
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from . import intervals, memory
from .model import (
    CpuOpStat,
    Device,
    GpuTotals,
    IdleStats,
    KernelStat,
    MemOpStat,
    RankSummary,
    SkippedEvents,
    StepStats,
)
from .names import rank_from_name, short_name, worker_name
from .reader import TraceStream

IDLE_FLAG_RATIO = 0.20
GAP_REPORT_US = 10.0
STEP_PREFIX = "ProfilerStep#"
WHOLE_TRACE = "(whole trace)"

_CPU_OP_CATS = frozenset({"cpu_op", "operator", "Operator"})
_KERNEL_CATS = frozenset({"kernel", "Kernel"})
_MEM_CATS = {"gpu_memcpy": "memcpy", "Memcpy": "memcpy", "memcpy": "memcpy",
             "gpu_memset": "memset", "Memset": "memset", "memset": "memset"}
# Frequent categories this summary does not use: skipped before any other work.
_SKIP_CATS = frozenset({"python_function", "ac2g", "cuda_runtime", "cuda_driver", "Runtime", "runtime",
                        "driver", "Trace", "python", "fwdbwd", "overhead", "cuda_profiler_range"})
_COMM_MARKERS = ("nccl", "rccl")
# Kineto writes "ph" then "cat" first in every event: these events (Python stack frames, flow arrows, CUDA API
# calls; over half of a with_stack trace) are recognised from their first bytes and never decoded at all.
SKIP_HEAD = rb'\s*"ph"\s*:\s*(?:"[fs]"|"X"\s*,\s*"cat"\s*:\s*"(?:python_function|cuda_runtime|cuda_driver)")'

# ts and dur must be real numbers (JSON true is an int in Python, and no time), finite and within a float's range
# (the arrays hold doubles; the stdlib parser reads 1e400 as inf and a 400-digit integer as an int).
_NUMBER_TYPES: frozenset[type] = frozenset({int, float})
_FLOAT_MAX = sys.float_info.max


def analyze_trace(path: str, top: int = 10, on_read: Callable[[int], object] | None = None) -> RankSummary:
    """Read ``path`` once and summarize it; raises TraceError for files that are not complete traces.

    ``on_read``: progress callback, see ``TraceStream``.
    """
    stream = TraceStream(path, skip_head=SKIP_HEAD, on_read=on_read)
    acc = _Accumulator()
    for batch in stream.batches():
        acc.feed(batch)
    return acc.summary(path, stream, top)


class _Accumulator:
    """Compact per-event numbers gathered in one pass; ``summary`` turns them into the report's figures."""

    def __init__(self) -> None:
        self.events = 0
        self.names: dict[str, int] = {}  # CPU op name -> id
        self.kernels: dict[str, list[float]] = {}  # name -> [calls, total_us]
        self.mem_ops: dict[tuple[str, str], list[Any]] = {}  # (kind, name) -> [calls, total_us, bytes or None]
        self.g_lo, self.g_hi = array("d"), array("d")  # every GPU activity interval
        self.k_lo = array("d")  # kernel starts (step kernel counts)
        self.comm_lo, self.comm_hi = array("d"), array("d")  # communication kernels
        self.streams: set[tuple[Any, Any]] = set()
        self.threads: dict[tuple[Any, Any], int] = {}
        self.op_thread, self.op_name = array("l"), array("l")
        self.op_ts, self.op_dur = array("d"), array("d")
        self.cpu_steps: dict[str, list[float]] = {}
        self.gpu_steps: dict[str, list[float]] = {}
        self.span_lo, self.span_hi = float("inf"), float("-inf")
        self.malformed: dict[tuple[str, str, bool], list[Any]] = {}  # (field, problem, dropped) -> [count, example]
        self.memory = memory.MemoryEvents(self._count_malformed)  # [memory] instant events (profile_memory=True)

    def feed(self, batch: list[dict[str, Any]]) -> None:
        """The hot loop: a few dict lookups per event, then appends to arrays.

        An event the summary would use but whose fields it cannot (a ``ts`` that is no finite number, a negative
        ``dur``, a name that is no string, an unhashable ``pid``) goes to ``_reject``, which says why; every
        lookup that can fail comes before the first append, so a rejected event leaves no trace in the arrays.
        """
        self.events += len(batch)
        skip, cpu_cats, kernel_cats, mem_cats = _SKIP_CATS, _CPU_OP_CATS, _KERNEL_CATS, _MEM_CATS
        names, threads, kernels, streams = self.names, self.threads, self.kernels, self.streams
        g_lo, g_hi, k_lo = self.g_lo.append, self.g_hi.append, self.k_lo.append
        op_thread, op_name, op_ts, op_dur = (self.op_thread.append, self.op_name.append, self.op_ts.append,
                                             self.op_dur.append)
        span_lo, span_hi = self.span_lo, self.span_hi
        number, big, reject = _NUMBER_TYPES, _FLOAT_MAX, self._reject
        memory_cat, memory_event = memory.INSTANT_CAT, self.memory.feed
        for ev in batch:
            cat = ev.get("cat")
            try:
                if cat in skip or ev.get("ph") != "X":
                    if cat == memory_cat:
                        memory_event(ev)
                    continue
            except TypeError:  # an unhashable category (a list or an object)
                reject(ev)
                continue
            # Any JSON value until the check below; typed as what passes it (mypy cannot narrow by the set test,
            # and the narrowing it can do, a tuple test, costs twice as much per event).
            ts: float = ev.get("ts")  # type: ignore[assignment]
            dur: float = ev.get("dur")  # type: ignore[assignment]
            name: str = ev.get("name")  # type: ignore[assignment]
            if (ts.__class__ not in number or dur.__class__ not in number or name.__class__ is not str
                    or not (-big <= ts <= big and 0 <= dur <= big)):
                reject(ev)
                continue
            end = ts + dur
            if cat in cpu_cats and not name.startswith(STEP_PREFIX):
                key = (ev.get("pid"), ev.get("tid"))
                try:
                    t = threads.get(key)
                except TypeError:  # an unhashable pid or tid
                    reject(ev)
                    continue
                if t is None:
                    t = threads[key] = len(threads)
                n = names.get(name)
                if n is None:
                    n = names[name] = len(names)
                op_thread(t)
                op_name(n)
                op_ts(ts)
                op_dur(dur)
            elif cat in kernel_cats:
                try:
                    streams.add((ev.get("pid"), ev.get("tid")))
                except TypeError:
                    reject(ev)
                    continue
                k = kernels.get(name)
                if k is None:
                    kernels[name] = [1, dur]
                else:
                    k[0] += 1
                    k[1] += dur
                g_lo(ts)
                g_hi(end)
                k_lo(ts)
                if any(marker in name.lower() for marker in _COMM_MARKERS):
                    self.comm_lo.append(ts)
                    self.comm_hi.append(end)
            elif cat in mem_cats:
                try:
                    streams.add((ev.get("pid"), ev.get("tid")))
                except TypeError:
                    reject(ev)
                    continue
                self._mem_op(mem_cats[cat], name, dur, ev)
                g_lo(ts)
                g_hi(end)
            elif name.startswith(STEP_PREFIX):
                steps = self.gpu_steps if cat == "gpu_user_annotation" else self.cpu_steps
                s = steps.get(name)
                if s is None:
                    steps[name] = [ts, end]
                else:
                    s[0], s[1] = min(s[0], ts), max(s[1], end)
            else:
                continue
            if ts < span_lo:
                span_lo = ts
            if end > span_hi:
                span_hi = end
        self.span_lo, self.span_hi = span_lo, span_hi

    def _reject(self, ev: dict[str, Any]) -> None:
        """Count an event left out, under the first field that is malformed (off the hot path)."""
        field, problem = malformed_field(ev)
        self._count_malformed(field, problem, True, ev.get("name"))

    def _count_malformed(self, field: str, problem: str, dropped: bool, name: Any) -> None:
        entry = self.malformed.get((field, problem, dropped))
        if entry is None:
            self.malformed[(field, problem, dropped)] = [1, name if isinstance(name, str) else ""]
        else:
            entry[0] += 1

    def _mem_op(self, kind: str, name: str, dur: float, ev: dict[str, Any]) -> None:
        args = ev.get("args")
        nbytes = args.get("bytes") if isinstance(args, dict) else None
        if nbytes is not None and (nbytes.__class__ is not int or nbytes < 0):
            self._count_malformed("args.bytes", "not a non-negative integer (size left unknown)", False, name)
            nbytes = None
        m = self.mem_ops.get((kind, name))
        if m is None:
            self.mem_ops[(kind, name)] = [1, dur, nbytes]
        else:
            m[0] += 1
            m[1] += dur
            m[2] = m[2] + nbytes if m[2] is not None and nbytes is not None else None

    def summary(self, path: str, stream: TraceStream, top: int) -> RankSummary:
        meta = stream.metadata
        kernels, mem_ops = self.kernels, self.mem_ops
        busy = intervals.merge(zip(self.g_lo, self.g_hi, strict=True))
        comm = intervals.merge(zip(self.comm_lo, self.comm_hi, strict=True))
        has_gpu = bool(self.g_lo)
        steps = _steps(self.cpu_steps, self.gpu_steps, self.span_lo, self.span_hi, busy if has_gpu else None,
                       sorted(self.k_lo))
        kernel_us = sum((k[1] for k in kernels.values()), 0.0)
        activity_us = kernel_us + sum((m[1] for m in mem_ops.values()), 0.0)
        gpu = None
        if has_gpu:
            gpu = GpuTotals(
                busy_us=sum(b - a for a, b in busy),
                activity_us=activity_us,
                kernel_count=len(self.k_lo),
                kernel_us=kernel_us,
                memcpy_us=sum((m[1] for (kind, _), m in mem_ops.items() if kind == "memcpy"), 0.0),
                memset_us=sum((m[1] for (kind, _), m in mem_ops.items() if kind == "memset"), 0.0),
                streams=len(self.streams),
            )
        cpu_ops, cpu_self_total = _cpu_ops(self.op_thread, self.op_name, self.op_ts, self.op_dur, list(self.names),
                                           top)
        dist_info = meta.get("distributedInfo")
        dist: dict[str, Any] = dist_info if isinstance(dist_info, dict) else {}
        rank = dist.get("rank") if isinstance(dist.get("rank"), int) else rank_from_name(path)
        notes = []
        if not has_gpu:
            notes.append("no GPU activity in this trace (CPU-only capture, or CUDA activity was not recorded)")
        if not steps:
            notes.append("no timed events in this trace (complete 'X' events with a ts and a dur): nothing to "
                         "summarize")
        elif not self.cpu_steps:
            notes.append("no ProfilerStep annotations (profiler ran without a schedule): the whole trace is one "
                         "step")
        memory_section = memory.section(path, rank, notes, memory.summarize(
            self.memory, steps, self.threads, self.op_thread, self.op_name, self.op_ts, self.op_dur, list(self.names),
            top))
        return RankSummary(
            file=os.path.abspath(path),
            size_bytes=os.path.getsize(path),
            compressed=stream.compressed,
            worker=worker_name(path),
            rank=rank,
            world_size=dist.get("world_size") if isinstance(dist.get("world_size"), int) else None,
            devices=_devices(meta.get("deviceProperties")),
            versions=_versions(meta),
            event_count=self.events + stream.skipped,
            trace_span_us=self.span_hi - self.span_lo if self.span_hi >= self.span_lo else 0.0,
            steps=steps,
            gpu=gpu,
            idle=_idle_total(steps),
            top_kernels=_top_kernels(kernels, activity_us, top),
            top_cpu_ops=cpu_ops,
            cpu_self_total_us=cpu_self_total,
            memory_ops=[MemOpStat(kind=kind, name=name, calls=m[0], total_us=m[1], bytes=m[2])
                        for (kind, name), m in sorted(mem_ops.items(), key=lambda item: -item[1][1])],
            gpu_comm_us=sum(intervals.covered(comm, s.start_us, s.start_us + s.wall_us) for s in steps)
            if has_gpu else None,
            notes=notes,
            skipped_events=[SkippedEvents(field=field, problem=problem, count=count, example=example, dropped=dropped)
                            for (field, problem, dropped), (count, example) in self.malformed.items()],
            memory=memory_section,
        )



def malformed_field(ev: dict[str, Any]) -> tuple[str, str]:
    """(field, problem) for the first field of ``ev`` that the summary cannot use: the reason it is left out."""
    try:
        hash(ev.get("cat"))
    except TypeError:
        return "cat", "not a string"
    for key, lowest in (("ts", -_FLOAT_MAX), ("dur", 0)):
        if key not in ev:
            return key, "missing"
        value = ev[key]
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            return key, "not a number"
        if not (-_FLOAT_MAX <= value <= _FLOAT_MAX):
            return key, "not a finite number"
        if value < lowest:
            return key, "negative"
    if "name" not in ev:
        return "name", "missing"
    if not isinstance(ev["name"], str):
        return "name", "not a string"
    return "pid/tid", "not a number or string"


Intervals = list[tuple[float, float]]


def _steps(cpu_steps: dict[str, list[float]], gpu_steps: dict[str, list[float]], span_lo: float, span_hi: float,
           busy: Intervals | None, kernel_starts: Sequence[float]) -> list[StepStats]:
    windows: list[tuple[str, float, float, float]] = []
    for name, (lo, hi) in cpu_steps.items():
        g = gpu_steps.get(name)
        windows.append((name, lo, max(hi, g[1]) if g else hi, hi - lo))
    for name, (lo, hi) in gpu_steps.items():  # GPU-side span without its CPU annotation (unusual)
        if name not in cpu_steps:
            windows.append((name, lo, hi, 0.0))
    if not windows and span_hi > span_lo:
        windows.append((WHOLE_TRACE, span_lo, span_hi, span_hi - span_lo))
    out = []
    for name, lo, hi, cpu_us in sorted(windows, key=lambda w: w[1]):
        wall = hi - lo
        step = StepStats(name=name, number=_step_number(name), start_us=lo, wall_us=wall, cpu_us=cpu_us,
                         gpu_busy_us=None, gpu_busy_pct=None, kernel_count=None, idle=None)
        if busy is not None:
            step.gpu_busy_us = intervals.covered(busy, lo, hi)
            step.gpu_busy_pct = percent(step.gpu_busy_us, wall)
            step.kernel_count = bisect_left(kernel_starts, hi) - bisect_left(kernel_starts, lo)
            step.idle = _idle(busy, lo, hi, name)
        out.append(step)
    return out


def _idle(busy: Intervals, lo: float, hi: float, step: str) -> IdleStats:
    gaps = intervals.gaps(busy, lo, hi)
    window = hi - lo
    idle = sum(b - a for a, b in gaps)
    largest = max(gaps, key=lambda g: g[1] - g[0], default=(lo, lo))
    ratio = idle / window if window > 0 else 0.0
    return IdleStats(
        window_us=window,
        idle_us=idle,
        ratio=ratio,
        largest_gap_us=largest[1] - largest[0],
        largest_gap_at_us=largest[0] - lo,
        largest_gap_step=step,
        gaps_over_10us=sum(1 for a, b in gaps if b - a >= GAP_REPORT_US),
        flagged=ratio >= IDLE_FLAG_RATIO,
    )


def _idle_total(steps: list[StepStats]) -> IdleStats | None:
    measured = [s.idle for s in steps if s.idle is not None]
    if not measured:
        return None
    window = sum(i.window_us for i in measured)
    idle = sum(i.idle_us for i in measured)
    worst_step = max(range(len(measured)), key=lambda i: measured[i].largest_gap_us)
    worst = measured[worst_step]
    ratio = idle / window if window > 0 else 0.0
    return IdleStats(window_us=window, idle_us=idle, ratio=ratio, largest_gap_us=worst.largest_gap_us,
                     largest_gap_at_us=worst.largest_gap_at_us, largest_gap_step=worst.largest_gap_step,
                     gaps_over_10us=sum(i.gaps_over_10us for i in measured), flagged=ratio >= IDLE_FLAG_RATIO)


def _top_kernels(kernels: dict[str, list[float]], activity_us: float, top: int) -> list[KernelStat]:
    ranked = sorted(kernels.items(), key=lambda item: -item[1][1])[:top]
    return [KernelStat(name=name, short_name=short_name(name), calls=int(calls), total_us=total,
                       mean_us=total / calls, pct_of_gpu_time=percent(total, activity_us) or 0.0)
            for name, (calls, total) in ranked]


def _cpu_ops(op_thread: Sequence[int], op_name: Sequence[int], op_ts: Sequence[float], op_dur: Sequence[float],
             op_names: list[str], top: int) -> tuple[list[CpuOpStat], float]:
    """Self time per op name: each op's duration minus its direct children's on the same thread."""
    child = _child_time(op_thread, op_ts, op_dur)
    per_name: dict[int, list[float]] = {}
    total_self = 0.0
    for i, (n_id, dur) in enumerate(zip(op_name, op_dur, strict=True)):
        self_us = dur - child[i]
        if self_us < 0.0:
            self_us = 0.0
        total_self += self_us
        s = per_name.get(n_id)
        if s is None:
            per_name[n_id] = [1, self_us, dur]
        else:
            s[0] += 1
            s[1] += self_us
            s[2] += dur
    ranked = sorted(per_name.items(), key=lambda item: -item[1][1])[:top]
    return [CpuOpStat(name=op_names[n_id], calls=int(calls), self_us=self_us, total_us=total_us,
                      mean_self_us=self_us / calls, pct_of_cpu_self=percent(self_us, total_self) or 0.0)
            for n_id, (calls, self_us, total_us) in ranked], total_self


def _child_time(thread: Sequence[int], ts: Sequence[float], dur: Sequence[float]) -> list[float]:
    """Summed duration of each op's direct children, by a stack walk per thread in (start, -duration) order.

    Kineto writes ops already in that order, so the walk first trusts the file order and checks it as it goes;
    only if the check fails does it sort (parents must come before the children they contain).
    """
    n = len(ts)
    child: list[float] = []
    for trust_file_order in (True, False):
        order: Iterable[int] = range(n) if trust_file_order else sorted(range(n), key=lambda i: (ts[i], -dur[i]))
        child = [0.0] * n
        stacks: dict[int, list[int]] = {}
        last: dict[int, int] = {}
        in_order = True
        for i in order:
            t, start = thread[i], ts[i]
            if trust_file_order:
                j = last.get(t)
                if j is not None and (start < ts[j] or (start == ts[j] and dur[i] > dur[j])):
                    in_order = False
                    break
                last[t] = i
            stack = stacks.get(t)
            if stack is None:
                stack = stacks[t] = []
            while stack and ts[stack[-1]] + dur[stack[-1]] <= start:
                stack.pop()
            if stack:
                child[stack[-1]] += dur[i]
            stack.append(i)
        if in_order:
            return child
    return child


def _devices(props: Any) -> list[Device]:
    out = []
    for p in props if isinstance(props, list) else []:
        if not isinstance(p, dict):
            continue
        major, minor = p.get("computeMajor"), p.get("computeMinor")
        out.append(Device(
            id=p.get("id") if isinstance(p.get("id"), int) else None,
            name=str(p.get("name", "?")),
            memory_bytes=p.get("totalGlobalMem") if isinstance(p.get("totalGlobalMem"), int) else None,
            compute_capability=f"{major}.{minor}" if isinstance(major, int) and isinstance(minor, int) else None,
        ))
    return out


def _versions(meta: dict[str, Any]) -> dict[str, str]:
    """Versions the trace records: CUDA runtime/driver (kineto), CUPTI, NCCL (distributedInfo), torch if set."""
    out: dict[str, str] = {}
    for key in ("torch_version", "pytorch_version"):
        if meta.get(key) is not None:
            out["torch"] = str(meta[key])
    for key, label in (("cuda_runtime_version", "cuda_runtime"), ("cuda_driver_version", "cuda_driver")):
        v = meta.get(key)
        if isinstance(v, int) and v > 0:
            out[label] = f"{v // 1000}.{v % 1000 // 10}"  # CUDA encodes 12.4 as 12040
        elif v is not None:
            out[label] = str(v)
    if meta.get("cupti_version") is not None:
        out["cupti"] = str(meta["cupti_version"])
    for key in ("hip_runtime_version", "rocm_version", "roctracer_version"):
        if meta.get(key) is not None:
            out[key.replace("_version", "")] = str(meta[key])
    dist = meta.get("distributedInfo")
    if isinstance(dist, dict):
        if dist.get("nccl_version"):
            out["nccl"] = str(dist["nccl_version"])
        if dist.get("backend"):
            out["distributed_backend"] = str(dist["backend"])
    return out


def _step_number(name: str) -> int | None:
    try:
        return int(name[len(STEP_PREFIX):]) if name.startswith(STEP_PREFIX) else None
    except ValueError:
        return None


def percent(part: float, whole: float) -> float | None:
    """``part`` as a percentage of ``whole``; None when ``whole`` is not positive (the one rule for every share)."""
    return 100.0 * part / whole if whole > 0 else None
