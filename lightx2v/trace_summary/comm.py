"""Collectives: each call on one rank from whichever schema the trace writes, and the same call matched across
the ranks of a run.

    calls = rank_collectives(c, chain, tree, found, where)      # one rank: [CollectiveCall], in call order
    matched = match_run(ranks)                                  # a run: Instances (one per collective) + notes

One call on a rank is the events that one ``torch.distributed`` call leaves, tied together:

- on the calling thread, the outermost of the nested ops ``c10d::allreduce_`` / ``c10d::alltoall_base_`` / ...
  and ``record_param_comms`` (newer kineto writes the collective's metadata on it: ``Collective name``, ``dtype``,
  ``In msg nelems``, ``Process Group Name``, ``Seq``, ...; ``records.Args`` names each key), with any ``nccl:*`` /
  ``gloo:*`` annotation inside it;
- its GPU side: the NCCL/RCCL kernels (``ncclKernel_*``, ``ncclDevKernel_*``) launched inside it (the launch chain,
  ``launch``); newer kineto copies the metadata onto them;
- gloo's work: the ``gloo:*`` annotation on the backend's own thread, whose duration is the collective's work
  (torch 2.13 writes no ``record_param_comms`` for gloo, and no group or sequence number); it is the call's when it
  is the first unclaimed one of the same kind that starts after the call.

A ``record_param_comms`` that names no collective (``wait``) or has no kind at all is a wait record, not a call.
A call is timed (``CollectiveCall.timed``: its arrival and end are the collective's) by its kernels, or by gloo's
work (the caller blocks in it); a NCCL call whose kernel the capture lacks only says when the host enqueued it.

Across ranks a call is matched by process group and sequence number (``Seq``), where every call of the group on
every rank has one; otherwise by order within its group and step: the k-th call of group G in ``ProfilerStep#N``
on each rank (the steps of a job's ranks carry the same numbers; a capture that starts one collective late on a
rank shifts nothing past its first step). Point-to-point calls (send/recv) are not matched. A gloo trace names no
group, but its ``distributedInfo.pg_config`` lists the groups each rank is in: where they split the ranks (a
DeviceMesh's ``mesh_seq_p`` and ``mesh_cfg_p``), the calls at one place of the step on every rank (one line of the
program) are split into the groups of the split whose groups end together right after their own last arrival, over
all the steps (``_split_by_group``). What cannot be
matched is said in one line each (``Matching.notes``): a rank whose trace is missing or damaged, files of another
run, calls without peers (a rank that hung or stopped capturing early), sequence numbers that restart.
"""

from __future__ import annotations

import math
import re
from bisect import bisect_right
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from .collect import Collected
from .enclosing import NONE, Enclosing
from .launch import LaunchChain
from .model import CollectiveCall, RankSummary
from .optree import OpTree
from .steps import Steps

RECORD_PARAM_COMMS = "record_param_comms"
OP_PREFIXES = ("c10d::",)
LABEL_PREFIXES = ("nccl:", "gloo:")
# A communication kernel's name holds one of these (any case): NCCL's ncclKernel_* / ncclDevKernel_*, RCCL's. HTA's
# rule (hta/utils/utils.py is_comm_kernel: ^nccl.*Kernel) picks the same kernels in every trace of its corpus.
COMM_MARKERS = ("nccl", "rccl")
_KERNEL_KIND = re.compile(r"^nccl(?:Dev)?Kernel_([A-Za-z]+)")
_DROP_WORDS = frozenset({"", "base", "coalesced", "into", "tensor", "any", "source"})
KINDS = {"allreduce": "all_reduce", "allgather": "all_gather", "reducescatter": "reduce_scatter",
         "alltoall": "all_to_all", "alltoallv": "all_to_all", "broadcast": "broadcast", "reduce": "reduce",
         "gather": "gather", "scatter": "scatter", "barrier": "barrier", "monitoredbarrier": "barrier",
         "send": "send", "recv": "recv", "sendrecv": "send_recv"}
POINT_TO_POINT = frozenset({"send", "recv", "send_recv"})
# Every rank of the group leaves these only once the last one arrived: their ends line the ranks' clocks up, and
# each rank's time in them before the last arrival is waiting (broadcast and reduce wait for the root only).
SYMMETRIC = frozenset({"all_reduce", "all_gather", "reduce_scatter", "all_to_all", "barrier"})


