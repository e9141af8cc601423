"""Where each step of a trace is, found in one streaming pass and kept, so the Timeline can load one step, not
the file.

    index = step_index(trace_path, cache_dir)   # built once; read back while the trace's size and mtime hold
    index.steps[k].lo, .hi, .end                # the step's CPU span and its window's end (its GPU tail)
    index.steps[k].launches                     # the correlation ids launched in it, as [first, last] runs

A step is a ``ProfilerStep#N`` span on the host. GPU work belongs to the step whose CPU span holds its launch
(the runtime or driver call with the same correlation id), however late the GPU runs it: the launch chain's rule
(``lightx2v.trace_summary.launch``). The window ends where ``trace_summary.steps`` ends a step's wall: its CPU
span extended over the GPU work it launched (and its GPU-side ``ProfilerStep#N`` span), never past the next
step's start. The pass is ``TraceStream``'s, with Python frames skipped undecoded (they are most of a with_stack
trace and say nothing about where steps are). For a plain file the index also cuts the event array into the
pieces the reader read (``Chunk``: about 4 MB of the file each) and notes what each holds (metadata, Python
frames, the time and the correlation ids its events cover), so a window reads only the pieces it needs; gzip
cannot be entered in the middle, so a gzip trace's windows read the whole stream.

The index is a small JSON file in a folder the stack owns (the trace browser's ``<root>/.trace_browser/index``),
never beside the user's trace; it names the trace's size and mtime and is built again when either changed. A
folder that cannot be written leaves the index in memory only.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
from bisect import bisect_right
from dataclasses import asdict, dataclass, field
from typing import Any

from lightx2v.fileio import write_atomically
from lightx2v.trace_browser.gzip_seek import FileChanged
from lightx2v.trace_summary import reader
from lightx2v.trace_summary.collect import KERNEL_CATS, MEM_CATS, RUNTIME_CATS, STEP_PREFIX
from lightx2v.trace_summary.reader import TraceStream
from lightx2v.trace_summary.records import NO_ID, UNSET, Event

VERSION = 4  # of the index file's layout: an index of another version is built again
INDEX_SUFFIX = ".steps.json"
KEEP_INDEXES = 256  # per cache folder, the most recently used: a few MB at most, whatever the traces' sizes
PIECE_BYTES = 4 << 20  # the reader's chunk here: the pieces a window reads back (fewer notes than 1 MB ones)
GPU_CATS = KERNEL_CATS | frozenset(MEM_CATS)
STEP_CATS = frozenset({"user_annotation"})
FLOW_PHASES = frozenset({"s", "t", "f"})
SKIP_FRAMES = rb'\s*"ph"\s*:\s*"X"\s*,\s*"cat"\s*:\s*"python_function"'  # kineto writes "ph", then "cat"
GPU_STEP_CATS = frozenset({"gpu_user_annotation"})
ALL_STEP_CATS = STEP_CATS | GPU_STEP_CATS
FRAME_CAT = "python_function"


@dataclass
class StepWindow:
    name: str
    lo: float  # the step's CPU span, in the trace's own microseconds
    hi: float
    end: float  # the window's end: hi extended over the step's GPU tail, at most the next step's start
    launches: list[list[int]] = field(default_factory=list)  # correlation ids launched in the step: [first, last]
    gpu_events: int = 0  # GPU events launched in the step


@dataclass
class StepIndex:
    size: int  # the trace's size and mtime when indexed: a trace that changed is indexed again
    mtime_ns: int
    events: int  # events decoded (Python frames not counted)
    skipped: int  # Python frames, skipped undecoded
    span: list[float]  # [first ts, last end] over the decoded timed events; [] when none
    steps: list[StepWindow]
    metadata: dict[str, Any] = field(default_factory=dict)  # every top-level key but traceEvents
    chunks: list[Chunk] = field(default_factory=list)  # the events, piece by piece
    compressed: bool = False  # gzip: the pieces' offsets are in the decompressed stream (``gzip_seek``)
    version: int = VERSION


@dataclass
class Chunk:
    """One piece of a trace's event array, as bytes [start, stop) of the file (of the decompressed stream for a
    gzip file), with what a window needs to
    know to pass it by unread: whether it holds metadata events or Python frames, the time its decoded events
    cover and the correlation ids its GPU events and flow arrows carry."""

    start: int
    stop: int = 0
    meta: bool = False
    frames: bool = False  # Python frames (skipped undecoded at indexing)
    f_lo: float = -math.inf  # the times its frames cover, from their bytes; unknown (the whole trace) by default
    f_hi: float = math.inf
    t_lo: float = math.inf
    t_hi: float = -math.inf
    corr_lo: float = math.inf
    corr_hi: float = -math.inf

    def holds(self, corr: Any) -> None:
        if isinstance(corr, int):
            self.corr_lo, self.corr_hi = min(self.corr_lo, corr), max(self.corr_hi, corr)

    def needed(self, lo: float, end: float, runs: list[list[int]], frames: bool) -> bool:
        """Whether events of the window [lo, end) (with the launches ``runs``) may lie in this piece."""
        if self.meta or (self.t_lo < end and self.t_hi >= lo):
            return True
        if frames and self.frames and self.f_lo < end and self.f_hi >= lo:
            return True
        return any(first <= self.corr_hi and last >= self.corr_lo for first, last in runs)


def step_index(trace_path: str, cache_dir: str | None, chunk_bytes: int = PIECE_BYTES) -> StepIndex:
    """The trace's index: read from ``cache_dir`` when it names this size and mtime, else built and kept there
    (FileChanged when the trace changed while it was being read)."""
    st = os.stat(trace_path)
    cache = _cache_file(trace_path, cache_dir) if cache_dir else None
    if cache is not None:
        found = _read(cache)
        if found is not None and (found.size, found.mtime_ns) == (st.st_size, st.st_mtime_ns):
            try:
                os.utime(cache)  # its mtime says when it was last used: the pruning keeps the recent ones
            except OSError:
                pass
            return found
    index = build_index(trace_path, chunk_bytes)
    _stamp(index, trace_path, st)
    if cache is not None:
        _keep(index, cache)
    return index


def index_keeper(cache_dir: str, trace_path: str, merge_below: int = PIECE_BYTES) -> IndexKeeper | None:
    """The index of ``trace_path`` made in another pass over it (``analyze_trace(also=...)``: the Overview reads a
    trace once for its summary and its Timeline index) and kept in ``cache_dir``; None when the cache holds it
    already. ``functools.partial(index_keeper, cache_dir)`` is what ``summarize_runs(also=...)`` takes."""
    cache = _cache_file(trace_path, cache_dir)
    st = os.stat(trace_path)
    found = _read(cache)
    if found is not None and (found.size, found.mtime_ns) == (st.st_size, st.st_mtime_ns):
        return None
    return IndexKeeper(trace_path, cache, st, merge_below)


class IndexKeeper:
    """An ``IndexBuilder`` riding along another pass (its batches merged into pieces of ``merge_below`` bytes),
    whose index is kept in the cache folder when the pass ends, unless the trace changed meanwhile."""

    def __init__(self, trace_path: str, cache: str, st: os.stat_result, merge_below: int = PIECE_BYTES) -> None:
        self.trace_path, self.cache, self.st = trace_path, cache, st
        self.builder = IndexBuilder(merge_below=merge_below)

    def feed(self, batch: list[Any], stream: TraceStream) -> None:
        self.builder.feed(batch, stream)

    def finish(self, stream: TraceStream) -> None:
        index = self.builder.finish(stream)
        try:
            _stamp(index, self.trace_path, self.st)
        except (FileChanged, OSError):
            return  # the summary stands; the Timeline indexes the new version when asked
        _keep(index, self.cache)


def _stamp(index: StepIndex, trace_path: str, st: os.stat_result) -> None:
    """Name the trace's size and mtime in the index; FileChanged when it was rewritten while being read."""
    after = os.stat(trace_path)
    if (after.st_size, after.st_mtime_ns, after.st_ino) != (st.st_size, st.st_mtime_ns, st.st_ino):
        raise FileChanged(trace_path)  # rewritten while being read: the index would name neither version
    index.size, index.mtime_ns = st.st_size, st.st_mtime_ns


