"""Memory answers from a trace's ``[memory]`` events (``torch.profiler.profile(profile_memory=True)``).

Kineto writes one instant event per allocation and free (``ph: "i"``, ``cat: "cpu_instant_event"``, name
``[memory]``) with args ``Addr``, ``Bytes`` (negative for a free), ``Total Allocated`` and ``Total Reserved``
(the allocator's running totals after it) and ``Device Type`` (0 CPU, 1 CUDA) / ``Device Id`` (-1 for the CPU).
CPU totals count only what was allocated while the profiler ran; CUDA totals are the caching allocator's own.

:class:`MemoryEvents` keeps them in compact arrays during the analysis' one pass (the events come after the
ops in kineto's file, so nothing is matched while reading); :func:`summarize` answers, per device:

- peak allocated / reserved, overall and per ``ProfilerStep#N`` (its CPU-side span: the CPU allocates);
- allocated at each step's start and end: a step that keeps ``leak_threshold`` or more is flagged, and the
  device is called leaking when LEAK_MIN_STEPS steps are (one step can be a warm-up cache; a leak repeats);
- the ops that allocated most: an allocation belongs to the innermost ``cpu_op`` enclosing its timestamp on the
  same thread (self bytes); "with children" adds what nested ops allocated;
- how much of each op's allocations is still live at the peak (alloc/free replayed by address);
- a curve of at most CURVE_POINTS points (each time bucket's lowest and highest point, the peak always kept).
"""

from __future__ import annotations

import sys
from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Sequence
from itertools import accumulate, compress, islice, repeat
from operator import add, le, lt
from typing import Any

from . import snapshot
from .model import DeviceMemory, MemoryCurve, MemoryOp, MemorySummary, SnapshotSummary, StepMemory, StepStats
from .records import UNSET, Event
from .steps import WHOLE_TRACE

MEMORY_EVENT = "[memory]"
OOM_EVENT = "[OutOfMemory]"
INSTANT_CAT = "cpu_instant_event"  # the category of both, the only one analyze hands to MemoryEvents.feed

# The leak rule: a step "grew" when it ends with at least this much more allocated than it started with.
LEAK_MIN_BYTES = 1 << 20  # 1 MiB: below it, allocator rounding and small caches
LEAK_PEAK_FRACTION = 0.01  # or 1% of the device's peak, whichever is larger
LEAK_MIN_STEPS = 2  # steps that grew before the device is called leaking
CURVE_POINTS = 512

HINT = ("no memory events in this trace: record them with profile_memory=True in the profiler's config "
        "(the embedded inference: --profile_memory)")

_DEVICE_TYPES = {0: "cpu", 1: "cuda"}
_NUMBER_TYPES: frozenset[type] = frozenset({int, float})
_FLOAT_MAX = sys.float_info.max
# args read from each [memory] event, in the order a malformed one is reported
_ARGS = ("Bytes", "Total Allocated", "Addr", "Device Type", "Device Id")
_INT64 = 1 << 63


def leak_threshold(peak_bytes: int) -> int:
    """The growth per step (bytes) at which a step is flagged: LEAK_MIN_BYTES or LEAK_PEAK_FRACTION of the peak."""
    return max(LEAK_MIN_BYTES, int(LEAK_PEAK_FRACTION * peak_bytes))


def device_label(device_type: int, device_id: int) -> str:
    kind = _DEVICE_TYPES.get(device_type, f"device-type-{device_type}")
    return kind if device_id < 0 else f"{kind}:{device_id}"