def is_comm_kernel(name: str) -> bool:
    """Whether a GPU kernel is a communication kernel: the stack's one rule (``kernels``, ``exposed``)."""
    lower = name.lower()
    return any(m in lower for m in COMM_MARKERS)


def is_comm_name(name: str) -> bool:
    """The pass's ``args_of`` rule: an op, label or kernel whose args the collectives need."""
    return name == RECORD_PARAM_COMMS or name.startswith(OP_PREFIXES + LABEL_PREFIXES) or is_comm_kernel(name)


def kind_of(name: str) -> str | None:
    """The collective an op, label, kernel or ``Collective name`` means, by one name each ("all_to_all"); None for
    what is no collective (``wait``, ``record_param_comms``, NCCL's generic kernel)."""
    m = _KERNEL_KIND.match(name)
    if m is not None:
        return KINDS.get(m.group(1).lower())
    s = name.lower()
    for prefix in OP_PREFIXES + LABEL_PREFIXES:
        if s.startswith(prefix):
            s = s[len(prefix):]
            break
    return KINDS.get("".join(w for w in s.split("_") if w not in _DROP_WORDS))


@dataclass
class _Call:
    """A call being assembled: its host ops, annotations and kernels."""

    thread: int
    lo: float  # host interval (relative to the trace's base), NaN for a kernel-only call
    hi: float
    ops: list[int] = field(default_factory=list)
    labels: list[int] = field(default_factory=list)
    kernels: list[int] = field(default_factory=list)
    work: int = NONE  # the gloo:* annotation on the backend's thread


def rank_collectives(c: Collected, chain: LaunchChain, tree: OpTree, steps: Steps,
                     where: Callable[[int, float, float], str] | None = None) -> list[CollectiveCall]:
    """The collectives called on one rank, in call order (empty when the trace has none)."""
    if not (c.op_args or c.lab_args or c.g_args):
        return []
    label_names, op_names = list(c.label_names), list(c.names)
    calls = _host_calls(c)
    works = _attach_labels(c, calls, label_names)
    _attach_works(c, calls, works, label_names, op_names)
    _attach_kernels(c, chain, calls)
    gpu_names = list(c.gpu_names)
    labels = Enclosing(c.lab_thread, c.lab_ts, c.lab_dur) if len(c.lab_ts) else None
    marks = _LabelStarts(c, label_names)
    base = c.base or 0.0
    step_starts = [lo for lo, _ in steps.cpu_spans]
    out: list[CollectiveCall] = []
    last_end: dict[int, float] = {}  # per thread: where the previous call's host side ended
    for call in sorted(calls, key=lambda k: (k.lo if k.lo == k.lo else c.g_lo[k.kernels[0]])):
        args = _merged_args(c, call)
        kind = _kind(c, call, args, op_names, label_names, gpu_names)
        if kind is None:
            continue
        host = call.lo == call.lo
        if call.kernels:
            lo = min(c.g_lo[g] for g in call.kernels)
            hi = max(c.g_lo[g] + c.g_dur[g] for g in call.kernels)
            comm = sum(b - a for a, b in _union((c.g_lo[g], c.g_lo[g] + c.g_dur[g]) for g in call.kernels))
            dev = c.g_dev[call.kernels[0]]
            device = dev if dev != -1 else None
        else:  # the host's side: it arrives when it calls, and sits in the call until gloo's work is done
            lo, hi = call.lo, call.hi
            if call.work != NONE:
                hi = max(hi, c.lab_ts[call.work] + c.lab_dur[call.work])
            comm = c.lab_dur[call.work] if call.work != NONE else hi - lo
            device = None
        step_at = call.lo if host else lo
        k = bisect_right(step_starts, step_at) - 1
        step = steps.steps[k].name if k >= 0 and step_at <= steps.cpu_spans[k][1] else ""
        site = ""
        if host:
            site = (where(call.thread, call.lo, call.hi) if where is not None else "") or _around(
                c, tree, labels, call, label_names, op_names)
        sources = _sources(c, call)
        record = CollectiveCall(
            kind=kind, group=_group(args), group_desc=_text(args.get("Process Group Description")),
            ranks=_ranks(args), seq=_int(args.get("Seq")), dtype=_first(sources, _dtype),
            in_nelems=_first(sources, _in_nelems), out_nelems=_int(args.get("Out msg nelems")),
            on_gpu=bool(call.kernels), timed=bool(call.kernels) or _gloo(c, call, label_names), device=device,
            call_us=call.lo + base if host else None, arrival_us=lo + base, end_us=hi + base, comm_us=comm,
            step=step, site=site, backend_thread=c.lab_thread[call.work] if call.work != NONE else -1)
        if host:
            since = max(last_end.get(call.thread, -math.inf), step_starts[k] if k >= 0 else -math.inf)
            _before(c, chain, tree, call, since, record, op_names, where)
            if record.before_us < (call.lo - since) / 2:  # the ops do not explain the time: a label might (a sleep)
                _before_label(c, marks, call, since, record, label_names, where)
            last_end[call.thread] = max(call.hi, hi if not call.kernels else call.hi)
        out.append(record)
    return out


