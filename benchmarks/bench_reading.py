"""Benchmark: how fast a trace is read (issue 38), each figure a ratio against a baseline measured in the same run.

    python benchmarks/bench_reading.py                       # the goals' sizes: 620 MB, 4 x 150 MB, 2 GB
    python benchmarks/bench_reading.py --size-mb 216 --rank-mb 50 --index-mb 400   # a quicker look

1. ``trace_summary --json`` of a with_stack replica of >= 600 MB against ``orjson.loads`` of the same file, each in a
   fresh process (goal: at most 0.6x), its peak RSS against the file's size (goal: at most 0.3x; the forked
   children that read the second half and charge the Python frames share the parent's pages, and the largest of
   the processes counts), the same command on one core (no fork: the file in one pass, the frames in turn), and
   the generic (dict) reading pass on the same file (what the typed one replaced);
2. a 4-rank run (4 files of 150 MB) read side by side (the command on the run's folder) against its four files
   read one after another in one process (``summarize_runs(workers=1)``; goal on 2 cores: at most 0.65x);
3. the Timeline's step index of a 2 GB replica (``step_index.build_index``) against the summary of the same file
   (goal: at most 1.0x);
4. the summary of a gzip trace (level 6, as the profiler writes it) against its plain twin, and its
   decompression alone with each gzip library installed (zlib, isal, zlib-ng).

Replicas are made from the H200 fixture (``bench_trace_summary.generate_trace``) in a temp folder, deleted at the
end. Wall times of child processes (best of --repeat), peak RSS from their rusage, the load average beside each
figure: on a shared machine, run it when it is as quiet as it gets.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_trace_summary import generate_trace, measure

GOAL_ORJSON, GOAL_RSS, GOAL_RANKS, GOAL_INDEX = 0.6, 0.3, 0.65, 1.0

SUMMARY = [sys.executable, "-m", "lightx2v.trace_summary", "--json"]
ORJSON = [sys.executable, "-c", "import orjson, sys; d = orjson.loads(open(sys.argv[1], 'rb').read()); "
                                "print(len(d['traceEvents']))"]
IN_TURN = [sys.executable, "-c", "import sys; from lightx2v.trace_summary import parallel; "
                                 "parallel.available_cores = lambda: 1; "
                                 "from lightx2v.trace_summary.__main__ import main; sys.exit(main(sys.argv[1:]))",
           "--json"]
GENERIC = [sys.executable, "-c", "import sys; from lightx2v.trace_summary import reader; reader.TYPED = False; "
                                 "from lightx2v.trace_summary.__main__ import main; sys.exit(main(sys.argv[1:]))",
           "--json"]
ONE_AFTER_ANOTHER = [sys.executable, "-c", "import sys; from lightx2v.trace_summary.discover import resolve; "
                                           "from lightx2v.trace_summary.summarize import summarize_runs; "
                                           "print(len(summarize_runs(resolve(sys.argv[1:]), workers=1)[0].ranks))"]
INDEX = [sys.executable, "-c", "import sys; from lightx2v.trace_browser.step_index import build_index; "
                               "print(len(build_index(sys.argv[1]).steps))"]
GUNZIP = """
import gzip, sys, time
name, path = sys.argv[1:]
if name == "isal":
    from isal.igzip import IGzipFile as Reader
elif name == "zlib-ng":
    from zlib_ng.gzip_ng import GzipNGFile as Reader
else:
    Reader = gzip.GzipFile
with open(path, "rb") as raw, Reader(fileobj=raw, mode="rb") as f:
    while f.read(1 << 20):
        pass
