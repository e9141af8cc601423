"""Which op launched each kernel: GPU work charged to its launching op, its top-level op and its label.

The launching op comes from the launch chain (``launch``: correlation id -> the runtime/driver call -> the
innermost ``cpu_op`` around that call on its thread). Its top-level op is the outermost op around it on its
thread (``aten::scaled_dot_product_attention`` for ``aten::_cudnn_attention_forward``), its label the innermost
``record_function`` label around it on its thread (``attn``), or around the call when no op encloses it. GPU
events whose launch is not known (launched before the capture, or a trace without launch records) are charged
to no op: ``op``, ``label`` and ``launcher`` are "".
"""

from __future__ import annotations

from .collect import Collected
from .enclosing import NONE
from .launch import LaunchChain
from .model import Launch
from .optree import OpTree


def launches(c: Collected, group: list[tuple[int, int, int]]) -> list[Launch]:
    """One row per (top-level op, label, launcher, GPU name), most time first; ``group``: ``group_keys``."""
    rows: dict[tuple[int, int, int, int], list[float]] = {}
    for g, key, d in zip(c.g_name, group, c.g_dur, strict=True):
        k = (key[0], key[1], key[2], g)
        row = rows.get(k)
        if row is None:
            rows[k] = [1, d]
        else:
            row[0] += 1
            row[1] += d
    names, labels, gpu_keys = list(c.names), list(c.label_names), list(c.gpu_names)
    out = []
    for (op, lab, launch, g), (calls, total) in sorted(rows.items(), key=lambda item: -item[1][1]):
        key = gpu_keys[g]
        kind, gpu_name = ("kernel", key) if key.__class__ is str else key
        out.append(Launch(op=names[op] if op != NONE else "", label=labels[lab] if lab != NONE else "",
                          launcher=names[launch] if launch != NONE else "", kind=kind, name=gpu_name,
                          calls=int(calls), total_us=total))
    return out


def group_keys(c: Collected, tree: OpTree, chain: LaunchChain) -> list[tuple[int, int, int]]:
    """Per GPU event: (top-level op name id, label name id, launching op name id), NONE where not known."""
    op_name, root, lab_name = c.op_name, tree.root, c.lab_name
    per_pair: dict[tuple[int, int], tuple[int, int, int]] = {}  # an op launches many events: build its key once
    out = []
    for i, j in zip(chain.op, chain.label, strict=True):
        key = per_pair.get((i, j))
        if key is None:
            key = per_pair[(i, j)] = (op_name[root[i]] if i != NONE else NONE, lab_name[j] if j != NONE else NONE,
                                      op_name[i] if i != NONE else NONE)
        out.append(key)
    return out
