"""How far from the hardware limit: per op class and op, achieved TFLOP/s and TB/s against the roofline, the
step's MFU, and the time each op would win at a target share of its roofline.

    eff = efficiency(c, chain, found, devices, peak=None, target_pct=80.0, top=10)

- The unit is one call of a modeled op (``flops``): a matrix op holding no other matrix op (``aten::addmm``
  under ``aten::linear``, with the copy it makes inside; ``aten::_cudnn_attention_forward`` under
  ``aten::scaled_dot_product_attention``; the ``aten::bmm`` calls of a math attention), or a vector op holding
  no modeled op and inside no matrix op (``aten::_softmax`` under ``aten::softmax``). Its time is the GPU work
  it launched (kernels, memcpys, memsets), found by the launch chain (``launch``: the innermost op around each
  launch, then the innermost unit around that), inside the steps (``steps``: by launch); in a CPU trace, the
  op's own duration. GPU work launched outside any modeled op is ``unmodeled_us``.
- Calls are grouped by op and shapes. Per group: FLOPs and bytes (``flops``; torch's own ``flops`` argument
  where ``with_flops=True`` wrote one), achieved TFLOP/s and TB/s, intensity (FLOPs per byte), and against the
  device's peak (``peaks``): ideal time = max(FLOPs / compute peak, bytes / bandwidth), bound = the larger of
  the two, roofline share = ideal / actual time (= achieved / the roof at its intensity), headroom = what the
  time would shrink by at ``target_pct`` of the roofline: max(0, time - ideal / target), per step.
- A class sums its groups: its share is its ideal time over its time, its headroom the sum of its groups'.
- The step: matrix FLOPs (GEMM, convolution, attention) over the steps' wall time is its TFLOP/s; its MFU is the
  time those FLOPs need at their dtype's peak over that wall time (one dtype: achieved / peak).
"""

from __future__ import annotations

from array import array
from collections.abc import Sequence

from . import flops as models
from .collect import Collected
from .enclosing import NONE, Enclosing, by_thread_in_order
from .launch import LaunchChain
from .model import ClassEfficiency, Device, Efficiency, OpEfficiency, PeakSpec
from .names import short_name
from .peaks import peak_for, peak_tflops
from .steps import Steps

TARGET_PCT = 80.0
TORCH_FLOPS_TOLERANCE = 0.01
KERNELS_PER_OP = 3
CPU_ONLY_HINT = ("a CPU-only trace: the roofline, MFU and headroom measure GPU kernels against a GPU's peaks; capture "
                 "where CUDA runs for them, or give --peak TFLOPS,TBps to hold these CPU ops against a roof of yours")
SHAPES_HINT = ("no op shapes in this trace: record them with record_shapes=True in the profiler's config (the "
               "embedded inference: --record_shapes) for FLOPs, TB/s, MFU and headroom; time by op class only")


