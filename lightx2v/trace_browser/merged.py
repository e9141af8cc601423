"""One step of a run with every rank on one clock, as one Chrome trace for Perfetto UI: the same collective linked
across the ranks.

    data = merged_step(run, index_of, "ProfilerStep#2")    # bytes: {"traceEvents": [...], "lightx2v_merged": {...}}

Each rank's window of that step (``window.step_window``, by the step's name in the rank's index) is taken whole:
its processes renumbered per rank (rank R's are ``(R+1)*10000 + i``, named ``rank R · <its name>`` and sorted by
rank), its flow arrows' ids moved apart per rank, and its times moved onto the first rank's clock by the offset
the summary applied (``trace_summary.clocks``; none when the clocks agree within their spread). Under each rank a
``rank R · collectives`` process holds one slice per matched collective of the step (its arrival to its end, with
its wait, transfer, group and call site), and a flow arrow goes from the last rank to arrive to every rank that
waited for it, at the moment it arrived (a viewer draws no arrow that goes back in time). ``lightx2v_merged`` in
the file says which ranks, which offsets, and which ranks lack the step.

    index = run_steps(run, index_of)                       # the run's Timeline: the steps every rank has

``run_steps`` lists the steps every rank has, each with its times on the same clock as the merged file's (the
earliest start and the latest end over the ranks, after their offsets), so the run's Timeline
(``timeline.render_timeline(..., run=True)``) opens a merged step zoomed to it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from lightx2v.trace_summary.clocks import clock_offsets
from lightx2v.trace_summary.comm import match_run
from lightx2v.trace_summary.comm_waits import instance_waits
from lightx2v.trace_summary.model import RankSummary, RunSummary

from .step_index import StepIndex
from .window import step_window

PIDS_PER_RANK = 10_000
COLLECTIVES_PID = PIDS_PER_RANK - 1  # the rank's collectives process, last of its pids
FLOW_IDS_PER_RANK = 10**12  # correlation ids stay below this: each rank's flow ids are moved by a multiple of it


def merged_step(run: RunSummary, index_of: Callable[[str], StepIndex], step: str, frames: bool = False) -> bytes:
    """The merged file (with each rank's Python frames when ``frames``); ValueError when no rank has the step."""
    offsets = _offsets(run)
    events: list[dict[str, Any]] = []
    missing, ranks = [], []
    for p, r in enumerate(run.ranks):
        index = index_of(r.file)
        k = next((i for i, s in enumerate(index.steps) if s.name == step), None)
        who = _who(r)
        if k is None:
            missing.append(who)
            continue
        ranks.append(who)
        window = json.loads(step_window(r.file, index, k, frames))
        events += _moved(window.get("traceEvents", []), p, who, offsets.get(p, 0.0))
    if not ranks:
        raise ValueError(f"no rank of the run has a step named {step!r}")
    events += _collectives(run, step, offsets)
    meta = {"step": step, "ranks": ranks, "missing": missing,
            "offsets_us": {_who(run.ranks[p]): us for p, us in offsets.items()}}
    return json.dumps({"traceEvents": events, "displayTimeUnit": "ms", "lightx2v_merged": meta},
                      separators=(",", ":")).encode()


def run_steps(run: RunSummary, index_of: Callable[[str], StepIndex]) -> dict[str, Any]:
    """The run's Timeline index: ``steps``, those every rank has, in the first rank's order, as the single-trace
    index has them (``name``, ``lo``, ``hi``, ``end``, ``gpu_events``) but on the merged file's clock: the first
    rank's, each rank's times less its applied offset; ``lo`` the earliest start over the ranks, ``hi`` and
    ``end`` the latest. ``left_out``: the steps some rank lacks, with who lacks them. ``span`` the steps' [lo,
    end] ([] without steps). A rank whose index cannot be built raises (TraceError), as ``merged_step`` does."""
    offsets = _offsets(run)
    indexes = [index_of(r.file) for r in run.ranks]
    names = [[s.name for s in index.steps] for index in indexes]
    steps: list[dict[str, Any]] = []
    left_out: list[dict[str, Any]] = []
    for name in dict.fromkeys(n for ns in names for n in ns):  # every step name once, in order of appearance
        lacking = [_who(r) for r, ns in zip(run.ranks, names, strict=True) if name not in ns]
        if lacking:
            left_out.append({"name": name, "missing": lacking})
            continue
        windows = [(next(s for s in index.steps if s.name == name), offsets.get(p, 0.0))
                   for p, index in enumerate(indexes)]
        steps.append({"name": name, "lo": min(s.lo - off for s, off in windows),
                      "hi": max(s.hi - off for s, off in windows), "end": max(s.end - off for s, off in windows),
                      "gpu_events": sum(s.gpu_events for s, _ in windows)})
    return {"run": run.label, "ranks": [_who(r) for r in run.ranks],
            "offsets_us": {_who(run.ranks[p]): us for p, us in offsets.items()}, "steps": steps,
            "left_out": left_out, "span": [min(s["lo"] for s in steps), max(s["end"] for s in steps)] if steps else []}


def _who(r: RankSummary) -> str:
    return f"rank {r.rank}" if r.rank is not None else r.worker


def _offsets(run: RunSummary) -> dict[int, float]:
    """Per position in run.ranks, the µs its times are moved by: the clock offsets the summary applied."""
    c = run.communication
    if c is None:
        return {}
    applied = {(x.rank, x.worker): x.offset_us for x in c.clocks if x.applied}
    return {p: applied[(r.rank, r.worker)] for p, r in enumerate(run.ranks) if (r.rank, r.worker) in applied}


def _moved(events: list[dict[str, Any]], p: int, who: str, offset: float) -> list[dict[str, Any]]:
    pids: dict[Any, int] = {}
    named: set[int] = set()
    out = []
    for e in events:
        pid = pids.setdefault(e.get("pid"), (p + 1) * PIDS_PER_RANK + len(pids))
        e["pid"] = pid
        if isinstance(e.get("ts"), (int, float)) and not isinstance(e.get("ts"), bool):
            e["ts"] = e["ts"] - offset
        if e.get("ph") in ("s", "t", "f") and isinstance(e.get("id"), int):
            e["id"] = e["id"] + (p + 1) * FLOW_IDS_PER_RANK
        args = e.get("args")
        if e.get("ph") == "M" and isinstance(args, dict):
            if e.get("name") == "process_name":
                args["name"] = f"{who} · {args.get('name', '')}"
                named.add(pid)
            elif e.get("name") == "process_sort_index":
                args["sort_index"] = pid
        out.append(e)
    for orig, pid in pids.items():
        if pid not in named:
            out.append({"ph": "M", "name": "process_name", "pid": pid, "args": {"name": f"{who} · {orig}"}})
    return out


def _collectives(run: RunSummary, step: str, offsets: dict[int, float]) -> list[dict[str, Any]]:
    """Each rank's collectives of the step as slices, and an arrow from the last rank to arrive to every waiter."""
    if run.communication is None:
        return []
    matching = match_run(run.ranks)
    waited = {id(w.instance): w for w in instance_waits(matching, clock_offsets(run.ranks, matching).offset)}
    out: list[dict[str, Any]] = []
    for p, r in enumerate(run.ranks):
        who = _who(r)
        pid = (p + 1) * PIDS_PER_RANK + COLLECTIVES_PID
        out += [{"ph": "M", "name": "process_name", "pid": pid, "args": {"name": f"{who} · collectives"}},
                {"ph": "M", "name": "process_sort_index", "pid": pid, "args": {"sort_index": pid}}]
    flow = 0
    for inst in matching.instances:
        if inst.step != step:
            continue
        w = waited.get(id(inst))
        for p, call in inst.calls.items():
            lo = call.arrival_us - offsets.get(p, 0.0)
            args: dict[str, Any] = {"group": inst.group or "(one group)", "site": call.site}
            if w is not None:
                args.update(wait_ms=round(w.wait[p] / 1000, 3), transfer_ms=round(w.transfer[p] / 1000, 3),
                            last_to_arrive=_who(run.ranks[w.last]))
            out.append({"ph": "X", "cat": "collective", "name": inst.kind, "pid": (p + 1) * PIDS_PER_RANK
                        + COLLECTIVES_PID, "tid": 0, "ts": lo, "dur": max(call.end_us - call.arrival_us, 0.001),
                        "args": args})
        if w is None:
            continue
        # When the last rank arrives, an arrow from its slice to each slice still waiting for it. Both ends at that
        # moment: viewers (Chromium's, Perfetto) drop an arrow whose end is earlier than its start, as one to the
        # waiter's own arrival would be.
        released = inst.calls[w.last].arrival_us - offsets.get(w.last, 0.0)
        for p in inst.calls:
            if p == w.last or w.wait[p] <= 0:
                continue
            flow += 1
            common = {"cat": "collective", "name": f"{inst.kind}: waited for", "id": flow, "tid": 0, "ts": released}
            out.append({**common, "ph": "s", "pid": (w.last + 1) * PIDS_PER_RANK + COLLECTIVES_PID})
            out.append({**common, "ph": "f", "bp": "e", "pid": (p + 1) * PIDS_PER_RANK + COLLECTIVES_PID})
    return out
