"""The one streaming pass: compact per-event numbers (arrays of ints and floats, interned names) that every
question's module (steps, kernels, cpu_ops, attribution, devices) reads afterwards.

Memory grows with the number of kernels and CPU ops, not with the JSON text: five numbers per CPU op, four per
GPU activity (kernel, memcpy, memset); names are stored once. What is collected:

- CPU ops (``cpu_op``; older ``operator``), in file order: thread, name id, ts, dur, External id; for the op
  names in ``shapes_of`` (those ``flops`` has a model for) also their ``Input Dims``, ``Input type``,
  ``Concrete Inputs`` and ``flops`` arguments (one set test per op on the hot path, the rest off it).
- ``record_function`` labels (``user_annotation`` other than ``ProfilerStep#N``; a trace has few): thread,
  name id, ts, dur. Older kineto (PyTorch 1.8-1.9) writes the labels torch itself opens as ops
  (``enumerate(DataLoader)#...__next__``, ``Optimizer.step#SGD.step``): those are labels too (``is_label_op``,
  TensorBoard's rule).
- GPU activity (``kernel``, ``gpu_memcpy``, ``gpu_memset``; older ``Kernel``/``Memcpy``/``Memset``): start,
  dur, name id (a memory op's key is ``(kind, name)``), correlation id, External id, and per memory op name its
  bytes.
- Runtime and driver calls (``cuda_runtime``, ``cuda_driver``; older ``Runtime``; HIP calls are written under
  the same categories): thread, name id, ts, dur, correlation id. A GPU event's correlation id names the call
  that launched it, the first link of the launch chain (``launch``).
- ``ProfilerStep#N`` spans, CPU and GPU side; the span of all timed events; malformed events by field.
- With ``frames=KEEP`` (a rule on the frame's name), the Python frames of a ``with_stack`` capture
  (``python_function``) that KEEP keeps: thread, name id, ts, dur, for ``frames`` (where in the user's code); the
  rest are counted and dropped (``frames.SKIP_HEAD_FOLDED`` drops most of them undecoded). Without it they are
  never decoded (SKIP_HEAD), and a trace without them costs nothing more either way.
- With ``args_of`` (a rule on the event's name: ``comm.is_comm_name``), the ``args`` of the ops, labels and kernels
  it accepts (the collectives: ``record_param_comms``, ``c10d::*``, ``nccl:*``/``gloo:*``, NCCL/RCCL kernels; a
  trace has few), by event index (``op_args``, ``lab_args``, ``g_args``); one set test per op and kernel, the rule
  once per name. And the device of every GPU event (``g_dev``: ``args.device``, NO_ID when absent).

Times are kept relative to ``base`` (the whole microsecond at or before the first timed event): kineto's
nanosecond traces write epoch microseconds with three decimals (1712195495505583.047), which a double holds only
to 0.25 us, so sums of ``ts + dur`` drift (a union of intervals came out longer than their summed durations).
``ts - base`` is exact, and so is everything computed from it; report timestamps add ``base`` back.

One more question over other events (e.g. ``[memory]`` instants) is one more collector: an object with
``categories`` and ``feed(event)``, given to :class:`Collected`; it receives every event of those categories
(``X`` or not) that the core does not use, off the hot path of the core's own events.

Two ways in, one set of answers: ``feed`` takes dicts (the generic reader's), ``feed_records`` the typed reader's
:class:`records.Event` (attribute reads instead of dict lookups, 2-3x faster). They apply the same rules; a
record a rule rejects is decoded again generically (the reader's ``generic_of``) and counted by the dict path's
own rule, so the one-line reasons cannot drift apart, and the dicts a typed batch holds (events the typed decoder
rejected) go through ``feed``. A collector's typed entry is ``feed_record(record) -> bool`` (False: "give me this
one as a dict"); a collector without one gets every record of its categories as a dict (correct, slower).
"""

from __future__ import annotations

import math
import sys
from array import array
from collections.abc import Callable, Iterable, Sequence
from functools import partial
from typing import Any, Protocol

from .reader import generic_value
from .records import NO_RAW, UNSET, Comm, Event

STEP_PREFIX = "ProfilerStep#"
# The record_function labels torch opens itself, which older kineto writes as ops (``cpu_op``/``Operator``): the
# DataLoader's and DataPipe's next(), the optimizer's step and zero_grad, (Distributed)DataParallel.forward.
# torch-tb-profiler recognizes them by these names (node.py: create_operator_node, is_operator_node, ExcludeOpName).
LABEL_OP_PREFIXES = ("enumerate(DataLoader)#", "enumerate(DataPipe)#", "Optimizer.")
LABEL_OP_NAMES = frozenset({"DataParallel.forward", "DistributedDataParallel.forward"})