def efficiency(c: Collected, chain: LaunchChain, found: Steps, devices: Sequence[Device],
               peak: PeakSpec | None = None, target_pct: float = TARGET_PCT, top: int = 10) -> Efficiency | None:
    """The answers for one trace; None when it has no steps (nothing timed)."""
    steps = found.steps
    if not steps:
        return None
    names = list(c.names)
    candidates = array("l", (i for i, n in enumerate(c.op_name) if n in c.shaped))
    by_shape = [(models.cost(names[n], *args), models.signature(args[0], args[1]))
                 for (n, _, _, _), args in zip(c.shape_ids, c.shape_args, strict=True)]
    costs: dict[int, models.OpCost | None] = {}
    sigs: dict[int, str] = {}
    checked = disagree = 0
    for i, s in c.op_shape.items():
        op_cost, sigs[i] = by_shape[s]
        torch_flops = c.op_flops.get(i) if c.op_flops else None
        if op_cost is not None and torch_flops is not None and torch_flops > 0:
            checked += 1
            if abs(torch_flops - op_cost.flops) > TORCH_FLOPS_TOLERANCE * max(torch_flops, op_cost.flops):
                disagree += 1
            op_cost = models.OpCost(op_cost.op_class, torch_flops, op_cost.bytes, op_cost.dtype, op_cost.matrix)
        costs[i] = op_cost
    shapes = bool(c.op_shape)
    units = _units(c, candidates, names)
    gpu = len(c.g_lo) > 0
    groups: dict[tuple[str, str], _Group] = {}
    counted = bytearray(len(c.op_ts))  # a unit is one call of its group once, however many kernels it launched

    def group_of(u: int) -> _Group:
        key = (names[c.op_name[u]], sigs.get(u, ""))
        g = groups.get(key)
        if g is None:
            g = groups[key] = _Group(costs.get(u))
        if not counted[u]:
            counted[u] = 1
            g.add_call(costs.get(u))
        return g

    outside = 0.0
    if gpu:
        sub = Enclosing(array("l", (c.op_thread[i] for i in units)), array("d", (c.op_ts[i] for i in units)),
                        array("d", (c.op_dur[i] for i in units)))
        last_op = last_unit = NONE  # an op's kernels mostly come one after another: one query for them all
        for g, (o, step) in enumerate(zip(chain.op, found.of_gpu, strict=True)):
            if step == NONE:
                continue
            d = c.g_dur[g]
            if o != last_op:
                j = sub.innermost(c.op_thread[o], c.op_ts[o], c.op_ts[o] + c.op_dur[o]) if o != NONE else NONE
                last_op, last_unit = o, units[j] if j != NONE else NONE
            if last_unit == NONE:
                outside += d
                continue
            group = group_of(last_unit)
            group.time += d
            group.kernels[c.g_name[g]] = group.kernels.get(c.g_name[g], 0.0) + d
    else:
        spans = found.cpu_spans
        for u in units:
            if any(lo <= c.op_ts[u] < hi for lo, hi in spans):
                group_of(u).time += c.op_dur[u]
    _rank_kernels(c, groups)
    if peak is None and devices:
        peak = peak_for(devices[0].name, devices[0].memory_bytes)
    n_steps = len(steps)
    wall = sum(s.wall_us for s in steps)
    ops = [_op_row(key, g, peak, target_pct, n_steps) for key, g in groups.items()]
    modeled = sum(r.time_us for r in ops if r.flops is not None and r.bytes is not None and r.dtype)
    unmodeled = outside + sum(r.time_us for r in ops if not r.dtype)
    classes = _classes(ops, peak)
    ops.sort(key=lambda r: (-(r.headroom_us or 0.0), -r.time_us))
    classes.sort(key=lambda r: (-(r.headroom_us or 0.0), -r.time_us))
    matrix = [r for r in ops if r.op_class in models.MATRIX_CLASSES and r.dtype]
    matrix_flops = sum(r.flops or 0.0 for r in matrix)
    needed = [_compute_us(r, peak) for r in matrix]
    mfu = (100 * sum(x for x in needed if x is not None) / wall if peak is not None and wall > 0 and matrix
           and None not in needed else None)
    hint = "" if shapes else SHAPES_HINT
    if not gpu and peak is None:
        hint = CPU_ONLY_HINT
    elif shapes and peak is None:
        where = f"{devices[0].name!r} is not in the peak table" if devices else "the trace names no GPU"
        hint = f"{where}: give --peak TFLOPS,TBps for the roofline, MFU and headroom"
    return Efficiency(
        shapes_recorded=shapes, hint=hint, peak=peak, target_pct=target_pct, steps=n_steps, step_wall_us=wall,
        gpu=gpu, modeled_us=modeled, unmodeled_us=unmodeled, matrix_flops=matrix_flops,
        step_tflops_per_s=matrix_flops / wall / 1e6 if shapes and wall > 0 else None, mfu_pct=mfu,
        headline=_headline(classes, target_pct, n_steps, hint), classes=classes, ops=ops[:top],
        torch_flops_checked=checked, torch_flops_disagree=disagree)


def _units(c: Collected, candidates: array, names: list[str]) -> array:
    """The calls that are units: a matrix op (GEMM, convolution, attention) holding no other matrix op (the
    copies and fills it makes inside are its own work), and a vector op holding no modeled op and inside no
    matrix op. One stack walk per thread in (start, -duration) order."""
    matrix = models.MATRIX_CLASSES
    is_matrix = {n: models.CLASS_OF.get(names[n]) in matrix for n in {c.op_name[i] for i in candidates}}
    ts, dur = c.op_ts, c.op_dur
    not_unit = bytearray(len(ts))  # holds a matrix op (a matrix op); holds a modeled op or sits in a matrix op
    for order in by_thread_in_order(candidates, c.op_thread, ts, dur).values():
        stack: list[int] = []
        for i in order:
            start = ts[i]
            while stack and ts[stack[-1]] + dur[stack[-1]] <= start:
                stack.pop()
            if stack:
                top = stack[-1]
                if not is_matrix[c.op_name[top]]:
                    not_unit[top] = 1
                mine = is_matrix[c.op_name[i]]
                for j in reversed(stack):
                    if is_matrix[c.op_name[j]]:
                        not_unit[j if mine else i] = 1
                        break
            stack.append(i)
    return array("l", sorted(i for i in candidates if not not_unit[i]))


class _Group:
    __slots__ = ("calls", "time", "flops", "bytes", "cost", "kernels", "labels")

    def __init__(self, cost: models.OpCost | None) -> None:
        self.calls, self.time, self.flops, self.bytes, self.cost = 0, 0.0, 0, 0, cost
        self.kernels: dict[int, float] = {}
        self.labels: list[str] = []  # its GPU work's short names, most time first

    def add_call(self, cost: models.OpCost | None) -> None:
        self.calls += 1
        if cost is not None:
            self.flops += cost.flops
            self.bytes += cost.bytes


