"""CPU ops: calls, self time and total time per op name.

Self time is TensorBoard's "self host duration" (``optree.self_times``): the op's duration less its direct child
``cpu_op`` events on the same thread and less the CUDA runtime and driver calls it made itself. The other figure,
``self_with_runtime_us``, counts those calls as the op's own: where an op waits in ``cudaStreamSynchronize`` or a
blocking ``cudaMemcpyAsync`` (``aten::copy_`` to the host, ``.item()``), the wait is there and not in self time.
``record_function`` labels are not ops (an op's children inside a label are still its children), nor are the
labels older kineto writes as ops (``collect.is_label_op``).
"""

from __future__ import annotations

from .collect import Collected
from .model import CpuOpStat
from .optree import OpTree, self_times
from .ratios import percent


def cpu_op_stats(c: Collected, tree: OpTree) -> tuple[list[CpuOpStat], float]:
    """(every op name, most self time first; the summed self time of all ops)."""
    child = tree.child_us
    own = self_times(c, tree)
    per_name: dict[int, list[float]] = {}
    total_self = 0.0
    for i, (n_id, dur) in enumerate(zip(c.op_name, c.op_dur, strict=True)):
        self_us = own[i]
        with_runtime = dur - child[i] if dur > child[i] else 0.0
        total_self += self_us
        s = per_name.get(n_id)
        if s is None:
            per_name[n_id] = [1, self_us, dur, with_runtime]
        else:
            s[0] += 1
            s[1] += self_us
            s[2] += dur
            s[3] += with_runtime
    names = list(c.names)
    ranked = sorted(per_name.items(), key=lambda item: -item[1][1])
    return [CpuOpStat(name=names[n_id], calls=int(calls), self_us=self_us, total_us=total_us,
                      mean_self_us=self_us / calls, pct_of_cpu_self=percent(self_us, total_self) or 0.0,
                      self_with_runtime_us=with_runtime)
            for n_id, (calls, self_us, total_us, with_runtime) in ranked], total_self
