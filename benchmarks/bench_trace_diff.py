"""Benchmark: `python -m lightx2v.trace_summary --diff BASE NEW` against summarizing both traces (issue 16, item 7).

    python benchmarks/bench_trace_diff.py                  # two ~520 MB traces (the goal's size)
    python benchmarks/bench_trace_diff.py --size-mb 100    # a quick run

BASE is the real H200 fixture's events replicated with bench_trace_summary.generate_trace (one more
``ProfilerStep`` per copy); NEW is BASE with a known edit streamed in line by line: the flash SDPA kernel
renamed (the op now launches another kernel) and the 192x192 GEMM 1.5x slower. Both live in their own run
directory under a temp directory, deleted at the end.

Each measurement is its own child process (wall time to exit, interpreter start included; peak RSS from
``os.wait4``'s rusage, as bench_trace_summary.py does). The baseline is one process summarizing both traces
(``trace_summary BASE NEW --json``); the candidate is ``--diff BASE NEW --json``. They alternate --repeat
times; the time ratio is the fastest run of each (the pairs' ratios are printed too), peak RSS the ratio of
the medians. Between processes a loaded machine's noise is large, so the script also times, in one process,
what the diff adds to reading both traces (compare_runs and its JSON). Goals: diff time <= 1.2x the
baseline's, peak RSS <= 1.2x the baseline's (the diff keeps two summaries, never two traces' events).
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_trace_summary import generate_trace, measure  # a sibling script, not a package

GOAL_TIME_RATIO, GOAL_RSS_RATIO = 1.2, 1.2
RENAMED = ("cudnn_generated_fort_native_sdpa_sm90_flash_fprop", "cudnn_generated_fort_native_sdpa_sm90_other_fprop")
SLOWED, FACTOR = "nvjet_sm90_tst_192x192_64x4_2x1_v_bz_coopB_bias_TNN", 1.5
_DUR = re.compile(r'"dur": (\d+(?:\.\d+)?)')


def edit_copy(src: Path, dst: Path) -> None:
    """NEW from BASE, streamed: kineto writes a kernel's name on one line and its ``"dur"`` on the next."""
    slow_next = False
    with open(src, encoding="utf-8") as fin, open(dst, "w", encoding="utf-8") as fout:
        for line in fin:
            if slow_next and '"dur": ' in line:
                line = _DUR.sub(lambda m: f'"dur": {float(m.group(1)) * FACTOR:.3f}', line, count=1)
            slow_next = '"cat": "kernel"' in line and SLOWED in line
            fout.write(line.replace(*RENAMED) if RENAMED[0] in line else line)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size-mb", type=float, default=520, help="raw size of each trace (default 520)")
    parser.add_argument("--repeat", type=int, default=3, help="alternating runs of each command (default 3)")
    args = parser.parse_args()
    if args.size_mb <= 0 or args.repeat < 1:
        parser.error("--size-mb must be > 0 and --repeat >= 1")

    work = Path(tempfile.mkdtemp(prefix="bench_trace_diff_"))
    try:
        base, new = work / "base" / "rank0_base.pt.trace.json", work / "new" / "rank0_new.pt.trace.json"
        base.parent.mkdir()
        new.parent.mkdir()
        t = time.perf_counter()
        copies = generate_trace(base, args.size_mb)
        edit_copy(base, new)
        print(f"generated 2 traces of {base.stat().st_size / 1e6:.1f} / {new.stat().st_size / 1e6:.1f} MB, "
              f"{copies} steps each ({time.perf_counter() - t:.1f} s)", flush=True)
        commands = {
            "summary": [sys.executable, "-m", "lightx2v.trace_summary", str(base), str(new), "--json"],
            "diff": [sys.executable, "-m", "lightx2v.trace_summary", "--diff", str(base), str(new), "--json"],
        }
        runs: dict[str, list[dict]] = {name: [] for name in commands}
        for i in range(args.repeat):
            for name, cmd in (commands.items() if i % 2 == 0 else reversed(commands.items())):
                out = work / f"{name}.json"
                r = measure(cmd, out, 3600)
                runs[name].append(r)
                print(f"  run {i + 1} {name:<8} {r['wall_s']:7.2f} s  {r['rss_mb']:6.0f} MB peak RSS", flush=True)
        check(json.loads((work / "summary.json").read_text()), json.loads((work / "diff.json").read_text()), copies)
        report(runs, base.stat().st_size / 1e6 + new.stat().st_size / 1e6)
        breakdown(base, new)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


