"""Which op launched each kernel: GPU work charged to its launching op, its top-level op and its label.

Rule (checked on the H200 fixture: every kernel and memset carries the ``External id`` of the innermost
``cpu_op`` around its ``cudaLaunchKernel`` / ``cuLaunchKernelEx`` / ``cudaMemsetAsync``): a GPU event's
``args["External id"]`` names its launcher. The launcher's top-level op is the outermost op around it on its
thread (``aten::scaled_dot_product_attention`` for ``aten::_cudnn_attention_forward``), its label the innermost
``record_function`` label around it on its thread (``attn``). GPU events whose id matches no op of the trace
(launched before the capture, or a trace without ids) are charged to no op: ``op``, ``label`` and ``launcher``
are "".
"""

from __future__ import annotations

from array import array
from bisect import bisect_right

from .collect import NO_ID, Collected
from .model import Launch
from .optree import NONE, OpTree


def launches(c: Collected, tree: OpTree) -> list[Launch]:
    """One row per (top-level op, label, launcher, GPU name), most time first."""
    launcher: dict[int, int] = {x: NONE for x in c.g_ext if x != NO_ID}  # External id -> op index
    if launcher:
        for i, x in enumerate(c.op_ext):
            if x in launcher:
                launcher[x] = i
    label_of = _Labels(c)
    op_name, root = c.op_name, tree.root
    unset = NONE - 1
    label_at = array("l", [unset]) * len(op_name) if len(c.lab_ts) else None  # per op, found on first use
    rows: dict[tuple[int, int, int, int], list[float]] = {}
    for g, x, d in zip(c.g_name, c.g_ext, c.g_dur, strict=True):
        i = launcher.get(x, NONE)
        if i == NONE:
            key = (NONE, NONE, NONE, g)
        else:
            lab = NONE
            if label_at is not None:
                lab = label_at[i]
                if lab == unset:
                    lab = label_at[i] = label_of(i)
            key = (op_name[root[i]], lab, op_name[i], g)
        row = rows.get(key)
        if row is None:
            rows[key] = [1, d]
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


class _Labels:
    """The innermost label around an op: per thread, labels in (start, -duration) order with their parents.

    Labels nest, so the innermost label around an op is on the parent chain of the last label that starts at or
    before the op (the first one on that chain that also ends at or after the op's end)."""

    def __init__(self, c: Collected) -> None:
        self.c = c
        by_thread: dict[int, list[int]] = {}
        for j, t in enumerate(c.lab_thread):
            by_thread.setdefault(t, []).append(j)
        ts, dur = c.lab_ts, c.lab_dur
        self.threads: dict[int, tuple[list[float], list[int], list[int]]] = {}
        for t, js in by_thread.items():
            js.sort(key=lambda j: (ts[j], -dur[j]))
            parent: list[int] = []
            stack: list[int] = []  # positions in js
            for pos, j in enumerate(js):
                while stack and ts[js[stack[-1]]] + dur[js[stack[-1]]] <= ts[j]:
                    stack.pop()
                parent.append(stack[-1] if stack else NONE)
                stack.append(pos)
            self.threads[t] = ([ts[j] for j in js], js, parent)

    def __call__(self, op: int) -> int:
        """The label name id around op ``op``, NONE when none."""
        c = self.c
        found = self.threads.get(c.op_thread[op])
        if found is None:
            return NONE
        starts, js, parent = found
        lo, hi = c.op_ts[op], c.op_ts[op] + c.op_dur[op]
        pos = bisect_right(starts, lo) - 1
        while pos != NONE:
            j = js[pos]
            if c.lab_ts[j] + c.lab_dur[j] >= hi:
                return c.lab_name[j]
            pos = parent[pos]
        return NONE
