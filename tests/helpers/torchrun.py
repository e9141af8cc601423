"""Run a program under torchrun (2 ranks, gloo, CPU) the way CI does, and read the lines its ranks print.

`TwoNodeJob` runs one job as two "nodes" on this machine: two torchrun agents, each in its own UTS namespace
(`unshare --uts`, needs root) so each has its own host name, meeting through c10d rendezvous on 127.0.0.1 (only
the host name is split; the network, the file system and the processes are shared).

The one place that decides what a torchrun job's exit may be: exactly 0, nothing tolerated, no retry. A rank
used to abort at interpreter exit now and then ("terminate called without an active exception", SIGABRT) after
its work was done, because the profiler's inductor probe left the process group pinned past
destroy_process_group() (docs/torchrun.md). The profiler now unpins it and our programs end with barrier +
destroy, which measured 0 aborts (benchmarks/bench_torchrun_exit.py), so an abort here is a regression to fix,
not luck to retry; the message says where to look.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path

from conftest import free_port, subprocess_env
from helpers.procs import descendants


def run_torchrun(program: Path, *args: str, cwd: Path, nproc: int = 2, timeout: float = 300) -> str:
    """The job's combined output; AssertionError (with that output) unless torchrun exited 0."""
    proc = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={nproc}", str(program),
         *args],
        capture_output=True, text=True, timeout=timeout, cwd=cwd, env=subprocess_env(OMP_NUM_THREADS="1"),
    )
    output = proc.stdout + proc.stderr
    _assert_exited_0(proc.returncode, output, "torchrun")
    return output


def _assert_exited_0(returncode: int, output: str, who: str) -> None:
    hint = (" (a rank aborted at exit: is a process group still pinned after destroy_process_group()? "
            "see the EXIT lines and docs/torchrun.md)" if "terminate called" in output else "")
    assert returncode == 0, f"{who} exited {returncode}{hint}\n{output}"


class TwoNodeJob:
    """One torchrun job on the "nodes" named by `cwds`' keys (two in our tests), node `host` running in
    `cwds[host]`; a context manager.

    Each node is `torchrun --nnodes=2 --nproc-per-node=NPROC --rdzv-backend=c10d --rdzv-endpoint=127.0.0.1:PORT`
    under `unshare --uts` with its own host name. `--local-addr=127.0.0.1`: the agents otherwise advertise their
    host name, which resolves nowhere here; GLOO_SOCKET_IFNAME=lo for the same reason. Each node's combined
    output goes to `<cwd>/<host>.log`; `node_env[host]` adds to one node's environment. Leaving the `with` block
    kills whatever still runs.
    """

    def __init__(self, program: Path, *args: str, cwds: dict[str, Path], nproc: int = 1,
                 node_env: dict[str, dict[str, str]] | None = None, **env: str) -> None:
        port, job_id = free_port(), f"job{uuid.uuid4().hex[:8]}"
        self.logs = {host: Path(cwd) / f"{host}.log" for host, cwd in cwds.items()}
        self.procs: dict[str, subprocess.Popen] = {}
        for host, cwd in cwds.items():
            with open(self.logs[host], "wb") as log:
                self.procs[host] = subprocess.Popen(
                    ["unshare", "--uts", "sh", "-c", 'hostname "$0" && exec "$@"', host,
                     sys.executable, "-m", "torch.distributed.run", f"--nnodes={len(cwds)}",
                     f"--nproc-per-node={nproc}", "--rdzv-backend=c10d", f"--rdzv-endpoint=127.0.0.1:{port}",
                     f"--rdzv-id={job_id}", "--local-addr=127.0.0.1", str(program), *args],
                    cwd=cwd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                    env=subprocess_env(**{"OMP_NUM_THREADS": "1", "GLOO_SOCKET_IFNAME": "lo", **env,
                                          **(node_env or {}).get(host, {})}))

    def output(self, host: str) -> str:
        return self.logs[host].read_text(errors="replace")

    def on(self, host: str, *argv: str) -> list[str]:
        """`argv` as a command run on node `host`: in that node's UTS namespace (`nsenter`), so with its host name."""
        return ["nsenter", "--uts", f"--target={self.procs[host].pid}", *argv]

    def wait(self, timeout: float = 300) -> dict[str, str]:
        """Each node's output once both agents ended; AssertionError (with the outputs) unless both exited 0."""
        for host, proc in self.procs.items():
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()
                raise AssertionError(f"node {host} still ran after {timeout} s\n" + self._all_output()) from None
        outputs = {host: self.output(host) for host in self.procs}
        for host, proc in self.procs.items():
            if proc.returncode != 0 and "unshare:" in outputs[host]:
                raise AssertionError(f"node {host}: `unshare --uts` failed (these tests need root)\n{outputs[host]}")
            _assert_exited_0(proc.returncode, self._all_output(), f"torchrun on node {host}")
        return outputs

    def kill(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                for pid in (proc.pid, *descendants(proc.pid)):  # torchrun starts each worker in its own session
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                proc.wait(10)

    def _all_output(self) -> str:
        return "\n".join(f"--- node {host} ---\n{self.output(host)}" for host in self.procs)

    def __enter__(self) -> "TwoNodeJob":
        return self

    def __exit__(self, *exc: object) -> None:
        self.kill()


def rows(output: str, tag: str) -> dict[int, dict[str, str]]:
    """``TAG rank=R key=value ...`` lines, by rank (each rank writes a line in one write, so none are glued)."""
    found = [dict(kv.split("=", 1) for kv in line.split()[1:]) for line in output.splitlines()
             if line.startswith(tag + " ")]
    return {int(row["rank"]): row for row in found}