def check(summary: dict, diff: dict, copies: int) -> None:
    """The two commands read the same traces: both sides have every step, the edits show in the diff."""
    assert [len(run["ranks"][0]["steps"]) for run in summary["runs"]] == [copies, copies], "summary steps"
    (rank,) = diff["ranks"]
    assert (rank["base_steps"], rank["new_steps"]) == (copies, copies), "diff steps"
    kernels = {k["name"]: k for k in rank["kernels"]}
    assert any(RENAMED[1] in name and k["status"] == "added" for name, k in kernels.items()), "renamed kernel"
    slowed = next(k for name, k in kernels.items() if SLOWED in name)
    ratio = slowed["time_per_step_us"]["new"] / slowed["time_per_step_us"]["base"]
    assert abs(ratio - FACTOR) < 1e-3, f"slowed kernel: {ratio:.4f}x, expected {FACTOR}x"


def report(runs: dict[str, list[dict]], total_mb: float) -> None:
    med = {name: {key: statistics.median(r[key] for r in rs) for key in ("wall_s", "rss_mb")}
           for name, rs in runs.items()}
    print()
    print(f"{'command':<36} {'median wall s':>14} {'MB/s':>7} {'median peak RSS MB':>19}")
    for name, label in (("summary", "trace_summary BASE NEW --json"), ("diff", "trace_summary --diff BASE NEW")):
        m = med[name]
        print(f"{label:<36} {m['wall_s']:14.2f} {total_mb / m['wall_s']:7.1f} {m['rss_mb']:19.0f}")
    # each run's pair (run i of both commands, back to back) shares the machine's load of that moment; the
    # fastest run of each is the one least disturbed by other jobs (bench_trace_summary.py counts it too)
    pairs = [d["wall_s"] / s["wall_s"] for d, s in zip(runs["diff"], runs["summary"], strict=True)]
    time_ratio = min(r["wall_s"] for r in runs["diff"]) / min(r["wall_s"] for r in runs["summary"])
    rss_ratio = med["diff"]["rss_mb"] / med["summary"]["rss_mb"]
    print()
    print(f"diff / summary time per run pair: {', '.join(f'{r:.2f}x' for r in pairs)} "
          f"(median {statistics.median(pairs):.2f}x)")
    print(f"diff / summary time, fastest of each: {time_ratio:.2f}x (goal <= {GOAL_TIME_RATIO}x) -> "
          f"{'met' if time_ratio <= GOAL_TIME_RATIO else 'NOT met'}")
    print(f"diff / summary peak RSS: {rss_ratio:.2f}x (goal <= {GOAL_RSS_RATIO}x) -> "
          f"{'met' if rss_ratio <= GOAL_RSS_RATIO else 'NOT met'}; "
          f"{med['diff']['rss_mb'] / (total_mb / 2):.2f}x one trace's size")


def breakdown(base: Path, new: Path) -> None:
    """In this process, what --diff adds to summarizing both: compare_runs and its JSON, against the summaries
    and theirs. Free of the machine's noise between processes, it says what the wall-clock ratio should be."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from lightx2v.trace_summary.diff import compare_runs, diff_to_json
    from lightx2v.trace_summary.model import to_json
    from lightx2v.trace_summary.summarize import summarize_paths

    t0 = time.perf_counter()
    (b,), (n,) = summarize_paths([str(base)]), summarize_paths([str(new)])
    t1 = time.perf_counter()
    json.dumps(to_json([b, n]))
    t2 = time.perf_counter()
    json.dumps(diff_to_json(compare_runs(b, n)))
    t3 = time.perf_counter()
    print(f"in one process: summarizing both {t1 - t0:.2f} s; then the summary's JSON {1000 * (t2 - t1):.1f} ms, "
          f"or compare_runs + the diff's JSON {1000 * (t3 - t2):.1f} ms "
          f"(the diff's own work: {100 * (t3 - t2) / (t1 - t0):.2f}% of reading both)")


if __name__ == "__main__":
    sys.exit(main())