CPU_OP_CATS = frozenset({"cpu_op", "operator", "Operator"})
LABEL_CATS = frozenset({"user_annotation"})
KERNEL_CATS = frozenset({"kernel", "Kernel"})
MEM_CATS = {"gpu_memcpy": "memcpy", "Memcpy": "memcpy", "memcpy": "memcpy",
            "gpu_memset": "memset", "Memset": "memset", "memset": "memset"}
# Frequent categories the summary does not use: skipped before any other work.
RUNTIME_CATS = frozenset({"cuda_runtime", "cuda_driver", "Runtime", "runtime", "driver"})
SKIP_CATS = frozenset({"python_function", "ac2g", "Trace", "python", "fwdbwd", "overhead", "cuda_profiler_range"})
# Kineto writes "ph" then "cat" first in every event: these events (Python stack frames and flow arrows; most of
# a with_stack trace) are recognised from their first bytes and never decoded at all. A flow arrow links a launch
# to its GPU event by the correlation id that both events also carry in their args.
SKIP_HEAD = rb'\s*"ph"\s*:\s*(?:"[fs]"|"X"\s*,\s*"cat"\s*:\s*"python_function")'
SKIP_HEAD_FRAMES = rb'\s*"ph"\s*:\s*"[fs]"'  # the same, keeping the Python frames (``Collected(frames=...)``)
FRAME_CAT = "python_function"

NO_ID = -1  # External id of an event without a usable one

# ts and dur must be real numbers (JSON true is an int in Python, and no time), finite and within a float's range
# (the arrays hold doubles; the stdlib parser reads 1e400 as inf and a 400-digit integer as an int).
_NUMBER_TYPES: frozenset[type] = frozenset({int, float})
_FLOAT_MAX = sys.float_info.max


class Collector(Protocol):
    """An extra question's collector: fed every event of ``categories`` the core pass does not use."""

    categories: frozenset[str]

    def feed(self, event: dict[str, Any]) -> None: ...


class RecordSource(Protocol):
    """Where a typed batch was read (``reader.TraceStream``): its events' bytes, decoded again on demand."""

    def generic_of(self, record: Event) -> Any: ...

    def comm_of(self, record: Event) -> Comm | None: ...


# The per-event arrays, and the ids each holds (None: times and links, kept as they are): renumbered when a pass
# over the events that follow is appended (``Collected.extend``).
COLUMNS: dict[str, str | None] = {
    "fr_thread": "thread", "fr_name": "frame", "fr_ts": None, "fr_dur": None,
    "op_thread": "thread", "op_name": "name", "op_ext": None, "op_ts": None, "op_dur": None,
    "lab_thread": "thread", "lab_name": "label", "lab_ts": None, "lab_dur": None,
    "g_name": "gpu", "g_lo": None, "g_dur": None, "g_ext": None, "g_corr": None, "g_dev": None,
    "rt_thread": "thread", "rt_name": "runtime", "rt_corr": None, "rt_ts": None, "rt_dur": None,
}


