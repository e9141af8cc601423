"""The plain-text report: compact tables for a terminal over SSH (ASCII only, <= ~110 columns but for names).

Names in the last column of a table (kernels, CPU ops, allocating ops, code locations) are never cut: a kernel
shows its whole ``short_name`` (one rule, ``names.short_name``, for the summary, ``--diff`` and the browser).
A name in a column in the middle of a row is cut to the column with ``...`` (``names.cut``).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import TypeVar

from .devices import unlisted
from .gpu_clock import FAR_US
from .memory import HINT as MEMORY_HINT
from .memory import LEAK_MIN_STEPS
from .model import (
    CpuOpStat,
    Device,
    GpuClockCheck,
    IdleStats,
    MemorySummary,
    RankSummary,
    RunSummary,
    SkippedEvents,
    SnapshotSummary,
    StepStats,
)
from .names import cut as _cut
from .ranks import LOCKSTEP_SPREAD, mean_busy
from .ratios import percent
from .render_comm import rank_comm_lines, run_comm_lines
from .render_efficiency import efficiency_lines
from .render_frames import frames_lines, tree_lines
from .steps import IDLE_FLAG_RATIO, cause_times, idle_advice
from .units import format_bytes, format_signed_bytes

MAX_STEP_ROWS = 12
CUDA_API_NOTE = "as TensorBoard's, without the CUDA API calls the op made itself"

_Step = TypeVar("_Step")


def render_runs(runs: list[RunSummary], frame_tree: bool = False) -> str:
    """``frame_tree``: each rank's "where in your code" tree too (``--frames``)."""
    return "\n\n".join(render_run(run, frame_tree) for run in runs) + "\n"


def render_run(run: RunSummary, frame_tree: bool = False) -> str:
    damaged = [f"  damaged   {d.file}: {d.problem} (left out of this report)" for d in run.damaged_files]
    if len(run.ranks) == 1 and not damaged:
        return render_rank(run.ranks[0], frame_tree)
    ranks = [r.rank for r in run.ranks]
    one = len(run.ranks) == 1
    if run.spans:
        workers = sorted({r.worker for r in run.ranks})
        what = f"spans of {', '.join(workers)}"
    elif None not in ranks and len(set(ranks)) == len(ranks):
        what = "rank" if one else "ranks"
    else:
        what = "trace file (a worker or span)" if one else "trace files (workers or spans)"
    count = f"{len(run.ranks)} {what}" + (f", {len(damaged)} more damaged" if damaged else "")
    lines = [f"Run {run.label}: {count} ({run.path})", *damaged]
    if run.spans:
        lines.append(f"  {spans_note(run)}")
    lines.append("")
    if len(run.ranks) == 1:
        return "\n".join([*lines, render_rank(run.ranks[0], frame_tree)])
    first = run.ranks[0].trace_start_us or 0.0
    lines.append(f"  {'span' if run.spans else 'rank':>4}  {'worker':<24} "
                 + (f"{'started':>12} " if run.spans else "")
                 + f"{'steps':>5} {'step ms':>10} {'GPU busy ms':>12} {'busy %':>7} {'comm ms':>9}")
    for i, (row, r) in enumerate(zip(run.comparison or [], run.ranks, strict=False), 1):
        lines.append(f"  {i if run.spans else _opt(row.rank):>4}  {_cut(row.worker, 24):<24} "
                     + (f"{'+' + format_duration((r.trace_start_us or 0.0) - first):>12} " if run.spans else "")
                     + f"{row.steps:>5} {_ms(row.step_wall_us):>10} "
                     f"{_ms(row.gpu_busy_us):>12} {_p(row.gpu_busy_pct):>7} {_ms(row.gpu_comm_us):>9}")
    s = run.straggler
    if s is not None:
        who = f"rank {s.rank} ({s.worker})" if s.rank is not None else s.worker
        if s.criterion == "waits_caused":
            named = sum(1 for x in (run.communication.steps if run.communication else []) if x.late_worker)
            steps = len(run.communication.steps) if run.communication else 0
            lines.append(f"  straggler: {who}: the others waited {_ms(s.waits_caused_us)} ms per step for it in "
                         f"collectives (late in {named} of {steps} steps; step {_ms(s.step_wall_us)} ms)")
        elif s.criterion == "step_wall":
            factor = 1 + s.slower_than_fastest_pct / 100
            fastest = s.step_wall_us / factor
            lead = f"{factor:.1f}x" if factor >= 2 else f"{s.slower_than_fastest_pct:+.1f}% vs"
            lines.append(f"  straggler: {who}: step {_ms(s.step_wall_us)} ms, {lead} the fastest rank's "
                         f"{_ms(fastest)} ms")
        else:
            lines.append(f"  straggler: {who}: step times are within {100 * LOCKSTEP_SPREAD:.0f}% (ranks wait for "
                         f"each other in collectives); it has the most GPU compute per step, "
                         f"{s.slower_than_fastest_pct:+.1f}% vs the least")
    lines += run_comm_lines(run.communication)
    for i, rank in enumerate(run.ranks, 1):
        lines += ["", "=" * 100, render_rank(rank, frame_tree, f"span {i} of {len(run.ranks)}" if run.spans else "")]
    return "\n".join(lines)


