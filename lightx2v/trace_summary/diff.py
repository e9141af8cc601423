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
- Several ranks: rank N is compared with rank N (files in order when ranks are not recorded); the run's step
  time is its slowest rank's mean step wall.

Thresholds in one place: CHANGED_PCT (below it a figure reads as unchanged in the verdict), VERDICT_GROUPS.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Optional

from .model import RunSummary, _rounded

DIFF_SCHEMA = "lightx2v.trace_summary.diff/1"

CHANGED_PCT = 0.5  # a per-step wall-time change smaller than this reads as "about the same"
VERDICT_GROUPS = 2  # op groups named in the verdict line, largest |delta| first

# Status words of KernelChange / CpuOpChange / OpChange rows.
ADDED, REMOVED, CHANGED, SAME = "added", "removed", "changed", "same"
KERNELS_CHANGED = "kernels changed"  # an op group present on both sides that launches other kernels


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


@dataclass
class CpuOpChange:
    """One CPU op (by name) on both sides, per step: self time (TensorBoard's self host duration) and total."""

    name: str
    status: str
    calls_per_step: Delta
    self_per_step_us: Delta
    total_per_step_us: Delta


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


@dataclass
class RankDiff:
    """One rank of BASE against the same rank of NEW."""

    rank: Optional[int]
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


@dataclass
class SideInfo:
    """What one side of the comparison is."""

    label: str
    path: str
    ranks: int
    straggler: Optional[str]  # "rank 1 (worker)" when the side has several ranks, else None
    step_wall_us: float  # the run's step time: the slowest rank's mean step wall


@dataclass
class RunDiff:
    base: SideInfo
    new: SideInfo
    verdict: str  # the one line printed first
    step_wall_us: Delta  # the runs' step times (the slowest rank's mean, per side)
    ranks: list[RankDiff]  # pairs of ranks, rank to rank
    unmatched_base: list[str] = field(default_factory=list)  # ranks of BASE without a partner in NEW
    unmatched_new: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # e.g. "rank counts differ: BASE 2, NEW 1"


def compare_runs(base: RunSummary, new: RunSummary) -> RunDiff:
    """Compare two runs' summaries (made by ``summarize_run`` / ``summarize_paths``); raises ValueError when a
    side has no readable rank."""
    raise NotImplementedError  # filled in by the following commits


def diff_to_json(diff: RunDiff) -> dict[str, Any]:
    """The ``--diff --json`` document: {"schema": DIFF_SCHEMA, ...RunDiff's fields}, floats rounded like to_json."""
    return {"schema": DIFF_SCHEMA, **_rounded(dataclasses.asdict(diff))}
