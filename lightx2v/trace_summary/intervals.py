"""Time-interval arithmetic for GPU busy time: kernels on several streams overlap, so busy time is a union.

    merged = merge([(0, 10), (5, 20), (30, 40)])   # [(0, 20), (30, 40)]
    covered(merged, 0, 50)                          # 30
    gaps(merged, 0, 50)                             # [(20, 30), (40, 50)]
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable

_NONE_YET = float("-inf")


def merge(intervals: Iterable[tuple[float, float]]) -> list[tuple[float, float]]:
    """Sorted, disjoint intervals covering exactly the union of ``intervals`` (touching ones are joined)."""
    out: list[tuple[float, float]] = []
    cur_lo = cur_hi = _NONE_YET  # the union being grown; intervals are finite, so nothing joins "none yet"
    for lo, hi in sorted(intervals):
        if lo <= cur_hi:
            if hi > cur_hi:
                cur_hi = hi
            continue
        if cur_hi != _NONE_YET:
            out.append((cur_lo, cur_hi))
        cur_lo, cur_hi = lo, hi
    if cur_hi != _NONE_YET:
        out.append((cur_lo, cur_hi))
    return out


def clip(merged: list[tuple[float, float]], lo: float, hi: float) -> list[tuple[float, float]]:
    """The parts of sorted disjoint ``merged`` that lie inside [lo, hi]."""
    out = []
    for i in range(max(bisect_right(merged, (lo, float("inf"))) - 1, 0), len(merged)):
        a, b = merged[i]
        if a >= hi:
            break
        a, b = max(a, lo), min(b, hi)
        if b > a:
            out.append((a, b))
    return out


def covered(merged: list[tuple[float, float]], lo: float, hi: float) -> float:
    """Length of [lo, hi] covered by sorted disjoint ``merged``."""
    return sum(b - a for a, b in clip(merged, lo, hi))


def gaps(merged: list[tuple[float, float]], lo: float, hi: float) -> list[tuple[float, float]]:
    """The uncovered parts of [lo, hi], including before the first and after the last interval."""
    out = []
    at = lo
    for a, b in clip(merged, lo, hi):
        if a > at:
            out.append((at, a))
        at = b
    if hi > at:
        out.append((at, hi))
    return out
