"""CPU ops: calls, self time and total time per op name.

Self time = duration minus the durations of the ``cpu_op`` events directly nested in it on the same thread
(TensorBoard's "self host duration"); ``record_function`` labels are not ops (an op's children inside a label
are still its children).
"""

from __future__ import annotations

from .collect import Collected
from .model import CpuOpStat
from .optree import OpTree
from .ratios import percent


def cpu_op_stats(c: Collected, tree: OpTree) -> tuple[list[CpuOpStat], float]:
    """(every op name, most self time first; the summed self time of all ops)."""
    child = tree.child_us
    per_name: dict[int, list[float]] = {}
    total_self = 0.0
    for i, (n_id, dur) in enumerate(zip(c.op_name, c.op_dur, strict=True)):
        self_us = dur - child[i]
        if self_us < 0.0:
            self_us = 0.0
        total_self += self_us
        s = per_name.get(n_id)
        if s is None:
            per_name[n_id] = [1, self_us, dur]
        else:
            s[0] += 1
            s[1] += self_us
            s[2] += dur
    names = list(c.names)
    ranked = sorted(per_name.items(), key=lambda item: -item[1][1])
    return [CpuOpStat(name=names[n_id], calls=int(calls), self_us=self_us, total_us=total_us,
                      mean_self_us=self_us / calls, pct_of_cpu_self=percent(self_us, total_self) or 0.0)
            for n_id, (calls, self_us, total_us) in ranked], total_self