def _keep(index: StepIndex, cache: str) -> None:
    try:
        os.makedirs(os.path.dirname(cache), exist_ok=True)
        write_atomically(cache, json.dumps(asdict(index)))
        prune(os.path.dirname(cache))
    except OSError:  # a read-only results root: the caller keeps it in memory
        pass


def prune(cache_dir: str, keep: int = KEEP_INDEXES) -> None:
    """Remove all but the ``keep`` most recently used indexes of ``cache_dir`` (traces deleted, renamed or
    rewritten leave theirs behind; nothing else would ever remove them)."""
    found = []
    with os.scandir(cache_dir) as entries:
        for entry in entries:
            if entry.name.endswith(INDEX_SUFFIX) and entry.is_file():
                try:
                    found.append((entry.stat().st_mtime_ns, entry.path))
                except OSError:
                    continue
    found.sort(reverse=True)
    for _, path in found[keep:]:
        try:
            os.unlink(path)
        except OSError:  # removed meanwhile by another server on the same root
            pass


def _cache_file(trace_path: str, cache_dir: str) -> str:
    key = hashlib.sha256(os.path.realpath(trace_path).encode("utf-8", "surrogateescape")).hexdigest()[:32]
    return os.path.join(cache_dir, key + INDEX_SUFFIX)