class MemoryEvents:
    """The ``[memory]`` events of one trace as arrays (56 bytes an event), filled by ``feed`` in file order.

    ``feed`` appends to two arrays (the timestamps, and six integers an event interleaved: one C call each);
    ``finish`` splits the integers into the named arrays below, by C-level strided slices.
    """

    FIELDS = ("thread", "device", "nbytes", "allocated", "reserved", "addr")
    categories = frozenset({INSTANT_CAT})  # what the pass hands to ``feed`` (collect.Collector)

    def __init__(self, malformed: Callable[[str, str, bool, Any], None]):
        """``malformed(field, problem, dropped, name)``: how an event left out is counted (analyze's table)."""
        self.ts = array("d")
        self._ints = array("q")  # per event: thread, device, Bytes, Total Allocated, Total Reserved (-1: none), Addr
        self._add_ts, self._add_ints = self.ts.append, self._ints.extend
        self.thread = array("q")  # index into ``threads``
        self.device = array("q")  # index into ``devices``
        self.nbytes = array("q")
        self.allocated = array("q")
        self.reserved = array("q")
        self.addr = array("q")
        self.threads: dict[tuple[Any, Any], int] = {}
        self.devices: dict[tuple[int, int], int] = {}  # (Device Type, Device Id) -> index
        self.oom: dict[tuple[int, int], int] = {}  # [OutOfMemory] events per device
        self._malformed = malformed

    def __len__(self) -> int:
        return len(self.ts)

    def __getstate__(self) -> dict[str, Any]:
        """Its data without its callbacks (a half read in a child process is sent back so: ``halves``)."""
        return {k: v for k, v in self.__dict__.items() if k not in ("_malformed", "_add_ts", "_add_ints")}

    def extend(self, later: MemoryEvents) -> None:
        """Append the events ``later`` read after this one's in the file (before ``finish``), ids in first-seen
        order as one pass over both would give them."""
        width = len(self.FIELDS)
        ints = array("q", later._ints)
        for column, mine, theirs in ((0, self.threads, later.threads), (1, self.devices, later.devices)):
            ids = {theirs_id: mine.setdefault(key, len(mine)) for key, theirs_id in theirs.items()}
            ints[column::width] = array("q", map(ids.__getitem__, later._ints[column::width]))
        self._ints.extend(ints)
        self.ts.extend(later.ts)
        for device, count in later.oom.items():
            self.oom[device] = self.oom.get(device, 0) + count

    def feed(self, ev: dict[str, Any]) -> None:
        """One ``cpu_instant_event``; keeps ``[memory]`` events, counts ``[OutOfMemory]``, ignores the rest."""
        name = ev.get("name")
        if name != MEMORY_EVENT:
            if name == OOM_EVENT:
                self._out_of_memory(ev)
            return
        ts = ev.get("ts")
        args = ev.get("args")
        try:
            nbytes, total, addr = args["Bytes"], args["Total Allocated"], args["Addr"]  # type: ignore[index]
            device = (args["Device Type"], args["Device Id"])  # type: ignore[index]
            reserved = args.get("Total Reserved", -1)  # type: ignore[union-attr]
            key = (ev.get("pid"), ev.get("tid"))
            thread = self.threads.get(key)
            d = self.devices.get(device)
        except (KeyError, TypeError, AttributeError):
            self._reject(ev)
            return
        if (ts.__class__ not in _NUMBER_TYPES or not -_FLOAT_MAX <= ts <= _FLOAT_MAX  # type: ignore[operator]
                or nbytes.__class__ is not int or total.__class__ is not int or addr.__class__ is not int
                or device[0].__class__ is not int or device[1].__class__ is not int or reserved.__class__ is not int):
            self._reject(ev)
            return
        if thread is None:
            thread = self.threads[key] = len(self.threads)
        if d is None:
            d = self.devices[device] = len(self.devices)
        n = len(self._ints)
        try:
            self._add_ints((thread, d, nbytes, total, reserved, addr))
        except OverflowError:  # an integer beyond 64 bits: no allocator total
            del self._ints[n:]
            self._reject(ev)
            return
        self._add_ts(ts)  # type: ignore[arg-type]

    def feed_record(self, ev: Event) -> bool:
        """``feed`` for a typed record (collect.Collected.feed_records); False hands the event back to be fed as a
        dict: one this pass leaves out (so ``feed``'s rule says why) or an ``[OutOfMemory]`` (rare)."""
        name = ev.name
        if name != MEMORY_EVENT:
            return name != OOM_EVENT
        ts, args = ev.ts, ev.args
        if args is None or ts is UNSET:
            return False
        nbytes, total, addr = args.alloc_bytes, args.total_allocated, args.addr
        dtype, did, reserved = args.device_type, args.device_id, args.total_reserved
        if (nbytes is UNSET or total is UNSET or addr is UNSET or dtype is UNSET or did is UNSET
                or not -_FLOAT_MAX <= ts <= _FLOAT_MAX):
            return False
        key = (ev.pid, ev.tid)
        thread = self.threads.get(key)
        if thread is None:
            thread = self.threads[key] = len(self.threads)
        device = (dtype, did)
        d = self.devices.get(device)
        if d is None:
            d = self.devices[device] = len(self.devices)
        n = len(self._ints)
        try:
            self._add_ints((thread, d, nbytes, total, -1 if reserved is UNSET else reserved, addr))
        except OverflowError:  # beyond 64 bits: ``feed`` rejects it, naming the field
            del self._ints[n:]
            return False
        self._add_ts(ts)
        return True

    def finish(self) -> None:
        """Split the interleaved integers into ``thread``, ``device``, ``nbytes``, ... (after the last ``feed``)."""
        for k, field in enumerate(self.FIELDS):
            setattr(self, field, self._ints[k::len(self.FIELDS)])

    def _out_of_memory(self, ev: dict[str, Any]) -> None:
        args = ev.get("args")
        dtype, did = (args.get("Device Type"), args.get("Device Id")) if isinstance(args, dict) else (None, None)
        device = (dtype, did) if dtype.__class__ is int and did.__class__ is int else (-1, -1)
        self.oom[device] = self.oom.get(device, 0) + 1

    def _reject(self, ev: dict[str, Any]) -> None:
        field, problem = memory_problem(ev)
        self._malformed(field, problem, True, ev.get("name"))


