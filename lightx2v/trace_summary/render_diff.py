"""The plain-text report of ``--diff``: the verdict first, then BASE / NEW / delta tables (ASCII, <= ~110 columns)."""

from __future__ import annotations

from .diff import RunDiff


def render_diff(diff: RunDiff, top: int = 10) -> str:
    """The report for a terminal; ``top``: rows per table (kernels, CPU ops, op groups)."""
    raise NotImplementedError  # filled in by the following commits