def _read(path: str) -> StepIndex | None:
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
        if data.get("version") != VERSION:
            return None
        steps = [StepWindow(**s) for s in data.pop("steps")]
        chunks = [Chunk(**c) for c in data.pop("chunks")]
        return StepIndex(steps=steps, chunks=chunks, **data)
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return None  # missing, half-understood or from another layout: build it again


def build_index(trace_path: str, chunk_bytes: int = PIECE_BYTES, typed: bool | None = None) -> StepIndex:
    """One streaming pass over the trace (TraceError when it cannot be read); ``typed``: the reading pass's
    decoder (default ``reader.TYPED``; the generic one gives the same index)."""
    typed = reader.TYPED if typed is None else typed
    builder = IndexBuilder()
    stream = TraceStream(trace_path, chunk_bytes=chunk_bytes, skip_head=None if typed else SKIP_FRAMES,
                         on_skipped=builder.skipped_bytes, typed=typed)
    for batch in stream.batches():
        builder.feed(batch, stream)
    return builder.finish(stream)


class IndexBuilder:
    """The index's share of a reading pass: ``feed`` each batch the stream yields (dicts, or typed records with
    dicts at ``stream.generic``), then ``finish``. It rides along the summary's pass too (the trace browser's
    Overview reads a trace once for both), that pass's batches merged into pieces of at least ``merge_below``
    bytes.

    Python frames are not indexed, only counted (``skipped``) and noted per piece with the times they cover: the
    generic reader skips most of them undecoded (their times then come from their bytes, ``frame_span``), the
    typed one decodes them all."""

    def __init__(self, merge_below: int = 0) -> None:
        self.merge_below = merge_below
        self.cpu_steps: dict[str, list[float]] = {}
        self.gpu_steps: dict[str, list[float]] = {}
        self.launch_ts: dict[int, float] = {}  # correlation id -> its runtime/driver call's start
        self.gpu: list[tuple[int, float]] = []  # (correlation id, GPU end) of GPU events with a correlation id
        self.chunks: list[Chunk] = []
        self.lo, self.hi = math.inf, -math.inf
        self.events = 0  # events indexed (Python frames not counted)
        self.frames = 0  # Python frames
        self._undecoded = 0  # the stream's frames skipped undecoded so far
        self._skipped_span: tuple[float, float] | tuple[()] = ()  # on_skipped's, for the batch about to come
        self._span: list[float] | None = None  # [lowest start, highest end] of the current piece's frames
        self._span_known = True  # False once a frame's times could not be read: the piece's are the whole trace's

    def skipped_bytes(self, piece: memoryview) -> None:
        """``TraceStream(on_skipped=...)``: the times of the frames the generic reader skipped in a batch."""
        self._skipped_span = frame_span(piece)

    def feed(self, batch: list[Any], stream: TraceStream) -> None:
        if not self.chunks or stream.batch_start - self.chunks[-1].start >= self.merge_below:
            self._close_piece()
            if self.chunks:
                self.chunks[-1].stop = stream.batch_start
            self.chunks.append(Chunk(start=stream.batch_start))
        chunk = self.chunks[-1]
        undecoded = stream.skipped - self._undecoded
        if undecoded:
            self._undecoded = stream.skipped
            self.frames += undecoded
            if self._skipped_span:
                self._widen(*self._skipped_span)
            else:
                self._span_known = False
        frames = self.frames
        if not stream.typed:
            for e in batch:
                self._event(e, chunk)
        elif not stream.generic:
            self._records(batch, chunk)
        else:
            generic = set(stream.generic)
            for k, e in enumerate(batch):
                if k in generic:
                    self._event(e, chunk)
                else:
                    self._records([e], chunk)
        self.events += len(batch) - (self.frames - frames)

    def finish(self, stream: TraceStream) -> StepIndex:
        """The index, once the stream has been read to its end (size and mtime for the caller to set)."""
        self._close_piece()
        if self.chunks:
            self.chunks[-1].stop = stream.events_end
        windows = _windows(self.cpu_steps, self.gpu_steps, self.launch_ts, self.gpu)
        return StepIndex(size=0, mtime_ns=0, events=self.events, skipped=self.frames,
                         span=[self.lo, self.hi] if self.lo <= self.hi else [], steps=windows,
                         metadata=stream.metadata, chunks=self.chunks, compressed=stream.compressed)

    def _widen(self, lo: float, hi: float) -> None:
        if self._span is None:
            self._span = [lo, hi]
        else:
            self._span[0], self._span[1] = min(self._span[0], lo), max(self._span[1], hi)

    def _frame(self, ts: Any, dur: Any) -> None:
        self.frames += 1
        if isinstance(ts, (int, float)) and isinstance(dur, (int, float)):
            self._widen(float(ts), float(ts) + float(dur))  # as frame_span reads them from the bytes
        else:
            self._span_known = False

    def _close_piece(self) -> None:
        """Note the frames of the piece just finished."""
        if self.chunks and (self._span is not None or not self._span_known):
            chunk = self.chunks[-1]
            chunk.frames = True
            if self._span_known and self._span is not None:
                chunk.f_lo, chunk.f_hi = self._span
        self._span, self._span_known = None, True

    def _event(self, e: dict[str, Any], chunk: Chunk) -> None:
        """One event decoded as a dict."""
        ph = e.get("ph")
        if ph == "M":
            chunk.meta = True
            return
        cat = e.get("cat")
        if cat == FRAME_CAT and ph == "X":
            self._frame(e.get("ts"), e.get("dur"))
            return
        ts = e.get("ts")
        if not isinstance(ts, (int, float)):
            return
        dur = e.get("dur")
        end = ts + dur if isinstance(dur, (int, float)) else ts
        self.lo, self.hi = min(self.lo, ts), max(self.hi, end)
        chunk.t_lo, chunk.t_hi = min(chunk.t_lo, ts), max(chunk.t_hi, end)
        if ph in FLOW_PHASES:
            chunk.holds(e.get("id"))
            return
        if ph != "X":
            return
        if cat in RUNTIME_CATS or cat in GPU_CATS:
            args = e.get("args")
            corr = args.get("correlation") if isinstance(args, dict) else None
            if isinstance(corr, int):
                self._linked(cat, corr, ts, end, chunk)
        elif cat in STEP_CATS or cat in GPU_STEP_CATS:
            name = e.get("name")
            if isinstance(name, str) and name.startswith(STEP_PREFIX):
                self._step(cat, name, ts, end)

    def _records(self, batch: list[Event], chunk: Chunk) -> None:
        """``_event`` over typed records (the hot loop of a typed pass)."""
        lo, hi, t_lo, t_hi = self.lo, self.hi, chunk.t_lo, chunk.t_hi
        unset, flows, calls, gpu_cats, step_cats = UNSET, FLOW_PHASES, RUNTIME_CATS, GPU_CATS, ALL_STEP_CATS
        for e in batch:
            ph = e.ph
            if ph == "M":
                chunk.meta = True
                continue
            cat = e.cat
            if cat == FRAME_CAT and ph == "X":
                self._frame(e.ts, e.dur)
                continue
            ts = e.ts
            if ts is unset:
                continue
            dur = e.dur
            end = ts if dur is unset else ts + dur
            if ts < lo:
                lo = ts
            if end > hi:
                hi = end
            if ts < t_lo:
                t_lo = ts
            if end > t_hi:
                t_hi = end
            if ph in flows:
                chunk.holds(e.id)
            elif ph != "X":
                continue
            elif cat in calls or cat in gpu_cats:
                args = e.args
                if args is not None and args.correlation != NO_ID:
                    self._linked(cat, args.correlation, ts, end, chunk)
            elif cat in step_cats:
                name = e.name
                if name is not unset and name.startswith(STEP_PREFIX):
                    self._step(cat, name, ts, end)
        self.lo, self.hi, chunk.t_lo, chunk.t_hi = lo, hi, t_lo, t_hi

    def _linked(self, cat: Any, corr: int, ts: float, end: float, chunk: Chunk) -> None:
        if cat in RUNTIME_CATS:
            self.launch_ts[corr] = ts
        else:
            self.gpu.append((corr, end))
            chunk.holds(corr)

    def _step(self, cat: Any, name: str, ts: float, end: float) -> None:
        spans = self.cpu_steps if cat in STEP_CATS else self.gpu_steps
        span = spans.setdefault(name, [ts, end])
        span[0], span[1] = min(span[0], ts), max(span[1], end)


