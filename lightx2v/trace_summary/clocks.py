"""The ranks' clocks against each other, from the collectives they share: every rank leaves an all-reduce,
all-gather, reduce-scatter, all-to-all or barrier together, so the differences of its ends are the clocks'.

    clocks = clock_offsets(ranks, matching)    # Clocks: offset per position in run.ranks, the rows, notes

Each rank's traces carry its own host's clock (kineto: the system clock; GPU times converted to it). Ranks on one
host share it, ranks on different hosts differ by up to hundreds of µs (meta-pytorch/attention-gym #487 aligns them
by hand on collective ends). The first rank is the reference; another rank's offset is the median of (its end - the
reference's end) over the complete symmetric collectives both took part in (through a rank that shares some with
both, where it shares none with the reference: the one it shares most with); its spread is the largest distance of
one of those differences from the offset. The ends are not exactly together (the rank that arrived last still has
its transfer to finish; on a busy CPU, gloo's threads get the cores late), so an offset within its spread cannot be
told from none: the clocks agree as far as the trace can tell, and none is applied. An offset beyond its spread
means the clocks really disagree (from MIN_COLLECTIVES ends on): a note says so, and subtracting it puts the rank's
times on the reference's clock for the waits (``comm_waits``) and the merged timeline.
"""

from __future__ import annotations

from dataclasses import dataclass
from statistics import median

from .comm import SYMMETRIC, Matching, rank_label
from .model import ClockOffset, RankSummary

MIN_COLLECTIVES = 3  # ends an offset is applied from at least (fewer: their spread says little)


@dataclass
class Clocks:
    offset: dict[int, float]  # position in run.ranks -> µs to subtract from its timestamps (applied ones only)
    rows: list[ClockOffset]
    notes: list[str]


def clock_offsets(ranks: list[RankSummary], matching: Matching) -> Clocks:
    positions = matching.positions
    shared = [inst for inst in matching.instances if inst.complete and inst.kind in SYMMETRIC]
    offset: dict[int, float] = {}
    rows: dict[int, ClockOffset] = {}
    if not positions:
        return Clocks(offset={}, rows=[], notes=[])
    ref = positions[0]
    offset[ref] = 0.0
    rows[ref] = ClockOffset(rank=ranks[ref].rank, worker=ranks[ref].worker, offset_us=0.0, spread_us=0.0,
                            collectives=len([i for i in shared if ref in i.calls]))
    pending = [p for p in positions if p != ref]
    while pending:
        # the pair (a rank placed, one not yet) sharing the most collectives: the most ends to estimate from
        best: tuple[int, int, list[float]] | None = None
        for p in pending:
            for q in offset:
                diffs = [inst.calls[p].end_us - inst.calls[q].end_us for inst in shared
                         if p in inst.calls and q in inst.calls]
                if diffs and (best is None or len(diffs) > len(best[2])):
                    best = (p, q, diffs)
        if best is None:
            break
        p, q, diffs = best
        mid = median(diffs)
        offset[p] = offset[q] + mid
        rows[p] = ClockOffset(rank=ranks[p].rank, worker=ranks[p].worker, offset_us=offset[p],
                              spread_us=max(abs(d - mid) for d in diffs), collectives=len(diffs))
        pending.remove(p)
    notes = []
    for p in pending:  # shares no collective with any rank placed so far
        offset[p] = 0.0
        rows[p] = ClockOffset(rank=ranks[p].rank, worker=ranks[p].worker, offset_us=0.0, spread_us=0.0,
                              collectives=0)
        notes.append(f"clocks: {rank_label(ranks[p], p)} shares no complete collective with the others: its clock "
                     "is taken as theirs")
    for p in positions:
        row = rows[p]
        row.applied = p != ref and row.collectives >= MIN_COLLECTIVES and abs(row.offset_us) > row.spread_us
        if row.applied:
            ahead = "ahead of" if row.offset_us > 0 else "behind"
            notes.append(f"clocks: {rank_label(ranks[p], p)}'s clock is {abs(row.offset_us) / 1000:.3f} ms {ahead} "
                         f"{rank_label(ranks[ref], ref)}'s (±{row.spread_us / 1000:.3f} ms over {row.collectives} "
                         "collectives' ends): its times are corrected")
    return Clocks(offset={p: rows[p].offset_us for p in positions if rows[p].applied},
                  rows=[rows[p] for p in positions], notes=notes)
