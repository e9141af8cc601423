"""The innermost interval around a time range on one thread: which op (or label) encloses a runtime call.

    ops = Enclosing(c.op_thread, c.op_ts, c.op_dur)
    ops.innermost(thread, call_ts, call_ts + call_dur)   # index of the innermost op around the call, or NONE
    for i, parent in ops.walk(): ...                     # each interval with the one enclosing it (frames)

Intervals on one thread nest (kineto writes a thread's ops and labels as a stack), so after sorting a thread's
intervals by (start, -duration) each one's parent is the nearest earlier interval still open at its start. The
innermost interval around [lo, hi] is then on the parent chain of the last interval starting at or before lo:
the first one on that chain that also ends at or after hi. One bisect and a short walk per query.

Intervals that do not nest (one starts inside another and ends after it: a faulty tracer's or a replay's Python
frames, each step's ``<module>`` running into the next) would each become the child of the one they overlap, a
chain as long as the trace. With ``close_overlapped`` the later interval closes the earlier one instead: every
open interval that ends before it is taken as ended at its start, so the nesting stays as deep as the code's and
a lookup after that start never finds the closed one (the frames read it so: ``frames.FrameIndex``). Ends within
``same_end_us`` of each other are one end, so properly nested intervals nest as before: SAME_END_US (a float sum's
rounding) where times are small, and one step of a double more where they are epoch microseconds
(``same_end_us()``: 1712195495505583.047 is read as a multiple of 0.25 us, so two frames that end in the same
nanosecond, ``return g()``, come out up to 0.25 us apart).
"""

from __future__ import annotations

from array import array
from bisect import bisect_right
from collections.abc import Iterable, Iterator, Sequence
from itertools import compress, islice
from math import ulp
from operator import add, eq, le

NONE = -1
SAME_END_US = 0.0005  # half the nanosecond kineto writes: two ends closer than this are the same end


def same_end_us(latest_us: float) -> float:
    """How close two ends are one end in a trace whose absolute times reach ``latest_us``: SAME_END_US, plus the
    step of a double there (each start was rounded to it when read: 0.25 us at epoch microseconds)."""
    return SAME_END_US + ulp(abs(latest_us))


class Enclosing:
    """Per thread: the intervals' starts in (start, -duration) order, their indices and their parents."""

    def __init__(self, thread: Sequence[int], ts: Sequence[float], dur: Sequence[float],
                 close_overlapped: bool = False, same_end: float = SAME_END_US) -> None:
        self.ts, self.dur = ts, dur
        # arrays, not lists: 24 bytes an interval instead of about 100 (a float and two int objects each)
        self.threads: dict[int, tuple[array, array, array]] = {}
        self.closed: dict[int, float] = {}  # index -> the start of the interval that closed it (close_overlapped)
        closed = self.closed
        for t, idx in by_thread_in_order(range(len(thread)), thread, ts, dur).items():
            starts = array("d", map(ts.__getitem__, idx))
            if close_overlapped:
                parent = _parents_closing(idx, starts, ts, dur, closed, same_end)
            else:
                parent = _parents(starts, map(add, starts, map(dur.__getitem__, idx)))
            self.threads[t] = (starts, idx, parent)

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
        ts, dur, closed = self.ts, self.dur, self.closed
        pos = bisect_right(starts, lo) - 1
        while pos != NONE:
            i = idx[pos]
            if (closed[i] if closed and i in closed else ts[i] + dur[i]) >= hi:
                return i
            pos = parent[pos]
        return NONE


def _parents(starts: Sequence[float], ends: Iterable[float]) -> array:
    """Each interval's parent (a position, NONE for none), the intervals in nesting order: the nearest earlier one
    still open at its start (one that ends at or before it is closed)."""
    parent = array("l")
    add_parent = parent.append
    stack: list[int] = []  # positions of the intervals still open
    open_ends: list[float] = []  # and their ends
    for pos, (start, end) in enumerate(zip(starts, ends, strict=True)):
        while open_ends and open_ends[-1] <= start:
            open_ends.pop()
            stack.pop()
        add_parent(stack[-1] if stack else NONE)
        stack.append(pos)
        open_ends.append(end)
    return parent


def _parents_closing(idx: Sequence[int], starts: Sequence[float], ts: Sequence[float], dur: Sequence[float],
                     closed: dict[int, float], same_end: float = SAME_END_US) -> array:
    """``_parents`` where an interval that starts inside another and ends after it (by more than ``same_end``)
    closes that one at its start (``close_overlapped``), noted in ``closed``."""
    parent = array("l")
    stack: list[int] = []  # positions in idx of the intervals still open
    for pos, i in enumerate(idx):
        start = starts[pos]
        while stack:
            j = idx[stack[-1]]
            end = ts[j] + dur[j]
            if end > start:
                if end >= start + dur[i] - same_end:
                    break
                closed[j] = start
            stack.pop()
        parent.append(stack[-1] if stack else NONE)
        stack.append(pos)
    return parent


def by_thread_in_order(indices: Iterable[int], thread: Sequence[int], ts: Sequence[float],
                       dur: Sequence[float]) -> dict[int, array]:
    """``indices`` by ``thread[i]``, each thread's in (start, -duration) order, the order its intervals nest in
    (kineto writes a thread's events in this order: sorted only when they are not)."""
    by_thread: dict[int, array] = {}
    indices = indices if isinstance(indices, range) else list(indices)
    threads = set(map(thread.__getitem__, indices))
    if len(threads) == 1:  # one thread (most traces' ops): no loop over the intervals
        by_thread[threads.pop()] = array("l", indices)
    else:
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
    """Whether ``idx`` is already in (start, -duration) order (C-level comparisons; durations looked at only
    where starts tie)."""
    starts = list(map(ts.__getitem__, idx))
    if not all(map(le, starts, islice(starts, 1, None))):
        return False
    ties = list(compress(range(len(starts) - 1), map(eq, starts, islice(starts, 1, None))))
    return all(dur[idx[k]] >= dur[idx[k + 1]] for k in ties)
