"""How often does a profiled 2-rank torchrun job (gloo, CPU) exit non-zero after its work is done?

A rank can abort at interpreter exit with "terminate called without an active exception" when its process group
outlives ``destroy_process_group()`` (docs/torchrun.md explains why). This script runs each variant N times under
the same load, round-robin (run i of every variant, then run i+1), and prints the failure rate per variant:

- ``module``: the user-like job: a new ``TorchTraceProfileContext`` per step around a target holding an
  ``all_reduce``, then ``destroy_process_group()`` (no barrier);
- ``module-unfixed``: the same with the module's mitigation (``_unpin_process_group_defaults``) replaced by a
  no-op in the job, i.e. the module as it was before the fix;
- ``test-program``: ``tests/programs/distributed_capture.py`` (module capture, barrier + destroy), as CI runs it;
- ``bare-profiler``: bare ``torch.profiler`` + ``all_reduce`` + barrier + destroy;
- ``bare-profiler-early-import``: the same with ``torch.distributed.nn.functional`` imported before
  ``init_process_group`` (the workaround for users' own code);
- ``dynamo-import``: no profiler, ``import torch._dynamo`` after ``init_process_group``;
- ``no-profiler``: ``all_reduce`` + barrier + destroy.

A run counts as failed when torchrun exits non-zero, or when a rank's work is missing (its RESULT line with the
expected all_reduce sum). Each rank also reports, after ``destroy_process_group()``, how many collectives of
``torch.distributed.nn.functional`` still hold a ProcessGroup default and how many gloo threads are alive: the
mechanism, visible in every run, not only in the ones that abort.

    python benchmarks/bench_torchrun_exit.py [--runs 40] [--hogs 2] [--variants module module-unfixed ...]

``--hogs K`` starts K busy-loop processes for the duration (each also stops itself after ``--hog_limit_s``), so the
figure does not depend on what else the machine happens to run. Re-run after a torch upgrade: ``module-unfixed``
and ``bare-profiler`` show whether upstream still pins the group; ``module`` must stay at 0.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TEST_PROGRAM = REPO / "tests" / "programs" / "distributed_capture.py"
VARIANTS = ("module", "module-unfixed", "test-program", "bare-profiler", "bare-profiler-early-import",
            "dynamo-import", "no-profiler")
DEFAULT_VARIANTS = ("module", "module-unfixed", "test-program", "bare-profiler", "no-profiler")
SIDE = 16


# ----------------------------------------------------------------------------------------- one rank (the job)
def job(variant: str) -> None:
    """One rank of one run; started by torchrun with ``--job VARIANT``."""
    import torch
    import torch.distributed as dist

    if variant == "bare-profiler-early-import":
        import torch.distributed.nn.functional
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    x = torch.ones(SIDE, SIDE) * (rank + 1)

    def step() -> torch.Tensor:
        y = torch.relu(x @ x)
        dist.all_reduce(y)
        return y

    if variant in ("module", "module-unfixed"):
        from lightx2v.utils import torch_trace_profiler as ttp

        if variant == "module-unfixed":
            ttp._unpin_process_group_defaults = lambda: None
        for _ in range(3):  # a new context at every denoising step, as LightX2V's runners do
            with ttp.TorchTraceProfileContext("bench_exit", tb_dir="tb") as profile:
                y = profile.run(step)
    elif variant.startswith("bare-profiler"):
        import torch.profiler as tp

        with tp.profile(activities=[tp.ProfilerActivity.CPU], schedule=tp.schedule(wait=1, warmup=1, active=1),
                        on_trace_ready=lambda p: p.export_chrome_trace(f"trace.rank{rank}.json")) as prof:
            for _ in range(3):
                y = step()
                prof.step()
    else:
        if variant == "dynamo-import":
            import torch._dynamo
        y = step()
    sys.stdout.write(f"RESULT rank={rank} sum={float(y.sum())}\n")
    sys.stdout.flush()
    if variant != "module" and variant != "module-unfixed":
        dist.barrier()
    dist.destroy_process_group()
    sys.stdout.write(f"EXIT rank={rank} {exit_state()}\n")
    sys.stdout.flush()


def exit_state() -> str:
    """``pinned=NAMES gloo_threads=NAMES`` (``-`` for none): what still holds, and runs for, a process group."""
    from lightx2v.utils.distributed import gloo_threads_settled, pinned_group_defaults  # the repo is on the job's path

    return f"pinned={','.join(pinned_group_defaults()) or '-'} gloo_threads={','.join(gloo_threads_settled()) or '-'}"


# ------------------------------------------------------------------------------------------------ the runner
def expected_sum() -> float:
    return float(sum(SIDE * (rank + 1) ** 2 for rank in (0, 1)) * SIDE * SIDE)


def run_once(variant: str, workdir: Path, timeout: float) -> dict:
    """One torchrun job; what it did and how it ended."""
    workdir.mkdir(parents=True, exist_ok=True)
    target = [str(TEST_PROGRAM), "tensorboard"] if variant == "test-program" else [__file__, "--job", variant]
    env = dict(os.environ, OMP_NUM_THREADS="1",
               PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))
    env.pop("LIGHTX2V_TORCH_PROFILE", None)
    try:
        proc = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
                               *target], cwd=workdir, env=env, capture_output=True, text=True, timeout=timeout)
        returncode, output = proc.returncode, proc.stdout + proc.stderr
    except subprocess.TimeoutExpired as exc:
        returncode = None
        output = "".join(s.decode(errors="replace") if isinstance(s, bytes) else (s or "")
                         for s in (exc.stdout, exc.stderr))
    sums = dict(re.findall(r"^RESULT rank=(\d+) .*?sum=(\S+)", output, re.M))
    exits = re.findall(r"^EXIT rank=\d+ .*?pinned=(\S+) gloo_threads=(\S+)", output, re.M)
    return {
        "returncode": returncode,
        "terminate": "terminate called" in output,
        "work_ok": sums.keys() == {"0", "1"} and all(float(s) == expected_sum() for s in sums.values()),
        "pinned": any(p != "-" for p, _ in exits),
        "threads": any(t != "-" for _, t in exits),
        "reported": len(exits) == 2,
        "output": output,
    }


def start_hogs(count: int, limit_s: float) -> list[subprocess.Popen]:
    """Busy loops that stop themselves after `limit_s` even if this script dies."""
    code = f"import time\nend = time.monotonic() + {limit_s}\nwhile time.monotonic() < end:\n    pass\n"
    return [subprocess.Popen([sys.executable, "-c", code]) for _ in range(count)]


def stop_hogs(hogs: list[subprocess.Popen]) -> None:
    for hog in hogs:
        hog.terminate()
    for hog in hogs:
        try:
            hog.wait(10)
        except subprocess.TimeoutExpired:
            hog.kill()
            hog.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--job", choices=VARIANTS, help=argparse.SUPPRESS)
    parser.add_argument("--runs", type=int, default=40, help="runs per variant (default 40)")
    parser.add_argument("--variants", nargs="+", choices=VARIANTS, default=list(DEFAULT_VARIANTS))
    parser.add_argument("--hogs", type=int, default=0, help="busy-loop processes to run meanwhile (default 0)")
    parser.add_argument("--hog_limit_s", type=float, default=3600, help="each hog stops itself after this")
    parser.add_argument("--timeout_s", type=float, default=300, help="per torchrun job")
    parser.add_argument("--show_failures", action="store_true", help="print the tail of each failed run's output")
    args = parser.parse_args()
    if args.job:
        return job(args.job)
    if args.runs < 1 or args.hogs < 0:
        parser.error("--runs must be >= 1 and --hogs >= 0")

    import torch

    stats = {v: [] for v in args.variants}
    hogs = start_hogs(args.hogs, args.hog_limit_s)
    started = time.monotonic()
    load_before = os.getloadavg()[0]
    try:
        with tempfile.TemporaryDirectory(prefix="bench_torchrun_exit_") as tmp:
            for i in range(args.runs):
                for variant in args.variants:
                    outcome = run_once(variant, Path(tmp) / f"{variant}_{i}", args.timeout_s)
                    stats[variant].append(outcome)
                    failed = outcome["returncode"] != 0 or not outcome["work_ok"]
                    if failed and args.show_failures:
                        print(f"--- {variant} run {i}: rc={outcome['returncode']}\n{outcome['output'][-1500:]}")
                tally = ", ".join(f"{v} {sum(o['returncode'] != 0 for o in outs)}" for v, outs in stats.items())
                print(f"  round {i + 1}/{args.runs} ({time.monotonic() - started:.0f} s), exit != 0 so far: {tally}",
                      file=sys.stderr)
    except KeyboardInterrupt:  # Ctrl-C: the table of the runs done so far
        print("interrupted: the table counts the runs completed", file=sys.stderr)
    finally:
        stop_hogs(hogs)
    print(f"torch {torch.__version__}, 2 ranks, gloo, CPU, {args.hogs} hog(s) of this script, "
          f"{os.cpu_count()} CPUs, load avg {load_before:.1f} at start, {os.getloadavg()[0]:.1f} at end, "
          f"{time.monotonic() - started:.0f} s")
    print("| variant | runs | exit != 0 | terminate | work missing | timeout | group pinned after destroy "
          "| gloo threads after destroy |")
    print("|---|---|---|---|---|---|---|---|")
    for variant, outcomes in stats.items():
        n = len(outcomes)
        bad = sum(o["returncode"] != 0 for o in outcomes)

        def count(key: str, outcomes: list = outcomes) -> int:
            return sum(bool(o[key]) for o in outcomes)

        reported = count("reported")
        print(f"| {variant} | {n} | {bad}/{n} | {count('terminate')} | {n - count('work_ok')} "
              f"| {sum(o['returncode'] is None for o in outcomes)} | {count('pinned')}/{reported} "
              f"| {count('threads')}/{reported} |")


if __name__ == "__main__":
    main()
