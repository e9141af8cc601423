"""PATHs -> runs -> per-rank summaries, with the rank comparison for runs of several files."""

from __future__ import annotations

from collections.abc import Callable

from .analyze import analyze_trace
from .discover import RunFiles, resolve
from .model import RunSummary
from .ranks import rank_rows, straggler


def summarize_paths(paths: list[str], top: int = 10) -> list[RunSummary]:
    """Summaries for command-line PATHs (files, run directories, logdirs); raises TraceError on bad input."""
    return [summarize_run(run, top) for run in resolve(paths)]


def summarize_run(run: RunFiles, top: int = 10, on_read: Callable[[int], object] | None = None) -> RunSummary:
    """One run's summary; ``on_read`` gets the bytes read from disk as they are read (for a progress bar)."""
    ranks = [analyze_trace(path, top, on_read) for path in run.files]
    ranks.sort(key=lambda r: (r.rank is None, r.rank if r.rank is not None else 0, r.worker))
    rows = rank_rows(ranks) if len(ranks) > 1 else None
    return RunSummary(label=run.label, path=run.path, ranks=ranks, comparison=rows,
                      straggler=straggler(rows) if rows else None)