def memory_problem(ev: dict[str, Any]) -> tuple[str, str]:
    """(field, problem) for the first field of a ``[memory]`` event that cannot be used (off the hot path)."""
    ts = ev.get("ts")
    if "ts" not in ev:
        return "ts", "missing"
    if ts.__class__ not in _NUMBER_TYPES:
        return "ts", "not a number"
    if not -_FLOAT_MAX <= ts <= _FLOAT_MAX:  # type: ignore[operator]
        return "ts", "not a finite number"
    args = ev.get("args")
    if not isinstance(args, dict):
        return "args", "not an object" if "args" in ev else "missing"
    for key in (*_ARGS, "Total Reserved"):
        if key not in args:
            if key == "Total Reserved":
                continue
            return f"args.{key}", "missing"
        value = args[key]
        if value.__class__ is not int:
            return f"args.{key}", "not an integer"
        if not -_INT64 <= value < _INT64:
            return f"args.{key}", "out of range"
    return "pid/tid", "not a number or string"


def summarize(events: MemoryEvents, steps: Sequence[StepStats], op_threads: dict[tuple[Any, Any], int],
              op_thread: Sequence[int], op_name: Sequence[int], op_ts: Sequence[float], op_dur: Sequence[float],
              op_names: Sequence[str], top: int) -> list[DeviceMemory]:
    """The answers per device (CUDA devices first, then the CPU); [] without memory events.

    ``op_*``: the analysis' CPU ops (thread index by ``op_threads``' (pid, tid) keys, name id, start, duration).
    ``steps``: the trace's steps; a single step without a number ("(whole trace)") covers every event.
    """
    events.finish()
    n = len(events)
    if not n:
        return []
    ts = events.ts
    order: Sequence[int] = range(n)
    if not all(map(le, ts, islice(ts, 1, None))):
        order = sorted(range(n), key=ts.__getitem__)  # stable: an alloc and its free at one ts keep file order
    owners = _Attribution(events, order, op_threads, op_thread, op_name, op_ts, op_dur)
    windows = _step_windows(steps)
    by_device: dict[int, list[int]] = {}
    if len(events.devices) == 1:
        by_device[0] = list(order)
    else:
        dev = events.device
        for i in order:
            by_device.setdefault(dev[i], []).append(i)
    as_is = isinstance(order, range) and len(events.devices) == 1  # one device, its events in time order
    out = []
    for (dtype, did), d in events.devices.items():
        out.append(_device(events, (dtype, did), by_device.get(d, []), owners, windows, op_name, op_names, top,
                           as_is))
    out.sort(key=lambda m: (m.device_type != 1, m.device_type, m.device_id if m.device_id is not None else -1))
    return out


