"""Benchmark: `python -m lightx2v.trace_summary` on a large trace, next to the TensorBoard plugin's own loader.

    python benchmarks/bench_trace_summary.py                       # one 520 MB trace for both tools
    python benchmarks/bench_trace_summary.py --size-mb 1000 --plugin-size-mb 100   # the plugin on a smaller one

Traces are made by replicating the real H200 fixture's events (tests/fixtures/h200_dit_stack.pt.trace.json.gz,
kineto's own formatting kept) with timestamps shifted by one step per copy, so each copy is one more
``ProfilerStep``. They are written to a temp directory and deleted at the end.

Every measurement runs in its own child process: wall time from start to exit (interpreter start included) and
peak RSS from ``os.wait4``'s rusage of that child. The plugin baseline does what torch_tb_profiler 0.4.3's
``RunLoader._process_data`` does for one worker file: ``RunProfileData.parse`` + ``RunGenerator
.generate_run_profile``, stopped after --plugin-timeout. By default it parses the same file; give it a smaller
one with --plugin-size-mb (it runs at a few MB/s and ~6-8x the file size in RAM); ratios are always taken on
one file both tools read. A gzip copy (level 1) of that file is also summarized. Goals (issue 6): >= 50 MB/s and
peak RSS <= 3x the file size.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
FIXTURE = REPO / "tests" / "fixtures" / "h200_dit_stack.pt.trace.json.gz"
GOAL_MB_S, GOAL_RSS_RATIO = 50.0, 3.0

_TS = re.compile(r'"ts": (\d+(?:\.\d+)?)')
_STEP = re.compile(r'"ProfilerStep#(\d+)"')

PLUGIN_CODE = """
import sys, tempfile
from torch_tb_profiler.profiler.data import RunProfileData
from torch_tb_profiler.profiler.run_generator import RunGenerator
path = sys.argv[1]
data = RunProfileData.parse("bench", None, path, tempfile.mkdtemp())
profile = RunGenerator("bench", None, data).generate_run_profile()
print("steps", len(data.steps_names) if getattr(data, "steps_names", None) else "?")
"""


def fixture_parts() -> tuple[str, int, int, str, str]:
    """The H200 fixture's text split for replication: (raw, where its event array starts and ends, the timed
    events, the metadata events), the events as the text kineto wrote them."""
    raw = gzip.decompress(FIXTURE.read_bytes()).decode()
    array_start = raw.index("[", raw.index('"traceEvents"')) + 1
    array_end = raw.rindex("]")
    pieces = re.split(r"(?<=\n  \}),\n(?=  \{)", raw[array_start:array_end].strip("\n"))
    timed = ",\n".join(p for p in pieces if '"ph": "M"' not in p)
    meta = ",\n".join(p for p in pieces if '"ph": "M"' in p)
    return raw, array_start, array_end, timed, meta


def generate_trace(path: Path, size_mb: float) -> int:
    """Write a kineto-formatted trace of at least ``size_mb`` MB; returns the number of step copies."""
    raw, array_start, array_end, timed, meta = fixture_parts()
    stamps = [float(t) for t in _TS.findall(timed)]
    doc = json.loads(raw)
    span = max(e["ts"] + e.get("dur", 0) for e in doc["traceEvents"] if "ts" in e) - min(stamps) + 500.0
    target = size_mb * 1e6
    with open(path, "w", encoding="utf-8") as f:
        f.write(raw[:array_start] + "\n")
        written, copies = array_start, 0
        while written < target:
            shift = copies * span
            text = _TS.sub(lambda m, shift=shift: f'"ts": {float(m.group(1)) + shift:.3f}', timed) if copies else timed
            text = _STEP.sub(lambda m, copies=copies: f'"ProfilerStep#{int(m.group(1)) + copies}"', text)
            text = (",\n" if copies else "") + text
            f.write(text)
            written += len(text)
            copies += 1
        f.write(",\n" + meta + "\n" + raw[array_end:])
    return copies


def measure(cmd: list[str], stdout_path: Path, timeout: float, code: Path = REPO) -> dict:
    """Wall time and peak RSS of one child process (its own rusage via wait4); ``code``: where its lightx2v is."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(code), os.environ.get("PYTHONPATH")])))
    with open(stdout_path, "wb") as out:
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.PIPE, env=env, start_new_session=True)
        deadline = start + timeout
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.perf_counter() > deadline:
                os.killpg(proc.pid, signal.SIGKILL)
                os.wait4(proc.pid, 0)
                return {"timeout": True, "wall_s": timeout}
            time.sleep(0.02)
        wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    stderr = proc.stderr.read().decode(errors="replace")
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}):\n{stderr[-2000:]}")
    return {"timeout": False, "wall_s": wall, "rss_mb": usage.ru_maxrss / 1024}


def best_of(repeat: int, cmd: list[str], stdout_path: Path, timeout: float) -> dict:
    runs = [measure(cmd, stdout_path, timeout) for _ in range(repeat)]
    done = [r for r in runs if not r["timeout"]]
    return min(done, key=lambda r: r["wall_s"]) if done else runs[0]


