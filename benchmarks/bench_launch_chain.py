"""Benchmark: what the launch chain, steps by launch, idle causes and the noise test cost (issue 25's 1.1x goal).

    python benchmarks/bench_launch_chain.py                         # 500 MB traces, against the code before it
    python benchmarks/bench_launch_chain.py --size-mb 100 --repeat 2

The summary now decodes every runtime/driver call (it skipped them undecoded before) and keeps per-step series;
this measures it against the code at --against (a commit of this repository, extracted with ``git archive``
into a temp dir) on the same files, in the same run: BASE is the H200 fixture replicated to --size-mb
(bench_trace_summary.generate_trace, one ProfilerStep per copy, with_stack frames included), NEW is BASE with a
kernel renamed and a GEMM 1.5x slower (bench_trace_diff.edit_copy). Each run is its own child process (wall
time to exit, peak RSS from wait4); old and new alternate --repeat times; the ratio is of the fastest runs, the
pairs' ratios are printed too. Goal: summary and --diff each <= 1.1x the old code's time.
"""

from __future__ import annotations

import argparse
import io
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_trace_diff import edit_copy  # sibling scripts, not a package
from bench_trace_summary import REPO, generate_trace, measure

GOAL = 1.1
DEFAULT_AGAINST = "c8c5969^"  # the parent of the commit that added the launch chain


def extract(ref: str, into: Path) -> Path:
    """The ``lightx2v`` package as it was at ``ref``."""
    blob = subprocess.run(["git", "-C", str(REPO), "archive", ref, "lightx2v"], check=True, capture_output=True).stdout
    with tarfile.open(fileobj=io.BytesIO(blob)) as tar:
        tar.extractall(into, filter="data")
    return into


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size-mb", type=float, default=500)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--against", default=DEFAULT_AGAINST, help=f"the old code's commit (default {DEFAULT_AGAINST})")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench_chain_"))
    try:
        old = extract(args.against, work / "old")
        base, new = work / "base" / "w.pt.trace.json", work / "new" / "w.pt.trace.json"
        base.parent.mkdir()
        new.parent.mkdir()
        copies = generate_trace(base, args.size_mb)
        edit_copy(base, new)
        print(f"traces: {base.stat().st_size / 1e6:.1f} MB each, {copies} steps; old code: {args.against}")
        py = sys.executable
        jobs = {"summary": [py, "-m", "lightx2v.trace_summary", str(base), "--json"],
                "--diff": [py, "-m", "lightx2v.trace_summary", "--diff", str(base), str(new), "--json"]}
        runs: dict[tuple[str, str], list[dict]] = {(j, c): [] for j in jobs for c in ("old", "new")}
        for i in range(args.repeat):
            for job, cmd in jobs.items():
                for code, where in (("old", old), ("new", REPO)) if i % 2 == 0 else (("new", REPO), ("old", old)):
                    r = measure(cmd, work / "out.json", 1800, where)
                    runs[(job, code)].append(r)
                    print(f"  round {i + 1}: {job:<8} {code}: {r['wall_s']:.2f} s, peak RSS {r['rss_mb']:.0f} MB",
                          flush=True)
        ok = True
        for job in jobs:
            o, n = runs[(job, "old")], runs[(job, "new")]
            ratio = min(r["wall_s"] for r in n) / min(r["wall_s"] for r in o)
            pairs = [b["wall_s"] / a["wall_s"] for a, b in zip(o, n, strict=True)]
            rss = statistics.median(r["rss_mb"] for r in n) / statistics.median(r["rss_mb"] for r in o)
            ok &= ratio <= GOAL
            fastest_new, fastest_old = min(r["wall_s"] for r in n), min(r["wall_s"] for r in o)
            print(f"{job:<8} new/old: fastest {fastest_new:.2f} / {fastest_old:.2f} s = {ratio:.3f}x (pairs "
                  f"{', '.join(f'{p:.2f}' for p in pairs)}; median {statistics.median(pairs):.3f}x); peak RSS "
                  f"{rss:.2f}x  [goal <= {GOAL}x: {'met' if ratio <= GOAL else 'NOT met'}]")
        return 0 if ok else 1
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