def _step_windows(steps: Sequence[StepStats]) -> list[tuple[StepStats, float, float]]:
    if len(steps) == 1 and steps[0].name == WHOLE_TRACE:  # no ProfilerStep: every event is in it
        return [(steps[0], float("-inf"), float("inf"))]
    return [(s, s.start_us, s.start_us + (s.cpu_us if s.cpu_us > 0 else s.wall_us)) for s in steps]


class _Attribution:
    """Which ``cpu_op`` each allocation belongs to, and each op name's bytes "with children", per thread.

    ``inner[i]``: the innermost op enclosing event ``i`` on its thread (-1: none), i.e. of the ops whose span holds
    its timestamp, the one that started last. ``with_children[(device index, name id)]``: the bytes allocated
    inside the spans of that name's ops (a prefix sum over the thread's allocations between the op's start and
    end; an op nested in an op of its own name is not counted again).

    Cost: the per-op work is C-level (``map`` of ``bisect`` over the op starts and ends, ``compress``); Python
    loops run over the allocations and the few ops that hold one (most ops are views and bookkeeping).
    """

    def __init__(self, events: MemoryEvents, order: Sequence[int], op_threads: dict[tuple[Any, Any], int],
                 op_thread: Sequence[int], op_name: Sequence[int], op_ts: Sequence[float],
                 op_dur: Sequence[float]):
        nbytes, thread = events.nbytes, events.thread
        self.inner = array("l", [-1]) * len(events)
        self.with_children: dict[tuple[int, int], int] = {}
        to_op_thread = {m: op_threads.get(key, -1) for key, m in events.threads.items()}
        allocs_by_thread: dict[int, list[int]] = {}
        for i in order:
            if nbytes[i] > 0:
                t = to_op_thread[thread[i]]
                if t >= 0:
                    allocs_by_thread.setdefault(t, []).append(i)
        for t, allocs in allocs_by_thread.items():
            if len(op_threads) == 1:
                ops: Sequence[int] = range(len(op_ts))
                starts, durs = op_ts, op_dur
            else:
                ops = [j for j, x in enumerate(op_thread) if x == t]
                starts, durs = [op_ts[j] for j in ops], [op_dur[j] for j in ops]
            if not _in_op_order(starts, durs):
                ops = sorted(ops, key=lambda j: (op_ts[j], -op_dur[j]))  # parents before the children they hold
                starts, durs = [op_ts[j] for j in ops], [op_dur[j] for j in ops]
            self._thread(events, allocs, ops, starts, durs, op_name)

    def _thread(self, events: MemoryEvents, allocs: list[int], ops: Sequence[int], starts: Sequence[float],
                durs: Sequence[float], op_name: Sequence[int]) -> None:
        ts, nbytes, device = events.ts, events.nbytes, events.device
        at = [ts[i] for i in allocs]
        ends = list(map(add, starts, durs))
        first = list(map(bisect_left, repeat(at), starts))  # the first allocation at or after each op's start
        at_or_end = [*at, float("inf")]
        holding = list(compress(range(len(starts)), map(le, map(at_or_end.__getitem__, first), ends)))
        h_start, h_end = [starts[k] for k in holding], [ends[k] for k in holding]
        h_first = [first[k] for k in holding]  # allocations inside holding op k: at[h_first[k]:h_past[k]]
        h_past = list(map(bisect_right, repeat(at), h_end))
        inner = self.inner
        for i, t in zip(allocs, at, strict=True):
            p = bisect_right(h_start, t) - 1
            while p >= 0 and h_end[p] < t:  # an earlier sibling: walk back to the op that holds t
                p -= 1
            if p >= 0:
                inner[i] = ops[holding[p]]
        with_children = self.with_children
        for d in set(device[i] for i in allocs):
            prefix = [0, *accumulate(nbytes[i] if device[i] == d else 0 for i in allocs)]
            open_until: dict[int, float] = {}  # name id -> end of its outermost op seen so far
            for k, start, end, lo, hi in zip(holding, h_start, h_end, h_first, h_past, strict=True):
                name = op_name[ops[k]]
                if start < open_until.get(name, float("-inf")):
                    continue  # nested in an op of the same name: already counted there
                open_until[name] = end
                b = prefix[hi] - prefix[lo]
                if b:
                    with_children[(d, name)] = with_children.get((d, name), 0) + b


