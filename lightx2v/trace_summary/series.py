"""Per-step values of one rank: the step wall, each kernel's, each op group's and each CPU op's time per step.

``--diff`` tells a change from noise with them (``noise``): one capture's steps are repeated measurements of
the same code. A GPU event counts in the step that launched it (``steps``), a CPU op in the step whose CPU span
holds its start; self time is TensorBoard's self host duration (``optree.self_times``).
"""

from __future__ import annotations

from array import array

from .collect import Collected
from .enclosing import NONE
from .model import StepSeries
from .optree import OpTree, self_times
from .steps import Steps, op_steps


def step_series(c: Collected, steps: Steps, tree: OpTree, group: list[tuple[int, int, int]]) -> StepSeries:
    count = len(steps.steps)
    zeros = array("d", bytes(8 * count))
    gpu_keys, names, labels = list(c.gpu_names), list(c.names), list(c.label_names)
    kernel: dict[int, array] = {}
    groups: dict[tuple[int, int], array] = {}
    for g, k in enumerate(steps.of_gpu):
        if k == NONE:
            continue
        d = c.g_dur[g]
        name = c.g_name[g]
        if gpu_keys[name].__class__ is str:
            row = kernel.get(name)
            if row is None:
                row = kernel[name] = array("d", zeros)
            row[k] += d
        op, lab, _ = group[g]
        grow = groups.get((lab, op))
        if grow is None:
            grow = groups[(lab, op)] = array("d", zeros)
        grow[k] += d
    cpu: dict[int, array] = {}
    own = self_times(c, tree)
    for i, (n_id, k) in enumerate(zip(c.op_name, op_steps(c, steps), strict=True)):
        if k == NONE:
            continue
        row = cpu.get(n_id)
        if row is None:
            row = cpu[n_id] = array("d", zeros)
        self_us = own[i]
        if self_us > 0.0:
            row[k] += self_us
    return StepSeries(
        steps=[s.name for s in steps.steps],
        wall_us=[s.wall_us for s in steps.steps],
        kernel_us={gpu_keys[g]: list(row) for g, row in kernel.items()},
        cpu_self_us={names[n]: list(row) for n, row in cpu.items()},
        group_us={(labels[lab] if lab != NONE else "", names[op] if op != NONE else ""): list(row)
                  for (lab, op), row in groups.items()},
    )
