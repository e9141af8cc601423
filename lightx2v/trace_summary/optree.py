"""The CPU ops' nesting, per thread, found by one stack walk: each op's children's time and its top-level op,
and the time of the CUDA runtime calls made directly in each op. ``cpu_ops`` and ``series`` (self time) and
``attribution`` (who launched a kernel) read it.

An op's self time (``self_times``) is TensorBoard's "self host duration": its duration less its direct child ops'
and less the runtime and driver calls it made itself (``cudaLaunchKernel``, ``cudaMemcpyAsync``,
``cudaStreamSynchronize``; torch-tb-profiler's ``node.py``: "cpu_self_time does not include runtime's time").
A call belongs to the innermost op around it on its thread (the launch chain's rule, ``launch``), where TensorBoard
uses the call's ``External id``: the same op on kineto's traces (tests/test_trace_corpus.py compares them).
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from operator import add

from .collect import Collected
from .enclosing import Enclosing

NONE = -1


@dataclass
class OpTree:
    child_us: array  # per op: summed duration of its direct child ops (doubles: 8 bytes an op, not a float object)
    root: array  # per op: index of its top-level op (the outermost op around it; itself when none)
    runtime_us: array | None = None  # per op: summed duration of the runtime/driver calls it made itself (None: 0)
    self_us: array | None = None  # per op: its self time (``self_times``, made once)


def op_tree(c: Collected, ops: Enclosing | None = None, call_op: Sequence[int] | None = None) -> OpTree:
    """The walk in (start, -duration) order per thread. Kineto writes ops in that order, so the walk first trusts
    the file order and checks it as it goes; only if the check fails does it sort (parents before children).
    ``ops``: the ops' nesting index, when the caller has one (``launch_chain`` builds it); made here otherwise,
    and only for a trace with runtime calls; ``call_op``: each runtime call's innermost op, when known
    (``LaunchChain.call_op``)."""
    thread, ts, dur = c.op_thread, c.op_ts, c.op_dur
    n = len(ts)
    if ops is not None:  # the nesting is known: each op's parent, no second walk
        child, root = _from_parents(ops, dur, n)
        return OpTree(child_us=child, root=root,
                      runtime_us=_runtime(c, ops, call_op) if len(c.rt_ts) and n else None)
    result = _walk(range(n), True, thread, ts, dur)
    if result is None:
        result = _walk(sorted(range(n), key=lambda i: (ts[i], -dur[i])), False, thread, ts, dur)
    assert result is not None  # the sorted walk never gives up
    return OpTree(child_us=result[0], root=result[1], runtime_us=_runtime(c, ops) if len(c.rt_ts) and n else None)


def _from_parents(ops: Enclosing, dur: Sequence[float], n: int) -> tuple[array, array]:
    """``_walk``'s answers from the ops' nesting index: the same order per thread (start, -duration), the same
    rule (an op's parent is the nearest earlier one still open), so the same sums in the same order."""
    child = array("d", bytes(8 * n))
    root = array("l", [NONE]) * n
    for _, idx, parent in ops.threads.values():
        for i, p in zip(idx, parent, strict=True):
            if p == NONE:
                root[i] = i
            else:
                j = idx[p]
                child[j] += dur[i]
                root[i] = root[j]
    return child, root


def self_times(c: Collected, tree: OpTree) -> array:
    """Per op, its self time: TensorBoard's self host duration (duration less direct child ops and the runtime
    calls it made itself; never below 0)."""
    if tree.self_us is not None:
        return tree.self_us
    child, runtime = tree.child_us, tree.runtime_us
    if runtime is None:
        tree.self_us = array("d", (d - k if d > k else 0.0 for d, k in zip(c.op_dur, child, strict=True)))
    else:
        tree.self_us = array("d", (d - k - r if d > k + r else 0.0
                                   for d, k, r in zip(c.op_dur, child, runtime, strict=True)))
    return tree.self_us


def _runtime(c: Collected, ops: Enclosing | None, call_op: Sequence[int] | None = None) -> array:
    """Per op, the summed duration of the runtime and driver calls whose innermost op it is."""
    if call_op is None:
        if ops is None:
            ops = Enclosing(c.op_thread, c.op_ts, c.op_dur)
        call_op = list(map(ops.innermost, c.rt_thread, c.rt_ts, map(add, c.rt_ts, c.rt_dur)))
    out = array("d", bytes(8 * len(c.op_ts)))
    for o, d in zip(call_op, c.rt_dur, strict=True):
        if o != NONE:
            out[o] += d
    return out


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
