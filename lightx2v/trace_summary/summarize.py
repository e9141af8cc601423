"""PATHs -> runs -> per-rank summaries, with the rank comparison and the communication across ranks (``run_comm``)
for runs of several files.

Every file of the runs asked for (a run's ranks, ``--diff``'s two sides) is read side by side in worker processes
(``parallel``), one pass each; the runs are put together here, in the parent, in their files' order: what needs
every rank (the comparison, the communication) is made here.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from . import reader
from .analyze import AlsoRead, analyze_trace
from .comm_waits import straggler_by_waits
from .discover import RunFiles, resolve
from .errors import TraceError
from .model import DamagedFile, PeakSpec, RankSummary, RunSummary
from .parallel import read_files
from .ranks import are_spans, rank_rows, straggler
from .run_comm import run_comm


def summarize_paths(paths: list[str], top: int = 10, peak: PeakSpec | None = None,
                    folded: bool = True) -> list[RunSummary]:
    """Summaries for command-line PATHs (files, run directories, logdirs); raises TraceError on bad input."""
    return summarize_runs(resolve(paths), top, peak=peak, folded=folded)


def summarize_run(run: RunFiles, top: int = 10, on_read: Callable[[int], object] | None = None,
                  keep_going: bool = False, peak: PeakSpec | None = None, folded: bool = True,
                  also: Callable[[str], AlsoRead | None] | None = None, with_comm: bool = True) -> RunSummary:
    """One run's summary (``summarize_runs`` of one run)."""
    return summarize_runs([run], top, on_read, keep_going, peak, folded, also=also, with_comm=with_comm)[0]


def summarize_runs(runs: list[RunFiles], top: int = 10, on_read: Callable[[int], object] | None = None,
                   keep_going: bool = False, peak: PeakSpec | None = None, folded: bool = True,
                   typed: bool | None = None, also: Callable[[str], AlsoRead | None] | None = None,
                   workers: int | None = None, on_start: Callable[[str, int], object] | None = None,
                   with_comm: bool = True, side_by_side: bool = False) -> list[RunSummary]:
    """The runs' summaries, all their files read side by side; ``on_read`` gets the bytes read from disk as they
    are read, across all of them (for one progress bar); ``folded=False`` keeps library frames in the frame answers
    (``--all-frames``); ``typed``: the reading pass (default ``reader.TYPED``); ``also(path)``: another answer
    made in each file's pass (``analyze_trace(also=...)``; made in the worker: a picklable callable);
    ``workers``/``on_start``: ``parallel.read_files``'; ``with_comm=False`` leaves the communication answers out
    (benchmarks/bench_comm.py measures them); ``side_by_side``: ``analyze_trace``'s (the command's choice).

    A rank file that cannot be read raises TraceError (the first such file in the runs' order); with
    ``keep_going`` it is listed in its run's ``damaged_files`` instead and the other ranks are summarized
    (``ranks`` is empty when none could be read).
    """
    work = partial(_rank, top=top, peak=peak, folded=folded, typed=reader.TYPED if typed is None else typed,
                   also=also, with_comm=with_comm, side_by_side=side_by_side)
    paths = [path for run in runs for path in run.files]
    outcomes = iter(read_files(paths, work, on_read, workers, stop_on_error=not keep_going, on_start=on_start))
    done = []
    for run in runs:
        ranks: list[RankSummary] = []
        damaged: list[DamagedFile] = []
        for _ in run.files:
            outcome = next(outcomes)
            if isinstance(outcome, TraceError):
                if not keep_going:
                    raise outcome
                damaged.append(DamagedFile(file=outcome.path, problem=outcome.problem))
            elif outcome is not None:
                ranks.append(outcome)
        done.append(_run_summary(run, ranks, damaged, top, with_comm))
    return done


def _rank(path: str, on_read: Callable[[int], object] | None, top: int, peak: PeakSpec | None, folded: bool,
          typed: bool, also: Callable[[str], AlsoRead | None] | None, with_comm: bool,
          side_by_side: bool) -> RankSummary:
    """One file's summary (what a worker does)."""
    return analyze_trace(path, top, on_read, peak, folded=folded, typed=typed,
                         also=also(path) if also is not None else None, with_comm=with_comm,
                         side_by_side=side_by_side)


def _run_summary(run: RunFiles, ranks: list[RankSummary], damaged: list[DamagedFile], top: int,
                 with_comm: bool) -> RunSummary:
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
