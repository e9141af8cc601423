"""TensorBoard on large with_stack traces: stock torch-tb-profiler 0.4.3 vs our launcher, per size.

    python benchmarks/bench_tensorboard_large.py                      # 250, 500 and 1000 MB, stock and ours
    python benchmarks/bench_tensorboard_large.py --sizes 250 --servers ours --work /tmp/tb_large

Each trace is the H200 fixture (tests/fixtures/h200_dit_stack.pt.trace.json.gz) replicated to the size
(bench_efficiency.replicate: one ProfilerStep per copy, timestamps and correlation / External ids shifted, Python
frames included), plain JSON, written once into --work and reused. Each server starts alone on a logdir holding
only that trace; measured from its start: the run listed by /runs, then the Overview, Operator (pie and table)
and Kernel (pie and table) data answering, and the Trace view's route (its status and body size: ours answers a
notice past its limit). Peak RSS is the sum over TensorBoard's process tree (the plugin's loader children, its
forkserver and cache manager included), sampled every 0.2 s until the views answered. A server whose tree passes
--rss-cap-gb, or that has not answered within --timeout, is stopped and its row says so.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_efficiency import replicate

ROOT = Path(__file__).resolve().parent.parent

FIXTURE = ROOT / "tests" / "fixtures" / "h200_dit_stack.pt.trace.json.gz"
PLUGIN = "/data/plugin/pytorch_profiler"
RUN, WORKER = "big", "rank0_big"
VIEWS = (("overview", {}), ("operation", {"group_by": "Operation"}), ("operation/table", {"group_by": "Operation"}),
         ("kernel", {}), ("kernel/table", {"group_by": "Kernel"}))
PAGE = 4096


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def tree_rss(pid: int) -> int:
    """Bytes resident in `pid` and every descendant (RSS summed: pages a fork shares count in each process)."""
    children: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(name))
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        todo.extend(children.get(p, ()))
        try:
            with open(f"/proc/{p}/statm") as f:
                total += int(f.read().split()[1]) * PAGE
        except (OSError, IndexError, ValueError):
            pass
    return total


class Sampler(threading.Thread):
    def __init__(self, pid: int, cap: int):
        super().__init__(daemon=True)
        self.pid, self.cap, self.peak, self.over, self.running = pid, cap, 0, False, True

    def run(self) -> None:
        while self.running:
            rss = tree_rss(self.pid)
            self.peak = max(self.peak, rss)
            if rss > self.cap:
                self.over = True
                return
            time.sleep(0.2)


def get(url: str, timeout: float) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def view_url(port: int, route: str, **params: str) -> str:
    query = urllib.parse.urlencode({"run": RUN, "worker": WORKER, "span": "default", **params})
    return f"http://127.0.0.1:{port}{PLUGIN}/{route}?{query}"


def command(server: str, logdir: Path, port: int) -> list[str]:
    if server == "stock":
        return [sys.executable, "-m", "tensorboard.main", "--logdir", str(logdir), "--port", str(port),
                "--host", "127.0.0.1"]
    return [sys.executable, "-m", "lightx2v.tensorboard", "--logdir", str(logdir), "--port", str(port),
            "--host", "127.0.0.1"]


def measure(server: str, logdir: Path, timeout: float, cap: int, log: Path) -> dict:
    port = free_port()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    start = time.perf_counter()
    with open(log, "wb") as out:
        proc = subprocess.Popen(command(server, logdir, port), cwd=ROOT, env=env, stdout=out, stderr=out,
                                start_new_session=True)
    sampler = Sampler(proc.pid, cap)
    sampler.start()
    result: dict = {"server": server, "times": {}}

    def left() -> float:
        return start + timeout - time.perf_counter()

    def failed(why: str) -> dict:
        result["failed"] = why
        return result

    try:
        while True:  # listed
            if sampler.over:
                return failed(f"RSS over the {cap / 1e9:.0f} GB cap before listed")
            if proc.poll() is not None:
                return failed(f"TensorBoard exited ({proc.returncode}) before listed")
            if left() <= 0:
                return failed(f"not listed within {timeout:.0f} s")
            try:
                status, body = get(f"http://127.0.0.1:{port}{PLUGIN}/runs", 2)
                if status == 200 and RUN in json.loads(body)["runs"]:
                    break
                if status == 200 and not json.loads(body)["loading"] and time.perf_counter() - start > 20:
                    return failed("loading ended without the run (the parser failed: see the log)")
            except (OSError, ValueError, KeyError):
                pass
            time.sleep(0.2)
        result["times"]["listed"] = time.perf_counter() - start
        for route, params in VIEWS:
            if sampler.over:
                return failed(f"RSS over the {cap / 1e9:.0f} GB cap")
            try:
                status, body = get(view_url(port, route, **params), max(1.0, left()))
            except OSError as exc:
                return failed(f"{route}: {exc}")
            if status != 200:
                return failed(f"{route}: HTTP {status}")
            result["times"][route] = time.perf_counter() - start
        result["views_s"] = time.perf_counter() - start
        result["rss"] = sampler.peak
        t0 = time.perf_counter()
        try:
            status, body = get(view_url(port, "trace"), max(1.0, left()))
            result["trace"] = {"status": status, "mb": len(body) / 1e6, "s": time.perf_counter() - t0,
                               "notice": b"lightx2v" in body[:4096]}
        except OSError as exc:
            result["trace"] = {"error": str(exc)}
        return result
    finally:
        sampler.running = False
        result.setdefault("rss", sampler.peak)
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(15)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            pass
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()


def trace_of(work: Path, size_mb: int) -> Path:
    path = work / f"src_{size_mb}" / f"{WORKER}.pt.trace.json"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        t0 = time.perf_counter()
        copies = replicate(FIXTURE, tmp, size_mb)
        os.replace(tmp, path)
        print(f"wrote {path} ({path.stat().st_size / 1e6:.0f} MB, {copies} steps) in "
              f"{time.perf_counter() - t0:.0f} s", flush=True)
    return path


def logdir_for(work: Path, trace: Path, server: str) -> Path:
    logdir = work / f"logdir_{trace.parent.name}_{server}"
    dest = logdir / RUN / trace.name
    if not dest.exists():
        dest.parent.mkdir(parents=True, exist_ok=True)
        os.link(trace, dest)
    return logdir


def row(size: float, res: dict) -> str:
    t = res["times"]
    cells = [f"{t[k]:.0f} s" if k in t else "–" for k in ("listed", "overview", "operation/table", "kernel/table")]
    rss = f"{res['rss'] / 1e9:.1f} GB ({res['rss'] / (size * 1e6):.1f}×)"
    trace = res.get("trace") or {}
    if "status" in trace:
        what = "notice" if trace["notice"] else f"{trace['mb']:.0f} MB"
        trace_cell = f"HTTP {trace['status']}, {what}, {trace['s']:.1f} s"
    else:
        trace_cell = trace.get("error", "–")
    failed = res.get("failed", "")
    return f"| {size:.0f} MB | {res['server']} | " + " | ".join(cells) + f" | {rss} | {trace_cell} | {failed} |"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[250, 500, 1000], help="MB")
    parser.add_argument("--servers", nargs="+", choices=("stock", "ours"), default=["stock", "ours"])
    parser.add_argument("--work", type=Path, default=Path("/tmp/bench_tensorboard_large"),
                        help="where the traces are written (and kept for the next run)")
    parser.add_argument("--timeout", type=float, default=900, help="s per server and size")
    parser.add_argument("--rss-cap-gb", type=float, default=14)
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    rows = []
    for size in args.sizes:
        trace = trace_of(args.work, size)
        real = trace.stat().st_size / 1e6
        for server in args.servers:
            log = args.work / f"{server}_{size}.log"
            res = measure(server, logdir_for(args.work, trace, server), args.timeout, int(args.rss_cap_gb * 1e9), log)
            rows.append(row(real, res))
            print(rows[-1], f"(log: {log})", flush=True)
    print("\n| trace | TensorBoard | listed | Overview | Operator | Kernel | peak RSS (× file) | Trace view | failed |")
    print("|---|---|---|---|---|---|---|---|---|")
    print("\n".join(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