def ours(path: Path, copies: int, work: Path, repeat: int) -> dict:
    out = work / "summary.json"
    result = best_of(repeat, [sys.executable, "-m", "lightx2v.trace_summary", str(path), "--json"], out, 1800)
    steps = json.loads(out.read_text())["runs"][0]["ranks"][0]["steps"]
    assert len(steps) == copies, f"expected {copies} steps, the summary found {len(steps)}"
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size-mb", type=float, default=520, help="raw size of the large trace (default 520)")
    parser.add_argument("--plugin-size-mb", type=float, default=None,
                        help="raw size of the trace the plugin parses (default: --size-mb; 0 = skip the plugin)")
    parser.add_argument("--plugin-timeout", type=float, default=600, help="seconds before the plugin is stopped")
    parser.add_argument("--repeat", type=int, default=2, help="runs per measurement; the fastest counts")
    args = parser.parse_args()
    if args.plugin_size_mb is None:
        args.plugin_size_mb = args.size_mb

    work = Path(tempfile.mkdtemp(prefix="bench_trace_summary_"))
    rows = []
    try:
        sizes = sorted({args.size_mb, args.plugin_size_mb} - {0})
        files = {}
        for size in sizes:
            path = work / f"bench_{size:g}MB.pt.trace.json"
            t = time.perf_counter()
            copies = generate_trace(path, size)
            files[size] = (path, copies)
            print(f"generated {path.name}: {path.stat().st_size / 1e6:.1f} MB, {copies} steps "
                  f"({time.perf_counter() - t:.1f} s)", flush=True)
        if args.plugin_size_mb:
            path, copies = files[args.plugin_size_mb]
            gz = work / (path.name + ".gz")
            with open(path, "rb") as src, gzip.open(gz, "wb", compresslevel=1) as dst:
                shutil.copyfileobj(src, dst, 4 << 20)
            files["gz"] = (gz, copies)

        for key, (path, copies) in files.items():
            raw_mb = (files[args.plugin_size_mb][0] if key == "gz" else path).stat().st_size / 1e6
            r = ours(path, copies, work, args.repeat)
            rows.append(dict(tool="trace_summary", key=key, name=path.name, raw_mb=raw_mb,
                             disk_mb=path.stat().st_size / 1e6, **r))
            print(f"  trace_summary  {path.name}: {r['wall_s']:.2f} s, {r['rss_mb']:.0f} MB peak RSS", flush=True)
        if args.plugin_size_mb:
            path, _ = files[args.plugin_size_mb]
            r = best_of(1, [sys.executable, "-c", PLUGIN_CODE, str(path)], work / "plugin.txt", args.plugin_timeout)
            size = path.stat().st_size / 1e6
            rows.append(dict(tool="tb-plugin loader", key=args.plugin_size_mb, name=path.name, raw_mb=size,
                             disk_mb=size, **r))
            took = "timeout" if r["timeout"] else f"{r['wall_s']:.2f} s, {r['rss_mb']:.0f} MB peak RSS"
            print(f"  tb-plugin      {path.name}: {took}", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    report(rows, args)
    return 0


def report(rows: list[dict], args) -> None:
    print()
    print(f"{'tool':<17} {'file':<30} {'raw MB':>8} {'disk MB':>8} {'wall s':>8} {'MB/s':>7} {'peak RSS MB':>12} "
          f"{'RSS/raw':>8}")
    for r in rows:
        head = f"{r['tool']:<17} {r['name']:<30} {r['raw_mb']:8.1f} {r['disk_mb']:8.1f}"
        if r["timeout"]:
            print(f"{head} {'>' + format(r['wall_s'], '.0f'):>8} {'-':>7} {'-':>12} {'-':>8}")
        else:
            print(f"{head} {r['wall_s']:8.2f} {r['raw_mb'] / r['wall_s']:7.1f} {r['rss_mb']:12.0f} "
                  f"{r['rss_mb'] / r['raw_mb']:8.2f}")

    def row(tool, key):
        return next((r for r in rows if r["tool"] == tool and r["key"] == key), None)

    big = row("trace_summary", args.size_mb)
    speed, rss_ratio = big["raw_mb"] / big["wall_s"], big["rss_mb"] / big["raw_mb"]
    print()
    print(f"goal >= {GOAL_MB_S:.0f} MB/s on {big['raw_mb']:.0f} MB: {speed:.1f} MB/s -> "
          f"{'met' if speed >= GOAL_MB_S else 'NOT met'}")
    print(f"goal peak RSS <= {GOAL_RSS_RATIO:.0f}x the file size: {rss_ratio:.2f}x -> "
          f"{'met' if rss_ratio <= GOAL_RSS_RATIO else 'NOT met'}")
    plugin, same = row("tb-plugin loader", args.plugin_size_mb), row("trace_summary", args.plugin_size_mb)
    if plugin and not plugin["timeout"]:
        print(f"vs the tb-plugin loader on the same {same['raw_mb']:.0f} MB file: "
              f"{plugin['wall_s'] / same['wall_s']:.1f}x faster, {plugin['rss_mb'] / same['rss_mb']:.1f}x less "
              f"peak RSS")
    elif plugin:
        print(f"the tb-plugin loader did not finish within {args.plugin_timeout:g} s")


if __name__ == "__main__":
    sys.exit(main())