_NUMBER = rb"(-?[0-9][0-9.eE+-]*)"
_FRAME_TIMES = re.compile(rb'"python_function"[^{}]*?"ts"\s*:\s*' + _NUMBER + rb'\s*,\s*"dur"\s*:\s*' + _NUMBER)


def frame_span(piece: memoryview) -> tuple[float, float] | tuple[()]:
    """The times the Python frames in ``piece`` (raw JSON) cover: the earliest start and the latest end, read by
    one regex over the bytes (kineto writes a frame's "cat" before its "ts", then "dur"). Empty when some frame's
    times are not written that way (or its name holds a brace): the piece is then read for every frames window."""
    data = bytes(piece)
    pairs = _FRAME_TIMES.findall(data)
    if not pairs or len(pairs) != data.count(b'"python_function"'):
        return ()
    try:
        starts = [float(ts) for ts, _ in pairs]
        ends = [t + float(d) for t, (_, d) in zip(starts, pairs, strict=True)]
    except ValueError:
        return ()
    return min(starts), max(ends)


def _windows(cpu_steps: dict[str, list[float]], gpu_steps: dict[str, list[float]], launch_ts: dict[int, float],
             gpu: list[tuple[int, float]]) -> list[StepWindow]:
    spans = sorted((lo, hi, name) for name, (lo, hi) in cpu_steps.items())
    starts = [s[0] for s in spans]
    launched: list[list[list[int]]] = [[] for _ in spans]

    def step_of(t: float) -> int:
        k = bisect_right(starts, t) - 1
        return k if k >= 0 and t <= spans[k][1] else -1

    # Every correlation id the file holds (launch calls, GPU events), in order, with the step that launched it:
    # a step's runs are maximal ranges of these ids that it owns, so ids nothing in the file carries never split
    # a run, and a step is a few runs however many kernels it launched.
    owner = -2
    for corr in sorted(launch_ts.keys() | {c for c, _ in gpu}):
        t = launch_ts.get(corr)
        k = step_of(t) if t is not None else -1
        if k >= 0 and k == owner:
            launched[k][-1][1] = corr
        elif k >= 0:
            launched[k].append([corr, corr])
        owner = k
    gpu_end = [-math.inf] * len(spans)
    gpu_count = [0] * len(spans)
    for corr, end in gpu:
        at = launch_ts.get(corr)
        k = step_of(at) if at is not None else -1
        if k >= 0:
            gpu_count[k] += 1
            gpu_end[k] = max(gpu_end[k], end)
    out = []
    for k, (lo, hi, name) in enumerate(spans):
        tail = max(gpu_end[k], gpu_steps.get(name, [0.0, -math.inf])[1])
        nxt = starts[k + 1] if k + 1 < len(spans) else math.inf
        out.append(StepWindow(name=name, lo=lo, hi=hi, end=max(hi, min(tail, nxt)), launches=launched[k],
                              gpu_events=gpu_count[k]))
    return out


def describe(index: StepIndex) -> dict[str, Any]:
    """What the Timeline page needs: the steps' names and times (not their launches), the trace's span."""
    return {"span": index.span, "events": index.events, "skipped": index.skipped,
            "steps": [{"name": s.name, "lo": s.lo, "hi": s.hi, "end": s.end, "gpu_events": s.gpu_events}
                      for s in index.steps]}