def _host_calls(c: Collected) -> list[_Call]:
    """The comm ops grouped per thread into calls: an op nested in the previous one joins its call."""
    calls: list[_Call] = []
    current: dict[int, _Call] = {}
    ts, dur, thread = c.op_ts, c.op_dur, c.op_thread
    for i in sorted(c.op_args, key=lambda i: (thread[i], ts[i], -dur[i])):
        t = thread[i]
        call = current.get(t)
        if call is not None and ts[i] < call.hi:
            call.ops.append(i)
            continue
        call = current[t] = _Call(thread=t, lo=ts[i], hi=ts[i] + dur[i], ops=[i])
        calls.append(call)
    return calls


def _attach_labels(c: Collected, calls: list[_Call], label_names: list[str]) -> list[int]:
    """Comm annotations inside a call on its thread join it; the others (gloo's work) are returned."""
    by_thread: dict[int, list[_Call]] = defaultdict(list)
    for call in calls:
        by_thread[call.thread].append(call)
    starts = {t: [k.lo for k in ks] for t, ks in by_thread.items()}
    works = []
    for j in sorted(c.lab_args, key=c.lab_ts.__getitem__):
        t, lo = c.lab_thread[j], c.lab_ts[j]
        ks = by_thread.get(t)
        k = bisect_right(starts[t], lo) - 1 if ks else -1
        if ks and k >= 0 and lo < ks[k].hi:
            ks[k].labels.append(j)
        else:
            works.append(j)
    return works


def _attach_works(c: Collected, calls: list[_Call], works: list[int], label_names: list[str],
                  op_names: list[str]) -> None:
    """Each backend-thread annotation to the first unclaimed call of its kind that started before it; one that
    no call claims is a call of its own (an annotation whose op the trace lacks)."""
    waiting: dict[str | None, list[_Call]] = defaultdict(list)
    for call in sorted(calls, key=lambda k: k.lo):
        waiting[_host_kind(call, c, op_names, label_names)].append(call)
    taken: dict[str | None, int] = defaultdict(int)
    for j in works:  # in start order
        kind = kind_of(label_names[c.lab_name[j]])
        queue, at = waiting.get(kind, []), taken[kind]
        if at < len(queue) and queue[at].lo <= c.lab_ts[j]:
            queue[at].work = j
            taken[kind] = at + 1
        else:
            calls.append(_Call(thread=c.lab_thread[j], lo=c.lab_ts[j], hi=c.lab_ts[j] + c.lab_dur[j], labels=[j]))


def _attach_kernels(c: Collected, chain: LaunchChain, calls: list[_Call]) -> None:
    """Each communication kernel to the call whose op launched it (the launch chain); a kernel whose launch is not
    in the trace is a call of its own."""
    call_of_op = {i: call for call in calls for i in call.ops}
    for g in sorted(c.g_args, key=c.g_lo.__getitem__):
        o = chain.op[g]
        call = call_of_op.get(o) if o != NONE else None
        if call is None and o != NONE:  # launched by an op nested in a call's op (not itself a comm op)
            t, lo = c.op_thread[o], c.op_ts[o]
            call = next((k for k in calls if k.thread == t and k.lo <= lo < k.hi), None)
        if call is None:
            calls.append(_Call(thread=-1, lo=math.nan, hi=math.nan, kernels=[g]))
        else:
            call.kernels.append(g)


def _gloo(c: Collected, call: _Call, label_names: list[str]) -> bool:
    """Whether the call is gloo's: the host's times are then the collective's (the caller blocks in it); a NCCL
    call's host side only enqueues its kernel."""
    return any(label_names[c.lab_name[j]].startswith("gloo:") for j in (*call.labels, call.work) if j != NONE)


