"""Agreement: our `--diff` against Holistic Trace Analysis' `TraceDiff` on the same pair (issue 16, item 6).

    pip install HolisticTraceAnalysis      # in the test extra (~100 s, ~500 MB: it pulls jupyterlab)
    python benchmarks/bench_diff_agreement.py
    python benchmarks/bench_diff_agreement.py --pair tests/fixtures/hta/trace_diff/control \
        tests/fixtures/hta/trace_diff/test

The pair is the real H200 fixture (tests/fixtures/h200_dit_stack.pt.trace.json.gz, one ProfilerStep) and a copy
with known edits: the layer-norm kernels removed, the 192x192 GEMM 1.5x slower, the GELU kernel renamed (one
kernel gone, one new), and the step duplicated (NEW has two ProfilerSteps). Each side is a run directory of its
own (one rank file each; HTA reads a folder).

HTA totals over the iterations it is given (we give it every ProfilerStep; its default is the first one only)
and we report per step, so its figures are compared with ours times the side's step count. For every kernel
name, the memsets, and every CPU op (category cpu_op), counts must match exactly and total durations within
rounding. HTA is run twice: as shipped, it rounds every event inward to whole microseconds (start up, end down:
each event loses 0 to < 2 us, a sub-microsecond one can go negative); with HTA_DISABLE_NS_ROUNDING=1 it keeps
kineto's nanoseconds, and the totals must then agree to 0.01 us. Prints the kernel rows, a line per check and
PASS/FAIL; exit 1 on a disagreement.

``--pair BASE NEW`` compares a pair we did not write instead (two folders of one trace each, such as HTA's own
``trace_diff`` pair: an A100 rank of an 8-rank NCCL job, old kineto with the correlation id in ``External id``, and
NEW with GPU events that have no launch record), with nanoseconds kept only: those traces' timestamps are whole
microseconds, so HTA's rounding changes nothing there. Where the two tools differ on such a pair, ours must equal
the trace itself (every event of that name, counted and summed from the file with ``json``): HTA leaves out GPU
events it cannot tie to a launch and some ops, and the script prints how many ("HTA leaves out"); a row where ours
differs from the file fails.
"""

from __future__ import annotations

import argparse
import copy
import gzip
import importlib.util
import json
import logging
import os
import sys
import tempfile
import time
import warnings
from importlib.metadata import version
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
FIXTURE = REPO / "tests" / "fixtures" / "h200_dit_stack.pt.trace.json.gz"

REMOVED = "vectorized_layer_norm_kernel"
SLOWED, FACTOR = "nvjet_sm90_tst_192x192", 1.5
RENAMED = ("GeluCUDAKernelImpl", "GeluCUDAKernelImplV2")
ID_KEYS = ("correlation", "External id", "Python id", "Python parent id", "Ev Idx", "Record function id")
ID_SHIFT = 10_000_000


def edited(doc: dict) -> dict:
    """NEW: the fixture with the edits above, its one step duplicated with shifted timestamps and fresh ids."""
    events = []
    for ev in doc["traceEvents"]:
        ev = copy.deepcopy(ev)
        name = ev.get("name", "")
        if ev.get("cat") == "kernel" and REMOVED in name:
            continue
        if ev.get("cat") == "kernel" and SLOWED in name:
            ev["dur"] = ev["dur"] * FACTOR
        if ev.get("cat") == "kernel" and RENAMED[0] in name:
            ev["name"] = name.replace(*RENAMED)
        events.append(ev)
    timed = [ev for ev in events if ev.get("ph") != "M" and "ts" in ev]
    span = max(ev["ts"] + ev.get("dur", 0) for ev in timed) - min(ev["ts"] for ev in timed) + 1000.0
    copies = []
    for ev in timed:
        ev = copy.deepcopy(ev)
        ev["ts"] += span
        if "id" in ev:  # flow events (ac2g) pair by id
            ev["id"] += ID_SHIFT
        for key in ID_KEYS:
            if isinstance(ev.get("args", {}).get(key), int) and ev["args"][key] >= 0:
                ev["args"][key] += ID_SHIFT
        if ev.get("name", "").startswith("ProfilerStep#"):
            ev["name"] = "ProfilerStep#5"
        copies.append(ev)
    return dict(doc, traceEvents=events + copies)


def write_pair(work: Path) -> tuple[Path, Path]:
    doc = json.loads(gzip.decompress(FIXTURE.read_bytes()))
    dirs = []
    for side, content in (("base", doc), ("new", edited(doc))):
        folder = work / side
        folder.mkdir()
        content = dict(content, distributedInfo={"rank": 0, "world_size": 1})  # HTA wants the rank named
        (folder / f"rank0_{side}.pt.trace.json").write_text(json.dumps(content))
        dirs.append(folder)
    return dirs[0], dirs[1]


