"""The CPU ops' nesting, per thread, found by one stack walk: each op's children's time, its top-level op and its
nearest ``record_function`` label. ``cpu_ops`` (self time) and ``attribution`` (who launched a kernel) read it.

Labels (``user_annotation`` events) are transparent for the ops: an op's children are the ops directly inside it,
labels in between or not, and a label's own span is nobody's child time.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from .collect import Collected

NONE = -1


@dataclass
class OpTree:
    child_us: list[float]  # per op: summed duration of its direct child ops
    root: array  # per op: index of its top-level op (the outermost op around it; itself when none); labels: NONE
    label: array  # per op: index of the nearest label around it, NONE when none
    is_label: bytearray  # per op: 1 when the entry is a label


def op_tree(c: Collected) -> OpTree:
    """The walk in (start, -duration) order per thread. Kineto writes ops in that order, so the walk first trusts
    the file order and checks it as it goes; only if the check fails does it sort (parents before children)."""
    thread, ts, dur, names = c.op_thread, c.op_ts, c.op_dur, c.op_name
    n = len(ts)
    flags = c.label_ids()
    is_label = bytearray(flags[k] for k in names) if any(flags) else bytearray(n)
    has_labels = any(flags)
    result = None
    for trust_file_order in (True, False):
        order: Iterable[int] = range(n) if trust_file_order else sorted(range(n), key=lambda i: (ts[i], -dur[i]))
        result = _walk(order, trust_file_order, thread, ts, dur, is_label, has_labels)
        if result is not None:
            break
    assert result is not None  # the sorted walk never gives up
    child, root, label = result
    return OpTree(child_us=child, root=root, label=label, is_label=is_label)


def _walk(order: Iterable[int], check: bool, thread: Sequence[int], ts: Sequence[float], dur: Sequence[float],
          is_label: bytearray, has_labels: bool) -> tuple[list[float], array, array] | None:
    n = len(ts)
    child = [0.0] * n
    root = array("l", [NONE]) * n
    label = array("l", [NONE]) * n
    parent_op = array("l", [NONE]) * n if has_labels else root  # nearest op ancestor (only needed with labels)
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
        if not has_labels:
            if stack:
                top = stack[-1]
                child[top] += dur[i]
                root[i] = root[top]
            else:
                root[i] = i
        else:
            up = lab = NONE
            if stack:
                top = stack[-1]
                if is_label[top]:
                    up, lab = parent_op[top], top
                else:
                    up, lab = top, label[top]
            parent_op[i], label[i] = up, lab
            if is_label[i]:
                root[i] = root[up] if up != NONE else NONE
            else:
                if up != NONE:
                    child[up] += dur[i]
                root[i] = root[up] if up != NONE else i
        stack.append(i)
    return child, root, label