def _host_kind(call: _Call, c: Collected, op_names: list[str], label_names: list[str]) -> str | None:
    for i in call.ops:
        args = c.op_args.get(i)
        name = args.get("Collective name") if isinstance(args, dict) else None
        kind = kind_of(name) if isinstance(name, str) else kind_of(op_names[c.op_name[i]])
        if kind is not None:
            return kind
    return next((k for j in call.labels if (k := kind_of(label_names[c.lab_name[j]])) is not None), None)


def _kind(c: Collected, call: _Call, args: dict[str, Any], op_names: list[str], label_names: list[str],
          gpu_names: list[Any]) -> str | None:
    """The call's collective: its recorded name, else its ops', annotations' or kernels' names."""
    name = args.get("Collective name")
    if isinstance(name, str):
        return kind_of(name)
    names = [op_names[c.op_name[i]] for i in call.ops] + [label_names[c.lab_name[j]] for j in call.labels]
    names += [gpu_names[c.g_name[g]] for g in call.kernels]
    return next((k for k in map(kind_of, names) if k is not None), None)


def _sources(c: Collected, call: _Call) -> list[dict[str, Any]]:
    """The args of the call's events: its ops (outermost first), kernels, annotations, gloo's work."""
    found = [c.op_args.get(i) for i in call.ops] + [c.g_args.get(g) for g in call.kernels]
    found += [c.lab_args.get(j) for j in call.labels]
    if call.work != NONE:
        found.append(c.lab_args.get(call.work))
    return [args for args in found if isinstance(args, dict)]


def _merged_args(c: Collected, call: _Call) -> dict[str, Any]:
    """The collective's metadata from its ops, kernels and annotations (the first value of each key wins)."""
    out: dict[str, Any] = {}
    for args in _sources(c, call):
        for key, value in args.items():
            out.setdefault(key, value)
    return out


def _first(sources: list[dict[str, Any]], read: Callable[[dict[str, Any]], Any]) -> Any:
    """The first source's value that ``read`` finds (its empty value when none has one)."""
    empty = read({})
    return next((v for v in map(read, sources) if v != empty), empty)


def _union(pairs: Iterable[tuple[float, float]]) -> list[tuple[float, float]]:
    out: list[tuple[float, float]] = []
    for a, b in sorted(pairs):
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


def _around(c: Collected, tree: OpTree, labels: Enclosing | None, call: _Call, label_names: list[str],
            op_names: list[str]) -> str:
    """The record_function label around the call, else the top-level op around it ("" when it is top-level)."""
    if labels is not None:
        j = labels.innermost(call.thread, call.lo, call.hi)
        if j != NONE and not label_names[c.lab_name[j]].startswith(LABEL_PREFIXES + ("ProfilerStep#",)):
            return label_names[c.lab_name[j]]
    if not call.ops:
        return ""
    root = tree.root[call.ops[0]]
    return op_names[c.op_name[root]] if root not in (NONE, call.ops[0]) else ""


def _before(c: Collected, chain: LaunchChain, tree: OpTree, call: _Call, since: float, record: CollectiveCall,
            op_names: list[str], where: Callable[[int, float, float], str] | None) -> None:
    """What the rank did on the calling thread between its previous collective (or its step's start) and this
    call: the top-level op with the most time there, and the user's line around most of that op's time there (an
    op such as ``aten::matmul`` runs in many places: its longest single call may be elsewhere)."""
    found = chain.ops.threads.get(call.thread)
    if found is None or not since < call.lo:
        return
    starts, idx, parent = found
    root = tree.root
    time_of: Counter[int] = Counter()  # op name id -> time inside the window
    spans: dict[int, list[tuple[int, float]]] = {}  # op name id -> (op, its time inside the window)
    pos = max(bisect_right(starts, since) - 1, 0)
    end = bisect_right(starts, call.lo)
    for p in range(pos, end):
        i = idx[p]
        if root[i] != i or i in call.ops or i in c.op_args:
            continue
        lo, hi = max(c.op_ts[i], since), min(c.op_ts[i] + c.op_dur[i], call.lo)
        if hi > lo:
            n = c.op_name[i]
            time_of[n] += hi - lo
            spans.setdefault(n, []).append((i, hi - lo))
    if not time_of:
        return
    n, us = time_of.most_common(1)[0]
    record.before_op, record.before_us = op_names[n], us
    if where is not None:
        at: dict[str, float] = {}
        for i, inside in spans[n]:
            line = where(call.thread, c.op_ts[i], c.op_ts[i] + c.op_dur[i])
            at[line] = at.get(line, 0.0) + inside
        record.before_line = max(at, key=lambda line: (at[line], line))


