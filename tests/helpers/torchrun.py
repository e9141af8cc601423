"""Run a program under torchrun (2 ranks, gloo, CPU) the way CI does, and read the lines its ranks print.

The one place that decides what a torchrun job's exit may be: exactly 0, nothing tolerated, no retry. A rank
used to abort at interpreter exit now and then ("terminate called without an active exception", SIGABRT) after
its work was done, because the profiler's inductor probe left the process group pinned past
destroy_process_group() (docs/torchrun.md). The profiler now unpins it and our programs end with barrier +
destroy, which measured 0 aborts (benchmarks/bench_torchrun_exit.py), so an abort here is a regression to fix,
not luck to retry; the message says where to look.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from conftest import subprocess_env


def run_torchrun(program: Path, *args: str, cwd: Path, nproc: int = 2, timeout: float = 300) -> str:
    """The job's combined output; AssertionError (with that output) unless torchrun exited 0."""
    proc = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={nproc}", str(program),
         *args],
        capture_output=True, text=True, timeout=timeout, cwd=cwd, env=subprocess_env(OMP_NUM_THREADS="1"),
    )
    output = proc.stdout + proc.stderr
    hint = (" (a rank aborted at exit: is a process group still pinned after destroy_process_group()? "
            "see the EXIT lines and docs/torchrun.md)" if "terminate called" in output else "")
    assert proc.returncode == 0, f"torchrun exited {proc.returncode}{hint}\n{output}"
    return output


def rows(output: str, tag: str) -> dict[int, dict[str, str]]:
    """``TAG rank=R key=value ...`` lines, by rank (each rank writes a line in one write, so none are glued)."""
    found = [dict(kv.split("=", 1) for kv in line.split()[1:]) for line in output.splitlines()
             if line.startswith(tag + " ")]
    return {int(row["rank"]): row for row in found}
