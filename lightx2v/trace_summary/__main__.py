"""``python -m lightx2v.trace_summary PATH... [--top N] [--json]``: print a trace's summary;
``--diff BASE NEW`` (or ``--diff LOGDIR``: its two newest runs): compare two captures.

Every PATH is reported on its own: one that is missing, not a trace or holds no traces, and a rank file of a run
that is truncated or corrupt, each get one line on stderr naming the file and the problem, while everything
that can be read is still printed. A folder's files that are not traces are skipped, with a one-line note on
stderr saying how many (and in ``--json``, ``skipped_files``).

Exit status, one convention for both modes (EXIT_STATUS, also in ``--help``): 0 when everything was read (with
``--diff``: both sides read and compared); 1 for a data error: a PATH or trace file that is missing, not a trace,
truncated or corrupt, a directory without traces, with ``--diff`` a side that cannot be read or a logdir with
fewer than two runs (the reason on stderr; the summary still prints what it could read); 2 for a usage error:
argparse's (an unknown option, ``--top 0``) and ``--diff`` with more than two paths.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from tqdm import tqdm

from ..fileio import write_atomically
from ..program import program
from .diff import compare_runs, diff_to_json
from .discover import RunFiles, newest_runs, resolve, skipped_phrase, trace_files
from .errors import TraceError
from .frames import COLLAPSED_VALUES, collapsed_stacks
from .model import PeakSpec, RunSummary, SkippedFile, to_json
from .names import rank_from_name
from .peaks import parse_peak
from .render import render_runs
from .render_diff import render_diff
from .summarize import span_runs, summarize_runs

COLLAPSED_CHOICES = ("auto", *COLLAPSED_VALUES)
DATA_ERROR, USAGE_ERROR = 1, 2  # exit statuses (USAGE_ERROR is argparse's own)
EXIT_STATUS = ("Exit status (both modes): 0 when everything was read (--diff: both sides read and compared); "
               f"{DATA_ERROR} for a data error: a PATH or trace file missing, not a trace, truncated or corrupt, a "
               "directory without traces, a --diff logdir with fewer than two runs (each named on stderr; the "
               f"summary still prints what it could read); {USAGE_ERROR} for a usage error: an unknown option, a "
               "bad value (--top 0), --diff with more than two paths.")


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1: {value}")
    return value


def _peak(text: str) -> PeakSpec:
    try:
        return parse_peak(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=program("lightx2v.trace_summary"),
        description="Summarize torch.profiler traces: steps, GPU busy/idle time, top kernels and CPU ops, "
                    "slowest rank.",
        epilog="PATH: a trace file (.json or .json.gz, TensorBoard or chrome format), a run directory (one file "
               "per rank), or a TensorBoard logdir (its newest run). Files given together from one directory "
               "are treated as the ranks of one run (its spans when none overlaps another in time and they record "
               "no ranks). --diff BASE NEW: compare two captures (each a PATH), per "
               "profiled step: step time, GPU busy and idle, kernels and CPU ops added, removed and changed, "
               "each op's kernels, memcpy/memset, rank to rank; --diff LOGDIR compares its two newest runs. "
               + EXIT_STATUS)
    parser.add_argument("paths", nargs="+", metavar="PATH")
    parser.add_argument("--diff", action="store_true",
                        help="compare two captures: PATH is BASE NEW, or one logdir (its two newest runs: older "
                             "is BASE) or run directory of spans (its two newest spans); the verdict line comes "
                             "first")
    parser.add_argument("--top", type=_positive, default=10, metavar="N",
                        help="rows in the kernel and CPU-op tables (default 10)")
    parser.add_argument("--peak", type=_peak, default=None, metavar="TFLOPS,TBPS",
                        help="the device's dense peak TFLOP/s and memory TB/s for the efficiency answers (e.g. "
                             "989,4.8), instead of the peak table's row for the trace's GPU; for CPUs and GPUs "
                             "not in the table")
    parser.add_argument("--frames", action="store_true",
                        help="with_stack traces: also print the tree of your code's frames (per step, inclusive and "
                             "self, each frame's top-level ops last)")
    parser.add_argument("--all-frames", action="store_true",
                        help="keep torch's, the standard library's and site-packages' frames instead of folding "
                             "them into the calling frame of your code")
    parser.add_argument("--collapsed", metavar="FILE",
                        help="write the frames as collapsed stacks ('frame;frame;op value' lines, read by "
                             "flamegraph.pl, inferno and speedscope) to FILE; several traces: one FILE per trace, "
                             "named FILE with the worker before its extension")
    parser.add_argument("--collapsed-value", choices=COLLAPSED_CHOICES, default="auto",
                        help="the value of --collapsed lines: gpu or cpu (nanoseconds per step), memory (bytes "
                             "allocated per step); auto (default): gpu when the trace has GPU work, else cpu")
    parser.add_argument("--json", action="store_true",
                        help="print JSON (schema lightx2v.trace_summary/7, with --diff lightx2v.trace_summary.diff/6; "
                             "see docs/trace_summary.md) instead of text")
    return parser


def main(argv: list[str] | None = None) -> int:
    tqdm.monitor_interval = 0  # no monitor thread (our bar moves as bytes are read): one thread forks its workers
    parser = build_parser()
    args = parser.parse_args(argv)
    if hasattr(sys.stdout, "reconfigure"):
        sys.stdout.reconfigure(errors="replace")  # names with undecodable bytes must not crash the report
    if args.diff:
        if len(args.paths) > 2:
            parser.error(f"--diff takes BASE NEW or one logdir, got {len(args.paths)} paths")
        return _diff(args.paths, args.top, args.json, args.peak, not args.all_frames)
    errors: list[TraceError] = []
    try:
        runs_files = resolve(args.paths, errors)
        total = sum(_size(path) for run in runs_files for path in run.files)
        # On a terminal, a bar appears when reading takes over a second (big traces); never in pipes. One bar
        # across every file, read side by side.
        with tqdm(total=total, unit="B", unit_scale=True, desc="reading", file=sys.stderr, disable=None,
                  delay=1.0, leave=False) as bar:
            runs = summarize_runs(runs_files, args.top, bar.update, keep_going=True, peak=args.peak,
                                  folded=not args.all_frames, side_by_side=True)
    except KeyboardInterrupt:
        return _interrupted()
    for run in runs:
        if run.skipped_files:
            print(f"trace_summary: note: {skipped_note(run.skipped_files)}", file=sys.stderr)
        errors += [TraceError(d.file, d.problem) for d in run.damaged_files]
    readable = [run for run in runs if run.ranks]
    if args.collapsed:
        errors += write_collapsed(readable, args.collapsed, args.collapsed_value)
    try:
        if readable and args.json:
            json.dump(to_json(readable), sys.stdout, indent=2)
            sys.stdout.write("\n")
        elif readable:
            sys.stdout.write(render_runs(readable, args.frames))
        sys.stdout.flush()
    except BrokenPipeError:  # `... | head`
        sys.stdout = None
    for exc in errors:
        print(f"trace_summary: error: {exc}", file=sys.stderr)
    return DATA_ERROR if errors else 0


def write_collapsed(runs: list[RunSummary], path: str, value: str) -> list[TraceError]:
    """``--collapsed``: each trace's frames as collapsed stacks; a trace without frames is a data error."""
    ranks = [r for run in runs for r in run.ranks]
    errors = []
    for r in ranks:
        tree = r.tables.frames if r.tables else None
        if tree is None:
            errors.append(TraceError(r.file, "--collapsed: no Python frames in this trace (capture with "
                                             "with_stack=True)"))
            continue
        kind = value if value != "auto" else "gpu" if r.gpu is not None else "cpu"
        stem, ext = os.path.splitext(path)
        out = path if len(ranks) == 1 else f"{stem}.{r.worker}{ext}"
        try:
            write_atomically(out, "".join(line + "\n" for line in collapsed_stacks(tree, kind)))
        except OSError as exc:
            errors.append(TraceError(out, f"--collapsed: cannot write: {exc.strerror or exc}"))
            continue
        print(f"trace_summary: wrote {out} ({kind} collapsed stacks of {r.worker})", file=sys.stderr)
    return errors


