"""Benchmark: the summary of a trace with ``[memory]`` events vs the same trace without them (issue 17: <= 1.2x).

    python benchmarks/bench_memory_summary.py                 # a ~500 MB trace with memory events
    python benchmarks/bench_memory_summary.py --size-mb 60    # a quick run

Traces are the real H200 fixture's events replicated one step per copy (as in bench_trace_summary.py). The memory
trace adds what ``profile_memory=True`` records for them: one allocation inside every ``aten::empty*`` op of
the copy (the ops that allocate the outputs; 120 of the fixture's 792 CPU ops) and its free 16 allocations
later, in kineto's own formatting, after the copy's other events. Three files:

- ``memory``: ops + kernels + memory events (the given size);
- ``same ops``: the same copies without the memory events (smaller: the issue's "same trace, no memory events");
- ``same size``: copies without memory events up to the memory file's size (the cost per MB).

Each is summarized (``python -m lightx2v.trace_summary FILE --json``, its own child process, wall time from
start to exit) --repeat times, alternating, and the fastest run of each counts. Printed: the time ratios
memory / same ops and memory / same size of the fastest runs, and memory / same ops of each round (their
median is the steadier figure on a loaded machine).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

from bench_trace_summary import _STEP, _TS, fixture_parts, measure

GOAL_RATIO = 1.2
KEEP = 16  # an allocation is freed this many allocations later
ALLOC_OPS = ("aten::empty", "aten::empty_like", "aten::empty_strided")

MEMORY_EVENT = """  {{
    "ph": "i",
    "cat": "cpu_instant_event",
    "s": "t",
    "name": "[memory]",
    "pid": {pid},
    "tid": {tid},
    "ts": {ts:.3f}
    ,
    "args": {{
      "Total Reserved": {reserved}, "Total Allocated": {total}, "Bytes": {nbytes}, "Device Id": 0, \
"Device Type": 1, "Addr": {addr}, "finished": false, "Ev Idx": {idx}
    }}
  }}"""


def _pieces() -> tuple[str, str, str, str, list[dict], float]:
    raw, array_start, array_end, timed, meta = fixture_parts()
    doc = json.loads(raw)
    events = doc["traceEvents"]
    allocs = sorted((e for e in events if e.get("cat") == "cpu_op" and e.get("name") in ALLOC_OPS),
                    key=lambda e: e["ts"])
    stamps = [e["ts"] for e in events if "ts" in e and e.get("ph") != "M"]
    span = max(e["ts"] + e.get("dur", 0) for e in events if "ts" in e) - min(stamps) + 500.0
    return raw[:array_start], raw[array_end:], timed, meta, allocs, span


def generate(path: Path, size_mb: float | None, copies: int | None, with_memory: bool) -> tuple[int, int]:
    """Write a trace of ``copies`` steps (or up to ``size_mb``); returns (copies, memory events)."""
    head, tail, timed, meta, allocs, span = _pieces()
    live: list[tuple[int, int]] = []
    total, addr, idx, n_mem = 0, 0x7F00_0000_0000, 0, 0
    with open(path, "w", encoding="utf-8") as f:
        f.write(head + "\n")
        written, k = len(head), 0
        while (copies is not None and k < copies) or (copies is None and written < size_mb * 1e6):
            shift = k * span
            text = _TS.sub(lambda m, shift=shift: f'"ts": {float(m.group(1)) + shift:.3f}', timed) if k else timed
            text = _STEP.sub(lambda m, k=k: f'"ProfilerStep#{int(m.group(1)) + k}"', text)
            if with_memory:
                events = []
                for j, op in enumerate(allocs):
                    nbytes = (j % 13 + 1) * 1 << 20
                    total += nbytes
                    addr += 1 << 21
                    live.append((addr, nbytes))
                    at = op["ts"] + shift + min(op.get("dur", 0), 1.0) / 2
                    events.append(MEMORY_EVENT.format(pid=op["pid"], tid=op["tid"], ts=at, reserved=total + (64 << 20),
                                                      total=total, nbytes=nbytes, addr=addr, idx=idx))
                    idx += 1
                    if len(live) > KEEP:
                        old, size = live.pop(0)
                        total -= size
                        events.append(MEMORY_EVENT.format(pid=op["pid"], tid=op["tid"], ts=at + 0.001,
                                                          reserved=total + (64 << 20), total=total, nbytes=-size,
                                                          addr=old, idx=idx))
                        idx += 1
                n_mem += len(events)
                text += ",\n" + ",\n".join(events)
            text = (",\n" if k else "") + text
            f.write(text)
            written += len(text)
            k += 1
        f.write(",\n" + meta + "\n" + tail)
    return k, n_mem


def summarize(path: Path, work: Path) -> float:
    out = work / "summary.json"
    r = measure([sys.executable, "-m", "lightx2v.trace_summary", str(path), "--json"], out, 1800)
    return r["wall_s"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size-mb", type=float, default=500, help="size of the memory trace (default 500)")
    parser.add_argument("--repeat", type=int, default=3, help="alternating runs per file; the fastest counts")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench_memory_summary_"))
    try:
        t = time.perf_counter()
        mem_path = work / "memory.pt.trace.json"
        copies, n_mem = generate(mem_path, args.size_mb, None, True)
        ops_path = work / "same_ops.pt.trace.json"
        generate(ops_path, None, copies, False)
        size_path = work / "same_size.pt.trace.json"
        generate(size_path, mem_path.stat().st_size / 1e6, None, False)
        files = {"memory": mem_path, "same ops": ops_path, "same size": size_path}
        for name, path in files.items():
            print(f"{name:<10} {path.stat().st_size / 1e6:8.1f} MB", flush=True)
        print(f"({copies} steps, {n_mem:,} memory events; generated in {time.perf_counter() - t:.0f} s)")
        check = json.loads(_summary_json(mem_path, work))["runs"][0]["ranks"][0]
        (dev,) = check["memory"]["devices"]
        assert len(check["steps"]) == copies and dev["events"] == n_mem, "the summary did not see every event"
        times: dict[str, list[float]] = {name: [] for name in files}
        for _ in range(args.repeat):
            for name, path in files.items():
                times[name].append(summarize(path, work))
        best = {name: min(ts) for name, ts in times.items()}
        print()
        for name, path in files.items():
            mb = path.stat().st_size / 1e6
            print(f"{name:<10} {best[name]:7.2f} s  {mb / best[name]:6.1f} MB/s   runs: "
                  + ", ".join(f"{x:.2f}" for x in times[name]))
        same_ops, same_size = best["memory"] / best["same ops"], best["memory"] / best["same size"]
        pairs = sorted(m / o for m, o in zip(times["memory"], times["same ops"], strict=True))
        print()
        print(f"memory / same ops, per alternating round: {', '.join(f'{r:.2f}' for r in pairs)} "
              f"(median {pairs[len(pairs) // 2]:.2f}x)")
        verdict = "met" if same_ops <= GOAL_RATIO else "NOT met"
        print(f"memory / same ops:  {same_ops:.2f}x (goal <= {GOAL_RATIO}x: {verdict})")
        print(f"memory / same size: {same_size:.2f}x (cost per MB of memory events vs other events)")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


def _summary_json(path: Path, work: Path) -> str:
    out = work / "check.json"
    measure([sys.executable, "-m", "lightx2v.trace_summary", str(path), "--json"], out, 1800)
    return out.read_text()


if __name__ == "__main__":
    sys.exit(main())