def spans_note(run: RunSummary) -> str:
    """Why a run's files are reported as spans (``ranks.are_spans``)."""
    ranks = {r.rank for r in run.ranks}
    recorded = "no rank recorded" if ranks == {None} else "no distinct ranks recorded"
    return (f"spans: captures at different times (none overlaps another, {recorded}), side by side; not ranks, "
            "no straggler")


def render_rank(r: RankSummary, frame_tree: bool = False, span: str = "") -> str:
    """One trace's report; ``span``: which span of its run it is (``span 1 of 2``), "" for a rank."""
    lines = [f"Trace summary: {r.worker}" + (f" (rank {r.rank}" + (f" of {r.world_size})" if r.world_size else ")")
                                             if r.rank is not None else "") + (f", {span}" if span else "")]
    lines.append(f"  file      {r.file} ({format_bytes(r.size_bytes)}{', gzip' if r.compressed else ''}, "
                 f"{r.event_count:,} events, span {_ms(r.trace_span_us)} ms)")
    devices = "; ".join(_device(d) for d in r.devices)
    lines.append(f"  devices   {devices or unlisted(r.gpu)}")
    if r.versions:
        lines.append("  versions  " + ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in r.versions.items()))
    lines.append(f"  steps     {_step_names(r.steps)}")
    for note in r.notes:
        lines.append(f"  note      {note}")
    for skipped in r.skipped_events:
        lines.append(f"  skipped   {skipped_line(skipped)}")
    if r.gpu_clock is not None and r.gpu_clock.off:
        lines.append(f"  skipped   {gpu_clock_line(r.gpu_clock)}")

    columns = gpu_columns(r)
    if r.steps:
        lines += ["", f"  {'step':<20} {'wall ms':>10}" + (f" {'GPU busy ms':>12} {'busy %':>7} {'kernels':>8} "
                                                          f"{'idle %':>7} {'largest gap ms':>15} {'GPU lag ms':>11}"
                                                          if columns else "")]
    lines += _step_rows(r.steps, lambda s: _step_row(
        s.name, s.wall_us, s.gpu_busy_us, s.gpu_busy_pct, s.kernel_count, s.idle.ratio if s.idle else None,
        s.idle.largest_gap_us if s.idle else None, s.gpu_lag_us, columns))
    if len(r.steps) > 1:
        n = len(r.steps)
        wall = sum(s.wall_us for s in r.steps) / n
        gpu = r.gpu is not None
        busy = mean_busy(r)
        kernels = round(sum(s.kernel_count or 0 for s in r.steps) / n) if gpu else None
        lags = [s.gpu_lag_us for s in r.steps if s.gpu_lag_us is not None]
        slowest = max(r.steps, key=lambda s: s.wall_us)
        mean_lag = sum(lags) / len(lags) if lags else None
        lines.append(_step_row(f"mean of {n}", wall, busy, percent(busy, wall) if busy is not None else None, kernels,
                               r.idle.ratio if r.idle else None, None, mean_lag, columns))
        lines.append(f"  slowest step: {slowest.name} ({_ms(slowest.wall_us)} ms)")
    if r.idle is not None:
        lines += ["", _idle_line(r.idle)]
    lines += _memory_lines(r.memory)
    lines += efficiency_lines(r.efficiency)
    lines += frames_lines(r.frames)
    lines += rank_comm_lines(r.communication)
    if frame_tree:
        lines += tree_lines(r.tables.frames if r.tables else None, r.gpu is not None)

    if r.gpu is not None:
        g = r.gpu
        totals = (f"GPU activity {_ms(g.activity_us)} ms, busy {_ms(g.busy_us)} ms, {g.kernel_count:,} kernels on "
                  f"{g.streams} stream(s)")
        if r.top_kernels:
            lines += ["", f"Top {len(r.top_kernels)} GPU kernels by total time ({totals})",
                      f"  {'% GPU':>6} {'total ms':>10} {'calls':>7} {'mean us':>9}  kernel"]
        else:
            lines += ["", f"GPU kernels: none ({totals})"]
        for k in r.top_kernels:
            lines.append(f"  {k.pct_of_gpu_time:6.1f} {_ms(k.total_us):>10} {k.calls:>7} {k.mean_us:9.1f}  "
                         f"{k.short_name}")
        if r.memory_ops:
            lines += ["", "Memory copies and sets"]
            for m in r.memory_ops:
                size = f"  {format_bytes(m.bytes)}" if m.bytes is not None else ""
                lines.append(f"  {m.kind:<7} {_cut(m.name, 40):<40} {m.calls:>7} calls {_ms(m.total_us):>10} ms{size}")
        else:
            lines += ["", "Memory copies and sets: none"]
    else:
        lines += ["", "GPU: no kernels, copies or sets in this trace"]

    if r.top_cpu_ops:
        api = {op.name: cuda_api_us(op) for op in r.top_cpu_ops}
        with_api = any(api.values())  # a CPU-only trace has no CUDA calls: no column
        lines += ["", f"Top {len(r.top_cpu_ops)} CPU ops by self time (all CPU ops: {_ms(r.cpu_self_total_us)} ms "
                      "self" + (f"; {CUDA_API_NOTE}" if with_api else "") + ")",
                  f"  {'% self':>6} {'self ms':>10} " + (f"{'CUDA API ms':>11} " if with_api else "")
                  + f"{'total ms':>10} {'calls':>7}  op"]
        for op in r.top_cpu_ops:
            lines.append(f"  {op.pct_of_cpu_self:6.1f} {_ms(op.self_us):>10} "
                         + (f"{_ms(api[op.name]):>11} " if with_api else "")
                         + f"{_ms(op.total_us):>10} {op.calls:>7}  {op.name}")
    else:
        lines += ["", "CPU ops: none recorded"]
    return "\n".join(lines)