def _in_op_order(starts: Sequence[float], durs: Sequence[float]) -> bool:
    """Whether ops are in (start, -duration) order, as kineto writes them: C-level checks, ties looked at only
    when there are any."""
    if all(map(lt, starts, islice(starts, 1, None))):
        return True
    if not all(map(le, starts, islice(starts, 1, None))):
        return False
    return all(starts[k] < starts[k + 1] or durs[k] >= durs[k + 1] for k in range(len(starts) - 1))


def _device(events: MemoryEvents, key: tuple[int, int], idx: list[int], owners: _Attribution,
            windows: list[tuple[StepStats, float, float]], op_name: Sequence[int], op_names: Sequence[str],
            top: int, as_is: bool) -> DeviceMemory:
    """One device's answers; ``idx``: its events in time order, ``as_is``: they are all events, in file order."""
    dtype, did = key
    if as_is:  # the arrays as they are
        ts, nbytes, alloc, reserved = events.ts, events.nbytes, events.allocated, events.reserved
    else:
        ts, nbytes = array("d", [events.ts[i] for i in idx]), array("q", [events.nbytes[i] for i in idx])
        alloc, reserved = array("q", [events.allocated[i] for i in idx]), array("q", [events.reserved[i] for i in idx])
    has_reserved = max(reserved) > 0  # the CPU allocator records 0 (no cache)
    peak = max(alloc)
    p = alloc.index(peak)
    before = alloc[0] - nbytes[0]  # allocated before the first event
    threshold = leak_threshold(peak)

    step_rows = []
    peak_step = None
    for s, lo, hi in windows:
        i0, i1 = bisect_left(ts, lo), bisect_right(ts, hi)
        start = alloc[i0 - 1] if i0 else before
        end = alloc[i1 - 1] if i1 else before
        r_in = reserved[max(i0 - 1, 0):i1] if i1 else []
        growth = end - start
        step_rows.append(StepMemory(
            name=s.name, number=s.number, start_us=s.start_us, end_us=hi if hi != float("inf") else ts[-1],
            allocated_start_bytes=start, allocated_end_bytes=end, growth_bytes=growth,
            peak_allocated_bytes=max([start, *alloc[i0:i1]]),
            peak_reserved_bytes=max(r_in) if has_reserved and r_in else None,
            grew=growth >= threshold))
        if peak_step is None and i0 <= p < i1:
            peak_step = s.name
    if len(windows) == 1 and windows[0][0].name == WHOLE_TRACE:
        step_rows[0].start_us = ts[0]

    top_ops, unattributed = _top_ops(events.devices[key], idx, nbytes, p, events.addr, owners, op_name, op_names, top)
    allocations = [b for b in nbytes if b > 0]
    return DeviceMemory(
        device=device_label(dtype, did), device_type=dtype, device_id=did if did >= 0 else None, events=len(idx),
        allocations=len(allocations), allocated_bytes=sum(allocations), peak_allocated_bytes=peak,
        peak_allocated_at_us=ts[p], peak_step=peak_step,
        peak_reserved_bytes=max(reserved) if has_reserved else None, leak_threshold_bytes=threshold,
        leak=sum(1 for s in step_rows if s.grew) >= LEAK_MIN_STEPS, steps=step_rows, top_ops=top_ops,
        unattributed_bytes=unattributed, out_of_memory_events=events.oom.get(key, 0),
        curve=_curve(ts, alloc, reserved if has_reserved else None, p))


