"""One trace file -> :class:`RankSummary`: the thin front over the one pass and the question modules.

    summary = analyze_trace("rank0.pt.trace.json.gz")

``collect`` reads the file once into compact arrays; each question is its own module of functions over them,
with its thresholds in one place: ``steps`` (step windows, GPU busy and idle; IDLE_FLAG_RATIO), ``kernels``
(kernels, memcpy/memset, communication kernels), ``gpu_clock`` (GPU events whose times contradict the host's:
left out of what lays them on its timeline), ``cpu_ops`` (self time) over ``optree`` (op nesting),
``attribution`` (which op launched each kernel), ``devices`` (devices, versions, rank), ``memory`` ([memory]
events and memory snapshots). Definitions are in those
modules and in docs/trace_summary.md.
"""

from __future__ import annotations

import os
from array import array
from collections.abc import Callable
from typing import Any, Protocol

from . import intervals, memory, reader
from .attribution import group_keys, launches
from .collect import SKIP_HEAD, SKIP_HEAD_FRAMES, Collected, malformed_field
from .comm import is_comm_name, rank_collectives
from .cpu_ops import cpu_op_stats
from .devices import devices, process_groups, rank_and_world, versions
from .efficiency import TARGET_PCT, efficiency
from .exposed import rank_comm
from .flops import MODELED
from .frames import SKIP_HEAD_FOLDED, FrameIndex, code_line, frame_summary, frame_tree, keeps
from .gpu_clock import gpu_clock
from .halves import NotACut, find_cut, read_halves
from .kernels import gpu_work
from .launch import launch_chain
from .model import (
    CpuOpStat,
    Efficiency,
    FrameTree,
    Launch,
    PeakSpec,
    RankSummary,
    RankTables,
    SkippedEvents,
    StepSeries,
)
from .names import worker_name
from .optree import op_tree
from .parallel import beside
from .ratios import percent
from .reader import TraceStream
from .series import step_series
from .steps import IDLE_FLAG_RATIO, idle_total, step_stats

# Python frames are charged in a forked child beside the other tables (parallel.beside) from this many ops and
# frames on (the frame tree then takes ~0.2 s, many times a fork's and its answer's cost)
BESIDE_MIN_EVENTS = 100_000

__all__ = ["IDLE_FLAG_RATIO", "SKIP_HEAD", "analyze_trace", "malformed_field", "percent", "summarize_collected"]


class AlsoRead(Protocol):
    """Another answer made in the same pass (the Timeline's step index): fed every batch the stream yields."""

    def feed(self, batch: list[Any], stream: TraceStream) -> None: ...

    def finish(self, stream: TraceStream) -> None: ...


def analyze_trace(path: str, top: int = 10, on_read: Callable[[int], object] | None = None,
                  peak: PeakSpec | None = None, target_pct: float = TARGET_PCT,
                  with_efficiency: bool = True, with_frames: bool = True, folded: bool = True,
                  with_comm: bool = True, typed: bool | None = None, also: AlsoRead | None = None,
                  side_by_side: bool = False) -> RankSummary:
    """Read ``path`` once and summarize it; raises TraceError for files that are not complete traces.

    ``on_read``: progress callback, see ``TraceStream``; ``peak`` (``--peak``) replaces the device's peak table
    row, ``target_pct`` the share of the roofline headroom is counted against (``efficiency``);
    ``with_efficiency=False`` leaves the efficiency answers out (benchmarks/bench_efficiency.py measures them),
    ``with_frames=False`` the Python frames (never decoded then; benchmarks/bench_frames.py); ``folded=False``
    keeps torch's, the standard library's and site-packages' frames in the frame tree (``frames``);
    ``with_comm=False`` leaves the collectives out (benchmarks/bench_comm.py measures them). ``typed``:
    the typed reading pass (default ``reader.TYPED``) or the generic one (dicts; same answers, slower);
    ``also``: another answer fed the same batches (its events are then all decoded, generically too);
    ``side_by_side``: a forked child shares the work where a fork is safe and a core is spare (``parallel.beside``):
    a large file's second half is read in one (``halves``), a large trace's Python frames are charged in one
    beside the other tables. For our own commands, never in a user's process (the capture hook runs in theirs: a
    fork there would copy its page tables and share its CUDA state).
    """
    typed = reader.TYPED if typed is None else typed

    def new_pass() -> tuple[Collected, memory.MemoryEvents]:
        c = Collected(shapes_of=MODELED if with_efficiency else frozenset(),
                      frames=keeps(folded) if with_frames else None, args_of=is_comm_name if with_comm else None)
        mem = memory.MemoryEvents(c.count_malformed)
        c.attach(mem)
        return c, mem

    cut = find_cut(path) if side_by_side and typed and also is None else None
    if cut is not None:
        read = _Counted(on_read)
        try:
            c, mem, stream = read_halves(path, cut, new_pass, _feed, read)
        except NotACut:  # read it in one pass, the progress counted once
            on_read = read.beyond()
            cut = None
    if cut is None:
        skip = (SKIP_HEAD_FOLDED if folded else SKIP_HEAD_FRAMES) if with_frames else SKIP_HEAD
        stream = TraceStream(path, skip_head=skip if also is None else None, on_read=on_read, typed=typed)
        c, mem = new_pass()
        for batch in stream.batches():
            _feed(c, stream, batch)
            if also is not None:
                also.feed(batch, stream)
        if also is not None:
            also.finish(stream)
    return summarize_collected(c, path, stream, top, mem, peak, target_pct, with_efficiency, folded, side_by_side)


