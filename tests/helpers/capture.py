"""A small real torch.profiler capture, written the way our profiler writes (hidden temp name, then rename).

Usage: python tests/helpers/capture.py LOGDIR [RUN_NAME] [--worker NAME] [--fail]
Writes LOGDIR/RUN_NAME/<worker>.pt.trace.json and prints its path. `--fail` exits 3 before capturing
(a failing inference command for the supervisor tests).
"""

from __future__ import annotations

import argparse
import os
import sys
import time


def capture(run_dir: str, worker: str) -> str:
    import torch
    from torch.profiler import ProfilerActivity, profile, record_function, schedule

    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.GELU(), torch.nn.Linear(128, 64))
    x = torch.randn(32, 64)
    os.makedirs(run_dir, exist_ok=True)
    final = os.path.join(run_dir, f"{worker}.pt.trace.json")
    hidden = os.path.join(run_dir, f".{worker}.tmp")

    def export(prof):
        prof.export_chrome_trace(hidden)
        os.replace(hidden, final)

    with profile(activities=[ProfilerActivity.CPU], schedule=schedule(wait=1, warmup=1, active=1),
                 on_trace_ready=export, with_stack=True) as prof:
        for _ in range(3):
            with record_function("infer_main"):
                model(x)
            prof.step()
    return final


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("logdir", nargs="?", default="save_results/torch_profile")
    parser.add_argument("run", nargs="?", default=None)
    parser.add_argument("--worker", default="rank0_test")
    parser.add_argument("--fail", action="store_true")
    args = parser.parse_args()
    if args.fail:
        print("capture.py: failing on purpose", file=sys.stderr)
        return 3
    run = args.run or time.strftime("%Y%m%d-%H%M%S") + f"_{os.getpid()}_capture"
    print(capture(os.path.join(args.logdir, run), args.worker), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
