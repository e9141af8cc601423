"""``python -m lightx2v.trace_summary PATH... [--top N] [--json]``: print a trace's summary.

Exit status: 0 on success, 1 when a PATH is missing, not a trace, truncated or holds no traces (one line on
stderr naming the path and the problem), 2 for bad command-line usage.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from tqdm import tqdm

from .errors import TraceError
from .model import to_json
from .render import render_runs
from .discover import resolve
from .summarize import summarize_run


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1: {value}")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m lightx2v.trace_summary",
        description="Summarize torch.profiler traces: steps, GPU busy/idle time, top kernels and CPU ops, "
                    "slowest rank.",
        epilog="PATH: a trace file (.json or .json.gz, TensorBoard or chrome format), a run directory (one file "
               "per rank), or a TensorBoard logdir (its newest run). Files given together from one directory "
               "are treated as the ranks of one run.")
    parser.add_argument("paths", nargs="+", metavar="PATH")
    parser.add_argument("--top", type=_positive, default=10, metavar="N",
                        help="rows in the kernel and CPU-op tables (default 10)")
    parser.add_argument("--json", action="store_true",
                        help="print JSON (schema lightx2v.trace_summary/1, see docs/trace_summary.md) instead of text")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if hasattr(sys.stdout, "reconfigure"):
        sys.stdout.reconfigure(errors="replace")  # names with undecodable bytes must not crash the report
    try:
        runs_files = resolve(args.paths)
        total = sum(os.path.getsize(path) for run in runs_files for path in run.files)
        # On a terminal, a bar appears when reading takes over a second (big traces); never in pipes.
        with tqdm(total=total, unit="B", unit_scale=True, desc="reading", file=sys.stderr, disable=None,
                  delay=1.0, leave=False) as bar:
            runs = [summarize_run(run, args.top, bar.update) for run in runs_files]
    except TraceError as exc:
        print(f"trace_summary: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    try:
        if args.json:
            json.dump(to_json(runs), sys.stdout, indent=2)
            sys.stdout.write("\n")
        else:
            sys.stdout.write(render_runs(runs))
        sys.stdout.flush()
    except BrokenPipeError:  # `... | head`
        sys.stdout = None
    return 0


if __name__ == "__main__":
    sys.exit(main())
