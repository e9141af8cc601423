"""A run's communication across its ranks: the thin front over ``comm`` (matching), ``clocks``, ``comm_waits``
and ``bandwidth``.

    section = run_comm(ranks, damaged=[...])    # model.RunComm; None unless two ranks or more have collectives

The top collectives group the matched collectives by kind, process group and call site (the site of the most
ranks' calls): per step and rank (means), their exposed time (``exposed``), wait and transfer (``comm_waits``),
and their bandwidth against the link (``bandwidth``), most exposed time first.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable
from statistics import median

from .bandwidth import bus_factor, could_win, link_for, message_bytes
from .clocks import clock_offsets
from .comm import Instance, Matching, match_run
from .comm_waits import Waited, instance_waits, step_waits, wait_pairs
from .efficiency import TARGET_PCT
from .model import CollectiveStat, RankSummary, RunComm


def run_comm(ranks: list[RankSummary], damaged: Iterable[str] = (), top: int = 10,
             target_pct: float = TARGET_PCT) -> RunComm | None:
    if sum(1 for r in ranks if r.tables is not None and r.tables.collectives) < 2:
        return None
    matching = match_run(ranks, damaged)
    if len(matching.positions) < 2:  # the others are another run's: only the notes say something
        return RunComm(ranks=len(matching.positions), on_gpu=False, collectives=0, complete=0, clocks=[], steps=[],
                       pairs=[], top=[], notes=matching.notes)
    clocks = clock_offsets(ranks, matching)
    waited = instance_waits(matching, clocks.offset)
    steps = step_waits(ranks, matching.positions, waited)
    n_steps = max(len(steps), 1)
    on_gpu = any(ranks[p].communication is not None and ranks[p].communication.on_gpu  # type: ignore[union-attr]
                 for p in matching.positions)
    return RunComm(ranks=len(matching.positions), on_gpu=on_gpu, collectives=len(matching.instances),
                   complete=len(waited), clocks=clocks.rows, steps=steps,
                   pairs=wait_pairs(ranks, waited, n_steps),
                   top=_top(ranks, matching.positions, matching, waited, n_steps, target_pct)[:top],
                   notes=matching.notes + clocks.notes)


def _top(ranks: list[RankSummary], positions: list[int], matching: Matching, waited: list[Waited], steps: int,
         target_pct: float) -> list[CollectiveStat]:
    """Per (kind, group, call site): exposed time of every matched collective; wait, transfer and bandwidth of
    the complete ones (None where none is)."""
    waits = {id(w.instance): w for w in waited}
    groups: dict[tuple[str, str, str], list[Instance]] = defaultdict(list)
    for inst in matching.instances:
        sites = Counter(k.site for k in inst.calls.values())
        groups[(inst.kind, inst.group, sites.most_common(1)[0][0])].append(inst)
    device = next((d.name for p in positions for d in ranks[p].devices), "")
    link = link_for(device) if any(r.communication and r.communication.on_gpu for r in ranks) else None
    out = []
    per = steps * len(positions)
    for (kind, group, site), insts in groups.items():
        exposed = sum(k.exposed_us for inst in insts for k in inst.calls.values()) / per
        ws = [waits[id(inst)] for inst in insts if id(inst) in waits]
        wait = sum(d for w in ws for d in w.wait.values()) / per if ws else None
        transfer = sum(d for w in ws for d in w.transfer.values()) / per if ws else None
        first = next(iter(insts[0].calls.values()))
        size = len(first.ranks) if first.ranks else len(insts[0].expected)
        nbytes = message_bytes(kind, first.in_nelems, first.out_nelems, first.dtype, size)
        factor = bus_factor(kind, size)
        typical = median(median(w.transfer.values()) for w in ws) if ws else 0.0  # one collective's transfer
        algbw = nbytes / typical / 1000 if nbytes and typical > 0 else None  # bytes/µs = MB/s; /1000: GB/s
        busbw = algbw * factor if algbw is not None and factor is not None else None
        win = could_win(transfer, busbw, link.gbps, target_pct) if link and busbw is not None and transfer else None
        out.append(CollectiveStat(kind=kind, group=group, site=site, instances=len(insts), exposed_us=exposed,
                                  wait_us=wait, transfer_us=transfer, bytes=nbytes, algbw_gbps=algbw,
                                  busbw_gbps=busbw, link=link.name if link else "",
                                  link_gbps=link.gbps if link else None,
                                  link_pct=100 * busbw / link.gbps if link and busbw is not None else None,
                                  could_win_us=win))
    return sorted(out, key=lambda s: -s.exposed_us)