def gpu_columns(r: RankSummary) -> bool:
    """Whether a step table has GPU columns: the trace has GPU activity, or a step has GPU figures. A CPU-only
    trace's would all be dashes, so it has none (the text and the Overview alike)."""
    return r.gpu is not None or any(s.gpu_busy_us is not None for s in r.steps)


def cuda_api_us(op: CpuOpStat) -> float:
    """The time an op spent in the CUDA runtime/driver calls it made itself (not in its self time)."""
    return max(0.0, op.self_with_runtime_us - op.self_us) if op.self_with_runtime_us is not None else 0.0


def _memory_lines(m: MemorySummary | None) -> list[str]:
    """The memory section (lightx2v.trace_summary.memory); one line saying how to record it when absent."""
    if m is None:
        return ["", f"Memory: {MEMORY_HINT}"]
    lines = []
    for d in m.devices:
        where = ""
        step = next((s for s in d.steps if s.name == d.peak_step), None)
        if step is not None:
            where = f" in {step.name} (+{_ms(d.peak_allocated_at_us - step.start_us)} ms)"
        reserved = (f", peak reserved {format_bytes(d.peak_reserved_bytes)}" if d.peak_reserved_bytes is not None
                    else "")
        lines += ["", f"Memory {d.device}: peak allocated {format_bytes(d.peak_allocated_bytes)}{where}{reserved}; "
                      f"{d.allocations:,} allocations, {format_bytes(d.allocated_bytes)} in all"]
        if d.out_of_memory_events:
            lines.append(f"  !! {d.out_of_memory_events} out-of-memory event(s) on {d.device}")
        lines.append(f"  {'step':<20} {'allocated at start':>18} {'at end':>10} {'growth':>10} {'peak alloc':>11} "
                     f"{'peak reserved':>13}")
        lines += _step_rows(d.steps, lambda s: (
            f"  {_cut(s.name, 20):<20} {format_bytes(s.allocated_start_bytes):>18} "
            f"{format_bytes(s.allocated_end_bytes):>10} {format_signed_bytes(s.growth_bytes):>10} "
            f"{format_bytes(s.peak_allocated_bytes):>11} {format_bytes(s.peak_reserved_bytes):>13}"
            + ("  grew" if s.grew else "")))
        grew = [s for s in d.steps if s.grew]
        rule = f"a step is flagged when it keeps {format_bytes(d.leak_threshold_bytes)} or more"
        if d.leak:
            mean = sum(s.growth_bytes for s in grew) // len(grew)
            lines += [f"  !! LEAK: allocated memory grows in {len(grew)} of {len(d.steps)} steps (+"
                      f"{format_bytes(mean)} per step on average)",
                      f"     something keeps tensors across steps ({rule})"]
        elif grew:
            lines += [f"  note: {grew[0].name} kept +{format_bytes(grew[0].growth_bytes)}: a leak if it repeats; "
                      f"capture {LEAK_MIN_STEPS} or more steps to tell", f"     ({rule})"]
        else:
            lines.append(f"  no step grew ({rule})")
        if d.top_ops:
            lines += [f"  Top {len(d.top_ops)} ops by bytes allocated (self: in the op itself; live: not freed at "
                      "the peak)",
                      f"  {'self':>10} {'with children':>14} {'live at peak':>13} {'allocs':>7}  op"]
        for op in d.top_ops:
            lines.append(f"  {format_bytes(op.self_bytes):>10} {format_bytes(op.total_bytes):>14} "
                         f"{format_bytes(op.live_at_peak_bytes):>13} {op.allocations:>7}  {op.name}")
        if d.unattributed_bytes:
            lines.append(f"  {format_bytes(d.unattributed_bytes)} allocated outside any CPU op")
    for snap in m.snapshots:
        source = ("from the allocator's history" if snap.source == "device_traces"
                  else "no history recorded: the blocks live when the snapshot was taken")
        held = snapshot_holders(snap, 3)
        other = f"{', ' if held else ''}{format_bytes(snap.other_bytes)} elsewhere" if snap.other_bytes else ""
        lines += ["", f"Memory snapshot {snapshot_device(snap)} ({source}; {os.path.basename(snap.file)}): peak "
                      f"{format_bytes(snap.peak_bytes)}: {held}{other}",
                  f"  {'bytes':>10} {'blocks':>7}  where (innermost frame in your code)"]
        for site in snap.sites:
            lines.append(f"  {format_bytes(site.bytes):>10} {site.blocks:>7}  {site.location} {site.function}")
    return lines


