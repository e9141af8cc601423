"""Benchmark: exporting a large torch.profiler capture (issue 28, item 5): torch's own path against the drop-in's.

    nice -n 10 python benchmarks/bench_export.py                  # a 1000 MB with_stack trace
    python benchmarks/bench_export.py --size-mb 50 --rounds 2

The capture is CPU-only and cheap to make large: a Python recursion nine calls deep around one tiny ``x + 1``,
repeated, under ``torch.profiler.profile(with_stack=True, record_shapes=True)`` -- Python frames are most of the
events, as in a real with_stack capture. A small calibration capture gives the bytes per repetition. kineto saves
a capture only once ("Trace is already saved"), so every export gets its own fresh capture; the methods alternate
(their order rotates every round), all in this one process:

- torch gzip: ``torch.profiler.tensorboard_trace_handler(dir, use_gzip=True)(prof)`` (plain JSON to /tmp, then
  recompressed line by line at gzip's level 9), the path TensorBoard users take;
- torch plain: ``prof.export_chrome_trace(path)``;
- ours gzip / ours plain: the drop-in's ``_export_atomically`` (hidden temporary name, gzip level 6, rename).

Per export: wall time, the process's peak RSS during it (the high-water mark reset through /proc/self/clear_refs
before it where the kernel allows, else the VmHWM delta) and the output's size. Ratios are ours against torch's,
from the fastest round of each. The files are deleted after each measurement.
"""

from __future__ import annotations

import argparse
import gc
import sys
import tempfile
import time
from pathlib import Path

import torch
import torch.profiler as tp

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from lightx2v.utils.torch_trace_profiler import _export_atomically, _format_bytes

METHODS = ("torch gzip", "ours gzip", "torch plain", "ours plain")


def _frame(x: torch.Tensor, depth: int) -> torch.Tensor:
    return x + 1 if depth == 0 else _frame(x, depth - 1)


def capture(repetitions: int) -> tp.profile:
    x = torch.ones(2)
    with tp.profile(activities=[tp.ProfilerActivity.CPU], with_stack=True, record_shapes=True) as prof:
        for _ in range(repetitions):
            _frame(x, 8)
    return prof


def status() -> tuple[int, int]:
    """(VmRSS, VmHWM) in bytes."""
    fields = {}
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(("VmRSS:", "VmHWM:")):
                key, value = line.split(":", 1)
                fields[key] = int(value.split()[0]) * 1024
    return fields["VmRSS"], fields["VmHWM"]


def reset_high_water() -> bool:
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def export(method: str, prof: tp.profile, work: Path) -> tuple[float, int, int]:
    """(seconds, peak RSS during the export, output bytes)."""
    out = work / method.replace(" ", "_")
    out.mkdir()
    reset = reset_high_water()
    rss_before, hwm_before = status()
    started = time.perf_counter()
    if method == "torch gzip":
        tp.tensorboard_trace_handler(str(out), worker_name="w", use_gzip=True)(prof)
    elif method == "torch plain":
        prof.export_chrome_trace(str(out / "w.pt.trace.json"))
    else:
        _export_atomically(prof, str(out / ("w.pt.trace.json" + (".gz" if "gzip" in method else ""))),
                           "gzip" in method)
    seconds = time.perf_counter() - started
    _, hwm = status()
    peak = hwm if reset or hwm > hwm_before else rss_before  # without a reset, an unraised mark says no more
    files = list(out.iterdir())
    assert len(files) == 1, files
    size = files[0].stat().st_size
    files[0].unlink()
    out.rmdir()
    return seconds, peak, size


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size-mb", type=float, default=1000)
    parser.add_argument("--rounds", type=int, default=1)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench_export.") as tmp:
        work = Path(tmp)
        calibration = 2000
        _, _, plain = export("torch plain", capture(calibration), work)
        repetitions = max(1, int(args.size_mb * 1e6 / (plain / calibration)))
        print(f"{repetitions} repetitions for about {args.size_mb:.0f} MB of plain JSON "
              f"(calibration: {plain / calibration:.0f} B each); high-water reset: {reset_high_water()}", flush=True)
        results: dict[str, list[tuple[float, int, int]]] = {m: [] for m in METHODS}
        for round_ in range(args.rounds):
            order = METHODS[round_ % len(METHODS):] + METHODS[:round_ % len(METHODS)]
            for method in order:
                gc.collect()
                started = time.perf_counter()
                prof = capture(repetitions)
                made = time.perf_counter() - started
                rss, _ = status()
                seconds, peak, size = export(method, prof, work)
                results[method].append((seconds, peak, size))
                print(f"round {round_ + 1} {method:<12} capture {made:6.1f} s (RSS {_format_bytes(rss)}), export "
                      f"{seconds:6.1f} s, peak RSS {_format_bytes(peak)}, {_format_bytes(size)}", flush=True)
                del prof
        print()
        print("| export | time | peak RSS during export | output | time vs torch | RSS vs torch |")
        print("|---|---:|---:|---:|---:|---:|")
        best = {m: min(results[m]) for m in METHODS}
        for method in METHODS:
            seconds, peak, size = best[method]
            base = best["torch gzip" if "gzip" in method else "torch plain"]
            ratio = "" if method.startswith("torch") else f"{seconds / base[0]:.2f}x"
            rss_ratio = "" if method.startswith("torch") else f"{peak / base[1]:.2f}x"
            print(f"| {method} | {seconds:.1f} s | {_format_bytes(peak)} | {_format_bytes(size)} | {ratio} | "
                  f"{rss_ratio} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
