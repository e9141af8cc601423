"""Benchmark: what the communication answers cost (issue 37's goal: a multi-rank summary with them <= 1.15x
without them).

    python benchmarks/bench_comm.py                      # 4 ranks of 50 MB each, 3 rounds
    python benchmarks/bench_comm.py --ranks 8 --size-mb 20 --repeat 2

The run is HTA's sampled NCCL rank (tests/fixtures/hta/trace_filter/sampled_rank-0: A100, all-to-alls,
all-reduces and all-gathers over NCCL kernels, CPU ops with shapes) replicated to --size-mb per rank with its
steps, timestamps and ids shifted per copy (helpers.replica), written as --ranks rank files of one world (the
same events on each: every collective matches across all of them). The same code summarizes the run with the
communication answers (collectives kept in the pass, exposed communication per step, matching, clocks, waits,
bandwidth) and without (``summarize_run(..., with_comm=False)``), each run its own child process
(bench_trace_summary.measure: wall time to exit, peak RSS), alternating --repeat times; the ratio is of the
fastest runs.
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from bench_efficiency import with_and_without

from helpers.replica import replicate

GOAL = 1.15
SOURCE = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "hta" / "trace_filter" / "sampled_rank-0.json.gz"


def write_run(work: Path, ranks: int, size_mb: float) -> tuple[Path, int]:
    """``ranks`` rank files of one world in ``work/run``; (the folder, copies of the source per rank)."""
    with gzip.open(SOURCE, "rt", encoding="utf-8") as f:
        doc = json.load(f)
    run = work / "run"
    run.mkdir()
    copies = 0
    for rank in range(ranks):
        doc["distributedInfo"] = {"backend": "nccl", "rank": rank, "world_size": ranks}
        src = work / f"src{rank}.json.gz"
        with gzip.open(src, "wt", encoding="utf-8") as f:
            json.dump(doc, f)
        copies = replicate(src, run / f"rank{rank}_bench.pt.trace.json", size_mb)
    return run, copies


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ranks", type=int, default=4)
    parser.add_argument("--size-mb", type=float, default=50)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        run, copies = write_run(work, args.ranks, args.size_mb)
        total = sum(p.stat().st_size for p in run.iterdir()) / 1e6
        print(f"run: {args.ranks} ranks, {total:.0f} MB, {copies} copies of the source per rank")
        code = ("import sys; from lightx2v.trace_summary.discover import resolve; "
                "from lightx2v.trace_summary.summarize import summarize_run; "
                "(r,) = [summarize_run(x, with_comm=sys.argv[2] == '1') for x in resolve([sys.argv[1]])]; "
                "c = r.communication; "
                "print('collectives', c.collectives if c else '-', 'complete', c.complete if c else '-')")
        runs = with_and_without(code, run, work, args.repeat)
        best = {k: min(r["wall_s"] for r in v) for k, v in runs.items()}
        ratio = best["with"] / best["without"]
        print(f"multi-rank summary with communication / without: {ratio:.2f}x (fastest {best['with']:.2f} s vs "
              f"{best['without']:.2f} s; goal <= {GOAL}x) -> {'ok' if ratio <= GOAL else 'OVER'}")
        return 0 if ratio <= GOAL else 1


if __name__ == "__main__":
    sys.exit(main())