class _LabelStarts:
    """Per thread, the record_function labels (not steps, not collectives' own) in start order, built at the first
    lookup: the labels that start inside a window."""

    def __init__(self, c: Collected, label_names: list[str]) -> None:
        self.c, self.label_names = c, label_names
        self.threads: dict[int, tuple[list[float], list[int]]] | None = None

    def inside(self, thread: int, lo: float, hi: float) -> list[int]:
        if self.threads is None:
            c, names = self.c, self.label_names
            by_thread: dict[int, list[int]] = defaultdict(list)
            for j in sorted(range(len(c.lab_ts)), key=c.lab_ts.__getitem__):
                if not names[c.lab_name[j]].startswith(LABEL_PREFIXES + ("ProfilerStep#",)):
                    by_thread[c.lab_thread[j]].append(j)
            self.threads = {t: ([c.lab_ts[j] for j in js], js) for t, js in by_thread.items()}
        starts, idx = self.threads.get(thread, ([], []))
        return idx[bisect_right(starts, lo) - 1 if starts and lo in starts else bisect_right(starts, lo):
                   bisect_right(starts, hi)]


def _before_label(c: Collected, marks: _LabelStarts, call: _Call, since: float, record: CollectiveCall,
                  label_names: list[str], where: Callable[[int, float, float], str] | None) -> None:
    """The innermost label that holds more than half the window before the call, and more than the ops did (a rank
    that slept or waited outside any op, inside ``record_function("late_rank_delay")``)."""
    best, best_us = NONE, 0.0
    for j in marks.inside(call.thread, since, call.lo):  # the innermost of those that hold half the window
        us = min(c.lab_ts[j] + c.lab_dur[j], call.lo) - c.lab_ts[j]
        if us > max(record.before_us, (call.lo - since) / 2) and (best == NONE or c.lab_dur[j] < c.lab_dur[best]):
            best, best_us = j, us
    if best != NONE:
        lo = c.lab_ts[best]
        record.before_op, record.before_us = label_names[c.lab_name[best]], best_us
        record.before_line = where(call.thread, lo, lo + c.lab_dur[best]) if where is not None else ""


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _int(value: Any) -> int | None:
    return value if value.__class__ is int else None


def _group(args: dict[str, Any]) -> str:
    name = args.get("Process Group Name")
    if isinstance(name, str) and name:
        return name
    pg_id = args.get("Process Group ID")
    return str(pg_id) if pg_id.__class__ is int else ""


def _ranks(args: dict[str, Any]) -> list[int] | None:
    """The group's global ranks: ``Process Group Ranks`` ("[0, 1]" or a list), else start/stride/size."""
    value = args.get("Process Group Ranks")
    if isinstance(value, str):
        try:
            value = [int(v) for v in value.strip("[] ").split(",") if v.strip()]
        except ValueError:
            value = None
    if isinstance(value, list) and value and all(v.__class__ is int for v in value):
        return value
    start, stride, size = (_int(args.get(k)) for k in ("Global rank start", "Global rank stride", "Group size"))
    if start is not None and stride and size:
        return [start + stride * i for i in range(size)]
    return None


_DTYPE_BYTES = {"float": 4, "float32": 4, "double": 8, "float64": 8, "half": 2, "float16": 2, "bfloat16": 2,
                "c10::half": 2, "c10::bfloat16": 2, "int": 4, "int32": 4, "long": 8, "int64": 8, "short": 2,
                "int16": 2, "char": 1, "int8": 1, "byte": 1, "uint8": 1, "unsigned char": 1, "bool": 1,
                "float8_e4m3fn": 1, "float8_e5m2": 1, "complexfloat": 8, "complexdouble": 16}


def dtype_bytes(dtype: str) -> int | None:
    """Bytes per element of a dtype as kineto writes it ("Float", "BFloat16", "c10::BFloat16", "float")."""
    return _DTYPE_BYTES.get(dtype.lower().replace(" ", "")) if dtype else None


def _dtype(args: dict[str, Any]) -> str:
    """``dtype``, else the first tensor type of the recorded shapes (gloo with record_shapes=True)."""
    dtype = args.get("dtype")
    if isinstance(dtype, str):
        return dtype
    types = args.get("Input type")
    if isinstance(types, list):
        return next((t for t in types if isinstance(t, str) and dtype_bytes(t)), "")
    return ""