def _device(d: Device) -> str:
    """``0: NVIDIA H200 (sm 9.0, 139.8 GiB)``; the parenthesis holds only what the trace recorded, none without."""
    known = ([f"sm {d.compute_capability}"] if d.compute_capability else []) + (
        [f"{d.memory_bytes / 2**30:.1f} GiB"] if d.memory_bytes else [])
    return f"{d.id if d.id is not None else '?'}: {d.name}" + (f" ({', '.join(known)})" if known else "")


def _step_rows(steps: Sequence[_Step], row: Callable[[_Step], str]) -> list[str]:
    """One row per step, or past MAX_STEP_ROWS the first and the last two with the count left out between."""
    if len(steps) <= MAX_STEP_ROWS:
        return [row(s) for s in steps]
    head, tail = steps[:MAX_STEP_ROWS - 2], steps[-2:]
    return [*map(row, head), f"  ... {len(steps) - MAX_STEP_ROWS} more steps ...", *map(row, tail)]


def snapshot_device(snap: SnapshotSummary) -> str:
    return f"cuda:{snap.device}" if snap.device is not None else "cuda"


def snapshot_holders(snap: SnapshotSummary, sites: int) -> str:
    """``1.2 GB at model.py:40 forward, ...``: the places in the user's code holding most of a snapshot's peak."""
    return ", ".join(f"{format_bytes(site.bytes)} at {site.location} {site.function}" for site in snap.sites[:sites])


def skipped_line(s: SkippedEvents) -> str:
    """``3 events whose dur is negative (e.g. aten::mm)``: what was left out, how many, why."""
    example = f" (e.g. {_cut(s.example, 60)})" if s.example else ""
    events = f"{s.count:,} event{'s' if s.count != 1 else ''}"
    if s.dropped:
        return f"{events} whose {s.field} is {s.problem}{example}"
    return f"the {s.field} of {events}: {s.problem}{example}"