def _diff(paths: list[str], top: int, as_json: bool, peak: PeakSpec | None = None, folded: bool = True) -> int:
    """``--diff``: both sides summarized (one pass each), compared, printed; DATA_ERROR when a side cannot be
    read."""
    try:
        if len(paths) == 1:
            if not os.path.isdir(paths[0]):
                raise TraceError(paths[0], "--diff with one PATH needs a logdir holding two runs (or give BASE NEW)")
            files = trace_files(paths[0])
            named = [rank_from_name(f) for f in files]
            if len(files) > 1 and (None in named or len(set(named)) < len(named)):  # spans, maybe: read to tell
                (spans,) = _summarized([_one_run(paths[0])], top, peak, folded)
                if not spans.spans:
                    newest_runs(paths[0])  # raises: a run directory of ranks, not a logdir of runs
                base, new = span_runs(spans)[-2:]
                print(f"trace_summary: comparing the two newest spans of {paths[0]}: BASE {base.path}, "
                      f"NEW {new.path}", file=sys.stderr)
            else:  # a logdir (or a run directory of ranks: an error naming it)
                sides = newest_runs(paths[0])
                print(f"trace_summary: comparing the two newest runs of {paths[0]}: BASE {sides[0].path}, "
                      f"NEW {sides[1].path}", file=sys.stderr)
                base, new = _summarized(sides, top, peak, folded)
        else:
            base, new = _summarized([_one_run(path) for path in paths], top, peak, folded)
        diff = compare_runs(base, new)
    except TraceError as exc:
        print(f"trace_summary: error: {exc}", file=sys.stderr)
        return DATA_ERROR
    except KeyboardInterrupt:
        return _interrupted()
    for run in (base, new):
        if run.skipped_files:
            print(f"trace_summary: note: {skipped_note(run.skipped_files)}", file=sys.stderr)
    try:
        if as_json:
            json.dump(diff_to_json(diff), sys.stdout, indent=2)
            sys.stdout.write("\n")
        else:
            sys.stdout.write(render_diff(diff, top))
        sys.stdout.flush()
    except BrokenPipeError:
        sys.stdout = None
    return 0