def ours(base: Path, new: Path):
    from lightx2v.trace_summary.diff import compare_runs
    from lightx2v.trace_summary.summarize import summarize_paths

    (b,) = summarize_paths([str(base)])
    (n,) = summarize_paths([str(new)])
    (rank,) = compare_runs(b, n).ranks
    steps = {"base": rank.base_steps, "new": rank.new_steps}

    def totals(calls, time_us) -> dict[str, tuple[float, float]]:
        """Per-step figures back to the capture's totals, HTA's unit: {side: (count, total us)}."""
        return {side: ((getattr(calls, side) or 0.0) * n, (getattr(time_us, side) or 0.0) * n)
                for side, n in steps.items()}

    kernels = {k.name: totals(k.calls_per_step, k.time_per_step_us) for k in rank.kernels}
    for m in rank.memory:
        kernels["Memset (Device)" if m.kind == "memset" else "memcpy"] = totals(m.calls_per_step, m.time_per_step_us)
    cpu = {c.name: totals(c.calls_per_step, c.total_per_step_us) for c in rank.cpu_ops}
    return steps, kernels, cpu


def hta(base: Path, new: Path, rounding: bool):
    """HTA's TraceDiff tables, {name: {side: (count, total us)}} for kernels+memsets and for cpu_op names."""
    from hta.trace_diff import DeviceType, LabeledTrace, TraceDiff

    os.environ["HTA_DISABLE_NS_ROUNDING"] = "0" if rounding else "1"  # HTA reads it at every parse
    b, n = LabeledTrace("base", trace_dir=str(base)), LabeledTrace("new", trace_dir=str(new))
    out = {}
    for device in (DeviceType.GPU, DeviceType.CPU):
        # every ProfilerStep of each side (HTA's default is the first only), totals over them
        df = TraceDiff.compare_traces(b, n, control_iteration=b.iterations(), test_iteration=n.iterations(),
                                      device_type=device)
        out[device.name] = {
            name: {s: (float(row[f"{s}_counts"]), float(row[f"{s}_total_duration"])) for s in ("base", "new")}
            for name, row in df.iterrows()
        }
    memcpy = [out["GPU"].pop(name) for name in [n for n in out["GPU"] if n.startswith("Memcpy ")]]
    if memcpy:  # our diff keeps memcpys as one row, by kind
        out["GPU"]["memcpy"] = {s: (sum(m[s][0] for m in memcpy), sum(m[s][1] for m in memcpy))
                                for s in ("base", "new")}
    cpu_names = set()
    for lt in (b, n):
        ops = lt.extract_ops(iteration=lt.iterations(), device_type=DeviceType.CPU)
        summary = lt.get_ops_summary(ops)
        cpu_names |= set(summary.loc[summary["cat"] == "cpu_op", "name"])
    return (b.iterations(), n.iterations()), out["GPU"], {k: v for k, v in out["CPU"].items() if k in cpu_names}


GPU_CATS = {"kernel": None, "Kernel": None, "gpu_memset": "Memset (Device)", "gpu_memcpy": "memcpy",
            "Memcpy": "memcpy", "Memset": "Memset (Device)"}


def in_the_file(base: Path, new: Path) -> tuple[dict, dict]:
    """Every GPU event (memcpys as one row, as our diff keeps them) and every cpu_op of each side's one trace,
    {name: {side: (count, total us)}}: what a tool that drops nothing reports."""
    from lightx2v.trace_summary.reader import TraceStream

    gpu: dict = {}
    cpu: dict = {}
    for side, folder in (("base", base), ("new", new)):
        (path,) = [p for p in folder.iterdir() if p.is_file()]
        for batch in TraceStream(str(path)).batches():
            for ev in batch:
                cat, dur = ev.get("cat"), ev.get("dur")
                if ev.get("ph") != "X" or not isinstance(dur, (int, float)):
                    continue
                if cat in GPU_CATS:
                    rows, name = gpu, GPU_CATS[cat] or ev.get("name", "")
                elif cat == "cpu_op":
                    rows, name = cpu, ev.get("name", "")
                else:
                    continue
                count, total = rows.setdefault(name, {"base": (0, 0.0), "new": (0, 0.0)})[side]
                rows[name][side] = (count + 1, total + dur)
    return gpu, cpu