def _in_nelems(args: dict[str, Any]) -> int | None:
    """This rank's input elements: kineto's ``In msg nelems``, else the first tensor of the recorded shapes
    (``Input Dims``, gloo with record_shapes=True)."""
    value = args.get("In msg nelems")
    if value.__class__ is int:
        return value
    dims = args.get("Input Dims")
    if isinstance(dims, list):
        for d in dims:
            while isinstance(d, list) and d and isinstance(d[0], list):  # a TensorList: its first tensor
                d = d[0]
            if isinstance(d, list) and d and all(x.__class__ is int for x in d):
                return math.prod(d)
    return None


# -- across ranks -----------------------------------------------------------------------------------------------

@dataclass
class Instance:
    """One collective of a run: the call each participating rank made (keyed by position in ``run.ranks``)."""

    kind: str
    group: str
    key: tuple[Any, ...]  # (group, "seq", Seq) or (group, step, k)
    step: str
    calls: dict[int, CollectiveCall]
    expected: list[int]  # positions of the ranks that take part (those present in the run)
    complete: bool  # every expected rank's call is there, and each is timed


@dataclass
class Matching:
    instances: list[Instance]
    positions: list[int]  # the ranks (positions in run.ranks) whose collectives were matched
    notes: list[str]  # one line per problem


def rank_label(r: RankSummary, position: int) -> str:
    return f"rank {r.rank}" if r.rank is not None else f"{r.worker or f'file {position + 1}'}"


def match_run(ranks: list[RankSummary], damaged: Iterable[str] = ()) -> Matching:
    """Match the calls of a run's ranks (RankSummary.tables.collectives) into instances."""
    notes: list[str] = []
    present = [p for p, r in enumerate(ranks) if r.tables is not None and r.tables.collectives]
    positions = _same_run(ranks, present, notes)
    missing = _missing_ranks(ranks, positions, present, list(damaged), notes)
    by_rank_number = {ranks[p].rank: p for p in positions if ranks[p].rank is not None}
    keyed: dict[tuple[Any, ...], dict[int, CollectiveCall]] = defaultdict(dict)
    kinds: dict[tuple[Any, ...], Counter[str]] = defaultdict(Counter)
    p2p = 0
    groups: dict[str, list[int]] = defaultdict(list)  # group -> positions with calls in it
    for p in positions:
        for call in ranks[p].tables.collectives:  # type: ignore[union-attr]
            if call.kind in POINT_TO_POINT:
                p2p += 1
                continue
            if p not in groups[call.group]:
                groups[call.group].append(p)
    use_seq = {g: _seq_usable(ranks, ps, g, notes) for g, ps in groups.items()}
    for p in positions:
        ordinal: Counter[tuple[str, str]] = Counter()
        for call in ranks[p].tables.collectives:  # type: ignore[union-attr]
            if call.kind in POINT_TO_POINT:
                continue
            if use_seq[call.group]:
                key: tuple[Any, ...] = (call.group, "seq", call.seq)
            else:
                key = (call.group, call.step, ordinal[(call.group, call.step)])
                ordinal[(call.group, call.step)] += 1
            keyed[key][p] = call
            kinds[key][call.kind] += 1
    instances = []
    unmatched: Counter[int] = Counter()
    mixed = 0
    for key, calls in keyed.items():
        first = next(iter(calls.values()))
        expected = _expected(first, groups[first.group], by_rank_number)
        if len(kinds[key]) > 1:
            mixed += 1
        # a group holding a rank whose trace is missing (or of unknown members, when one is) has unknown waits
        absent = bool(missing) and (not first.ranks or any(r not in by_rank_number for r in first.ranks))
        complete = (all(p in calls for p in expected) and all(k.timed for k in calls.values()) and len(calls) > 1
                    and not absent)
        if len(calls) == 1 and len(expected) > 1:
            unmatched[next(iter(calls))] += 1
        steps = Counter(k.step for k in calls.values())
        instances.append(Instance(kind=kinds[key].most_common(1)[0][0], group=first.group, key=key,
                                  step=steps.most_common(1)[0][0], calls=calls, expected=expected,
                                  complete=complete))
    partitions = _partitions(ranks, positions)
    if len(partitions) > 1 and any(not inst.group for inst in instances):
        instances = _split_by_group(instances, partitions, ranks, positions, missing)
    instances.sort(key=lambda inst: min(k.arrival_us for k in inst.calls.values()))
    for p, count in sorted(unmatched.items()):
        notes.append(f"{rank_label(ranks[p], p)}: {count} collective{'s' if count != 1 else ''} without a peer "
                     "(a rank hung, or its capture ended or began elsewhere): no waits for them")
    if mixed:
        notes.append(f"{mixed} matched collective{'s' if mixed != 1 else ''} differ in kind across ranks (the "
                     "ranks called collectives in another order): their waits are suspect")
    if p2p:
        notes.append(f"{p2p} point-to-point call{'s' if p2p != 1 else ''} (send/recv) counted as communication, "
                     "not matched across ranks")
    return Matching(instances=instances, positions=positions, notes=notes)


