"""The CPU ops' nesting, per thread, found by one stack walk: each op's children's time and its top-level op.
``cpu_ops`` (self time) and ``attribution`` (who launched a kernel) read it.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from .collect import Collected

NONE = -1


@dataclass
class OpTree:
    child_us: array  # per op: summed duration of its direct child ops (doubles: 8 bytes an op, not a float object)
    root: array  # per op: index of its top-level op (the outermost op around it; itself when none)


def op_tree(c: Collected) -> OpTree:
    """The walk in (start, -duration) order per thread. Kineto writes ops in that order, so the walk first trusts
    the file order and checks it as it goes; only if the check fails does it sort (parents before children)."""
    thread, ts, dur = c.op_thread, c.op_ts, c.op_dur
    n = len(ts)
    result = _walk(range(n), True, thread, ts, dur)
    if result is None:
        result = _walk(sorted(range(n), key=lambda i: (ts[i], -dur[i])), False, thread, ts, dur)
    assert result is not None  # the sorted walk never gives up
    return OpTree(child_us=result[0], root=result[1])


def _walk(order: Iterable[int], check: bool, thread: Sequence[int], ts: Sequence[float], dur: Sequence[float]
          ) -> tuple[array, array] | None:
    n = len(ts)
    child = array("d", bytes(8 * n))
    root = array("l", [NONE]) * n
    stacks: dict[int, list[int]] = {}
    last: dict[int, int] = {}
    for i in order:
        t, start = thread[i], ts[i]
        if check:
            j = last.get(t)
            if j is not None and (start < ts[j] or (start == ts[j] and dur[i] > dur[j])):
                return None
            last[t] = i
        stack = stacks.get(t)
        if stack is None:
            stack = stacks[t] = []
        while stack and ts[stack[-1]] + dur[stack[-1]] <= start:
            stack.pop()
        if stack:
            child[stack[-1]] += dur[i]
            root[i] = stack[0]
        else:
            root[i] = i
        stack.append(i)
    return child, root
