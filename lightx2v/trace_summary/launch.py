"""The launch chain: which host call launched each GPU event, and which ops enclosed that call.

    chain = launch_chain(c)
    chain.op[g]         # the innermost cpu_op around the launch of GPU event g (NONE: not known)
    chain.label[g]      # the innermost record_function label around that op, or around the call itself
    chain.launch_ts[g]  # when the host launched it (the runtime/driver call's start; NaN: not known)

Rule, the one HTA and TensorBoard follow, checked on every kineto schema of HTA's test traces (2023-2026): a
kernel, memcpy or memset carries ``args.correlation``; the runtime or driver call (``cudaLaunchKernel``,
``cuLaunchKernelEx``, ``cudaMemcpyAsync``, ``hipLaunchKernel``, ...) with the same correlation id launched it;
the ops enclosing that call on its thread are its launching op (the innermost) and its top-level op (the
outermost), the innermost ``record_function`` label around the op its label. A call that no op encloses (a fused
optimizer's launches inside ``Optimizer.step#...``) still gets the label around the call itself. The call's
start is the event's launch time: it puts the event in the step whose CPU window holds the launch, however late
the GPU runs.

``External id`` is used only where it agrees with that chain: newer kineto writes the launching op's id there,
older kineto the correlation id (so matching it against op ids finds nothing, or the wrong op). A GPU event
without a launch record (its call fell outside the capture) is linked by its ``External id`` only when, on the
events that have both, the two links agree (AGREE_SHARE), or, in a trace without any launch record, when the
field does not simply repeat the correlation id.
"""

from __future__ import annotations

import math
from array import array
from dataclasses import dataclass
from itertools import compress
from operator import add

from .collect import NO_ID, Collected
from .enclosing import NONE, Enclosing
from .ids import IdIndex, nondecreasing
from .model import LaunchLinks

AGREE_SHARE = 0.99  # External id is trusted for events without a launch record when it agrees this often


@dataclass
class LaunchChain:
    op: array  # per GPU event (file order): index of its launching op, NONE when not known
    label: array  # per GPU event: index of the innermost label around its op (or its call), NONE when none
    launch_ts: array  # per GPU event: host time of its launch, NaN when not known
    call: array  # per GPU event: index of its runtime/driver call, NONE when the trace has none for it
    links: LaunchLinks  # how many events each rule linked (the summary's ``launch_links``)
    ops: Enclosing  # the CPU ops' nesting index, for callers that look up more host times
    call_op: array  # per runtime/driver call: index of the innermost op around it, NONE when none (``optree``)


def launch_chain(c: Collected) -> LaunchChain:
    n = len(c.g_lo)
    call_of = IdIndex(c.rt_corr)
    ops = Enclosing(c.op_thread, c.op_ts, c.op_dur)
    op = array("l", [NONE]) * n
    call = array("l", [NONE]) * n
    launch_ts = array("d", [math.nan]) * n
    rt_ts = c.rt_ts
    call_op = array("l", map(ops.innermost, c.rt_thread, rt_ts, map(add, rt_ts, c.rt_dur)))  # each call, once
    with_record = by_chain = 0
    for g, corr in enumerate(c.g_corr):
        i = call_of.get(corr) if corr != NO_ID else NONE
        if i == NONE:
            continue
        with_record += 1
        call[g] = i
        launch_ts[g] = rt_ts[i]
        o = call_op[i]
        if o != NONE:
            op[g] = o
            by_chain += 1

    op_of_ext = _ops_by_external_id(c)
    checked = agree = repeats_corr = has_ext = 0
    for g, x in enumerate(c.g_ext):
        if x == NO_ID:
            continue
        has_ext += 1
        if x == c.g_corr[g]:
            repeats_corr += 1
        if op[g] != NONE:
            checked += 1
            if op_of_ext.get(x) == op[g]:
                agree += 1
    if checked:
        trusted = agree >= AGREE_SHARE * checked
        rule = (f"agrees with the launch chain on {agree:,} of {checked:,} events" +
                ("" if trusted else ": not used"))
    elif has_ext:
        trusted = repeats_corr < has_ext / 2
        rule = "no launch records to check it against" + ("" if trusted else "; it repeats the correlation id: "
                                                                                "not used")
    else:
        trusted, rule = False, "not recorded"
    label = _labels(c, op, call)
    by_ext = 0
    if trusted:
        op_ts = c.op_ts
        for g, x in enumerate(c.g_ext):
            if call[g] == NONE and x != NO_ID:
                o = op_of_ext.get(x)
                if o != NONE:
                    op[g] = o
                    launch_ts[g] = op_ts[o]
                    by_ext += 1
        if by_ext:
            label = _labels(c, op, call)
    label_only = sum(1 for g in range(n) if op[g] == NONE and label[g] != NONE)
    links = LaunchLinks(gpu_events=n, with_launch_record=with_record, by_launch_chain=by_chain,
                        by_external_id=by_ext, label_only=label_only, unlinked=n - by_chain - by_ext - label_only,
                        external_id=rule)
    return LaunchChain(op=op, label=label, launch_ts=launch_ts, call=call, links=links, ops=ops, call_op=call_op)


def _ops_by_external_id(c: Collected) -> IdIndex:
    """The ops by External id; when their ids are out of order, only the ops whose id a GPU event carries are
    sorted (a trace's ops outnumber its GPU events several times)."""
    if not len(c.g_ext):
        return IdIndex(array("q"))
    if nondecreasing(c.op_ext):
        return IdIndex(c.op_ext, in_order=True)
    wanted = set(c.g_ext)
    wanted.discard(NO_ID)
    chosen = array("q", compress(range(len(c.op_ext)), map(wanted.__contains__, c.op_ext)))  # C-level, per op
    return IdIndex(array("q", map(c.op_ext.__getitem__, chosen)), chosen)


def _labels(c: Collected, op: array, call: array) -> array:
    """Per GPU event: the innermost label around its launching op, else around its launch call (NONE: none)."""
    label = array("l", [NONE]) * len(op)
    if not len(c.lab_ts):
        return label
    labels = Enclosing(c.lab_thread, c.lab_ts, c.lab_dur)
    last_op = last_label = NONE  # an op's GPU events mostly come one after another: one query for them all
    for g, o in enumerate(op):
        if o != NONE:
            if o != last_op:
                last_op, last_label = o, labels.innermost(c.op_thread[o], c.op_ts[o], c.op_ts[o] + c.op_dur[o])
            label[g] = last_label
        elif call[g] != NONE:
            i = call[g]
            label[g] = labels.innermost(c.rt_thread[i], c.rt_ts[i], c.rt_ts[i] + c.rt_dur[i])
    return label