def gpu_clock_line(g: GpuClockCheck) -> str:
    """``2 GPU events whose times contradict the host's (2 starting before the launch call; e.g. gemm): ...``:
    which GPU times were not laid on the CPU's timeline, how many, why (``gpu_clock``)."""
    why = ", ".join(f"{n:,} {what}" for n, what in (
        (g.before_launch, "starting before the launch call"), (g.after_sync, "ending after a device sync returned"),
        (g.far_off, f"over {FAR_US / 1e6:.0f} s outside the CPU's events")) if n)
    example = f"; e.g. {_cut(g.example, 60)}" if g.example else ""
    if not g.whole_clock:
        return (f"{g.off:,} GPU event{'s' if g.off != 1 else ''} whose times contradict the host's ({why}{example}): "
                "left out of busy, idle, lag and the span")
    offset = ""
    if g.offset_us is not None:
        by = abs(g.offset_us)
        offset = (f" (GPU times >= {f'{_ms(by)} ms' if by < 1e6 else format_duration(by)} "
                  f"{'late' if g.offset_us > 0 else 'early'})")
    return (f"the GPU clock is off the CPU's{offset}: {g.off:,} of {g.gpu_events:,} GPU events contradict the host's "
            f"({why}{example}); per-step GPU busy, idle and lag not given, kernel times and launches stand")


def _step_row(name: str, wall: float, busy: float | None, busy_pct: float | None, kernels: int | None,
              idle_ratio: float | None, largest_gap: float | None, lag: float | None, gpu: bool) -> str:
    row = f"  {_cut(name, 20):<20} {_ms(wall):>10}"
    if not gpu:
        return row
    return (f"{row} {_ms(busy):>12} {_p(busy_pct):>7} {_opt(kernels):>8} "
            f"{_p(idle_ratio * 100 if idle_ratio is not None else None):>7} {_ms(largest_gap):>15} {_ms(lag):>11}")


def _step_names(steps: Sequence[StepStats]) -> str:
    if not steps:
        return "none"
    if len(steps) <= 6:
        return ", ".join(s.name for s in steps)
    return f"{steps[0].name} ... {steps[-1].name} ({len(steps)} steps)"


def _idle_line(idle: IdleStats) -> str:
    verdict = (f"ok (flagged at >= {100 * IDLE_FLAG_RATIO:.0f}%)" if not idle.flagged
               else f"!! HIGH GPU IDLE (>= {100 * IDLE_FLAG_RATIO:.0f}% of step time)")
    lines = [f"GPU idle inside steps: {_ms(idle.idle_us)} of {_ms(idle.window_us)} ms ({100 * idle.ratio:.1f}%) - "
             f"{verdict}",
             f"  largest gap {_ms(idle.largest_gap_us)} ms at +{_ms(idle.largest_gap_at_us)} ms into "
             f"{idle.largest_gap_step}; {idle.gaps_over_10us} gaps >= 10 us"]
    causes = idle.causes
    if causes is not None and idle.idle_us > 0:
        parts = cause_times(causes)
        lines.append("  by cause: " + ", ".join(f"{name} {_ms(us)} ms ({100 * us / idle.idle_us:.0f}%)"
                                                 for name, us in parts if us > 0))
        for w in causes.syncs[:3]:
            lines.append(f"    sync  {_ms(w.idle_us)} ms in {w.gaps} gap{'s' if w.gaps != 1 else ''}: "
                         f"{w.op + ' -> ' if w.op else ''}{w.call}{' at ' + w.line if w.line else ''}")
    if idle.flagged:
        advice = idle_advice(idle)
        if advice:
            lines.append(f"  {advice}")
    return "\n".join(lines)


def format_ms(us: float | None, missing: str = "-") -> str:
    """Microseconds as milliseconds, ``1234.5`` -> ``"1.234"``; ``missing`` for None."""
    return missing if us is None else f"{us / 1000:.3f}"


def format_duration(us: float) -> str:
    """A time between captures: ``0.4 s``, ``59.0 s``, ``7 min 50 s``, ``2 h 5 min``."""
    seconds = us / 1e6
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, sec = divmod(round(seconds), 60)
    if minutes < 60:
        return f"{minutes} min {sec} s"
    return f"{minutes // 60} h {minutes % 60} min"


def format_pct(pct: float | None, missing: str = "-") -> str:
    return missing if pct is None else f"{pct:.1f}"


def _ms(us: float | None) -> str:
    return format_ms(us)


def _p(pct: float | None) -> str:
    return format_pct(pct)


def _opt(value: object) -> str:
    return "-" if value is None else str(value)
