"""Two runs' summaries compared: what got faster, what got slower, which kernels an op now launches.

    base, new = summarize_paths(["runs/sdpa"])[0], summarize_paths(["runs/math"])[0]
    d = compare_runs(base, new)
    print(d.verdict)            # 'NEW is 18.3% faster per step (-4.1 ms); attn -3.6 ms, aten::linear -0.4 ms'
    print(render_diff(d))       # lightx2v.trace_summary.render_diff
    diff_to_json(d)             # {"schema": DIFF_SCHEMA, ...}

It reads only the two summaries (each made in one streaming pass): no trace is parsed again and no events are
held. Definitions (also in docs/trace_summary.md, "Compare two captures"):

- Per step: every figure is divided by the side's number of profiled steps (``ProfilerStep#N`` windows; a trace
  without them is one step), so captures with different ``active`` counts compare fairly. Step wall, GPU busy
  and idle are the means of the steps' own figures; kernel, CPU-op and memory-op figures are the capture's
  totals divided by its steps.
- Attribution: each kernel, memcpy and memset is charged to the CPU op that launched it (its ``External id``),
  then grouped by that op's top-level op (the outermost ``cpu_op`` under the step) and the nearest
  ``record_function`` label around it. Groups match across runs by (label, top-level op), so a kernel switch
  inside ``aten::scaled_dot_product_attention`` (flash instead of math, another GEMM tile) reads as that op's
  kernels changed, and inner ops that differ by lowering (``_efficient_attention_forward`` vs
  ``_flash_attention_forward``) match through it.
- Several ranks: rank N is compared with rank N (``pairing`` "by rank"); when the two sides do not both record
  distinct ranks with some in common, the files are paired in order ("by file order"), and a pair whose traces
  record different ranks is named ``rank 3 (BASE) vs rank 1 (NEW)``. The run's step time is its slowest rank's
  mean step wall.
- Spans (``ranks.are_spans``: one process captured at different times) are no ranks: a side of spans is compared
  by its newest span, and a note says so (``--diff`` of one run directory of spans compares its two newest).
- Change or noise (``noise``): the step wall, each op group, kernel and CPU op is judged on its per-step values;
  the verdict names only changes beyond noise, and says "no change beyond noise (±x%)" when there is none, or
  "inconclusive (±x% noise)" when the steps' own spread is so wide (INCONCLUSIVE_PCT or more) that it could hide a
  change that matters, or that it cannot tell when a side has a single step. A delta that rounds to zero in the
  report is "same".
- Communication (``comm_diff``): exposed communication and the waits in collectives per step, means over each
  side's ranks, judged change or noise the same way, and each side's late rank.

Thresholds in one place: CHANGED_PCT (below it an untested step change reads "about as fast"), INCONCLUSIVE_PCT,
SAME_US (a delta that prints as 0.000 ms), VERDICT_GROUPS (op groups the verdict names); the noise rule's are in
``noise``.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from typing import Any, Optional

from .comm_diff import CommChange, comm_change
from .efficiency_diff import EfficiencyChange, efficiency_change
from .frames_diff import FramesChange, frames_change
from .model import CpuOpStat, RankSummary, RankTables, RunSummary, StepSeries, Straggler, _rounded
from .noise import NOISE, REAL, UNTESTED, Noise, judge
from .ranks import mean_busy
from .ratios import percent

DIFF_SCHEMA = "lightx2v.trace_summary.diff/6"  # 2: RankDiff.efficiency; 3: RankDiff.frames; 4: CPU self time
# without runtime calls, CpuOpChange.self_with_runtime_per_step_us, SideInfo.spans; 5: RunDiff.communication;
# 6: FrameChange.line

CHANGED_PCT = 0.5  # a per-step wall-time change smaller than this reads as "about the same" (one step a side)
INCONCLUSIVE_PCT = 5.0  # steps spread this much (± % of the median) or more: a change within it is "inconclusive"
SAME_US = 0.0005 * 1000  # a time delta below half the report's last digit (0.001 ms) prints as 0.000: "same"
SAME_CALLS = 0.005  # calls per step print with two decimals at most
MORE_STEPS = ("one step a side: noise cannot be told from change; capture more (active=5 in the profiler "
              "config; the embedded inference: --profile_active 5)")
VERDICT_GROUPS = 2  # op groups (CPU ops, without GPU work) named in the verdict line, largest |delta| first

# Status words of KernelChange / CpuOpChange / OpChange rows.
ADDED, REMOVED, CHANGED, SAME = "added", "removed", "changed", "same"
KERNELS_CHANGED = "kernels changed"  # an op group present on both sides that launches other kernels

# How RunDiff.pairing says the ranks of BASE and NEW were paired.
BY_RANK, BY_FILE_ORDER = "by rank", "by file order"
PAIRS_NAMED = 4  # rank pairs named in the note on pairs of different ranks


@dataclass
class Delta:
    """One figure on both sides: ``delta = new - base``; ``delta_pct`` relative to base (None when base is 0)."""

    base: Optional[float]
    new: Optional[float]
    delta: Optional[float]
    delta_pct: Optional[float]


@dataclass
class KernelChange:
    """One kernel (by full name) on both sides, per step; ``ops``: the groups that launch it, most time first."""

    name: str
    short_name: str
    status: str  # ADDED, REMOVED, CHANGED (count or time differ) or SAME
    calls_per_step: Delta
    time_per_step_us: Delta
    ops: list[str] = field(default_factory=list)  # "label / op" or "op" of the groups launching it (either side)
    noise: Optional[Noise] = None  # its per-step time judged (noise.judge)


@dataclass
class CpuOpChange:
    """One CPU op (by name) on both sides, per step: self time (TensorBoard's self host duration: without child ops
    and the op's own CUDA runtime calls) and total."""

    name: str
    status: str
    calls_per_step: Delta
    self_per_step_us: Delta
    total_per_step_us: Delta
    noise: Optional[Noise] = None  # its per-step self time judged
    # self time counting the op's own runtime calls (cpu_ops: self_with_runtime_us); None only when made by hand
    self_with_runtime_per_step_us: Optional[Delta] = None


@dataclass
class MemoryChange:
    """memcpy or memset totals on both sides, per step."""

    kind: str  # "memcpy" or "memset"
    calls_per_step: Delta
    time_per_step_us: Delta
    bytes_per_step: Delta  # None on a side whose sizes are unknown


@dataclass
class OpKernels:
    """The GPU work one op group launched: ``label / op`` on both sides and which kernels it changed to."""

    op: str  # the top-level op under the step ("" when the kernels had no launching op in the trace)
    label: str  # the nearest record_function label around it ("" when none)
    status: str  # ADDED, REMOVED, KERNELS_CHANGED, CHANGED (same kernels, other count/time) or SAME
    kernel_calls_per_step: Delta
    gpu_time_per_step_us: Delta
    kernels_removed: list[str]  # kernel names launched only in BASE
    kernels_added: list[str]  # kernel names launched only in NEW
    launchers_base: list[str]  # the ops that launched its kernels in BASE (inner ops: the lowering)
    launchers_new: list[str]
    noise: Optional[Noise] = None  # its per-step GPU time judged


@dataclass
class RankDiff:
    """One rank of BASE against the same rank of NEW (or, paired by file order, against another rank)."""

    rank: Optional[int]  # NEW's rank (BASE's when NEW records none); kept for compatibility: see base/new_rank
    base_rank: Optional[int]  # the rank BASE's trace records (distributedInfo or file name), None when none
    new_rank: Optional[int]
    base_worker: str
    new_worker: str
    base_file: str
    new_file: str
    base_steps: int
    new_steps: int
    step_wall_us: Delta  # mean per step
    gpu_busy_us: Delta  # mean per step (None on a side without GPU activity)
    gpu_idle_us: Delta  # mean per step
    kernel_calls_per_step: Delta
    kernel_time_per_step_us: Delta
    cpu_self_per_step_us: Delta
    kernels: list[KernelChange]  # sorted by |delta time per step|, largest first
    cpu_ops: list[CpuOpChange]  # sorted by |delta self time per step|
    memory: list[MemoryChange]
    ops: list[OpKernels]  # op groups, sorted by |delta GPU time per step|
    verdict: str
    step_noise: Optional[Noise] = None  # the step wall's per-step values judged
    efficiency: Optional[EfficiencyChange] = None  # MFU and op classes' roofline share, before and after
    frames: Optional[FramesChange] = None  # where in your code, per frame (with_stack traces)


@dataclass
class SideInfo:
    """What one side of the comparison is."""

    label: str
    path: str
    ranks: int
    straggler: Optional[str]  # "rank 1 (worker)" when the side has several ranks, else None
    step_wall_us: float  # the run's step time: the slowest rank's mean step wall (spans: the newest span's)
    spans: bool = False  # the side's files are spans (``ranks``): its newest was compared


@dataclass
class RunDiff:
    base: SideInfo
    new: SideInfo
    verdict: str  # the one line printed first
    step_wall_us: Delta  # the runs' step times (the slowest rank's mean, per side)
    pairing: str  # BY_RANK (rank N with rank N) or BY_FILE_ORDER (the files in order)
    ranks: list[RankDiff]  # pairs of ranks, rank to rank (by file order: see each pair's base_rank, new_rank)
    unmatched_base: list[str] = field(default_factory=list)  # ranks of BASE without a partner in NEW
    unmatched_new: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # e.g. "rank counts differ: BASE 2, NEW 1"
    step_noise: Optional[Noise] = None  # the slowest ranks' per-step walls judged
    communication: Optional[CommChange] = None  # exposed communication and waits per step (``comm_diff``)


def compare_runs(base: RunSummary, new: RunSummary) -> RunDiff:
    """Compare two runs' summaries (made by ``summarize_run`` / ``summarize_paths``); raises ValueError when a
    side has no readable rank."""
    for side, run in (("BASE", base), ("NEW", new)):
        if not run.ranks:
            raise ValueError(f"{side} ({run.path}) has no readable trace")
    notes: list[str] = []
    base_ranks, new_ranks = _compared(base, "BASE", notes), _compared(new, "NEW", notes)
    pairs, lone_base, lone_new, pairing = _pair_ranks(base_ranks, new_ranks)
    rank_diffs = [compare_ranks(b, n) for b, n in pairs]
    if len(base_ranks) != len(new_ranks):
        notes.append(f"rank counts differ: BASE has {len(base_ranks)}, NEW has {len(new_ranks)}; "
                     f"compared {len(pairs)} pair{'s' if len(pairs) != 1 else ''} "
                     + ("rank to rank" if pairing == BY_RANK else "in file order"))
    elif lone_base:
        notes.append("the two runs hold different ranks: compared the ones both have")
    crossed = [r for r in rank_diffs if r.base_rank != r.new_rank]
    if crossed:
        more = f", and {len(crossed) - PAIRS_NAMED} more" if len(crossed) > PAIRS_NAMED else ""
        notes.append("paired by file order (the traces do not record the same ranks): "
                     + ", ".join(pair_label(r) for r in crossed[:PAIRS_NAMED]) + more)
    b_info, n_info = _side(base, base_ranks), _side(new, new_ranks)
    step = _delta(b_info.step_wall_us, n_info.step_wall_us)
    if len(rank_diffs) == 1 and len(base_ranks) == len(new_ranks) == 1:
        verdict, step_noise = rank_diffs[0].verdict, rank_diffs[0].step_noise
    else:
        step_noise = judge(_walls(_slowest(base_ranks)), _walls(_slowest(new_ranks)))
        verdict = _verdict(step, step_noise, _mean_group_deltas(rank_diffs), "per step of the slowest rank")
    return RunDiff(base=b_info, new=n_info, verdict=verdict, step_wall_us=step, step_noise=step_noise,
                   pairing=pairing, ranks=rank_diffs,
                   unmatched_base=[_who(r) for r in lone_base], unmatched_new=[_who(r) for r in lone_new],
                   notes=notes, communication=comm_change(base, new) if not (base.spans or new.spans) else None)


def compare_ranks(base: RankSummary, new: RankSummary) -> RankDiff:
    """One rank of BASE against one rank of NEW, every figure per profiled step."""
    nb, nn = _steps(base), _steps(new)
    kernels = _kernel_changes(base, new, nb, nn)
    ops = _op_changes(base, new, nb, nn)
    step = _delta(_mean(s.wall_us for s in base.steps), _mean(s.wall_us for s in new.steps))
    step_noise = judge(_walls(base), _walls(new))
    diff = RankDiff(
        rank=new.rank if new.rank is not None else base.rank, base_rank=base.rank, new_rank=new.rank,
        base_worker=base.worker, new_worker=new.worker, base_file=base.file, new_file=new.file,
        base_steps=len(base.steps), new_steps=len(new.steps),
        step_wall_us=step,
        gpu_busy_us=_delta(mean_busy(base), mean_busy(new)),
        gpu_idle_us=_delta(_idle(base), _idle(new)),
        kernel_calls_per_step=_delta(base.gpu.kernel_count / nb if base.gpu else None,
                                     new.gpu.kernel_count / nn if new.gpu else None),
        kernel_time_per_step_us=_delta(base.gpu.kernel_us / nb if base.gpu else None,
                                       new.gpu.kernel_us / nn if new.gpu else None),
        cpu_self_per_step_us=_delta(base.cpu_self_total_us / nb, new.cpu_self_total_us / nn),
        kernels=kernels,
        cpu_ops=_cpu_op_changes(base, new, nb, nn),
        memory=_memory_changes(base, new, nb, nn),
        ops=ops,
        verdict="",
        step_noise=step_noise,
    )
    diff.verdict = _verdict(step, step_noise, _verdict_deltas(diff), "per step")
    diff.efficiency = efficiency_change(base.efficiency, new.efficiency)
    diff.frames = frames_change(base, new)
    return diff


def _verdict_deltas(r: RankDiff) -> list[tuple[str, float, Optional[Noise]]]:
    """What the verdict names: the op groups' GPU time per step, or on a capture without GPU work (a CPU run)
    the CPU ops' self time per step; each with its noise verdict."""
    if r.ops:
        return [(group_name(o), o.gpu_time_per_step_us.delta or 0.0, o.noise) for o in r.ops]
    return [(c.name, c.self_per_step_us.delta or 0.0, c.noise) for c in r.cpu_ops]


def pair_label(r: RankDiff) -> str:
    """``rank 1`` for a pair of the same rank; ``rank 3 (BASE) vs rank 1 (NEW)`` when its traces record different
    ranks (paired by file order; a side without a recorded rank is named by its worker)."""
    if r.base_rank == r.new_rank:
        return f"rank {'-' if r.rank is None else r.rank}"
    return (f"{_rank_or_worker(r.base_rank, r.base_worker)} (BASE) vs "
            f"{_rank_or_worker(r.new_rank, r.new_worker)} (NEW)")


def _rank_or_worker(rank: int | None, worker: str) -> str:
    return f"rank {rank}" if rank is not None else worker


def group_name(op: OpKernels) -> str:
    """How an op group is named in the verdict and tables: its label, else its top-level op."""
    return op.label or op.op or NO_OP


def group_path(label: str, op: str) -> str:
    """``attn / aten::scaled_dot_product_attention``: the label and top-level op of a group."""
    return f"{label} / {op or NO_OP}" if label else (op or NO_OP)


NO_OP = "(no launching op)"


# -- pieces -------------------------------------------------------------------------------------------------

def _steps(r: RankSummary) -> int:
    return len(r.steps) or 1


def _mean(values: Any) -> float:
    values = list(values)
    return sum(values) / len(values) if values else 0.0


def _idle(r: RankSummary) -> float | None:
    return _mean(s.idle.idle_us for s in r.steps if s.idle is not None) if r.idle is not None else None


def _delta(base: float | None, new: float | None) -> Delta:
    if base is None or new is None:
        return Delta(base=base, new=new, delta=None, delta_pct=None)
    delta = new - base
    return Delta(base=base, new=new, delta=delta, delta_pct=percent(delta, base))


def _same(calls: Delta, time: Delta) -> bool:
    """Equal as the report prints them: a time delta that rounds to 0.000 ms and the same calls per step."""
    return abs((calls.new or 0.0) - (calls.base or 0.0)) < SAME_CALLS and \
        abs((time.new or 0.0) - (time.base or 0.0)) < SAME_US


def _series(r: RankSummary) -> StepSeries | None:
    return r.tables.series if r.tables is not None else None


def _walls(r: RankSummary) -> list[float]:
    return [s.wall_us for s in r.steps]


def _slowest(ranks: list[RankSummary]) -> RankSummary:
    return max(ranks, key=lambda r: _mean(_walls(r)))


def _judge_rows(base: RankSummary, new: RankSummary, pick: Any, key: Any) -> Noise:
    """The noise verdict on one row's per-step values (``pick(series)``: its dict; zeros on a side without)."""
    sb, sn = _series(base), _series(new)
    if sb is None or sn is None:
        return judge([], [])
    vb, vn = pick(sb).get(key), pick(sn).get(key)
    return judge(vb if vb is not None else [0.0] * len(sb.steps), vn if vn is not None else [0.0] * len(sn.steps))


def _status(in_base: bool, in_new: bool, same: bool) -> str:
    if not in_base:
        return ADDED
    if not in_new:
        return REMOVED
    return SAME if same else CHANGED


def _by_abs_delta(d: Delta) -> float:
    return -abs(d.delta or 0.0)


def _tables(r: RankSummary) -> RankTables:
    if r.tables is None:
        raise ValueError(f"{r.file}: a summary without tables (made from JSON?) cannot be compared")
    return r.tables


def _kernel_changes(base: RankSummary, new: RankSummary, nb: int, nn: int) -> list[KernelChange]:
    b = {k.name: k for k in _tables(base).kernels}
    n = {k.name: k for k in _tables(new).kernels}
    groups: dict[str, dict[str, float]] = {}  # kernel -> group path -> time, both sides
    for r in (base, new):
        for launch in _tables(r).launches:
            if launch.kind == "kernel":
                by_group = groups.setdefault(launch.name, {})
                path = group_path(launch.label, launch.op)
                by_group[path] = by_group.get(path, 0.0) + launch.total_us
    out = []
    for name in {**b, **n}:
        kb, kn = b.get(name), n.get(name)
        calls = _delta(kb.calls / nb if kb else 0.0, kn.calls / nn if kn else 0.0)
        time = _delta(kb.total_us / nb if kb else 0.0, kn.total_us / nn if kn else 0.0)
        ops = sorted(groups.get(name, {}).items(), key=lambda item: -item[1])
        out.append(KernelChange(name=name, short_name=(kb or kn).short_name,  # type: ignore[union-attr]
                                status=_status(kb is not None, kn is not None, _same(calls, time)),
                                calls_per_step=calls, time_per_step_us=time, ops=[path for path, _ in ops],
                                noise=_judge_rows(base, new, lambda s: s.kernel_us, name)))
    out.sort(key=lambda k: _by_abs_delta(k.time_per_step_us))
    return out


def _cpu_op_changes(base: RankSummary, new: RankSummary, nb: int, nn: int) -> list[CpuOpChange]:
    b = {o.name: o for o in _tables(base).cpu_ops}
    n = {o.name: o for o in _tables(new).cpu_ops}
    out = []
    for name in {**b, **n}:
        ob, on = b.get(name), n.get(name)
        calls = _delta(ob.calls / nb if ob else 0.0, on.calls / nn if on else 0.0)
        self_us = _delta(ob.self_us / nb if ob else 0.0, on.self_us / nn if on else 0.0)
        total = _delta(ob.total_us / nb if ob else 0.0, on.total_us / nn if on else 0.0)
        with_runtime = _delta(_with_runtime(ob, nb), _with_runtime(on, nn))
        same = _same(calls, self_us) and _same(calls, total)
        out.append(CpuOpChange(name=name, status=_status(ob is not None, on is not None, same),
                               calls_per_step=calls, self_per_step_us=self_us, total_per_step_us=total,
                               noise=_judge_rows(base, new, lambda s: s.cpu_self_us, name),
                               self_with_runtime_per_step_us=with_runtime))
    out.sort(key=lambda o: _by_abs_delta(o.self_per_step_us))
    return out


def _with_runtime(op: CpuOpStat | None, steps: int) -> float | None:
    """An op's self time with its own runtime calls, per step (0 when absent; None when not known)."""
    if op is None:
        return 0.0
    return op.self_with_runtime_us / steps if op.self_with_runtime_us is not None else None


def _memory_changes(base: RankSummary, new: RankSummary, nb: int, nn: int) -> list[MemoryChange]:
    out = []
    for kind in ("memcpy", "memset"):
        sides = []
        for r, steps in ((base, nb), (new, nn)):
            ops = [m for m in r.memory_ops if m.kind == kind]
            nbytes = None if any(m.bytes is None for m in ops) else sum(m.bytes or 0 for m in ops)
            sides.append((sum(m.calls for m in ops) / steps, sum(m.total_us for m in ops) / steps,
                          nbytes / steps if nbytes is not None else None))
        if sides[0][0] or sides[1][0]:
            (cb, tb, bb), (cn, tn, bn) = sides
            out.append(MemoryChange(kind=kind, calls_per_step=_delta(cb, cn), time_per_step_us=_delta(tb, tn),
                                    bytes_per_step=_delta(bb, bn)))
    return out


@dataclass
class _Group:
    """One op group's GPU work on one side, summed over its launch rows."""

    calls: int = 0  # kernels launched
    time: float = 0.0  # kernels + memcpy + memset
    kernels: dict[str, float] = field(default_factory=dict)  # kernel name -> time
    launchers: dict[str, float] = field(default_factory=dict)  # launching op -> time


def _op_changes(base: RankSummary, new: RankSummary, nb: int, nn: int) -> list[OpKernels]:
    sides: list[dict[tuple[str, str], _Group]] = []
    for r in (base, new):
        groups: dict[tuple[str, str], _Group] = {}
        for launch in _tables(r).launches:
            g = groups.get((launch.label, launch.op))
            if g is None:
                g = groups[(launch.label, launch.op)] = _Group()
            g.time += launch.total_us
            if launch.kind == "kernel":
                g.calls += launch.calls
                g.kernels[launch.name] = g.kernels.get(launch.name, 0.0) + launch.total_us
            if launch.launcher:
                g.launchers[launch.launcher] = g.launchers.get(launch.launcher, 0.0) + launch.total_us
        sides.append(groups)
    b, n = sides
    out = []
    for key in {**b, **n}:
        gb, gn = b.get(key), n.get(key)
        calls = _delta(gb.calls / nb if gb else 0.0, gn.calls / nn if gn else 0.0)
        time = _delta(gb.time / nb if gb else 0.0, gn.time / nn if gn else 0.0)
        kb, kn = set(gb.kernels) if gb else set(), set(gn.kernels) if gn else set()
        if gb is None:
            status = ADDED
        elif gn is None:
            status = REMOVED
        elif kb != kn:
            status = KERNELS_CHANGED
        else:
            status = SAME if _same(calls, time) else CHANGED
        out.append(OpKernels(
            op=key[1], label=key[0], status=status, kernel_calls_per_step=calls, gpu_time_per_step_us=time,
            kernels_removed=_by_time(gb.kernels, kb - kn) if gb else [],
            kernels_added=_by_time(gn.kernels, kn - kb) if gn else [],
            launchers_base=_by_time(gb.launchers, set(gb.launchers)) if gb else [],
            launchers_new=_by_time(gn.launchers, set(gn.launchers)) if gn else [],
            noise=_judge_rows(base, new, lambda s: s.group_us, key)))
    out.sort(key=lambda o: _by_abs_delta(o.gpu_time_per_step_us))
    return out


def _by_time(times: dict[str, float], names: set[str]) -> list[str]:
    return sorted(names, key=lambda name: (-times[name], name))


def _verdict(step: Delta, noise: Noise, groups: list[tuple[str, float, Optional[Noise]]], per: str) -> str:
    """``NEW is 18.3% slower per step (+4.1 ms, beyond noise ±0.8%); attn +3.6 ms``, or ``no change beyond
    noise``; with one step a side the untested change and how to capture more steps."""
    delta, pct = step.delta or 0.0, step.delta_pct or 0.0  # delta_pct is None only when a side has no step time
    tested = noise.verdict != UNTESTED
    spread = f"±{noise.noise_pct:.1f}%" if noise.noise_pct is not None else "±0%"
    if (step.base or 0.0) <= 0:
        head = f"NEW takes {signed_ms(delta)} ms {per} (BASE has no step time)"
    elif noise.verdict == NOISE and (noise.noise_pct or 0.0) >= INCONCLUSIVE_PCT:
        head = f"inconclusive ({spread} noise) {per}: NEW {pct:+.1f}% ({signed_ms(delta)} ms)"
    elif noise.verdict == NOISE:
        head = f"no change beyond noise ({spread}) {per}: NEW {pct:+.1f}% ({signed_ms(delta)} ms)"
    elif tested:
        head = (f"NEW is {abs(pct):.1f}% {'faster' if delta < 0 else 'slower'} {per} ({signed_ms(delta)} ms, "
                f"beyond noise {spread})")
    elif abs(pct) < CHANGED_PCT:
        head = f"NEW is about as fast {per} ({signed_ms(delta)} ms, {pct:+.1f}%)"
    else:
        head = f"NEW is {abs(pct):.1f}% {'faster' if delta < 0 else 'slower'} {per} ({signed_ms(delta)} ms)"
    by_name: dict[str, list[float]] = {}  # groups of one label (several top-level ops) are named once
    for name, d, row_noise in groups:
        entry = by_name.setdefault(name, [0.0, 0.0, 0.0])
        entry[0] += d
        entry[1] += 1
        entry[2] += row_noise is not None and row_noise.verdict == REAL
    named = [(name, d) for name, (d, rows, real) in sorted(by_name.items(), key=lambda g: -abs(g[1][0]))
             if abs(d) >= SAME_US and (not tested or real >= rows / 2)]
    if named:
        lead = "; changed beyond noise: " if noise.verdict == NOISE else "; "
        head += lead + ", ".join(f"{name} {signed_ms(d)} ms" for name, d in named[:VERDICT_GROUPS])
    if not tested:
        head += "; " + MORE_STEPS
    return head


def _mean_group_deltas(ranks: list[RankDiff]) -> list[tuple[str, float, Optional[Noise]]]:
    """Each group's GPU-time delta per step, the mean over the compared rank pairs (each pair's noise kept)."""
    out = []
    for r in ranks:
        for name, d, noise in _verdict_deltas(r):
            out.append((name, d / len(ranks), noise))
    return out


def signed_ms(us: float) -> str:
    """Microseconds as signed milliseconds with the digits that matter: ``-4.1``, ``+0.046``."""
    ms = us / 1000
    digits = 0 if abs(ms) >= 100 else 1 if abs(ms) >= 10 else 2 if abs(ms) >= 1 else 3
    return f"{ms:+.{digits}f}"


def _who(r: RankSummary | Straggler) -> str:
    return f"rank {r.rank} ({r.worker})" if r.rank is not None else r.worker


def _side(run: RunSummary, compared: list[RankSummary]) -> SideInfo:
    walls = [_mean(s.wall_us for s in r.steps) for r in compared]
    who = _who(run.straggler) if run.straggler is not None else None
    return SideInfo(label=run.label, path=run.path, ranks=len(run.ranks), straggler=who, step_wall_us=max(walls),
                    spans=run.spans)


def _compared(run: RunSummary, side: str, notes: list[str]) -> list[RankSummary]:
    """The traces of a side that are compared: its ranks, or of spans the newest (noted)."""
    if not run.spans:
        return run.ranks
    newest = max(run.ranks, key=lambda r: r.trace_start_us or 0.0)
    notes.append(f"{side} holds {len(run.ranks)} spans of {', '.join(sorted({r.worker for r in run.ranks}))} "
                 f"(captures at different times, not ranks): compared its newest, {os.path.basename(newest.file)}; "
                 "name a file to compare another")
    return [newest]


def _pair_ranks(base: list[RankSummary], new: list[RankSummary]
                ) -> tuple[list[tuple[RankSummary, RankSummary]], list[RankSummary], list[RankSummary], str]:
    """(pairs, BASE's and NEW's ranks left without a partner, BY_RANK or BY_FILE_ORDER): rank N with rank N
    when both sides record distinct ranks and share some, else the files in order."""
    def by_rank(ranks: list[RankSummary]) -> dict[int, RankSummary] | None:
        numbers = [r.rank for r in ranks]
        if None in numbers or len(set(numbers)) != len(numbers):
            return None
        return {r.rank: r for r in ranks if r.rank is not None}

    b, n = by_rank(base), by_rank(new)
    if b is not None and n is not None and (set(b) & set(n) or not (b or n)):
        pairs = [(b[k], n[k]) for k in sorted(set(b) & set(n))]
        return pairs, [b[k] for k in sorted(set(b) - set(n))], [n[k] for k in sorted(set(n) - set(b))], BY_RANK
    count = min(len(base), len(new))
    return list(zip(base[:count], new[:count], strict=True)), base[count:], new[count:], BY_FILE_ORDER


def diff_to_json(diff: RunDiff) -> dict[str, Any]:
    """The ``--diff --json`` document: {"schema": DIFF_SCHEMA, ...RunDiff's fields}, floats rounded like to_json."""
    return {"schema": DIFF_SCHEMA, **_rounded(dataclasses.asdict(diff))}