def _expected(call: CollectiveCall, with_calls: list[int], by_rank_number: dict[int | None, int]) -> list[int]:
    """The positions of the ranks that take part: the group's recorded ranks that are in the run, else every rank
    with calls in this group."""
    if call.ranks:
        found = [by_rank_number[r] for r in call.ranks if r in by_rank_number]
        if found:
            return found
    return list(with_calls)


def _seq_usable(ranks: list[RankSummary], positions: list[int], group: str, notes: list[str]) -> bool:
    """Whether every call of the group on every rank has a sequence number that only grows."""
    for p in positions:
        last = None
        for call in ranks[p].tables.collectives:  # type: ignore[union-attr]
            if call.group != group or call.kind in POINT_TO_POINT:
                continue
            if call.seq is None:
                return False
            if last is not None and call.seq <= last:
                notes.append(f"{rank_label(ranks[p], p)}: group {group or '?'}'s sequence numbers restart "
                             f"({last} then {call.seq}: a new group of the same name?): matched by order instead")
                return False
            last = call.seq
    return True


def _same_run(ranks: list[RankSummary], present: list[int], notes: list[str]) -> list[int]:
    """The ranks that belong together: their captures overlap in time and agree on the world size. The largest
    such set is kept; every other rank is said in one line."""
    if len(present) < 2:
        return present
    worlds = Counter(ranks[p].world_size for p in present)
    world = worlds.most_common(1)[0][0]
    kept = []
    for p in present:
        if ranks[p].world_size != world:
            notes.append(f"{rank_label(ranks[p], p)}: world size {ranks[p].world_size}, the others' {world}: "
                         "another run's file? its collectives are not matched")
        else:
            kept.append(p)
    spans = {p: _span(ranks[p]) for p in kept}
    overlapping = max(kept, key=lambda p: sum(_overlaps(spans[p], spans[q]) for q in kept))
    out = []
    for p in kept:
        if p == overlapping or _overlaps(spans[p], spans[overlapping]):
            out.append(p)
        else:
            notes.append(f"{rank_label(ranks[p], p)}: its capture does not overlap "
                         f"{rank_label(ranks[overlapping], overlapping)}'s in time: another run's file? its "
                         "collectives are not matched")
    return out


def _span(r: RankSummary) -> tuple[float, float]:
    lo = r.trace_start_us or 0.0
    return lo, lo + r.trace_span_us


def _overlaps(a: tuple[float, float], b: tuple[float, float]) -> bool:
    return a[0] < b[1] and b[0] < a[1]


def _missing_ranks(ranks: list[RankSummary], positions: list[int], present: list[int], damaged: list[str],
                   notes: list[str]) -> list[int]:
    """The ranks of the world that have no trace here (or a damaged one), said in one line (a rank of another
    run, said apart, is not missing)."""
    if not positions:
        return []
    world = ranks[positions[0]].world_size
    have = {ranks[p].rank for p in present}
    if world is None or None in have or len(have) >= world:
        return []
    missing = [r for r in range(world) if r not in have]
    shown = ", ".join(map(str, missing[:8])) + (", ..." if len(missing) > 8 else "")
    why = f"; {len(damaged)} damaged file{'s' if len(damaged) != 1 else ''} ({', '.join(damaged)})" if damaged else ""
    notes.append(f"rank{'s' if len(missing) != 1 else ''} {shown} of {world}: no trace in this run{why}; "
                 "collectives they (may) take part in are incomplete: no waits for them")
    return missing


# -- gloo's sub-groups -------------------------------------------------------------------------------------------

Partition = list[frozenset[int]]  # a way the run's ranks split into groups: one process-group description's groups