def compare(title: str, ours_rows: dict, hta_rows: dict, per_event_us: float, show: bool,
            truth: dict | None = None) -> tuple[list[str], str]:
    """Rows side by side (printed when `show`); the problems (a name only one tool reports, counts that differ,
    totals further apart than `per_event_us` per event) and a one-line account. With ``truth`` (the file's own
    figures), a row where ours equals the file is no problem, whatever HTA says: it is counted as HTA's omission."""
    problems, rows, largest, omitted, by_file = [], 0, 0.0, 0, 0
    if show:
        print(f"\n{title}")
        print(f"  {'name':<58} {'side':<5} {'count ours/HTA':>15} {'total us ours':>14} {'HTA':>12} {'|diff|':>8}")
    for name in sorted(set(ours_rows) | set(hta_rows), key=lambda n: -max(
            v[1] for v in (ours_rows.get(n) or hta_rows[n]).values())):
        if truth is not None and name in ours_rows and name not in hta_rows:
            hta_rows = dict(hta_rows, **{name: {"base": (0.0, 0.0), "new": (0.0, 0.0)}})
        if name not in ours_rows or name not in hta_rows:
            present = {side: v for side, v in (ours_rows.get(name) or hta_rows[name]).items() if v[0]}
            if present:
                problems.append(f"{name}: only {'ours' if name in ours_rows else 'HTA'} reports it ({present})")
            continue
        for side in ("base", "new"):
            (oc, ot), (hc, ht) = ours_rows[name][side], hta_rows[name][side]
            slack = max(oc, hc) * per_event_us + 0.01
            if truth is not None and (round(oc) != round(hc) or abs(ot - ht) > slack):
                fc, ft = truth.get(name, {}).get(side, (0, 0.0))
                if round(oc) == fc and abs(ot - ft) <= max(oc, 1) * 0.001 + 0.01:
                    omitted += fc - round(hc)
                    rows += 1
                    by_file += 1
                    continue
                problems.append(f"{name} {side}: ours {oc:g} calls {ot:.3f} us, the file {fc} calls {ft:.3f} us, "
                                f"HTA {hc:g} calls {ht:.3f} us")
            elif round(oc) != round(hc):
                problems.append(f"{name} {side}: count {oc:g} (ours) vs {hc:g} (HTA)")
            elif abs(ot - ht) > slack:
                problems.append(f"{name} {side}: total {ot:.3f} us (ours) vs {ht:.3f} us (HTA), beyond {slack:.2f} us")
            rows += 1
            largest = max(largest, abs(ot - ht))
            if show:
                print(f"  {name[:58]:<58} {side:<5} {f'{oc:g}/{hc:g}':>15} {ot:14.3f} {ht:12.3f} {abs(ot - ht):8.3f}")
    account = f"{rows} name/side rows, counts equal in {rows - sum('count' in p for p in problems)}, " \
              f"largest |total difference| {largest:.3f} us"
    if truth is not None:
        account = (f"{rows} name/side rows: {rows - by_file - len(problems)} as HTA, {by_file} differ and equal the "
                   f"file (HTA leaves out {omitted} events)")
    return problems, account


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pair", nargs=2, metavar=("BASE", "NEW"), type=Path,
                        help="two trace folders to compare instead of the fixture and its edited copy")
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    logging.disable(logging.WARNING)  # HTA logs every parse at INFO/WARNING
    if importlib.util.find_spec("hta") is None:
        raise SystemExit("needs Holistic Trace Analysis: pip install HolisticTraceAnalysis")

    with tempfile.TemporaryDirectory(prefix="bench_diff_agreement_") as tmp:
        base, new = args.pair or write_pair(Path(tmp))
        t0 = time.perf_counter()
        steps, our_kernels, our_cpu = ours(base, new)
        t1 = time.perf_counter()
        exact = hta(base, new, rounding=False)
        t2 = time.perf_counter()
        modes = [("HTA_DISABLE_NS_ROUNDING=1", exact, 0.0)]
        truth: tuple[dict | None, dict | None] = (None, None)
        if args.pair:
            truth = in_the_file(base, new)
        else:
            modes.append(("HTA as shipped (whole us)", hta(base, new, rounding=True), 2.0))
    iterations = exact[0]
    print(f"HolisticTraceAnalysis {version('HolisticTraceAnalysis')}; steps ours {steps}, HTA iterations "
          f"base {iterations[0]}, new {iterations[1]}; ours {t1 - t0:.2f} s, HTA {t2 - t1:.2f} s")
    problems = []
    lines = []
    for mode, (_, hta_kernels, hta_cpu), per_event in modes:
        for what, ours_rows, theirs, file_rows in (("kernels+memsets", our_kernels, hta_kernels, truth[0]),
                                                   ("CPU ops", our_cpu, hta_cpu, truth[1])):
            found, line = compare(f"{what}, {mode}: totals over all steps", ours_rows, theirs, per_event,
                                  show=what == "kernels+memsets" and per_event == 0.0 and not args.pair,
                                  truth=file_rows)
            problems += [f"[{mode}] {p}" for p in found]
            lines.append(f"{'ok  ' if not found else 'FAIL'} {mode:<26} {what:<16} {line}")
    print()
    for p in problems:
        print(f"DISAGREE {p}")
    print("\n".join(lines))
    print("PASS" if not problems else "FAIL")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