def _rank_kernels(c: Collected, groups: dict[tuple[str, str], _Group]) -> None:
    gpu_keys = list(c.gpu_names)
    for g in groups.values():
        ranked = sorted(g.kernels.items(), key=lambda kv: -kv[1])[:KERNELS_PER_OP]
        g.labels = [short_name(k) if k.__class__ is str else " ".join(k) for k in (gpu_keys[i] for i, _ in ranked)]


def _rates(flops: float, nbytes: float, time_us: float) -> tuple[float | None, float | None, float | None]:
    if time_us <= 0:
        return None, None, flops / nbytes if nbytes else None
    return flops / time_us / 1e6, nbytes / time_us / 1e6, flops / nbytes if nbytes else None


def _ideal(flops: float, nbytes: float, peak_t: float | None, tbps: float) -> tuple[float, float] | None:
    """(compute time, memory time) at the peaks, in us; None without a compute peak for the dtype."""
    if peak_t is None:
        return None
    return flops / (peak_t * 1e6), nbytes / (tbps * 1e6)


def _op_row(key: tuple[str, str], g: _Group, peak: PeakSpec | None, target_pct: float, n_steps: int
            ) -> OpEfficiency:
    name, sig = key
    cost = g.cost
    row = OpEfficiency(op=name, op_class=cost.op_class if cost else models.CLASS_OF.get(name, ""), shapes=sig,
                       dtype=cost.dtype if cost else "", calls=g.calls, kernels=g.labels,
                       time_us=g.time, flops=g.flops if cost else None, bytes=g.bytes if cost else None,
                       tflops_per_s=None, tb_per_s=None,
                       intensity=None, bound="", roofline_pct=None, headroom_us=None)
    if cost is None:
        return row
    row.tflops_per_s, row.tb_per_s, row.intensity = _rates(g.flops, g.bytes, g.time)
    if peak is not None:
        ideal = _ideal(g.flops, g.bytes, peak_tflops(peak, cost.dtype, cost.matrix, cost.op_class), peak.tbps)
        if ideal is not None:
            compute, memory = ideal
            best = max(compute, memory)
            row.bound = "compute" if compute >= memory else "memory"
            if g.time > 0:
                row.roofline_pct = 100 * best / g.time
                row.headroom_us = max(0.0, g.time - best * 100 / target_pct) / n_steps
    return row


def _compute_us(r: OpEfficiency, peak: PeakSpec | None) -> float | None:
    """The time a matrix op's FLOPs need at its dtype's peak (the MFU's numerator), us."""
    if peak is None:
        return None
    p = peak_tflops(peak, r.dtype, True, r.op_class)
    return (r.flops or 0.0) / (p * 1e6) if p else None


def _classes(ops: list[OpEfficiency], peak: PeakSpec | None) -> list[ClassEfficiency]:
    by: dict[str, list[OpEfficiency]] = {}
    for r in ops:
        if r.op_class:
            by.setdefault(r.op_class, []).append(r)
    out = []
    for name, rows in by.items():
        known = [r for r in rows if r.dtype]
        t = sum(r.time_us for r in rows)
        f, b = sum(r.flops or 0.0 for r in known), sum(r.bytes or 0.0 for r in known)
        rate, bw, inten = _rates(f, b, sum(r.time_us for r in known)) if known else (None, None, None)
        by_dtype: dict[str, float] = {}
        for r in known:
            by_dtype[r.dtype] = by_dtype.get(r.dtype, 0.0) + r.time_us
        row = ClassEfficiency(op_class=name, dtype=max(by_dtype, key=by_dtype.__getitem__) if by_dtype else "",
                              calls=sum(r.calls for r in rows), time_us=t,
                              flops=f if known else None, bytes=b if known else None,
                              tflops_per_s=rate, tb_per_s=bw, intensity=inten, bound="", roofline_pct=None,
                              headroom_us=None)
        judged = [r for r in known if r.roofline_pct is not None]
        if peak is not None and judged:
            ideal = sum((r.roofline_pct or 0.0) * r.time_us / 100 for r in judged)
            row.roofline_pct = 100 * ideal / sum(r.time_us for r in judged)
            row.headroom_us = sum(r.headroom_us or 0.0 for r in judged)
            compute = sum(r.time_us for r in judged if r.bound == "compute")
            row.bound = "compute" if compute >= sum(r.time_us for r in judged) - compute else "memory"
        out.append(row)
    return out


def _headline(classes: list[ClassEfficiency], target_pct: float, n_steps: int, hint: str) -> str:
    judged = [r for r in classes if r.roofline_pct is not None]
    if not judged:
        return hint
    top = judged[0]
    where = (f"{top.op_class}: {top.time_us / n_steps / 1000:.3f} ms per step at {top.roofline_pct:.0f}% of its "
             "roofline")
    if not top.headroom_us:
        return f"every op class is at or above {target_pct:.0f}% of its roofline (the most: {where})"
    return f"{where}; at {target_pct:.0f}%, -{top.headroom_us / 1000:.3f} ms per step"

