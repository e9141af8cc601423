"""Benchmark: what the efficiency answers cost (issue 26's goal: the summary with them <= 1.15x without them).

    python benchmarks/bench_efficiency.py                    # a 200 MB trace with shapes, 3 rounds
    python benchmarks/bench_efficiency.py --size-mb 50 --repeat 2

The trace is the H200 fixture with the shapes its model records (tests/helpers/shaped_h200.py), one
ProfilerStep per copy, replicated to --size-mb with its timestamps, correlation and External ids shifted per
copy (so the launch chain links every copy as it does the original), with_stack frames included. The same code
summarizes it with the efficiency answers (shapes kept in the pass, FLOPs, roofline, headroom) and without
(``analyze_trace(..., with_efficiency=False)``: no shapes kept, no answers), each run its own child process
(bench_trace_summary.measure: wall time to exit, peak RSS), the two alternating --repeat times; the ratio is of
the fastest runs.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from bench_trace_summary import measure

from helpers.replica import replicate
from helpers.shaped_h200 import shaped_h200

GOAL = 1.15


def with_and_without(code: str, trace: Path, work: Path, repeat: int) -> dict[str, list[dict]]:
    """``code`` (a child's summary of ``sys.argv[1]``, the feature on when ``sys.argv[2] == "1"``) without and with
    the feature, alternating ``repeat`` times so the machine's drift touches both; each run printed with what the
    child printed. {"without" | "with": [bench_trace_summary.measure results]}."""
    runs: dict[str, list[dict]] = {"without": [], "with": []}
    for _ in range(repeat):
        for label, flag in (("without", "0"), ("with", "1")):
            out = work / f"{label}.out"
            res = measure([sys.executable, "-c", code, str(trace), flag], out, 3600)
            runs[label].append(res)
            print(f"  {label:<8} {res['wall_s']:7.2f} s  peak RSS {res['rss_mb']:.0f} MB  ({out.read_text().strip()})",
                  flush=True)
    return runs


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size-mb", type=float, default=200)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        trace = work / "shaped.pt.trace.json"
        copies = replicate(shaped_h200(work), trace, args.size_mb)
        print(f"trace: {trace.stat().st_size / 1e6:.0f} MB, {copies} steps with shapes")
        code = ("import sys; from lightx2v.trace_summary.analyze import analyze_trace; "
                "r = analyze_trace(sys.argv[1], with_efficiency=sys.argv[2] == '1'); "
                "print('MFU', r.efficiency.mfu_pct if r.efficiency else '-')")
        runs = with_and_without(code, trace, work, args.repeat)
        best = {k: min(r["wall_s"] for r in v) for k, v in runs.items()}
        ratio = best["with"] / best["without"]
        print(f"summary with efficiency / without: {ratio:.2f}x (fastest {best['with']:.2f} s vs "
              f"{best['without']:.2f} s; goal <= {GOAL}x) -> {'ok' if ratio <= GOAL else 'OVER'}")
        return 0 if ratio <= GOAL else 1


if __name__ == "__main__":
    sys.exit(main())
