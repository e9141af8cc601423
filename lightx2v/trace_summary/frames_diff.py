"""Where in your code, before and after (``--diff``): each frame of the user's code, its time per step on both
sides, the delta and the noise verdict (``noise``) of its per-step self time, and one line naming the frame
that changed:

    where in your code: two_functions.py:29 mlp +12.4 ms CPU per step (self, beyond noise ±3.1%)

Frames match by name (``file(line): function``, ``nn.Module: <name>``), wherever they were called from. They are
ranked by their self time's change (the time spent in the frame itself, library frames folded in): a change
inside one function moves its callers' inclusive time by as much, but only its own self time, so the function
that changed comes first. Changes beyond noise come before the rest. GPU time when both sides launched GPU work
from their frames, else CPU op time.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from .frames import LIBRARY, frame_series, line_kind, location, per_frame, shown
from .model import FrameTree, RankSummary
from .noise import REAL, UNTESTED, Noise, judge
from .ratios import percent

FRAMES_NAMED = 2  # frames the line names, changes beyond noise first


@dataclass
class FrameDelta:
    """``diff.Delta``'s fields (that module compares whole ranks and imports this one)."""

    base: Optional[float]
    new: Optional[float]
    delta: Optional[float]
    delta_pct: Optional[float]


@dataclass
class FrameChange:
    frame: str
    location: str  # "two_functions.py:29" ("" for an nn.Module frame)
    function: str
    line: str  # "def", "running" (the line it was running when a capture began: ``frames.line_kind``) or ""
    kind: str  # "user", "module" (or, --all-frames, "library")
    status: str  # "added", "removed", "changed" or "same" (as the rest of the diff)
    inclusive_per_step_us: FrameDelta
    self_per_step_us: FrameDelta
    noise: Noise  # its per-step self time judged


@dataclass
class FramesChange:
    value: str  # "gpu" (GPU time launched) or "cpu" (CPU ops' self time)
    frames: list[FrameChange] = field(default_factory=list)  # beyond noise first, then by |self delta|
    line: str = ""


def frames_change(base: RankSummary, new: RankSummary) -> FramesChange | None:
    """None when neither side has Python frames; a line saying which side lacks them when one does."""
    tb = base.tables.frames if base.tables else None
    tn = new.tables.frames if new.tables else None
    if tb is None and tn is None:
        return None
    if tb is None or tn is None:
        side = "BASE" if tb is None else "NEW"
        return FramesChange(value="", line=f"where in your code: {side} has no Python frames (capture both "
                                           "with with_stack=True to compare them)")
    gpu = sum(tb.gpu_us) > 0 and sum(tn.gpu_us) > 0
    key, self_key = ("gpu", "gpu_self") if gpu else ("cpu", "cpu_self")
    rows_b, rows_n = per_frame(tb), per_frame(tn)
    series_b, series_n = frame_series(tb, gpu), frame_series(tn, gpu)
    kinds = {**_kinds(tb), **_kinds(tn)}
    running = tb.running | tn.running  # a frame's name holds its line: running on one side, running on both
    out = []
    for name in dict.fromkeys([*rows_b, *rows_n]):
        if kinds[name] == LIBRARY and (base.frames is None or base.frames.folded):
            continue
        rb, rn = rows_b.get(name), rows_n.get(name)
        incl = _delta(rb[key] if rb else 0.0, rn[key] if rn else 0.0)
        own = _delta(rb[self_key] if rb else 0.0, rn[self_key] if rn else 0.0)
        vb = series_b[name][1] if name in series_b else [0.0] * tb.steps
        vn = series_n[name][1] if name in series_n else [0.0] * tn.steps
        where, function = location(name)
        status = "added" if rb is None else "removed" if rn is None else \
            "same" if abs(own.delta or 0.0) < 0.5 and abs(incl.delta or 0.0) < 0.5 else "changed"
        out.append(FrameChange(frame=name, location=where, function=function, line=line_kind(name, running),
                               kind=kinds[name], status=status, inclusive_per_step_us=incl, self_per_step_us=own,
                               noise=judge(vb, vn)))
    out.sort(key=lambda c: (c.noise.verdict != REAL, -abs(c.self_per_step_us.delta or 0.0), c.frame))
    change = FramesChange(value="gpu" if gpu else "cpu", frames=out)
    change.line = _line(change)
    return change


def _kinds(tree: FrameTree) -> dict[str, str]:
    return dict(zip(tree.names[1:], tree.kinds[1:], strict=True))


def _delta(base: float, new: float) -> FrameDelta:
    return FrameDelta(base=base, new=new, delta=new - base, delta_pct=percent(new - base, base))


def frame_name(c: FrameChange) -> str:
    """``two_functions.py:29 mlp``, or the module frame's own name."""
    return shown(c.location, c.function, c.frame, c.line)


def _line(ch: FramesChange) -> str:
    what = "GPU" if ch.value == "gpu" else "CPU"
    real = [c for c in ch.frames if c.noise.verdict == REAL]
    if real:
        parts = []
        for c in real[:FRAMES_NAMED]:
            spread = f" ±{c.noise.noise_pct:.1f}%" if c.noise.noise_pct is not None else ""
            parts.append(f"{frame_name(c)} {_signed_ms(c.self_per_step_us.delta or 0.0)} ms {what} per step "
                         f"(self, beyond noise{spread})")
        return "where in your code: " + "; ".join(parts)
    moved = [c for c in ch.frames if c.status != "same"]
    if not moved:
        return "where in your code: no frame's time changed"
    top = moved[0]
    untested = top.noise.verdict == UNTESTED
    return (f"where in your code: no frame changed beyond noise; most: {frame_name(top)} "
            f"{_signed_ms(top.self_per_step_us.delta or 0.0)} ms {what} per step (self"
            + (", one step a side: cannot tell)" if untested else ")"))


def _signed_ms(us: float) -> str:
    ms = us / 1000
    digits = 0 if abs(ms) >= 100 else 1 if abs(ms) >= 10 else 2 if abs(ms) >= 1 else 3
    return f"{ms:+.{digits}f}"
