"""Call stacks for operators of torch >= 2 traces, rebuilt from their `python_function` events.

torch-tb-profiler 0.4.3 reads an operator's stack from a `Call stack` arg that torch stopped writing;
with `with_stack=True` torch now records every Python frame as its own `python_function` event on the
operator's thread instead. The frames enclosing an operator in time are its call stack, innermost first,
in the plugin's `file(line): function;...` format.
"""

from __future__ import annotations

import re
from collections import defaultdict
from typing import Iterable, Protocol

FRAME = re.compile(r"^.+\(\d+\): .+$")  # "path/file.py(12): forward"; drops built-ins and nn.Module markers


class Event(Protocol):
    name: str
    ts: float
    duration: float
    tid: object


def attach_call_stacks(frames: Iterable[Event], ops: Iterable[Event]) -> int:
    """Set `op.callstack` from the `frames` (python_function events) that enclose each op on its thread.

    Only ops whose `callstack` is empty are touched. Returns how many ops got a stack. O(n log n).
    """
    per_thread: dict[object, list[tuple[float, int, float, Event]]] = defaultdict(list)
    for frame in frames:
        if frame.duration is not None:
            per_thread[frame.tid].append((frame.ts, 0, -frame.duration, frame))
    for op in ops:
        if not getattr(op, "callstack", None) and op.duration is not None:
            per_thread[op.tid].append((op.ts, 1, -op.duration, op))

    attached = 0
    for items in per_thread.values():
        items.sort(key=lambda item: item[:3])
        open_frames: list[list] = []  # [end_ts, name, cached stack string or None]
        for ts, kind, neg_dur, event in items:
            while open_frames and open_frames[-1][0] <= ts:
                open_frames.pop()
            if kind == 0:
                open_frames.append([ts - neg_dur, event.name, None])
                continue
            if not open_frames:
                continue
            top = open_frames[-1]
            if top[2] is None:
                names = (entry[1] for entry in reversed(open_frames))
                top[2] = ";".join(name.replace(";", ",") for name in names if FRAME.match(name or ""))
            if top[2]:
                setattr(event, "callstack", top[2])  # noqa: B010  (an attribute the plugin's Event class never declares)
                attached += 1
    return attached
