"""Benchmark: what "where in your code" costs (issue 27's goal: the summary with the Python frames <= 1.5x the
summary without them, peak memory <= 0.3x the file).

    nice -n 10 python benchmarks/bench_frames.py                  # a 500 MB with_stack trace, 2 rounds
    python benchmarks/bench_frames.py --size-mb 50 --repeat 1

The trace is the H200 fixture (a with_stack capture: 1,246 Python frames among its 2,921 events) replicated to
--size-mb, one ProfilerStep per copy, its timestamps, correlation and External ids shifted per copy so the launch
chain links every copy as it does the original (tests/helpers/replica.py). It is written to a temporary folder
and deleted afterwards. The same code summarizes it with the frames (``analyze_trace``: the Python frames decoded
in the one pass and every kernel, op and allocation charged to them) and without (``with_frames=False``: the
frames are skipped undecoded, as before), each run its own child process (wall time to exit, peak RSS), the two
alternating --repeat times; the ratio is of the fastest runs.

Then the same copies with each copy's ``<module>`` frame running half a copy into the next one (frames that
overlap without nesting, as a faulty tracer or a replay writes them; ``frames.FrameIndex``), summarized with the
frames once: its peak RSS against the file and against the properly nested trace's (issue 36: memory must not
depend on proper nesting; it was 1.3x the file at 200 MB before overlapping frames closed each other).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from bench_efficiency import with_and_without
from bench_trace_summary import measure

from helpers.replica import FIXTURE, replicate

TIME_GOAL, MEMORY_GOAL = 1.5, 0.3
OVERRUN = 0.5  # each <module> frame runs this share of a copy into the next copy


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size-mb", type=float, default=500)
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench_frames.") as tmp:
        work = Path(tmp)
        trace = work / "frames.pt.trace.json"
        copies = replicate(FIXTURE, trace, args.size_mb)
        size_mb = trace.stat().st_size / 1e6
        print(f"trace: {size_mb:.0f} MB, {copies} steps, with_stack frames")
        code = ("import sys; from lightx2v.trace_summary.analyze import analyze_trace; "
                "r = analyze_trace(sys.argv[1], with_frames=sys.argv[2] == '1'); "
                "print(r.frames.frames[0].location if r.frames else '-', len(r.steps))")
        runs = with_and_without(code, trace, work, args.repeat)
        best = {k: min(r["wall_s"] for r in v) for k, v in runs.items()}
        rss = max(r["rss_mb"] for r in runs["with"])
        ratio, memory = best["with"] / best["without"], rss / size_mb
        print(f"summary with frames / without: {ratio:.2f}x (fastest {best['with']:.2f} s vs "
              f"{best['without']:.2f} s; goal <= {TIME_GOAL}x); peak RSS with frames {rss:.0f} MB = "
              f"{memory:.2f}x the file (goal <= {MEMORY_GOAL}x)")
        trace.unlink()
        overrun = work / "overrun.pt.trace.json"
        replicate(FIXTURE, overrun, args.size_mb, module_overrun=OVERRUN)
        res = measure([sys.executable, "-c", code, str(overrun), "1"], work / "overrun.out", 3600)
        over_mb = overrun.stat().st_size / 1e6
        over_memory = res["rss_mb"] / over_mb
        print(f"<module> frames running {OVERRUN} of a step into the next: {res['wall_s']:.2f} s, peak RSS "
              f"{res['rss_mb']:.0f} MB = {over_memory:.2f}x the file, {res['rss_mb'] / rss:.2f}x the nested trace's "
              f"(goal <= {MEMORY_GOAL}x the file)")
        ok = ratio <= TIME_GOAL and memory <= MEMORY_GOAL and over_memory <= MEMORY_GOAL
        print("->", "ok" if ok else "OVER")
        return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