def _interrupted() -> int:
    """Ctrl-C: the progress bar has cleared itself (``leave=False``) but left the cursor on its line, after the
    terminal's ``^C``; on a terminal, end that line so the shell's prompt starts on its own. Exit status 130."""
    if sys.stderr is not None and sys.stderr.isatty():
        sys.stderr.write("\n")
        sys.stderr.flush()
    return 130


def _summarized(sides: list[RunFiles], top: int, peak: PeakSpec | None, folded: bool) -> list[RunSummary]:
    """``--diff``'s runs read (every file of both, side by side), with a progress bar on a terminal when reading
    takes over a second."""
    total = sum(_size(path) for run in sides for path in run.files)
    with tqdm(total=total, unit="B", unit_scale=True, desc="reading", file=sys.stderr, disable=None,
              delay=1.0, leave=False) as bar:
        return summarize_runs(sides, top, bar.update, peak=peak, folded=folded, side_by_side=True)


def _one_run(path: str) -> RunFiles:
    runs = resolve([path])
    return runs[0]


def skipped_note(skipped: list[SkippedFile], names: int = 4) -> str:
    """``skipped 3 files that are not traces: d/a.png, d/b.pt (not a .json or .json.gz file), d/c.json (...)``."""
    by_reason: dict[str, list[str]] = {}
    for s in skipped[:names]:
        by_reason.setdefault(s.reason, []).append(s.file)
    shown = ", ".join(f"{', '.join(files)} ({reason})" for reason, files in by_reason.items())
    more = f", and {len(skipped) - names} more" if len(skipped) > names else ""
    return f"skipped {skipped_phrase(len(skipped))}: {shown}{more}"


def _size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:  # gone since the listing: reading it reports that
        return 0


if __name__ == "__main__":
    sys.exit(main())
