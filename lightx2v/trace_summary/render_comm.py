"""The text of the communication answers: a rank's section (``exposed``) and a run's (``run_comm``): exposed
communication per step, who waited for whom and for what, the top collectives with their bandwidth. Per step;
the collective and its call site are the last column and never cut."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

from .comm_waits import LATE_MIN_US, LATE_SHARE
from .model import CommStep, RankComm, RunComm, StepWaits
from .units import format_bytes

MAX_STEP_ROWS = 12  # as the summary's step tables: past it the first steps and the last two
T = TypeVar("T")


def _ms(us: float | None) -> str:
    return "-" if us is None else f"{us / 1000:.3f}"


def _pct(pct: float | None) -> str:
    return "-" if pct is None else f"{pct:.1f}"


def _who(rank: int | None, worker: str) -> str:
    return f"rank {rank}" if rank is not None else worker


def _rows(items: Sequence[T], row: Callable[[T], str]) -> list[str]:
    if len(items) <= MAX_STEP_ROWS:
        return [row(x) for x in items]
    return [*map(row, items[:MAX_STEP_ROWS - 2]), f"  ... {len(items) - MAX_STEP_ROWS} more steps ...",
            *map(row, items[-2:])]


def rank_comm_lines(c: RankComm | None) -> list[str]:
    """A rank's section: its communication, what compute hid of it, per step."""
    if c is None:
        return []
    how = ("communication kernels against compute kernels (HTA's definition)" if c.on_gpu
           else "the collectives' walls on the calling thread against the other ops (a CPU-only trace)")
    kinds = ", ".join(f"{k} x{n}" for k, n in sorted(c.kinds.items(), key=lambda kv: -kv[1]))
    lines = ["", f"Communication: {c.calls} collective{'s' if c.calls != 1 else ''}"
                 + (f" ({kinds})" if kinds else "") + f"; {how}",
             f"  whole trace: {_ms(c.comm_us)} ms, exposed {_ms(c.exposed_us)} ms, overlapped by compute "
             f"{_pct(c.overlap_pct)}%"]
    if c.steps:
        lines.append(f"  {'step':<20} {'wall ms':>10} {'comm ms':>10} {'exposed ms':>11} {'% of step':>9} "
                     f"{'overlap %':>9} {'compute ms':>11} {'idle ms':>9} {'calls':>6}")
        lines += _rows(c.steps, _rank_step)
    return lines


def _rank_step(s: CommStep) -> str:
    share = 100 * s.exposed_us / s.wall_us if s.wall_us > 0 else None
    return (f"  {s.step[:20]:<20} {_ms(s.wall_us):>10} {_ms(s.comm_us):>10} {_ms(s.exposed_us):>11} "
            f"{_pct(share):>9} {_pct(s.overlap_pct):>9} {_ms(s.compute_us):>11} {_ms(s.idle_us):>9} {s.calls:>6}")


def run_comm_lines(c: RunComm | None) -> list[str]:
    """A run's section: per step exposed communication and the late rank, who waited for whom, the top
    collectives, the notes."""
    if c is None:
        return []
    notes = [f"  note      {note}" for note in c.notes]
    if not c.collectives:
        return ["", "Communication across ranks: no collectives matched", *notes]
    where = "NCCL kernels" if c.on_gpu else "gloo on CPU: the collectives' walls"
    lines = ["", f"Communication across {c.ranks} ranks ({where}): {c.collectives} collectives matched, "
                 f"{c.complete} with every rank's call (their waits are known)"]
    applied = [x for x in c.clocks if x.applied]
    spread = max((x.spread_us for x in c.clocks), default=0.0)
    if not c.complete:
        lines.append("  clocks    not compared: no collective has every rank's call")
    elif not applied:
        lines.append(f"  clocks    agree within the collectives' end spread (±{_ms(spread)} ms): no correction")
    lines += notes
    if c.steps:
        lines += [f"  {'step':<20} {'exposed ms':>11} {'% of step':>9} {'waited ms':>10}  late rank (the others' "
                  "mean wait for it; named from "
                  f"{_ms(LATE_MIN_US)} ms and {100 * LATE_SHARE:.0f}% of the median step)"]
        lines += _rows(c.steps, lambda s: _run_step(s, c.complete > 0))
    if c.pairs:
        lines.append("  who waited for whom (ms per step): " + "; ".join(
            f"{_who(p.waiter, p.waiter_worker)} -> {_who(p.late, p.late_worker)} {_ms(p.wait_us)}"
            for p in c.pairs[:6]) + (f"; {len(c.pairs) - 6} more" if len(c.pairs) > 6 else ""))
    if c.top:
        lines += ["  Top collectives by exposed time (per step, mean over ranks; bandwidth as nccl-tests: over "
                  "the transfer, after the last rank arrived)",
                  f"  {'exposed ms':>10} {'wait ms':>8} {'xfer ms':>8} {'calls':>5} {'size':>9} {'busbw GB/s':>10} "
                  f"{'% link':>6} {'win ms':>7}  collective at call site"]
        for t in c.top:
            busbw = "-" if t.busbw_gbps is None else f"{t.busbw_gbps:.2f}"
            group = f" (group {t.group})" if t.group else ""
            lines.append(f"  {_ms(t.exposed_us):>10} {_ms(t.wait_us):>8} {_ms(t.transfer_us):>8} {t.instances:>5} "
                         f"{format_bytes(t.bytes):>9} {busbw:>10} {_pct(t.link_pct):>6} {_ms(t.could_win_us):>7}  "
                         f"{t.kind}{group}" + (f" at {t.site}" if t.site else ""))
        link = next((t for t in c.top if t.link), None)
        if link is not None:
            lines.append(f"  link: {link.link}, {link.link_gbps:.0f} GB/s per direction (bandwidth.LINKS)")
    return lines


def _run_step(s: StepWaits, waits_known: bool) -> str:
    n = len(s.ranks) or 1
    exposed = sum(r.exposed_us for r in s.ranks) / n
    shares = [r.exposed_pct for r in s.ranks if r.exposed_pct is not None]
    waited = sum(r.waited_us for r in s.ranks) / n if waits_known else None
    late = "-"
    if s.late_worker:
        late = (f"{_who(s.late_rank, s.late_worker)} {_ms(s.late_wait_us)} ms: {s.collective}"
                + (f" at {s.site}" if s.site else "") + f" ({_ms(s.collective_wait_us)} ms there)")
        if s.doing:
            late += f"; before it: {s.doing} {_ms(s.doing_us)} ms" + (f" at {s.doing_line}" if s.doing_line else "")
    return (f"  {s.step[:20]:<20} {_ms(exposed):>11} {_pct(sum(shares) / len(shares) if shares else None):>9} "
            f"{_ms(waited):>10}  {late}")
