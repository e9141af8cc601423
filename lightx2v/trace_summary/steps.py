"""Steps and GPU idle time: the ``ProfilerStep#N`` windows, GPU busy and idle inside each.

- A step is a ``ProfilerStep#N`` annotation. Its window runs from the CPU-side step start to the later of the
  CPU step end and the end of the GPU-side ``ProfilerStep#N`` (kineto's ``gpu_user_annotation``, which spans
  the GPU work launched in the step). Busy and idle are measured inside that window; kernel count = kernels
  starting in it. A trace without step annotations is treated as one step spanning its CPU ops and GPU work.
- Idle = window minus busy. It is flagged when it reaches IDLE_FLAG_RATIO of the window: a GPU idle for a fifth
  of a step is starved (launch-bound small kernels, host syncs, CPU work between kernels).
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence

from . import intervals
from .collect import STEP_PREFIX
from .model import IdleStats, StepStats
from .ratios import percent

IDLE_FLAG_RATIO = 0.20
GAP_REPORT_US = 10.0
WHOLE_TRACE = "(whole trace)"

Intervals = list[tuple[float, float]]


def step_stats(cpu_steps: dict[str, list[float]], gpu_steps: dict[str, list[float]], span_lo: float,
               span_hi: float, busy: Intervals | None, kernel_starts: Sequence[float]) -> list[StepStats]:
    """The steps in time order; GPU fields stay None when ``busy`` is None (no GPU activity)."""
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
        step = StepStats(name=name, number=step_number(name), start_us=lo, wall_us=wall, cpu_us=cpu_us,
                         gpu_busy_us=None, gpu_busy_pct=None, kernel_count=None, idle=None)
        if busy is not None:
            step.gpu_busy_us = intervals.covered(busy, lo, hi)
            step.gpu_busy_pct = percent(step.gpu_busy_us, wall)
            step.kernel_count = bisect_left(kernel_starts, hi) - bisect_left(kernel_starts, lo)
            step.idle = idle_in(busy, lo, hi, name)
        out.append(step)
    return out


def idle_in(busy: Intervals, lo: float, hi: float, step: str) -> IdleStats:
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


def idle_total(steps: list[StepStats]) -> IdleStats | None:
    """All steps' idle together (None without GPU activity)."""
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


def step_number(name: str) -> int | None:
    try:
        return int(name[len(STEP_PREFIX):]) if name.startswith(STEP_PREFIX) else None
    except ValueError:
        return None
