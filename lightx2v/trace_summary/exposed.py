"""Communication against compute: how much of a rank's communication nothing hid (exposed), per step.

    section = rank_comm(c, gpu, found, calls)     # model.RankComm, None without collectives or comm kernels

HTA's definition (``get_comm_comp_overlap``, ``get_gpu_kernel_breakdown``), so the figures agree with it:

- on a GPU trace, communication is the union of the communication kernels (``comm.is_comm_kernel``: NCCL's and
  RCCL's; the same kernels as HTA's rule on its corpus), compute the union of the computation kernels: every other
  kernel whose name has no ``Memcpy`` or ``Sync`` and does not start with ``Memset`` (memcpy / memset events are
  memory, neither). Overlap is the length of their intersection; exposed = communication - overlap; overlap % =
  overlap / communication. Per device (HTA pools a rank's devices; a rank has one).
- on a CPU-only trace (gloo: the collective is the calling thread's wait), communication is the union of the
  collectives' walls (from the call to the end of its work), compute the union of the top-level ops that hold no
  collective, on any thread.

The whole trace gives HTA's figures; per step, the parts inside the step's window (``steps``). Idle is what
neither covers: the window less the union of all GPU activity (CPU: of compute and communication). Each call's
``exposed_us`` is its own interval's part that compute does not cover. GPU events whose times ``gpu_clock``
finds off are left out; when the whole GPU clock is off, there are no per-step figures (the steps' windows are
the CPU's).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from itertools import compress

from . import intervals
from .collect import NO_ID, Collected
from .comm import is_comm_kernel
from .gpu_clock import GpuClock
from .kernels import GpuWork
from .model import CollectiveCall, CommStep, RankComm
from .optree import OpTree
from .ratios import percent
from .steps import Steps

COMM, COMPUTE, MEMORY = 0, 1, 2  # a GPU event's class; COMM and COMPUTE index a device's pair


def kernel_class(key: object) -> int:
    """COMM, COMPUTE or MEMORY for a GPU event name key (a kernel's name; a memcpy/memset's (kind, name))."""
    if not isinstance(key, str):
        return MEMORY
    if is_comm_kernel(key):
        return COMM
    if "Memcpy" in key or "Sync" in key or key.startswith("Memset"):  # HTA's NCCL_COMPUTE_KERNEL_RE
        return MEMORY
    return COMPUTE


def rank_comm(c: Collected, gpu: GpuWork, found: Steps, calls: list[CollectiveCall],
              tree: OpTree, clock: GpuClock | None = None) -> RankComm | None:
    """The rank's communication section; sets each call's ``exposed_us``."""
    classes = [kernel_class(key) for key in c.gpu_names]
    has_comm_kernels = COMM in classes and any(classes[g] == COMM for g in c.g_name)
    if not has_comm_kernels and not any(k.timed for k in calls):
        return None  # no communication kernels, and no gloo calls: NCCL calls whose kernels were not captured
    base = c.base or 0.0
    if has_comm_kernels:
        devices = _gpu_spans(c, classes, clock.on_gpu if clock is not None else None)
        busy = gpu.busy
    else:
        comm, compute = _cpu_spans(c, calls, tree, base)
        devices = {None: (comm, compute, intervals.intersect(comm, compute))}
        busy = intervals.merge([*comm, *compute])

    def covered(lo: float, hi: float, which: int) -> float:
        return sum(intervals.covered(spans[which], lo, hi) for spans in devices.values())

    comm_us = sum(b - a for spans in devices.values() for a, b in spans[0])
    overlap_us = sum(b - a for spans in devices.values() for a, b in spans[2])
    for call in calls:
        spans = devices.get(call.device if has_comm_kernels else None)
        if call.timed and spans is not None:
            lo, hi = (call.arrival_us if has_comm_kernels or call.call_us is None else call.call_us) - base, \
                call.end_us - base
            call.exposed_us = max(0.0, intervals.covered(spans[0], lo, hi) - intervals.covered(spans[2], lo, hi))
    per_step: Counter[str] = Counter(call.step for call in calls)
    steps = []
    for s in found.steps if clock is None or not clock.whole else []:
        lo = s.start_us - base
        hi = lo + s.wall_us
        step_comm, step_overlap = covered(lo, hi, 0), covered(lo, hi, 2)
        steps.append(CommStep(step=s.name, wall_us=s.wall_us, comm_us=step_comm,
                              exposed_us=step_comm - step_overlap,
                              overlap_pct=percent(step_overlap, step_comm) if step_comm > 0 else None,
                              compute_us=covered(lo, hi, 1),
                              idle_us=s.wall_us - intervals.covered(busy, lo, hi), calls=per_step[s.name]))
    return RankComm(on_gpu=has_comm_kernels, calls=len(calls), kinds=dict(Counter(k.kind for k in calls)),
                    comm_us=comm_us, exposed_us=comm_us - overlap_us,
                    overlap_pct=percent(overlap_us, comm_us) if comm_us > 0 else None, steps=steps)


Device = tuple[intervals.Spans, intervals.Spans, intervals.Spans]  # communication, compute, their intersection


def _gpu_spans(c: Collected, classes: list[int], on_gpu: list[bool] | None = None) -> dict[int | None, Device]:
    """Per device (``args.device``; None when not recorded): its communication and compute kernels' unions (of the
    events ``on_gpu`` keeps; None: all)."""
    pairs: dict[int | None, tuple[list[tuple[float, float]], list[tuple[float, float]]]] = defaultdict(
        lambda: ([], []))
    events = zip(c.g_lo, c.g_dur, c.g_name, c.g_dev, strict=True)
    for lo, d, g, dev in events if on_gpu is None else compress(events, on_gpu):
        k = classes[g]
        if k != MEMORY:
            pairs[dev if dev != NO_ID else None][k].append((lo, lo + d))
    out: dict[int | None, Device] = {}
    for key, (comm_pairs, compute_pairs) in pairs.items():
        comm, compute = intervals.merge(comm_pairs), intervals.merge(compute_pairs)
        out[key] = (comm, compute, intervals.intersect(comm, compute))
    return out


def _cpu_spans(c: Collected, calls: list[CollectiveCall], tree: OpTree,
               base: float) -> tuple[intervals.Spans, intervals.Spans]:
    """The collectives' walls, and the top-level ops that hold no collective."""
    comm = intervals.merge(((k.arrival_us if k.call_us is None else k.call_us) - base, k.end_us - base)
                           for k in calls if k.timed)
    root = tree.root
    holding = {root[i] for i in c.op_args}
    compute = intervals.merge((c.op_ts[i], c.op_ts[i] + c.op_dur[i]) for i in range(len(c.op_ts))
                              if root[i] == i and i not in holding)
    return comm, compute