def _feed(c: Collected, stream: TraceStream, batch: list[Any]) -> None:
    """One batch into the pass: typed records (with the dicts ``stream.generic`` lists), or dicts."""
    if stream.typed:
        c.feed_records(batch, stream, stream.generic)
    else:
        c.feed(batch)


class _Counted:
    """A progress callback that remembers how much it was told, so a second pass over the same file (``halves``
    gave up on its cut) tells only what lies beyond."""

    def __init__(self, on_read: Callable[[int], object] | None) -> None:
        self.on_read, self.told = on_read, 0

    def __call__(self, n: int) -> None:
        self.told += n
        if self.on_read is not None:
            self.on_read(n)

    def beyond(self) -> Callable[[int], object] | None:
        """The callback for the second pass: silent until it has read past what this one told."""
        if self.on_read is None:
            return None
        on_read, told, seen = self.on_read, self.told, 0

        def tell(n: int) -> None:
            nonlocal seen
            new = max(0, seen + n - told) - max(0, seen - told)
            seen += n
            if new:
                on_read(new)
        return tell


def summarize_collected(c: Collected, path: str, stream: TraceStream, top: int,
                        mem: memory.MemoryEvents | None = None, peak: PeakSpec | None = None,
                        target_pct: float = TARGET_PCT, with_efficiency: bool = True,
                        folded: bool = True, side_by_side: bool = False) -> RankSummary:
    """The report's figures from one pass's data (``stream``: the finished stream, for its metadata;
    ``mem``: the pass's ``[memory]`` events, if it collected them)."""
    meta = stream.metadata
    chain = launch_chain(c)
    clock = gpu_clock(c, chain)
    gpu = gpu_work(c, clock.on_gpu)
    has_gpu = gpu.totals is not None
    tree = op_tree(c, chain.ops, chain.call_op)
    frame_index = FrameIndex(c)  # built once, if a sync or the frame tree needs it
    where = code_line(frame_index)
    found = step_stats(c, gpu.busy if has_gpu else None, gpu.is_kernel, chain, tree, where, clock)
    collectives = rank_collectives(c, chain, tree, found, where)
    communication = rank_comm(c, gpu, found, collectives, tree, clock)
    steps = found.steps
    group = group_keys(c, tree, chain)
    rank, world = rank_and_world(meta, path)
    device_list = devices(meta.get("deviceProperties"))
    notes = []
    if not has_gpu:
        notes.append("no GPU activity in this trace (CPU-only capture, or CUDA activity was not recorded)")
    if not steps:
        notes.append("no timed events in this trace (complete 'X' events with a ts and a dur): nothing to "
                     "summarize")
    elif not c.cpu_steps:
        notes.append("no ProfilerStep annotations (profiler ran without a schedule): the whole trace is one "
                     "step")
    base = c.base or 0.0
    span_lo, span_hi = clock.span or (c.span_lo, c.span_hi)
    op_ts = array("d", (t + base for t in c.op_ts)) if mem is not None and len(mem) else c.op_ts
    devices_memory = [] if mem is None else memory.summarize(  # memory events keep the trace's own time
        mem, steps, c.threads, c.op_thread, c.op_name, op_ts, c.op_dur, list(c.names), top)
    memory_section = memory.section(path, rank, notes, devices_memory)

    def frames_of_code() -> FrameTree | None:  # after memory.summarize: it finishes ``mem``
        return frame_tree(c, chain, found, tree, mem, folded, frame_index)

    def the_rest() -> tuple[tuple[list[CpuOpStat], float], list[Launch], StepSeries, Efficiency | None]:
        return (cpu_op_stats(c, tree), launches(c, group), step_series(c, found, tree, group),
                efficiency(c, chain, found, device_list, peak, target_pct, top) if with_efficiency else None)

    if side_by_side and len(c.fr_ts) and len(c.op_ts) + len(c.fr_ts) >= BESIDE_MIN_EVENTS:
        frames, rest = beside(frames_of_code, the_rest)
    else:
        frames, rest = frames_of_code(), the_rest()
    (cpu_ops, cpu_self_total), launch_stats, series, efficiency_answer = rest
    return RankSummary(
        file=os.path.abspath(path),
        size_bytes=os.path.getsize(path),
        compressed=stream.compressed,
        worker=worker_name(path),
        rank=rank,
        world_size=world,
        devices=device_list,
        versions=versions(meta),
        event_count=c.events + stream.skipped,
        trace_span_us=span_hi - span_lo if span_hi >= span_lo else 0.0,
        trace_start_us=span_lo + base if span_hi >= span_lo else None,
        steps=steps,
        gpu=gpu.totals,
        idle=idle_total(steps),
        top_kernels=gpu.kernels[:top],
        top_cpu_ops=cpu_ops[:top],
        cpu_self_total_us=cpu_self_total,
        memory_ops=gpu.memory_ops,
        gpu_comm_us=sum(intervals.covered(gpu.comm, s.start_us - base, s.start_us - base + s.wall_us) for s in steps)
        if has_gpu and not clock.whole else None,
        notes=notes,
        skipped_events=[SkippedEvents(field=field, problem=problem, count=count, example=example, dropped=dropped)
                        for (field, problem, dropped), (count, example) in c.malformed.items()],
        tables=RankTables(kernels=gpu.kernels, cpu_ops=cpu_ops, launches=launch_stats,
                          series=series, frames=frames, collectives=collectives,
                          process_groups=process_groups(meta) if collectives else {}),
        memory=memory_section,
        launch_links=chain.links if has_gpu else None,
        efficiency=efficiency_answer,
        frames=frame_summary(frames, len(c.fr_ts), folded, has_gpu, top) if frames is not None else None,
        communication=communication,
        gpu_clock=clock.check,
    )
