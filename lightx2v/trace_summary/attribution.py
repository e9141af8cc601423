"""Which op launched each kernel: GPU work charged to its launching op, its top-level op and its label.

Rule (checked on the H200 fixture: every kernel and memset carries the ``External id`` of the innermost
``cpu_op`` around its ``cudaLaunchKernel`` / ``cuLaunchKernelEx`` / ``cudaMemsetAsync``): a GPU event's
``args["External id"]`` names its launcher. The launcher's top-level op is the outermost op around it on its
thread (``aten::scaled_dot_product_attention`` for ``aten::_cudnn_attention_forward``), its label the nearest
``record_function`` label around it (``attn``). GPU events whose id matches no op of the trace (launched before
the capture, or a trace without ids) are charged to no op: ``op``, ``label`` and ``launcher`` are "".
"""

from __future__ import annotations

from .collect import NO_ID, Collected
from .model import Launch
from .optree import NONE, OpTree


def launches(c: Collected, tree: OpTree) -> list[Launch]:
    """One row per (top-level op, label, launcher, GPU name), most time first."""
    launcher: dict[int, int] = {x: NONE for x in c.g_ext if x != NO_ID}  # External id -> op index
    if launcher:
        is_label = tree.is_label
        for i, x in enumerate(c.op_ext):
            if x in launcher and not is_label[i]:
                launcher[x] = i
    op_name, root, label = c.op_name, tree.root, tree.label
    rows: dict[tuple[int, int, int, int], list[float]] = {}
    for g, x, d in zip(c.g_name, c.g_ext, c.g_dur, strict=True):
        i = launcher.get(x, NONE)
        if i == NONE:
            key = (NONE, NONE, NONE, g)
        else:
            lab = label[i]
            key = (op_name[root[i]], op_name[lab] if lab != NONE else NONE, op_name[i], g)
        row = rows.get(key)
        if row is None:
            rows[key] = [1, d]
        else:
            row[0] += 1
            row[1] += d
    names = c.op_names()
    gpu_keys = list(c.gpu_names)

    def name(n: int) -> str:
        return names[n] if n != NONE else ""

    out = []
    for (op, lab, launch, g), (calls, total) in sorted(rows.items(), key=lambda item: -item[1][1]):
        key = gpu_keys[g]
        kind, gpu_name = ("kernel", key) if key.__class__ is str else key
        out.append(Launch(op=name(op), label=name(lab), launcher=name(launch), kind=kind, name=gpu_name,
                          calls=int(calls), total_us=total))
    return out
