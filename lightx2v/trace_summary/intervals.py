"""Time-interval arithmetic for GPU busy time: kernels on several streams overlap, so busy time is a union.

    merged = merge([(0, 10), (5, 20), (30, 40)])   # Spans: (0, 20), (30, 40)
    covered(merged, 0, 50)                          # 30
    gaps(merged, 0, 50)                             # [(20, 30), (40, 50)]
    intersect(merged, merge([(15, 35)]))            # Spans: (15, 20), (30, 35)

A trace's GPU busy time is a union of up to one interval per kernel, kept for the whole summary: ``Spans`` holds it
in two arrays of doubles (16 bytes an interval; a list of float pairs takes about 110).
"""

from __future__ import annotations

from array import array
from bisect import bisect_right
from collections.abc import Iterable, Iterator, Sequence

_NONE_YET = float("-inf")


class Spans:
    """Sorted, disjoint intervals, as the arrays of their starts (``lo``) and ends (``hi``)."""

    __slots__ = ("lo", "hi")

    def __init__(self, pairs: Iterable[tuple[float, float]] = ()) -> None:
        self.lo, self.hi = array("d"), array("d")
        for a, b in pairs:
            self.lo.append(a)
            self.hi.append(b)

    def __len__(self) -> int:
        return len(self.lo)

    def __iter__(self) -> Iterator[tuple[float, float]]:
        return zip(self.lo, self.hi, strict=True)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Spans | list | tuple) and list(self) == list(other)

    def __repr__(self) -> str:
        return f"Spans({list(self)!r})"


def merge(intervals: Iterable[tuple[float, float]]) -> Spans:
    """Sorted, disjoint intervals covering exactly the union of ``intervals`` (touching ones are joined)."""
    out = Spans()
    lo_of, hi_of = out.lo.append, out.hi.append
    cur_lo = cur_hi = _NONE_YET  # the union being grown; intervals are finite, so nothing joins "none yet"
    for lo, hi in sorted(intervals):
        if lo <= cur_hi:
            if hi > cur_hi:
                cur_hi = hi
            continue
        if cur_hi != _NONE_YET:
            lo_of(cur_lo)
            hi_of(cur_hi)
        cur_lo, cur_hi = lo, hi
    if cur_hi != _NONE_YET:
        lo_of(cur_lo)
        hi_of(cur_hi)
    return out


def clip(merged: Spans | Sequence[tuple[float, float]], lo: float, hi: float) -> list[tuple[float, float]]:
    """The parts of sorted disjoint ``merged`` that lie inside [lo, hi]."""
    spans = merged if isinstance(merged, Spans) else Spans(merged)
    starts, ends = spans.lo, spans.hi
    out = []
    for i in range(max(bisect_right(starts, lo) - 1, 0), len(starts)):
        a, b = starts[i], ends[i]
        if a >= hi:
            break
        a, b = max(a, lo), min(b, hi)
        if b > a:
            out.append((a, b))
    return out


def covered(merged: Spans | Sequence[tuple[float, float]], lo: float, hi: float) -> float:
    """Length of [lo, hi] covered by sorted disjoint ``merged``."""
    return sum(b - a for a, b in clip(merged, lo, hi))


def gaps(merged: Spans | Sequence[tuple[float, float]], lo: float, hi: float) -> list[tuple[float, float]]:
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


def intersect(a: Spans, b: Spans) -> Spans:
    """Sorted disjoint intervals covering exactly what both sorted disjoint ``a`` and ``b`` cover (one walk)."""
    out = Spans()
    i = j = 0
    a_lo, a_hi, b_lo, b_hi = a.lo, a.hi, b.lo, b.hi
    while i < len(a_lo) and j < len(b_lo):
        lo, hi = max(a_lo[i], b_lo[j]), min(a_hi[i], b_hi[j])
        if hi > lo:
            out.lo.append(lo)
            out.hi.append(hi)
        if a_hi[i] < b_hi[j]:
            i += 1
        else:
            j += 1
    return out
