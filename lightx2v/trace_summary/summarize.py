"""PATHs -> runs -> per-rank summaries, with the rank comparison and the communication across ranks (``run_comm``)
for runs of several files."""

from __future__ import annotations

from collections.abc import Callable

from .analyze import analyze_trace
from .comm_waits import straggler_by_waits
from .discover import RunFiles, resolve
from .errors import TraceError
from .model import DamagedFile, PeakSpec, RankSummary, RunSummary
from .ranks import are_spans, rank_rows, straggler
from .run_comm import run_comm


def summarize_paths(paths: list[str], top: int = 10, peak: PeakSpec | None = None,
                    folded: bool = True) -> list[RunSummary]:
    """Summaries for command-line PATHs (files, run directories, logdirs); raises TraceError on bad input."""
    return [summarize_run(run, top, peak=peak, folded=folded) for run in resolve(paths)]


def summarize_run(run: RunFiles, top: int = 10, on_read: Callable[[int], object] | None = None,
                  keep_going: bool = False, peak: PeakSpec | None = None, folded: bool = True,
                  with_comm: bool = True) -> RunSummary:
    """One run's summary; ``on_read`` gets the bytes read from disk as they are read (for a progress bar);
    ``folded=False`` keeps library frames in the frame answers (``--all-frames``); ``with_comm=False`` leaves the
    communication answers out (benchmarks/bench_comm.py measures them).

    A rank file that cannot be read raises TraceError; with ``keep_going`` it is listed in ``damaged_files``
    instead and the other ranks are summarized (``ranks`` is empty when none could be read).
    """
    ranks: list[RankSummary] = []
    damaged: list[DamagedFile] = []
    for path in run.files:
        try:
            ranks.append(analyze_trace(path, top, on_read, peak, folded=folded, with_comm=with_comm))
        except TraceError as exc:
            if not keep_going:
                raise
            damaged.append(DamagedFile(file=exc.path, problem=exc.problem))
    spans = are_spans(ranks)
    if spans:
        ranks.sort(key=lambda r: r.trace_start_us or 0.0)
    else:
        ranks.sort(key=lambda r: (r.rank is None, r.rank if r.rank is not None else 0, r.worker))
    rows = rank_rows(ranks) if len(ranks) > 1 else None
    communication = run_comm(ranks, [d.file for d in damaged], top) if not spans and with_comm else None
    slowest = straggler(rows) if rows and not spans else None
    if communication is not None:
        slowest = straggler_by_waits(ranks, communication.steps, slowest)
    return RunSummary(label=run.label, path=run.path, ranks=ranks, comparison=rows, straggler=slowest,
                      skipped_files=list(run.skipped), damaged_files=damaged, spans=spans,
                      communication=communication)


def span_runs(run: RunSummary) -> list[RunSummary]:
    """A run of spans as one run per span, oldest first, each labelled ``<run> span <i>`` (``--diff`` of a run
    directory of spans compares its two newest)."""
    return [RunSummary(label=f"{run.label} span {i}", path=r.file, ranks=[r], comparison=None, straggler=None)
            for i, r in enumerate(run.ranks, 1)]