def _top_ops(device: int, idx: list[int], nbytes: Sequence[int], p: int, addr: Sequence[int], owners: _Attribution,
             op_name: Sequence[int], op_names: Sequence[str], top: int) -> tuple[list[MemoryOp], int]:
    """Ops by self bytes, with their inclusive bytes and what of their allocations is live at the peak ``p``."""
    inner = owners.inner
    per_op: dict[int, int] = {}  # op index -> bytes allocated directly in it
    calls: dict[int, int] = {}  # op index -> its allocations
    unattributed = 0
    live: dict[int, tuple[int, int]] = {}  # address -> (op index or -1, bytes), replayed up to the peak
    for pos, i in enumerate(idx):
        b = nbytes[pos]
        if b <= 0:
            if pos <= p:
                live.pop(addr[i], None)
            continue
        j = inner[i]
        if j < 0:
            unattributed += b
        else:
            per_op[j] = per_op.get(j, 0) + b
            calls[j] = calls.get(j, 0) + 1
        if pos <= p:
            live[addr[i]] = (j, b)
    self_bytes: dict[int, list[int]] = {}  # name id -> [allocations, bytes]
    for j, b in per_op.items():
        entry = self_bytes.get(op_name[j])
        if entry is None:
            self_bytes[op_name[j]] = [calls[j], b]
        else:
            entry[0] += calls[j]
            entry[1] += b
    total_bytes = {name: b for (d, name), b in owners.with_children.items() if d == device}
    live_by_name: dict[int, int] = {}
    for j, b in live.values():
        if j >= 0:
            live_by_name[op_name[j]] = live_by_name.get(op_name[j], 0) + b
    # by self bytes, then with children (an op that only calls allocating ops: aten::ones over aten::empty)
    ranked = sorted(total_bytes, key=lambda n_id: (-self_bytes.get(n_id, [0, 0])[1], -total_bytes[n_id],
                                                   op_names[n_id]))[:top]
    return [MemoryOp(name=op_names[n_id], allocations=self_bytes.get(n_id, [0, 0])[0],
                     self_bytes=self_bytes.get(n_id, [0, 0])[1], total_bytes=total_bytes[n_id],
                     live_at_peak_bytes=live_by_name.get(n_id, 0))
            for n_id in ranked], unattributed


def _curve(ts: Sequence[float], alloc: Sequence[int], reserved: Sequence[int] | None, p: int) -> MemoryCurve:
    """Every point when they fit; else each of CURVE_POINTS // 2 time buckets' lowest and highest points."""
    n = len(ts)
    if n <= CURVE_POINTS:
        keep: Sequence[int] = range(n)
    else:
        buckets = CURVE_POINTS // 2
        lo, span = ts[0], ts[-1] - ts[0]
        picked: set[int] = {0, n - 1, p}
        a = 0
        for k in range(1, buckets + 1):
            b = n if k == buckets else bisect_left(ts, lo + span * k / buckets, a)
            if b > a:
                part = alloc[a:b]
                picked.add(a + part.index(max(part)))
                picked.add(a + part.index(min(part)))
            a = b
        keep = sorted(picked)
        if len(keep) > CURVE_POINTS:  # the first and last points pushed it over: drop those that are no extreme
            keep = sorted(set(keep) - ({0, n - 1} - {p}))[:CURVE_POINTS]
    return MemoryCurve(ts_us=[ts[i] for i in keep], allocated_bytes=[alloc[i] for i in keep],
                       reserved_bytes=[(reserved[i] if reserved[i] >= 0 else None) if reserved else None
                                       for i in keep],
                       peak_index=list(keep).index(p))


def section(trace_path: str, rank: int | None, notes: list[str], devices: list[DeviceMemory]) -> MemorySummary | None:
    """RankSummary.memory: the trace's answers plus its rank's snapshot(s); a snapshot that cannot be read is a
    note naming the file (the trace's report is still complete). None when there is neither."""
    snapshots: list[SnapshotSummary] = []
    for path in snapshot.snapshot_files(trace_path, rank):
        try:
            snapshots += snapshot.read_snapshot(path)
        except snapshot.SnapshotError as exc:
            notes.append(f"memory snapshot left out: {exc}")
    return MemorySummary(devices=devices, snapshots=snapshots) if devices or snapshots else None

