"""Who waited for whom: at every collective matched across the ranks, each rank's wait for the last one to
arrive, the transfer after it, and per step the rank the others waited for, with what it was doing.

    waited = instance_waits(matching, clocks.offset)          # one Waited per complete collective
    steps = step_waits(ranks, matching.positions, waited)     # model.StepWaits per step
    pairs = wait_pairs(ranks, waited, steps)                  # model.WaitPair, most waiting first

On each rank's clock put on the first rank's (``clocks``): a rank arrives at a collective when its side begins
(``CollectiveCall.arrival_us``: the NCCL kernel's start, the gloo call); the last rank to arrive is the one
the others waited for; a rank's wait is the last arrival less its own, its transfer the rest of its time in the
collective (its end less the last arrival). A collective missing on some rank (``Instance.complete`` False) has no
waits. Broadcast and reduce wait for their root only: counted the same way, their waits are an upper bound.

In a step, the late rank is the one whose late arrivals made the others wait the most (their mean wait, summed over
the step's collectives; the collective, its site and what the rank did before are those of the first collective
where it made them wait at least half its worst: where its lateness began); it is named when that is at least
LATE_MIN_US and LATE_SHARE of the run's median step wall time: below that the ranks are in step (the jitter of a
step is relative to how long a step usually takes, and a rank that left the previous collective late, having still
its transfer to finish, arrives late at the next). The run's straggler is the rank named late in the most steps: by
the waits it caused, not by its wall time (with collectives every rank's step lasts as long as the slowest's).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from .comm import Instance, Matching
from .model import RankStepWaits, RankSummary, StepWaits, Straggler, WaitPair
from .ratios import percent

LATE_MIN_US = 1000.0
LATE_SHARE = 0.25


@dataclass
class Waited:
    instance: Instance
    last: int  # the position that arrived last
    last_arrival_us: float  # on the reference clock
    wait: dict[int, float]  # position -> its wait
    transfer: dict[int, float]  # position -> its time after the last arrival


def instance_waits(matching: Matching, offset: dict[int, float]) -> list[Waited]:
    out = []
    for inst in matching.instances:
        if not inst.complete:
            continue
        arrival = {p: k.arrival_us - offset.get(p, 0.0) for p, k in inst.calls.items()}
        last = max(arrival, key=arrival.__getitem__)
        at = arrival[last]
        out.append(Waited(instance=inst, last=last, last_arrival_us=at,
                          wait={p: at - a for p, a in arrival.items()},
                          transfer={p: max(0.0, k.end_us - offset.get(p, 0.0) - at) for p, k in inst.calls.items()}))
    return out


def step_waits(ranks: list[RankSummary], positions: list[int], waited: list[Waited]) -> list[StepWaits]:
    """Per step of the run (the steps of its ranks, by name, in order): each rank's figures and the late rank."""
    names: list[str] = []
    for p in positions:
        for s in ranks[p].steps:
            if s.name not in names:
                names.append(s.name)
    walls = sorted(s.wall_us for p in positions for s in ranks[p].steps)
    floor = max(LATE_MIN_US, LATE_SHARE * walls[len(walls) // 2]) if walls else LATE_MIN_US
    by_step: dict[str, list[Waited]] = defaultdict(list)
    for w in waited:
        by_step[w.instance.step].append(w)
    out = []
    for name in names:
        here = by_step.get(name, [])
        wait: dict[int, float] = defaultdict(float)
        transfer: dict[int, float] = defaultdict(float)
        caused: dict[int, float] = defaultdict(float)
        caused_at: dict[int, list[Waited]] = defaultdict(list)
        for w in here:
            caused[w.last] += _mean_wait(w)
            caused_at[w.last].append(w)
            for p, d in w.wait.items():
                wait[p] += d
                transfer[p] += w.transfer[p]
        rows = []
        for p in positions:
            r = ranks[p]
            comm = next((s for s in r.communication.steps if s.step == name), None) if r.communication else None
            wall = next((s.wall_us for s in r.steps if s.name == name), None)
            rows.append(RankStepWaits(
                rank=r.rank, worker=r.worker, comm_us=comm.comm_us if comm else 0.0,
                exposed_us=comm.exposed_us if comm else 0.0,
                exposed_pct=percent(comm.exposed_us, wall) if comm and wall else None,
                waited_us=wait[p], transfer_us=transfer[p], caused_us=caused[p]))
        step = StepWaits(step=name, ranks=rows, late_rank=None, late_worker="", late_wait_us=0.0, collective="",
                         site="", collective_wait_us=0.0, doing="", doing_us=0.0, doing_line="")
        if caused:
            late = max(caused, key=caused.__getitem__)
            if caused[late] >= floor:
                w = _origin(caused_at[late])
                call = w.instance.calls[late]
                step.late_rank, step.late_worker, step.late_wait_us = ranks[late].rank, ranks[late].worker, caused[late]
                step.collective, step.site, step.collective_wait_us = w.instance.kind, call.site, _mean_wait(w)
                step.doing, step.doing_us, step.doing_line = call.before_op, call.before_us, call.before_line
        out.append(step)
    return out


def _origin(waited: list[Waited]) -> Waited:
    """Where a late rank's lateness in a step began: the first collective at which it made the others wait at
    least half as long as at its worst (a rank late at one collective is late at the next ones of the step too,
    and the others' waits there are its first delay carried on)."""
    worst = max(map(_mean_wait, waited))
    return min((w for w in waited if _mean_wait(w) >= worst / 2), key=lambda w: w.last_arrival_us)


def _mean_wait(w: Waited) -> float:
    others = [d for p, d in w.wait.items() if p != w.last]
    return sum(others) / len(others) if others else 0.0


def wait_pairs(ranks: list[RankSummary], waited: list[Waited], steps: int) -> list[WaitPair]:
    """Each (waiter, late) pair's wait per step, most first (pairs under a µs per step are left out)."""
    total: dict[tuple[int, int], float] = defaultdict(float)
    in_steps: dict[tuple[int, int], set[str]] = defaultdict(set)
    for w in waited:
        for p, d in w.wait.items():
            if p != w.last and d > 0:
                total[(p, w.last)] += d
                in_steps[(p, w.last)].add(w.instance.step)
    n = max(steps, 1)
    out = [WaitPair(waiter=ranks[p].rank, waiter_worker=ranks[p].worker, late=ranks[q].rank,
                    late_worker=ranks[q].worker, wait_us=us / n, steps=len(in_steps[(p, q)]))
           for (p, q), us in total.items() if us / n >= 1.0]
    return sorted(out, key=lambda pair: -pair.wait_us)


def straggler_by_waits(ranks: list[RankSummary], steps: list[StepWaits], fallback: Straggler | None
                       ) -> Straggler | None:
    """The rank named late in the most steps (ties: the most waiting caused); ``fallback`` when no step names
    one (the ranks ran in step)."""
    named: dict[int | None, list[float]] = defaultdict(list)
    workers: dict[int | None, str] = {}
    for s in steps:
        if s.late_worker:
            named[s.late_rank].append(s.late_wait_us)
            workers[s.late_rank] = s.late_worker
    if not named:
        return fallback
    rank = max(named, key=lambda r: (len(named[r]), sum(named[r])))
    r = next(x for x in ranks if x.rank == rank and x.worker == workers[rank])
    n = len(r.steps) or 1
    wall = sum(s.wall_us for s in r.steps) / n
    walls = [sum(s.wall_us for s in x.steps) / (len(x.steps) or 1) for x in ranks]
    fastest = min(walls) if walls else wall
    spread = (max(walls) - fastest) / fastest if fastest > 0 and walls else 0.0
    return Straggler(rank=rank, worker=workers[rank], criterion="waits_caused", step_wall_us=wall,
                     slower_than_fastest_pct=100 * (wall - fastest) / fastest if fastest > 0 else 0.0,
                     spread_pct=100 * spread, waits_caused_us=sum(named[rank]) / max(len(steps), 1))
