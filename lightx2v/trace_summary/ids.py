"""Find an event by a kineto id (a correlation id, an ``External id``) in 16 bytes an event, not a dict's ~100.

    calls = IdIndex(c.rt_corr)
    calls.get(corr)   # the position of the last event carrying ``corr``, or NONE

A dict from id to position holds two int objects and a slot per event: tens of MB on a large trace, for a
lookup made once per GPU event. Kineto hands out its ids in increasing order, so the ids of one kind are
almost always already sorted in file order (every trace of HTA's test corpus but a few threads' worth of
exceptions): then the index is the id array itself and a lookup is one bisect. Otherwise it sorts a copy once
(stable: among equal ids the last in file order is the one found, as a dict built in file order would keep).
"""

from __future__ import annotations

from array import array
from bisect import bisect_right
from collections.abc import Sequence

NONE = -1


class IdIndex:
    """The ids of one kind of event, in file order; ``get(x)``: the position of the last event with id ``x``."""

    def __init__(self, ids: Sequence[int], positions: Sequence[int] | None = None,
                 in_order: bool | None = None) -> None:
        """``positions``: what ``get`` answers for each id (default: the id's own position in ``ids``);
        ``in_order``: whether ``ids`` is already ascending, when the caller has just checked (else checked here)."""
        self.keys: Sequence[int]
        self.pos: Sequence[int] | None
        if nondecreasing(ids) if in_order is None else in_order:
            self.keys, self.pos = ids, positions
        else:
            order = sorted(range(len(ids)), key=ids.__getitem__)
            self.keys = array("q", map(ids.__getitem__, order))
            self.pos = array("q", order if positions is None else map(positions.__getitem__, order))

    def get(self, x: int) -> int:
        keys = self.keys
        j = bisect_right(keys, x) - 1
        if j < 0 or keys[j] != x:
            return NONE
        return j if self.pos is None else self.pos[j]


def nondecreasing(ids: Sequence[int]) -> bool:
    prev = None
    for x in ids:
        if prev is not None and x < prev:
            return False
        prev = x
    return True
