"""The innermost interval around a time range on one thread: which op (or label) encloses a runtime call.

    ops = Enclosing(c.op_thread, c.op_ts, c.op_dur)
    ops.innermost(thread, call_ts, call_ts + call_dur)   # index of the innermost op around the call, or NONE
    for i, parent in ops.walk(): ...                     # each interval with the one enclosing it (frames)

Intervals on one thread nest (kineto writes a thread's ops and labels as a stack), so after sorting a thread's
intervals by (start, -duration) each one's parent is the nearest earlier interval still open at its start. The
innermost interval around [lo, hi] is then on the parent chain of the last interval starting at or before lo:
the first one on that chain that also ends at or after hi. One bisect and a short walk per query.
"""

from __future__ import annotations

import math
from array import array
from bisect import bisect_right
from collections.abc import Iterable, Iterator, Sequence

NONE = -1


class Enclosing:
    """Per thread: the intervals' starts in (start, -duration) order, their indices and their parents."""

    def __init__(self, thread: Sequence[int], ts: Sequence[float], dur: Sequence[float]) -> None:
        self.ts, self.dur = ts, dur
        # arrays, not lists: 24 bytes an interval instead of about 100 (a float and two int objects each)
        self.threads: dict[int, tuple[array, array, array]] = {}
        for t, idx in by_thread_in_order(range(len(thread)), thread, ts, dur).items():
            parent = array("l")
            stack: list[int] = []  # positions in idx of the intervals still open
            for pos, i in enumerate(idx):
                start = ts[i]
                while stack and ts[idx[stack[-1]]] + dur[idx[stack[-1]]] <= start:
                    stack.pop()
                parent.append(stack[-1] if stack else NONE)
                stack.append(pos)
            self.threads[t] = (array("d", map(ts.__getitem__, idx)), idx, parent)

    def walk(self) -> Iterator[tuple[int, int]]:
        """Every interval as (index, its parent's index or NONE), parents before their children."""
        for _, idx, parent in self.threads.values():
            for i, p in zip(idx, parent, strict=True):
                yield i, idx[p] if p != NONE else NONE

    def innermost(self, thread: int, lo: float, hi: float) -> int:
        """The index of the innermost interval on ``thread`` with start <= lo and end >= hi; NONE when none."""
        found = self.threads.get(thread)
        if found is None:
            return NONE
        starts, idx, parent = found
        ts, dur = self.ts, self.dur
        pos = bisect_right(starts, lo) - 1
        while pos != NONE:
            i = idx[pos]
            if ts[i] + dur[i] >= hi:
                return i
            pos = parent[pos]
        return NONE


def by_thread_in_order(indices: Iterable[int], thread: Sequence[int], ts: Sequence[float],
                       dur: Sequence[float]) -> dict[int, array]:
    """``indices`` by ``thread[i]``, each thread's in (start, -duration) order, the order its intervals nest in
    (kineto writes a thread's events in this order: sorted only when they are not)."""
    by_thread: dict[int, array] = {}
    for i in indices:
        found = by_thread.get(thread[i])
        if found is None:
            found = by_thread[thread[i]] = array("l")
        found.append(i)
    for t, idx in by_thread.items():
        if not _ordered(idx, ts, dur):
            by_thread[t] = array("l", sorted(idx, key=lambda i: (ts[i], -dur[i])))
    return by_thread


def _ordered(idx: Sequence[int], ts: Sequence[float], dur: Sequence[float]) -> bool:
    """Whether ``idx`` is already in (start, -duration) order."""
    prev_ts, prev_dur = -math.inf, math.inf
    for i in idx:
        t = ts[i]
        if t < prev_ts or (t == prev_ts and dur[i] > prev_dur):
            return False
        prev_ts, prev_dur = t, dur[i]
    return True
