"""Embedded inference on CPU: seconds per denoising step (tiny, small) and the cost of profiling a whole run.

Every number comes from real `python -m lightx2v.infer` processes started by this script:
- seconds/step: unprofiled runs; the CLI's own timer (`seconds.denoise` in its metadata JSON) / steps, with
  torch's default threads and with `--threads 1` (on a 2-core machine that also runs other work, 2 threads
  spin-wait for each other at every small op);
- profiled/unprofiled: the same run with `--profile` (capture at step 0: 1 wait + 3 warmup + 1 active
  calls) and `--no-profile`, alternated A/B/A/B so machine load hits both alike; both the process wall time
  and the in-process denoise time, medians over the repeats.

    python benchmarks/bench_infer.py [--repeats 3] [--presets tiny small] [--threads default 1] [--ratio_preset tiny]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def run_cli(workdir: Path, *args: str, timeout: float | None = None) -> tuple[float, dict]:
    """(process wall seconds, metadata) of one CLI run in `workdir`; its output goes to `workdir`/cli.log."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))
    env.pop("LIGHTX2V_TORCH_PROFILE", None)
    workdir.mkdir(parents=True, exist_ok=True)
    save = workdir / "out.png"
    t0 = time.perf_counter()
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "lightx2v.infer",
            *args,
            "--save_result_path",
            str(save),
            "--tb_dir",
            str(workdir / "tb"),
        ],
        cwd=workdir,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    wall = time.perf_counter() - t0
    (workdir / "cli.log").write_text(f"$ lightx2v.infer {' '.join(args)}\n{proc.stdout}{proc.stderr}")
    if proc.returncode:
        sys.exit(f"run failed ({proc.returncode}): {' '.join(args)}\n{proc.stderr[-2000:]}")
    return wall, json.loads(save.with_suffix(".json").read_text())


def per_step(preset: str, steps: int, repeats: int, tmp: Path, threads: str) -> dict:
    denoise, init = [], []
    extra = ["--threads", threads] if threads != "default" else []
    for i in range(repeats):
        args = ["--preset", preset, "--infer_steps", str(steps), "--no-profile", *extra]
        _, meta = run_cli(tmp / f"{preset}-{threads}-{i}", *args)
        denoise.append(meta["seconds"]["denoise"] / steps)
        init.append(meta["seconds"]["init"])
    return {
        "s_per_step": statistics.median(denoise),
        "min": min(denoise),
        "init_s": statistics.median(init),
        "meta": meta,
    }


def profile_ratio(preset: str, steps: int, repeats: int, tmp: Path, threads: str) -> dict:
    walls = {"profiled": [], "unprofiled": []}
    denoise = {"profiled": [], "unprofiled": []}
    for i in range(repeats):
        for mode in ("profiled", "unprofiled"):  # A/B alternation within the same period of machine load
            flag = "--profile" if mode == "profiled" else "--no-profile"
            extra = ["--threads", threads] if threads != "default" else []
            wall, meta = run_cli(
                tmp / f"ratio-{mode}-{i}", "--preset", preset, "--infer_steps", str(steps), flag, *extra
            )
            walls[mode].append(wall)
            denoise[mode].append(meta["seconds"]["denoise"])
            if mode == "profiled":
                assert meta["infer_calls"] == steps + 4, meta["infer_calls"]
    med = {k: {m: statistics.median(v[m]) for m in v} for k, v in (("wall", walls), ("denoise", denoise))}
    return {"median": med, "walls": walls, "denoise": denoise}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--presets", nargs="+", default=["tiny", "small"])
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--ratio_preset", default="tiny")
    p.add_argument("--ratio_threads", default="1", help="threads for the A/B runs (1: least noise on a busy box)")
    p.add_argument("--threads", nargs="+", default=["default", "1"], help="torch CPU threads to compare")
    args = p.parse_args()

    import torch

    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, {os.cpu_count()} CPUs, ", end="")
    print(f"load average {os.getloadavg()[0]:.2f}")
    with tempfile.TemporaryDirectory(prefix="bench_infer_") as d:
        tmp = Path(d)
        print("\n== seconds per denoising step (CPU fp32, CFG on = 2 forwards/step, --no-profile, ", end="")
        print(f"median of {args.repeats})")
        print(f"{'preset':<8} {'params':>10} {'resolution':>11} {'tokens':>7} {'threads':>8} {'s/step':>8} {'best':>8}")
        for preset in args.presets:
            for threads in args.threads:
                r = per_step(preset, args.steps, args.repeats, tmp, threads)
                a = r["meta"]["arch"]
                tokens = (a["height"] // 16) * (a["width"] // 16)
                print(
                    f"{preset:<8} {r['meta']['param_count'] / 1e6:>9.1f}M {a['height']:>5}x{a['width']:<5} {tokens:>7}"
                    f" {r['meta']['threads']:>8} {r['s_per_step']:>8.3f} {r['min']:>8.3f}"
                )

        print(f"\n== profiled / unprofiled, whole run ({args.ratio_preset}, {args.steps} steps, ", end="")
        print(f"threads {args.ratio_threads}, A/B x{args.repeats})")
        r = profile_ratio(args.ratio_preset, args.steps, args.repeats, tmp, args.ratio_threads)
        for key, label in (("wall", "process wall (python start to exit)"), ("denoise", "denoising loop (in-process)")):
            prof, plain = r["median"][key]["profiled"], r["median"][key]["unprofiled"]
            print(f"{label:<38} profiled {prof:7.2f} s  unprofiled {plain:7.2f} s  ratio {prof / plain:.2f}x")
        print(f"  raw walls: {json.dumps({k: [round(x, 2) for x in v] for k, v in r['walls'].items()})}")
    print(f"\nload at end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
