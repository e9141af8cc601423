"""The one rule for shares and relative changes, used by every module that prints one."""

from __future__ import annotations


def percent(part: float, whole: float) -> float | None:
    """``part`` as a percentage of ``whole``; None when ``whole`` is not positive (the one rule for every share)."""
    return 100.0 * part / whole if whole > 0 else None


def relative(a: float, b: float) -> float:
    """(a - b) / b, 0 when b is not positive."""
    return (a - b) / b if b > 0 else 0.0
