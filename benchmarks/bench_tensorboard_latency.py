"""How fast a capture shows up in TensorBoard: our launcher vs stock TensorBoard, same logdir, same run.

1. Trace landing -> run listed by /data/plugin/pytorch_profiler/runs, over N captures (default 10), with
   `python -m lightx2v.tensorboard` and stock `tensorboard` watching the same logdir at the same time.
   Each capture is a real torch.profiler CPU trace (made once, then landed atomically in a new run dir).
2. Start -> TensorBoard answering HTTP: supervisord with docker/supervisord.conf, our launcher alone,
   stock TensorBoard alone.

Usage: python benchmarks/bench_tensorboard_latency.py [--captures 10] [--starts 3] [--trace PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def get(url: str, timeout: float = 2.0):
    with urllib.request.urlopen(url, timeout=timeout) as response:
        return response.status, response.read()


def answers(port: int) -> bool:
    try:
        return get(f"http://127.0.0.1:{port}/")[0] == 200
    except OSError:
        return False


def listed(port: int) -> list[str]:
    try:
        return json.loads(get(f"http://127.0.0.1:{port}/data/plugin/pytorch_profiler/runs")[1])["runs"]
    except OSError:
        return []


def start(args: list[str], cwd: Path, env: dict | None = None) -> subprocess.Popen:
    return subprocess.Popen(args, cwd=cwd, env=env or ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


def make_trace(work: Path) -> Path:
    out = subprocess.run([sys.executable, str(ROOT / "tests" / "helpers" / "capture.py"), str(work / "src"), "cap"],
                         env=ENV, capture_output=True, text=True, check=True)
    return Path(out.stdout.strip().splitlines()[-1])


def land(src: Path, run_dir: Path) -> float:
    run_dir.mkdir(parents=True)
    tmp = run_dir / ".landing.tmp"
    shutil.copyfile(src, tmp)
    landed = time.monotonic()
    os.replace(tmp, run_dir / src.name)
    return landed


def wait_started(port: int, proc: subprocess.Popen, t0: float, limit: float = 120) -> float:
    while time.monotonic() - t0 < limit:
        if answers(port):
            return time.monotonic() - t0
        if proc.poll() is not None:
            raise RuntimeError(f"{proc.args} exited with {proc.returncode}")
        time.sleep(0.05)
    raise RuntimeError(f"{proc.args} did not answer within {limit} s")


def bench_listing(trace: Path, work: Path, captures: int) -> dict[str, list[float]]:
    logdir = work / "logdir"
    land(trace, logdir / "warmup")
    servers = {}
    ports = {"lightx2v.tensorboard": free_port(), "stock tensorboard": free_port()}
    servers["lightx2v.tensorboard"] = start([sys.executable, "-m", "lightx2v.tensorboard", "--logdir", str(logdir),
                                             "--port", str(ports["lightx2v.tensorboard"]), "--host", "127.0.0.1"], ROOT)
    servers["stock tensorboard"] = start([sys.executable, "-m", "tensorboard.main", "--logdir", str(logdir),
                                          "--port", str(ports["stock tensorboard"]), "--host", "127.0.0.1"], ROOT)
    results: dict[str, list[float]] = {name: [] for name in servers}
    try:
        for name, port in ports.items():
            t0 = time.monotonic()
            while "warmup" not in listed(port):
                if time.monotonic() - t0 > 120:
                    raise RuntimeError(f"{name} never listed the warm-up run")
                time.sleep(0.1)
        for i in range(captures):
            time.sleep(random.uniform(0.0, 10.5))  # land at a random point of stock's 10 s rescan cycle
            run = f"capture{i:02d}"
            landed = land(trace, logdir / run)

            def watch(name: str, port: int, run: str = run, landed: float = landed) -> None:
                while run not in listed(port):
                    if time.monotonic() - landed > 60:
                        results[name].append(float("inf"))
                        return
                    time.sleep(0.02)
                results[name].append(time.monotonic() - landed)

            threads = [threading.Thread(target=watch, args=item) for item in ports.items()]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            print(f"  capture {i + 1:2d}/{captures}: " + "  ".join(
                f"{name} {results[name][-1]:.2f} s" for name in ports), flush=True)
    finally:
        for proc in servers.values():
            stop(proc)
    return results


def bench_startup(work: Path, starts: int) -> dict[str, list[float]]:
    conf = ROOT / "docker" / "supervisord.conf"
    results: dict[str, list[float]] = {"supervisord stack": [], "lightx2v.tensorboard": [], "stock tensorboard": []}
    for i in range(starts):
        for name in results:
            port, cwd = free_port(), work / f"start{i}_{name.replace(' ', '_')}"
            cwd.mkdir()
            env = dict(ENV)
            if name == "supervisord stack":
                (cwd / "run").mkdir()
                env.update(LIGHTX2V_SUPERVISOR_RUN_DIR=str(cwd / "run"), LIGHTX2V_PYTHON=sys.executable,
                           LIGHTX2V_BIND_HOST="127.0.0.1", TENSORBOARD_PORT=str(port), LIGHTX2V_INFERENCE="0",
                           LIGHTX2V_TRACE_BROWSER="0")
                args = [sys.executable, "-m", "supervisor.supervisord", "-n", "-c", str(conf)]
            elif name == "lightx2v.tensorboard":
                args = [sys.executable, "-m", "lightx2v.tensorboard", "--port", str(port), "--host", "127.0.0.1"]
            else:
                (cwd / "logdir").mkdir()
                args = [sys.executable, "-m", "tensorboard.main", "--logdir", "logdir", "--port", str(port),
                        "--host", "127.0.0.1"]
            t0 = time.monotonic()
            proc = start(args, cwd, env)
            try:
                results[name].append(wait_started(port, proc, t0))
            finally:
                stop(proc)
            print(f"  start {i + 1}/{starts}: {name} {results[name][-1]:.2f} s", flush=True)
    return results


def table(title: str, results: dict[str, list[float]], baseline: str) -> str:
    base_median = statistics.median(results[baseline])
    header = f"  {'':24s} {'n':>3s} {'median s':>9s} {'max s':>7s} {'mean s':>7s} {'median vs ' + baseline:>28s}"
    lines = [title, header]
    for name, values in results.items():
        median = statistics.median(values)
        lines.append(f"  {name:24s} {len(values):3d} {median:9.2f} {max(values):7.2f} {statistics.fmean(values):7.2f} "
                     f"{median / base_median:27.2f}x")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--captures", type=int, default=10)
    parser.add_argument("--starts", type=int, default=3)
    parser.add_argument("--trace", type=Path, help="trace to land (default: a fresh CPU capture)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-tb-") as tmp:
        work = Path(tmp)
        trace = args.trace or make_trace(work)
        print(f"trace: {trace.name} ({trace.stat().st_size / 1024:.0f} KB); {args.captures} captures", flush=True)
        listing = bench_listing(trace, work, args.captures)
        startup = bench_startup(work, args.starts)
    print()
    print(table("Trace landed -> run listed by /runs", listing, "stock tensorboard"))
    print(table("Start -> TensorBoard answers HTTP", startup, "stock tensorboard"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