"""


def best(cmd: list[str], args: list[str], work: Path, repeat: int, timeout: float = 3600) -> dict:
    runs = [measure(cmd + args, work / "out.txt", timeout) for _ in range(repeat)]
    return min(runs, key=lambda r: r["wall_s"]) | {"load": os.getloadavg()[0]}


def line(what: str, r: dict, mb: float) -> str:
    return (f"  {what:<44} {r['wall_s']:7.2f} s {mb / r['wall_s']:7.1f} MB/s  peak RSS {r.get('rss_mb', 0):7.0f} MB"
            f"  (load {r['load']:.1f})")


def verdict(name: str, ratio: float, goal: float) -> str:
    return f"{name}: {ratio:.2f}x (goal <= {goal:g}x: {'met' if ratio <= goal else 'NOT met'})"


def libraries() -> list[str]:
    found = ["zlib"]
    for name, module in (("isal", "isal"), ("zlib-ng", "zlib_ng")):
        try:
            __import__(module)
            found.append(name)
        except ImportError:
            pass
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size-mb", type=float, default=620, help="the summary vs orjson replica (default 620)")
    parser.add_argument("--rank-mb", type=float, default=150, help="each of the 4 ranks (default 150)")
    parser.add_argument("--index-mb", type=float, default=2000, help="the index vs summary replica (default 2000)")
    parser.add_argument("--repeat", type=int, default=2, help="runs per measurement; the fastest counts")
    parser.add_argument("--skip-generic", action="store_true", help="leave out the generic pass (slow)")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench_reading_"))
    verdicts = []
    print(f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at the start", flush=True)
    try:
        # 1. the summary against orjson.loads, and the generic pass
        big = work / "big.pt.trace.json"
        generate_trace(big, args.size_mb)
        mb = big.stat().st_size / 1e6
        print(f"{big.name}: {mb:.0f} MB", flush=True)
        summary = best(SUMMARY, [str(big)], work, args.repeat)
        baseline = best(ORJSON, [str(big)], work, args.repeat)
        in_turn = best(IN_TURN, [str(big)], work, args.repeat)
        print(line("trace_summary --json", summary, mb))
        print(line("orjson.loads (fresh process)", baseline, mb))
        print(line("trace_summary --json, one core (no fork)", in_turn, mb))
        if not args.skip_generic:
            print(line("trace_summary --json, generic (dict) pass", best(GENERIC, [str(big)], work, 1), mb))
        verdicts.append(verdict("summary / orjson.loads", summary["wall_s"] / baseline["wall_s"], GOAL_ORJSON))
        verdicts.append(verdict("summary peak RSS / file", summary["rss_mb"] / mb, GOAL_RSS))
        verdicts.append(f"halves side by side and frames beside the other tables / one core: "
                        f"{summary['wall_s'] / in_turn['wall_s']:.2f}x")

        # 4. gzip against its plain twin (the big file, level 6), and each library's decompression alone
        packed = work / "big.pt.trace.json.gz"
        with open(big, "rb") as src, __import__("gzip").open(packed, "wb", compresslevel=6) as dst:
            shutil.copyfileobj(src, dst, 4 << 20)
        gz = best(SUMMARY, [str(packed)], work, args.repeat)
        print(line(f"trace_summary --json of the gzip twin ({packed.stat().st_size / 1e6:.0f} MB)", gz, mb))
        verdicts.append(f"gzip summary / plain summary: {gz['wall_s'] / summary['wall_s']:.2f}x")
        for name in libraries():
            r = best([sys.executable, "-c", GUNZIP, name], [str(packed)], work, args.repeat)
            print(line(f"decompression alone, {name}", r, mb))
        packed.unlink()
        big.unlink()

        # 2. a 4-rank run side by side against its files one after another
        run = work / "run"
        run.mkdir()
        generate_trace(run / "rank0_host.pt.trace.json", args.rank_mb)
        for r in (1, 2, 3):
            shutil.copy(run / "rank0_host.pt.trace.json", run / f"rank{r}_host.pt.trace.json")
        mb = 4 * (run / "rank0_host.pt.trace.json").stat().st_size / 1e6
        print(f"run/: 4 ranks, {mb:.0f} MB", flush=True)
        side = best(SUMMARY, [str(run)], work, args.repeat)
        alone = best(ONE_AFTER_ANOTHER, [str(run)], work, args.repeat)
        print(line("trace_summary --json run/ (side by side)", side, mb))
        print(line("the 4 files one after another (one process)", alone, mb))
        verdicts.append(verdict(f"4 ranks side by side / one after another ({os.cpu_count()} CPUs)",
                                side["wall_s"] / alone["wall_s"], GOAL_RANKS))
        shutil.rmtree(run)

        # 3. the Timeline's index against the summary of the same file
        huge = work / "huge.pt.trace.json"
        generate_trace(huge, args.index_mb)
        mb = huge.stat().st_size / 1e6
        print(f"{huge.name}: {mb:.0f} MB", flush=True)
        index = best(INDEX, [str(huge)], work, 1)
        summary = best(SUMMARY, [str(huge)], work, 1)
        print(line("step_index.build_index", index, mb))
        print(line("trace_summary --json", summary, mb))
        verdicts.append(verdict("Timeline index / summary", index["wall_s"] / summary["wall_s"], GOAL_INDEX))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print()
    for v in verdicts:
        print(v)
    print(f"load average at the end {os.getloadavg()[0]:.1f} ({time.strftime('%Y-%m-%d %H:%M')})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