class Collected:
    """The pass's state; ``feed`` batches of events into it, then hand it to the analysis modules."""

    def __init__(self, extra: Iterable[Collector] = (), shapes_of: frozenset[str] = frozenset(),
                 frames: Callable[[str], bool] | None = None, args_of: Callable[[str], bool] | None = None) -> None:
        self.events = 0
        self.args_of = args_of  # names whose events' args are kept (see the module's docstring)
        self.arg_names: set[int] = set()  # op name ids it accepts
        self.arg_kernels: set[int] = set()  # kernel name ids it accepts
        self.op_args: dict[int, Any] = {}  # op index -> its args (None when it has none)
        self.lab_args: dict[int, Any] = {}  # label index -> its args
        self.g_args: dict[int, Any] = {}  # GPU event index -> its args
        self.g_dev = array("q")  # per GPU event: its device (args.device), NO_ID when not recorded
        self.skip = SKIP_CATS - {FRAME_CAT} if frames is not None else SKIP_CATS
        self.keep_frame = frames
        self.frame_names: dict[str, int] = {}  # Python frame name ("model.py(21): forward") -> id, -1: not kept
        self.frame_kept: list[str] = []  # the kept names, by id
        self.fr_thread, self.fr_name = array("l"), array("l")
        self.fr_ts, self.fr_dur = array("d"), array("d")
        self.threads: dict[tuple[Any, Any], int] = {}  # (pid, tid) -> thread id, of ops and labels
        self.names: dict[str, int] = {}  # CPU op name -> id
        self.op_thread, self.op_name, self.op_ext = array("l"), array("l"), array("q")
        self.op_ts, self.op_dur = array("d"), array("d")
        self.shapes_of = shapes_of
        self.shaped: set[int] = set()  # name ids of the ops in shapes_of
        # Recorded arguments, once per distinct (name, dims, types, concrete): few in a trace, and kept as text
        # keys, not as the parsed lists (millions of small lists alive slow the parse down: the GC walks them).
        self.shape_ids: dict[tuple[int, str, str, str], int] = {}
        self.shape_args: list[tuple[Any, Any, Any]] = []  # shape id -> (Input Dims, Input type, Concrete Inputs)
        self.op_shape: dict[int, int] = {}  # op index -> shape id
        self.op_flops: dict[int, int] = {}  # op index -> torch's ``flops`` argument (with_flops=True)
        self.label_names: dict[str, int] = {}
        self.lab_thread, self.lab_name = array("l"), array("l")
        self.lab_ts, self.lab_dur = array("d"), array("d")
        self.gpu_names: dict[Any, int] = {}  # kernel name (str) or (kind, name) of a memory op -> id
        self.g_lo, self.g_dur = array("d"), array("d")  # every GPU activity (start, duration), file order
        self.g_name, self.g_ext, self.g_corr = array("l"), array("q"), array("q")
        self.rt_names: dict[str, int] = {}  # runtime/driver call name -> id
        self.rt_thread, self.rt_name, self.rt_corr = array("l"), array("l"), array("q")
        self.rt_ts, self.rt_dur = array("d"), array("d")
        self.mem_bytes: dict[int, int | None] = {}  # memory op name id -> summed bytes (None: some unknown)
        self.streams: set[tuple[Any, Any]] = set()
        self.cpu_steps: dict[str, list[float]] = {}
        self.gpu_steps: dict[str, list[float]] = {}
        self.span_lo, self.span_hi = float("inf"), float("-inf")
        self.base: float | None = None  # subtracted from every timestamp kept (see the module's docstring)
        self.malformed: dict[tuple[str, str, bool], list[Any]] = {}  # (field, problem, dropped) -> [count, example]
        self._extra: dict[str, Any] = {}
        self._extra_records: dict[str, tuple[Any, Any]] = {}  # category -> (feed_record or None, feed)
        for collector in extra:
            self.attach(collector)

    def __getstate__(self) -> dict[str, Any]:
        """Its data without its rules (functions, its collectors' methods): a half read in a child process is sent
        back so (``halves``), and ``extend`` needs only the data."""
        state = dict(self.__dict__)
        for rule in ("args_of", "keep_frame", "_extra", "_extra_records"):
            state[rule] = None if rule in ("args_of", "keep_frame") else {}
        return state

    def extend(self, later: Collected) -> None:
        """Append what ``later`` collected from the events that follow this pass's in the file (read with this
        pass's ``base``): afterwards this holds what one pass over both would have, ids in first-seen order."""
        offsets = (len(self.op_ts), len(self.lab_ts), len(self.g_lo))
        ops, labs, gpus = offsets
        thread = _merge_ids(self.threads, later.threads)
        name = _merge_ids(self.names, later.names)
        label = _merge_ids(self.label_names, later.label_names)
        gpu = _merge_ids(self.gpu_names, later.gpu_names)
        runtime = _merge_ids(self.rt_names, later.rt_names)
        frame = {}
        for text, n in later.frame_names.items():  # -1 (a frame not kept) stays -1
            mine = self.frame_names.get(text)
            if mine is None:
                mine = self._frame_name_kept(text, n >= 0)
            frame[n] = mine
        self.events += later.events
        self.arg_names.update(map(name.__getitem__, later.arg_names))
        self.arg_kernels.update(map(gpu.__getitem__, later.arg_kernels))
        self.shaped.update(map(name.__getitem__, later.shaped))
        self.op_args.update((ops + i, a) for i, a in later.op_args.items())
        self.lab_args.update((labs + i, a) for i, a in later.lab_args.items())
        self.g_args.update((gpus + i, a) for i, a in later.g_args.items())
        shape = {}
        for (n, dims, types, concrete), s in later.shape_ids.items():
            key = (name[n], dims, types, concrete)
            mine = self.shape_ids.get(key)
            if mine is None:
                mine = self.shape_ids[key] = len(self.shape_args)
                self.shape_args.append(later.shape_args[s])
            shape[s] = mine
        self.op_shape.update((ops + i, shape[s]) for i, s in later.op_shape.items())
        self.op_flops.update((ops + i, f) for i, f in later.op_flops.items())
        for g, nbytes in later.mem_bytes.items():
            mine = gpu[g]
            if mine not in self.mem_bytes:
                self.mem_bytes[mine] = nbytes
            else:
                total = self.mem_bytes[mine]
                self.mem_bytes[mine] = total + nbytes if total is not None and nbytes is not None else None
        ids = {"thread": thread, "name": name, "label": label, "gpu": gpu, "runtime": runtime, "frame": frame}
        for column, holds in COLUMNS.items():
            theirs = getattr(later, column)
            getattr(self, column).extend(theirs if holds is None else map(ids[holds].__getitem__, theirs))
        self.streams.update(later.streams)
        for mine_steps, their_steps in ((self.cpu_steps, later.cpu_steps), (self.gpu_steps, later.gpu_steps)):
            for step, (lo, hi) in their_steps.items():
                window = mine_steps.get(step)
                if window is None:
                    mine_steps[step] = [lo, hi]
                else:
                    window[0], window[1] = min(window[0], lo), max(window[1], hi)
        self.span_lo, self.span_hi = min(self.span_lo, later.span_lo), max(self.span_hi, later.span_hi)
        if self.base is None:
            self.base = later.base
        for why, (count, example) in later.malformed.items():
            entry = self.malformed.get(why)
            if entry is None:
                self.malformed[why] = [count, example]
            else:
                entry[0] += count

    def attach(self, collector: Collector) -> None:
        """Hand ``collector`` the events of its categories from now on (memory.MemoryEvents, for one)."""
        for cat in collector.categories:
            self._extra[cat] = collector.feed
            self._extra_records[cat] = (getattr(collector, "feed_record", None), collector.feed)

    def feed_records(self, batch: list[Any], source: RecordSource, generic_at: Sequence[int] = ()) -> None:
        """The typed pass's hot loop: ``feed``'s rules over :class:`records.Event` (the reader's typed batch).

        ``generic_at``: where the batch holds dicts (``TraceStream.generic``), fed to ``feed`` in file order;
        ``source`` (the stream): ``generic_of(record)``, the record decoded generically, for the dict path's rule
        when one rejects it, and ``comm_of(record)``, a collective's metadata.
        Typed values are the declared types (anything else was decoded generically), so only the checks that
        such values can fail remain: times absent (UNSET), out of range or negative, a name absent.
        """
        if generic_at:
            at = 0
            for i in generic_at:
                if i > at:
                    self.feed_records(batch[at:i], source)
                self.feed(batch[i:i + 1])
                at = i + 1
            if at < len(batch):
                self.feed_records(batch[at:], source)
            return
        self.events += len(batch)
        skip, cpu_cats, label_cats, kernel_cats, mem_cats = self.skip, CPU_OP_CATS, LABEL_CATS, KERNEL_CATS, MEM_CATS
        runtime_cats = RUNTIME_CATS
        names, threads, gpu_names, streams = self.names, self.threads, self.gpu_names, self.streams
        arg_names, arg_kernels, g_dev = self.arg_names, self.arg_kernels, self.g_dev.append
        extra = self._extra_records
        g_lo, g_dur, g_name, g_ext = self.g_lo.append, self.g_dur.append, self.g_name.append, self.g_ext.append
        g_corr = self.g_corr.append
        rt_names, rt_corr, rt_thread = self.rt_names, self.rt_corr.append, self.rt_thread.append
        rt_name, rt_ts, rt_dur = self.rt_name.append, self.rt_ts.append, self.rt_dur.append
        op_thread, op_name, op_ts, op_dur = (self.op_thread.append, self.op_name.append, self.op_ts.append,
                                             self.op_dur.append)
        op_ext = self.op_ext.append
        shaped = self.shaped
        frame_names = self.frame_names
        fr_thread, fr_name, fr_ts, fr_dur = (self.fr_thread.append, self.fr_name.append, self.fr_ts.append,
                                             self.fr_dur.append)
        span_lo, span_hi = self.span_lo, self.span_hi
        big, reject, unset, generic_of = _FLOAT_MAX, self._reject, UNSET, source.generic_of
        base = self.base if self.base is not None else self._base_of_records(batch)
        for ev in batch:
            cat = ev.cat
            if cat in skip:
                continue
            if ev.ph != "X":
                if extra and cat in extra:
                    self._extra_record(extra[cat], ev, generic_of)
                continue
            name = ev.name
            if cat == FRAME_CAT and name is not unset:
                n = frame_names.get(name)
                if n is None:
                    n = self._frame_name(name)
                if n < 0:
                    continue  # a frame the fold drops, whatever its other fields (most are never decoded)
            ts = ev.ts
            dur = ev.dur
            if (ts is unset or dur is unset or name is unset
                    or not (-big <= ts <= big and 0 <= dur <= big)):
                reject(generic_of(ev))
                continue
            ts = ts - base
            end = ts + dur
            if cat == FRAME_CAT:  # a frame kept: n is its name's id
                key = (ev.pid, ev.tid)
                t = threads.get(key)
                if t is None:
                    t = threads[key] = len(threads)
                fr_thread(t)
                fr_name(frame_names[name])  # registered above: the frame is kept
                fr_ts(ts)
                fr_dur(dur)
                continue  # frames enclose the ops: they do not widen the trace's span
            if cat in cpu_cats and not name.startswith(STEP_PREFIX):
                n = names.get(name)
                if n is None and is_label_op(name):
                    self._label_of(name, ts, dur, (ev.pid, ev.tid), partial(_args_of, generic_of, ev))
                    if ts < span_lo:
                        span_lo = ts
                    if end > span_hi:
                        span_hi = end
                    continue
                key = (ev.pid, ev.tid)
                t = threads.get(key)
                if t is None:
                    t = threads[key] = len(threads)
                if n is None:
                    n = names[name] = len(names)
                    if name in self.shapes_of:
                        shaped.add(n)
                    if self.args_of is not None and self.args_of(name):
                        arg_names.add(n)
                args = ev.args
                if n in shaped and args is not None:
                    self._shapes_of_record(n, args)
                if n in arg_names:  # a collective: its args as the dict path keeps them (a trace has few)
                    self.op_args[len(self.op_ts)] = _args_of(generic_of, ev)
                try:
                    op_ext(args.external_id if args is not None else NO_ID)
                except OverflowError:  # beyond 64 bits
                    op_ext(NO_ID)
                op_thread(t)
                op_name(n)
                op_ts(ts)
                op_dur(dur)
            elif cat in kernel_cats:
                streams.add((ev.pid, ev.tid))
                g = gpu_names.get(name)
                if g is None:
                    g = gpu_names[name] = len(gpu_names)
                    if self.args_of is not None and self.args_of(name):
                        arg_kernels.add(g)
                if g in arg_kernels:
                    self.g_args[len(self.g_lo)] = _args_of(generic_of, ev)
                args = ev.args
                _device_of(g_dev, args)
                if args is None:
                    g_ext(NO_ID)
                    g_corr(NO_ID)
                else:
                    try:
                        g_ext(args.external_id)
                    except OverflowError:
                        g_ext(NO_ID)
                    try:
                        g_corr(args.correlation)
                    except OverflowError:
                        g_corr(NO_ID)
                g_name(g)
                g_lo(ts)
                g_dur(dur)
            elif cat in mem_cats:
                streams.add((ev.pid, ev.tid))
                args = ev.args
                g_name(self._mem_op_bytes(mem_cats[cat], name, args.bytes if args is not None else None))
                _device_of(g_dev, args)
                if args is None:
                    g_ext(NO_ID)
                    g_corr(NO_ID)
                else:
                    try:
                        g_ext(args.external_id)
                    except OverflowError:
                        g_ext(NO_ID)
                    try:
                        g_corr(args.correlation)
                    except OverflowError:
                        g_corr(NO_ID)
                g_lo(ts)
                g_dur(dur)
            elif cat in runtime_cats:
                key = (ev.pid, ev.tid)
                t = threads.get(key)
                if t is None:
                    t = threads[key] = len(threads)
                n = rt_names.get(name)
                if n is None:
                    n = rt_names[name] = len(rt_names)
                args = ev.args
                try:
                    rt_corr(args.correlation if args is not None else NO_ID)
                except OverflowError:
                    rt_corr(NO_ID)
                rt_thread(t)
                rt_name(n)
                rt_ts(ts)
                rt_dur(dur)
                continue  # host calls inside the ops: they do not widen the trace's span
            elif name.startswith(STEP_PREFIX):
                steps = self.gpu_steps if cat == "gpu_user_annotation" else self.cpu_steps
                s = steps.get(name)
                if s is None:
                    steps[name] = [ts, end]
                else:
                    s[0], s[1] = min(s[0], ts), max(s[1], end)
            elif cat in label_cats:
                self._label_of(name, ts, dur, (ev.pid, ev.tid), partial(_args_of, generic_of, ev))
            else:
                if extra and cat in extra:
                    self._extra_record(extra[cat], ev, generic_of)
                continue
            if ts < span_lo:
                span_lo = ts
            if end > span_hi:
                span_hi = end
        self.span_lo, self.span_hi = span_lo, span_hi

    @staticmethod
    def _extra_record(feeds: tuple[Any, Any], ev: Event, generic_of: Callable[[Event], Any]) -> None:
        """A collector's event: typed where it takes records, else (or when it declines one) as a dict."""
        feed_record, feed = feeds
        if feed_record is None or not feed_record(ev):
            feed(generic_of(ev))

    def feed(self, batch: list[dict[str, Any]]) -> None:
        """The hot loop: a few dict lookups per event, then appends to arrays.

        An event the summary would use but whose fields it cannot (a ``ts`` that is no finite number, a negative
        ``dur``, a name that is no string, an unhashable ``pid``) goes to ``_reject``, which says why; every
        lookup that can fail comes before the first append, so a rejected event leaves no trace in the arrays.
        (An ``External id`` that is missing or no 64-bit integer is stored as NO_ID: it only links.)
        """
        self.events += len(batch)
        skip, cpu_cats, label_cats, kernel_cats, mem_cats = self.skip, CPU_OP_CATS, LABEL_CATS, KERNEL_CATS, MEM_CATS
        runtime_cats = RUNTIME_CATS
        names, threads, gpu_names, streams, extra = self.names, self.threads, self.gpu_names, self.streams, self._extra
        g_lo, g_dur, g_name, g_ext = self.g_lo.append, self.g_dur.append, self.g_name.append, self.g_ext.append
        g_corr = self.g_corr.append
        rt_names, rt_corr, rt_thread = self.rt_names, self.rt_corr.append, self.rt_thread.append
        rt_name, rt_ts, rt_dur = self.rt_name.append, self.rt_ts.append, self.rt_dur.append
        op_thread, op_name, op_ts, op_dur = (self.op_thread.append, self.op_name.append, self.op_ts.append,
                                             self.op_dur.append)
        op_ext = self.op_ext.append
        shaped = self.shaped
        arg_names, arg_kernels, g_dev = self.arg_names, self.arg_kernels, self.g_dev.append
        frame_names = self.frame_names
        fr_thread, fr_name, fr_ts, fr_dur = (self.fr_thread.append, self.fr_name.append, self.fr_ts.append,
                                             self.fr_dur.append)
        span_lo, span_hi = self.span_lo, self.span_hi
        number, big, reject = _NUMBER_TYPES, _FLOAT_MAX, self._reject
        base = self.base if self.base is not None else self._base_of(batch)
        for ev in batch:
            cat = ev.get("cat")
            try:
                if cat in skip:
                    continue
                if ev.get("ph") != "X":
                    if extra and cat in extra:
                        extra[cat](ev)
                    continue
            except TypeError:  # an unhashable category (a list or an object)
                reject(ev)
                continue
            # Any JSON value until the check below; typed as what passes it (mypy cannot narrow by the set test,
            # and the narrowing it can do, a tuple test, costs twice as much per event).
            name: str = ev.get("name")  # type: ignore[assignment]
            if cat == FRAME_CAT and name.__class__ is str:
                n = frame_names.get(name)
                if n is None:
                    n = self._frame_name(name)
                if n < 0:
                    continue  # a frame the fold drops, whatever its other fields (most are never decoded)
            ts: float = ev.get("ts")  # type: ignore[assignment]
            dur: float = ev.get("dur")  # type: ignore[assignment]
            if (ts.__class__ not in number or dur.__class__ not in number or name.__class__ is not str
                    or not (-big <= ts <= big and 0 <= dur <= big)):
                reject(ev)
                continue
            ts = ts - base
            end = ts + dur
            if cat == FRAME_CAT:  # a frame kept: n is its name's id
                key = (ev.get("pid"), ev.get("tid"))
                try:
                    t = threads.get(key)
                except TypeError:
                    reject(ev)
                    continue
                if t is None:
                    t = threads[key] = len(threads)
                fr_thread(t)
                fr_name(frame_names[name])  # registered above: the frame is kept
                fr_ts(ts)
                fr_dur(dur)
                continue  # frames enclose the ops: they do not widen the trace's span
            if cat in cpu_cats and not name.startswith(STEP_PREFIX):
                n = names.get(name)
                if n is None and is_label_op(name):  # older kineto's label written as an op (a few per step)
                    if not self._label(name, ts, dur, ev):
                        continue
                    if ts < span_lo:
                        span_lo = ts
                    if end > span_hi:
                        span_hi = end
                    continue
                key = (ev.get("pid"), ev.get("tid"))
                try:
                    t = threads.get(key)
                except TypeError:  # an unhashable pid or tid
                    reject(ev)
                    continue
                if t is None:
                    t = threads[key] = len(threads)
                if n is None:
                    n = names[name] = len(names)
                    if name in self.shapes_of:
                        shaped.add(n)
                    if self.args_of is not None and self.args_of(name):
                        arg_names.add(n)
                if n in shaped:
                    self._shapes(n, ev)
                if n in arg_names:
                    self.op_args[len(self.op_ts)] = ev.get("args")
                try:
                    op_ext(ev["args"]["External id"])
                except (KeyError, TypeError, OverflowError):  # no args or id, not an int, or beyond 64 bits
                    op_ext(NO_ID)
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
                g = gpu_names.get(name)
                if g is None:
                    g = gpu_names[name] = len(gpu_names)
                    if self.args_of is not None and self.args_of(name):
                        arg_kernels.add(g)
                args = ev.get("args")
                if g in arg_kernels:
                    self.g_args[len(self.g_lo)] = args
                try:
                    g_dev(args["device"])  # type: ignore[index]
                except (KeyError, TypeError, OverflowError):
                    g_dev(NO_ID)
                try:
                    g_ext(args["External id"])  # type: ignore[index]
                except (KeyError, TypeError, OverflowError):
                    g_ext(NO_ID)
                try:
                    g_corr(args["correlation"])  # type: ignore[index]
                except (KeyError, TypeError, OverflowError):
                    g_corr(NO_ID)
                g_name(g)
                g_lo(ts)
                g_dur(dur)
            elif cat in mem_cats:
                try:
                    streams.add((ev.get("pid"), ev.get("tid")))
                except TypeError:
                    reject(ev)
                    continue
                g_name(self._mem_op(mem_cats[cat], name, ev))
                args = ev.get("args")
                try:
                    g_dev(args["device"])  # type: ignore[index]
                except (KeyError, TypeError, OverflowError):
                    g_dev(NO_ID)
                try:
                    g_ext(args["External id"])  # type: ignore[index]
                except (KeyError, TypeError, OverflowError):
                    g_ext(NO_ID)
                try:
                    g_corr(args["correlation"])  # type: ignore[index]
                except (KeyError, TypeError, OverflowError):
                    g_corr(NO_ID)
                g_lo(ts)
                g_dur(dur)
            elif cat in runtime_cats:
                key = (ev.get("pid"), ev.get("tid"))
                try:
                    t = threads.get(key)
                except TypeError:
                    reject(ev)
                    continue
                if t is None:
                    t = threads[key] = len(threads)
                n = rt_names.get(name)
                if n is None:
                    n = rt_names[name] = len(rt_names)
                try:
                    rt_corr(ev["args"]["correlation"])
                except (KeyError, TypeError, OverflowError):
                    rt_corr(NO_ID)
                rt_thread(t)
                rt_name(n)
                rt_ts(ts)
                rt_dur(dur)
                continue  # host calls inside the ops: they do not widen the trace's span
            elif name.startswith(STEP_PREFIX):
                steps = self.gpu_steps if cat == "gpu_user_annotation" else self.cpu_steps
                s = steps.get(name)
                if s is None:
                    steps[name] = [ts, end]
                else:
                    s[0], s[1] = min(s[0], ts), max(s[1], end)
            elif cat in label_cats:
                if not self._label(name, ts, dur, ev):
                    continue
            else:
                if extra and cat in extra:
                    extra[cat](ev)
                continue
            if ts < span_lo:
                span_lo = ts
            if end > span_hi:
                span_hi = end
        self.span_lo, self.span_hi = span_lo, span_hi

    def _frame_name(self, name: str) -> int:
        """A new frame name's id (-1 when ``keep_frame`` drops its frames; off the hot path: once per name)."""
        return self._frame_name_kept(name, self.keep_frame is not None and self.keep_frame(name))

    def _frame_name_kept(self, name: str, keep: bool) -> int:
        n = self.frame_names[name] = len(self.frame_kept) if keep else -1
        if keep:
            self.frame_kept.append(name)
        return n

    def _shapes(self, n: int, ev: dict[str, Any]) -> None:
        """Keep the recorded arguments of the op about to be appended (off the hot path: modeled ops only)."""
        args = ev.get("args")
        if not isinstance(args, dict) or "Input Dims" not in args:
            return
        flops = args.get("flops")
        self._keep_shapes(n, args.get("Input Dims"), args.get("Input type"), args.get("Concrete Inputs"),
                          flops if flops.__class__ is int else None)

    def _keep_shapes(self, n: int, dims: Any, types: Any, concrete: Any, flops: int | None) -> None:
        key = (n, str(dims), str(types), str(concrete))
        s = self.shape_ids.get(key)
        if s is None:
            s = self.shape_ids[key] = len(self.shape_args)
            self.shape_args.append((dims, types, concrete))
        i = len(self.op_ts)
        self.op_shape[i] = s
        if flops is not None:
            self.op_flops[i] = flops

    def _shapes_of_record(self, n: int, args: Any) -> None:
        """``_shapes`` for a typed record's args (decoded from their bytes as the dict path reads them)."""
        if args.input_dims is NO_RAW:
            return
        dims, types, concrete = (None if raw is NO_RAW else generic_value(raw)
                                 for raw in (args.input_dims, args.input_type, args.concrete_inputs))
        self._keep_shapes(n, dims, types, concrete, args.flops)

    def _dropped_frame(self, cat: Any, name: Any) -> bool:
        """Whether the event is a Python frame this pass drops (no base comes from one: the dict path's reader
        skips most of them undecoded, the typed one decodes them all)."""
        if cat != FRAME_CAT:
            return False
        if self.keep_frame is None:
            return True
        if name.__class__ is not str:
            return False
        n = self.frame_names.get(name)
        return (n if n is not None else self._frame_name(name)) < 0

    def _base_of_records(self, batch: list[Event]) -> float:
        """``_base_of`` for typed records."""
        for ev in batch:
            ts = ev.ts
            if (ts is not UNSET and -_FLOAT_MAX <= ts <= _FLOAT_MAX and ev.ph == "X"
                    and not self._dropped_frame(ev.cat, ev.name)):
                base = self.base = float(math.floor(ts))
                return base
        return 0.0

    def _base_of(self, batch: list[dict[str, Any]]) -> float:
        """The whole microsecond at or before the batch's first usable timestamp (0 when it has none yet), Python
        frames the pass drops left out."""
        for ev in batch:
            ts = ev.get("ts")
            if (isinstance(ts, (int, float)) and not isinstance(ts, bool) and -_FLOAT_MAX <= ts <= _FLOAT_MAX
                    and ev.get("ph") == "X" and not self._dropped_frame(ev.get("cat"), ev.get("name"))):
                base = self.base = float(math.floor(ts))
                return base
        return 0.0

    def _reject(self, ev: dict[str, Any]) -> None:
        """Count an event left out, under the first field that is malformed (off the hot path)."""
        field, problem = malformed_field(ev)
        self.count_malformed(field, problem, True, ev.get("name"))

    def count_malformed(self, field: str, problem: str, dropped: bool, name: Any) -> None:
        entry = self.malformed.get((field, problem, dropped))
        if entry is None:
            self.malformed[(field, problem, dropped)] = [1, name if isinstance(name, str) else ""]
        else:
            entry[0] += 1

    def _label(self, name: str, ts: float, dur: float, ev: dict[str, Any]) -> bool:
        """Keep a record_function label (off the hot path); False when its pid/tid is unusable (rejected)."""
        key = (ev.get("pid"), ev.get("tid"))
        try:
            hash(key)
        except TypeError:
            self._reject(ev)
            return False
        self._label_of(name, ts, dur, key, lambda: ev.get("args"))
        return True

    def _label_of(self, name: str, ts: float, dur: float, key: tuple[Any, Any],
                  args: Callable[[], Any]) -> None:
        """Keep a label of the thread ``key`` (a hashable (pid, tid)); ``args()``: its args, read only when
        ``args_of`` keeps them."""
        t = self.threads.get(key)
        if t is None:
            t = self.threads[key] = len(self.threads)
        n = self.label_names.get(name)
        if n is None:
            n = self.label_names[name] = len(self.label_names)
        if self.args_of is not None and self.args_of(name):
            self.lab_args[len(self.lab_ts)] = args()
        self.lab_thread.append(t)
        self.lab_name.append(n)
        self.lab_ts.append(ts)
        self.lab_dur.append(dur)

    def _mem_op(self, kind: str, name: str, ev: dict[str, Any]) -> int:
        """The name id of a memcpy/memset, adding its ``args.bytes`` to the name's total (off the hot path)."""
        args = ev.get("args")
        return self._mem_op_bytes(kind, name, args.get("bytes") if isinstance(args, dict) else None)

    def _mem_op_bytes(self, kind: str, name: str, nbytes: Any) -> int:
        if nbytes is not None and (nbytes.__class__ is not int or nbytes < 0):
            self.count_malformed("args.bytes", "not a non-negative integer (size left unknown)", False, name)
            nbytes = None
        key = (kind, name)
        g = self.gpu_names.get(key)
        if g is None:
            g = self.gpu_names[key] = len(self.gpu_names)
            self.mem_bytes[g] = nbytes
        else:
            total = self.mem_bytes[g]
            self.mem_bytes[g] = total + nbytes if total is not None and nbytes is not None else None
        return g


def _merge_ids(mine: dict[Any, int], theirs: dict[Any, int]) -> dict[int, int]:
    """Add ``theirs``' keys that ``mine`` lacks (next ids, in their order); their id -> its id in ``mine``."""
    ids = {}
    for key, theirs_id in theirs.items():
        mine_id = mine.get(key)
        if mine_id is None:
            mine_id = mine[key] = len(mine)
        ids[theirs_id] = mine_id
    return ids


def is_label_op(name: str) -> bool:
    """Whether an op event named ``name`` is a record_function label that older kineto wrote as an op."""
    return name.startswith(LABEL_OP_PREFIXES) or name in LABEL_OP_NAMES


def _args_of(generic_of: Callable[[Event], Any], ev: Event) -> Any:
    """A typed event's ``args`` as the dict path keeps them: the event decoded generically (a collective's; few)."""
    event = generic_of(ev)
    return event.get("args") if isinstance(event, dict) else None


def _device_of(append: Callable[[int], object], args: Any) -> None:
    """A GPU event's device (``args.device``), NO_ID when not recorded or beyond 64 bits."""
    try:
        append(args.device if args is not None and args.device is not None else NO_ID)
    except OverflowError:
        append(NO_ID)


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
