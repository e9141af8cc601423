"""Several ranks of one run side by side, and which one is the straggler; or spans, which have none.

Files of one run are **spans**, not ranks, when no two of them overlap in time and they do not record distinct
ranks (``distributedInfo`` or a ``rank<N>`` in the name): one process captured at different times (a schedule
with ``repeat``, or two captures; TensorBoard lists them as spans of one worker). Ranks run together, so their
captures overlap; spans have no straggler (a slower span is another moment, not a slower process), and
``--diff`` pairs no span with a rank.

The straggler is the rank with the longest mean step wall time. When all step times are within
LOCKSTEP_SPREAD of each other, collectives have synchronized the ranks (the fast ones wait inside NCCL), so
step time cannot tell them apart: then, if the traces have GPU communication kernels, the straggler is the rank
with the most GPU compute time per step (busy minus time in NCCL/RCCL kernels), the one the others wait for.
"""

from __future__ import annotations

from itertools import pairwise

from .model import RankRow, RankSummary, Straggler
from .ratios import percent, relative

LOCKSTEP_SPREAD = 0.05


def are_spans(ranks: list[RankSummary]) -> bool:
    """Whether these files are spans: two or more, without distinct recorded ranks, none overlapping another in
    time (a file without timed events is no span)."""
    if len(ranks) < 2:
        return False
    numbers = [r.rank for r in ranks]
    if None not in numbers and len(set(numbers)) == len(numbers):
        return False
    if any(r.trace_start_us is None for r in ranks):
        return False
    times = sorted((r.trace_start_us or 0.0, (r.trace_start_us or 0.0) + r.trace_span_us) for r in ranks)
    return all(later[0] >= earlier[1] for earlier, later in pairwise(times))


def mean_busy(r: RankSummary) -> float | None:
    """GPU busy per step, the mean over the steps; None without GPU activity, or when no step's busy is known (the
    GPU clock is off the CPU's: ``gpu_clock``)."""
    if r.gpu is None or (r.steps and all(s.gpu_busy_us is None for s in r.steps)):
        return None
    return sum(s.gpu_busy_us or 0.0 for s in r.steps) / (len(r.steps) or 1)


def rank_rows(ranks: list[RankSummary]) -> list[RankRow]:
    rows = []
    for r in ranks:
        n = len(r.steps) or 1
        wall = sum(s.wall_us for s in r.steps) / n
        has_gpu = r.gpu is not None
        busy = mean_busy(r)
        rows.append(RankRow(
            rank=r.rank,
            worker=r.worker,
            steps=len(r.steps),
            step_wall_us=wall,
            gpu_busy_us=busy,
            gpu_busy_pct=percent(busy, wall) if busy is not None else None,
            gpu_comm_us=(r.gpu_comm_us or 0.0) / n if has_gpu else None,
        ))
    return rows


def straggler(rows: list[RankRow]) -> Straggler | None:
    if len(rows) < 2:
        return None
    slowest = max(rows, key=lambda r: r.step_wall_us)
    fastest = min(rows, key=lambda r: r.step_wall_us)
    spread = relative(slowest.step_wall_us, fastest.step_wall_us)
    criterion, worst, lead = "step_wall", slowest, spread
    has_comm = all(r.gpu_comm_us is not None for r in rows) and any(r.gpu_comm_us for r in rows)
    if spread < LOCKSTEP_SPREAD and has_comm:
        def compute(r: RankRow) -> float:
            return (r.gpu_busy_us or 0.0) - (r.gpu_comm_us or 0.0)
        worst = max(rows, key=compute)
        criterion, lead = "gpu_compute", relative(compute(worst), min(compute(r) for r in rows))
    return Straggler(rank=worst.rank, worker=worst.worker, criterion=criterion, step_wall_us=worst.step_wall_us,
                     slower_than_fastest_pct=100.0 * lead, spread_pct=100.0 * spread)

