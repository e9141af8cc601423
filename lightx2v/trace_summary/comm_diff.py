"""Communication before and after (``--diff``): exposed communication and the waits per step, each judged change
or noise on its per-step values (``noise``), and the late rank on each side, in one line:

    communication: exposed 124.753 -> 10.905 ms per step (-91.3%, beyond noise); waits 120.629 -> 4.002 ms per
    step (-96.7%, beyond noise); late rank: rank 2 in 2 of 4 steps -> none

Per step, each figure is the mean over the side's ranks (exposed: ``exposed``, every rank with communication;
waits: ``comm_waits``, a side with collectives matched across two ranks or more).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from .model import RunSummary
from .noise import Noise, judge


@dataclass
class CommChange:
    base_exposed_us: Optional[float]  # per step, mean over the ranks (None: no communication on that side)
    new_exposed_us: Optional[float]
    exposed_noise: Optional[Noise]
    base_waited_us: Optional[float]  # per step, mean over the ranks (None: no waits known on that side)
    new_waited_us: Optional[float]
    waited_noise: Optional[Noise]
    base_late: str  # "rank 1 in 2 of 4 steps", "none", "" when the side has no waits
    new_late: str
    line: str


def comm_change(base: RunSummary, new: RunSummary) -> CommChange | None:
    """None when neither side has communication."""
    b_exposed, n_exposed = _exposed(base), _exposed(new)
    if not b_exposed and not n_exposed:
        return None
    b_waited, n_waited = _waited(base), _waited(new)
    change = CommChange(
        base_exposed_us=_mean(b_exposed), new_exposed_us=_mean(n_exposed),
        exposed_noise=judge(b_exposed, n_exposed) if b_exposed and n_exposed else None,
        base_waited_us=_mean(b_waited), new_waited_us=_mean(n_waited),
        waited_noise=judge(b_waited, n_waited) if b_waited and n_waited else None,
        base_late=_late(base), new_late=_late(new), line="")
    change.line = _line(change)
    return change


def _exposed(run: RunSummary) -> list[float]:
    """Per step (by name, in the first rank's order), the ranks' mean exposed communication."""
    ranks = [r.communication for r in run.ranks if r.communication is not None]
    if not ranks:
        return []
    names = [s.step for s in ranks[0].steps]
    out = []
    for name in names:
        values = [s.exposed_us for c in ranks for s in c.steps if s.step == name]
        out.append(sum(values) / len(values))
    return out


def _waited(run: RunSummary) -> list[float]:
    c = run.communication
    if c is None or not c.complete:
        return []
    return [sum(r.waited_us for r in s.ranks) / len(s.ranks) for s in c.steps if s.ranks]


def _late(run: RunSummary) -> str:
    c = run.communication
    if c is None or not c.complete:
        return ""
    named = [s for s in c.steps if s.late_worker]
    if not named:
        return "none"
    counts: dict[str, int] = {}
    for s in named:
        who = f"rank {s.late_rank}" if s.late_rank is not None else s.late_worker
        counts[who] = counts.get(who, 0) + 1
    return ", ".join(f"{who} in {n} of {len(c.steps)} steps" for who, n in
                     sorted(counts.items(), key=lambda kv: -kv[1]))


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _figure(name: str, base: float | None, new: float | None, noise: Noise | None) -> str:
    ms = [("-" if v is None else f"{v / 1000:.3f}") for v in (base, new)]
    text = f"{name} {ms[0]} -> {ms[1]} ms per step"
    extra = []
    if base and new is not None:
        extra.append(f"{100 * (new - base) / base:+.1f}%")
    if noise is not None:
        extra.append(noise.verdict)
    return text + (f" ({', '.join(extra)})" if extra else "")


def _line(c: CommChange) -> str:
    parts = [_figure("exposed", c.base_exposed_us, c.new_exposed_us, c.exposed_noise)]
    if c.base_waited_us is not None or c.new_waited_us is not None:
        parts.append(_figure("waits", c.base_waited_us, c.new_waited_us, c.waited_noise))
    if c.base_late or c.new_late:
        parts.append(f"late rank: {c.base_late or '-'} -> {c.new_late or '-'}")
    return "communication: " + "; ".join(parts)