def _partitions(ranks: list[RankSummary], positions: list[int]) -> dict[str, Partition]:
    """The ways the ranks split by their process groups (``distributedInfo.pg_config``: a description every rank
    has, "mesh_seq_p", with each rank's group of it), the world among them: a gloo trace does not say which group
    a collective was on, only which groups each rank is in."""
    groups_of: dict[int, dict[str, list[int]]] = {}
    for p in positions:
        r, tables = ranks[p].rank, ranks[p].tables
        if r is None or tables is None or not tables.process_groups:
            return {}
        groups_of[r] = tables.process_groups
    found: dict[str, Partition] = {}
    for desc in sorted(set.intersection(*(set(g) for g in groups_of.values()))):
        part = {frozenset(g[desc]) for g in groups_of.values()}
        members = [r for g in part for r in g]
        # a partition: disjoint groups, each rank in the one it names
        if len(members) == len(set(members)) and all(r in g[desc] for r, g in groups_of.items()):
            found[desc] = sorted(part, key=min)
    if not any(len(part) == 1 for part in found.values()):
        found["(world)"] = [frozenset(groups_of)]
    return found


def _split_by_group(instances: list[Instance], partitions: dict[str, Partition], ranks: list[RankSummary],
                    positions: list[int], missing: list[int]) -> list[Instance]:
    """Each collective matched by its place in the step on every rank (the same line of the same program), split
    into the groups of the partition that fits its times best at that place over all steps: the one whose groups
    each end together, right after their own last arrival. Score of a group: its ends' spread plus how long after
    its last arrival its first end comes (a group split too fine waited for ranks outside it; one too coarse holds
    groups that ended apart); of a split, its groups' mean. Places whose work ran on the same backend threads take
    one split together (``_same_threads``). Ties (ranks in lock-step at every step) go to the finer split: their
    waits are alike."""
    position = {ranks[p].rank: p for p in positions}
    score: dict[int, dict[str, float]] = defaultdict(lambda: defaultdict(float))  # place -> partition -> score
    for inst in instances:
        if inst.group or len(inst.key) != 3:
            continue
        for desc, part in partitions.items():
            score[inst.key[2]][desc] += sum(_fit(inst, [position[r] for r in g if r in position])
                                            for g in part) / len(part)
    chosen: dict[int, str] = {}
    for places in _same_threads(instances):  # places whose work ran on one group's threads: one group
        total = {desc: sum(score[place][desc] for place in places) for desc in partitions}
        desc = min(total, key=lambda d: (total[d], len(partitions[d]) == 1, d))
        chosen.update(dict.fromkeys(places, desc))
    out = []
    for inst in instances:
        desc = chosen.get(inst.key[2], "") if not inst.group and len(inst.key) == 3 else ""
        if not desc:
            out.append(inst)
            continue
        for g in partitions[desc]:
            calls = {position[r]: inst.calls[position[r]] for r in g if r in position and position[r] in inst.calls}
            if not calls:
                continue
            name = desc if len(partitions[desc]) == 1 else f"{desc} {sorted(g)}"
            for call in calls.values():
                call.group = name
            absent = any(r not in position for r in g) or bool(missing and desc == "(world)")
            expected = [position[r] for r in g if r in position]
            out.append(Instance(kind=inst.kind, group=name, key=(name, *inst.key[1:]), step=inst.step, calls=calls,
                                expected=expected,
                                complete=(len(calls) > 1 and all(p in calls for p in expected) and not absent
                                          and all(k.timed for k in calls.values()))))
    return out


def _same_threads(instances: list[Instance]) -> list[list[int]]:
    """The places in the step (unsplit instances' ordinals) grouped by the backend threads their work ran on, on any
    rank: gloo runs each group's work on the group's own threads, so places that share a thread share a group."""
    parent: dict[int, int] = {}

    def root(x: int) -> int:
        while parent.setdefault(x, x) != x:
            x = parent[x]
        return x

    owner: dict[tuple[int, int], int] = {}  # (position, thread) -> a place that ran there
    for inst in instances:
        if inst.group or len(inst.key) != 3:
            continue
        place = inst.key[2]
        root(place)
        for p, call in inst.calls.items():
            if call.backend_thread != -1:
                other = owner.setdefault((p, call.backend_thread), place)
                parent[root(place)] = root(other)
    clusters: dict[int, list[int]] = defaultdict(list)
    for place in list(parent):
        clusters[root(place)].append(place)
    return list(clusters.values())


def _fit(inst: Instance, members: list[int]) -> float:
    calls = [inst.calls[p] for p in members if p in inst.calls]
    if len(calls) < 2:
        return 0.0
    ends = [k.end_us for k in calls]
    last = max(k.arrival_us for k in calls)
    return max(ends) - min(ends) + max(0.0, min(ends) - last)
