"""Benchmark: the trace browser under a burst of requests and against half-open clients (issue 36, B2).

    python benchmarks/bench_server_load.py                       # 200 concurrent requests per route, 50 half-open
    python benchmarks/bench_server_load.py --requests 100 --half-open 20

A real `python -m lightx2v.trace_browser` on 127.0.0.1 (loopback only) serves a temporary results folder: --traces
copies of the H200 fixture (gzip, one folder each; the first folder holds a second rank). Every route is asked once
first (the step index, the summary and the gzip decompression points exist afterwards); that request alone is the
baseline. Then, route by route, --requests clients connect at once (released together by a barrier) and each asks
once: the trace list `/`, `/api/traces`, one trace's Overview, a run folder's Overview and a Timeline window of the
gzip trace. Each route prints its errors (no answer within --client-timeout s, a reset, a status other than 200) and
p50 / p95 / p99 of the time to a whole answer, and p99 against the lone request's time. Then the same burst on an
Overview and a Timeline window of traces nobody asked for yet (cold: the summary, or the step index and
decompression points, made once for the whole burst), against one cold request on another copy. Then --half-open
clients connect and send nothing or half a request line: the time until the server closes each (its read timeout),
and meanwhile whether `/` still answers. Every count and wait is bounded; the temporary folder is deleted
afterwards.

Target (issue 36): no error, p99 <= 2 s for 200 concurrent requests on a 2-core machine; every half-open client
closed within the read timeout (plus scheduling).
"""

from __future__ import annotations

import argparse
import http.client
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FIXTURE = REPO / "tests" / "fixtures" / "h200_dit_stack.pt.trace.json.gz"
P99_GOAL_S = 2.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def get(port: int, path: str, timeout: float) -> int:
    """The status of one whole answer (body read); raises OSError when none comes."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request("GET", path)
        response = conn.getresponse()
        response.read()
        return response.status
    finally:
        conn.close()


def burst(port: int, path: str, n: int, timeout: float) -> tuple[list[float], list[str]]:
    """`n` clients released at once, one request each: (seconds per answered request, one line per error)."""
    barrier = threading.Barrier(n)
    times: list[float] = []
    errors: list[str] = []
    lock = threading.Lock()

    def client() -> None:
        barrier.wait()
        start = time.perf_counter()
        try:
            status = get(port, path, timeout)
        except OSError as exc:
            with lock:
                errors.append(f"{type(exc).__name__}: {exc}")
            return
        with lock:
            (times if status == 200 else errors).append(time.perf_counter() - start if status == 200
                                                          else f"HTTP {status}")

    threads = [threading.Thread(target=client, daemon=True) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout + 30)
    return times, errors


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * len(ordered)) - 1))]


def half_open(port: int, n: int, limit: float) -> tuple[list[float], int, float | None]:
    """`n` clients that connect and send nothing (even ones) or half a request (odd ones): seconds until the server
    closed each (those still open after `limit` s are not counted), how many stayed open, and how long a
    normal `/` took while they were held."""
    socks = []
    for i in range(n):
        s = socket.create_connection(("127.0.0.1", port), timeout=limit)
        if i % 2:
            s.sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1")  # no end of headers
        socks.append(s)
    opened = time.perf_counter()
    start = time.perf_counter()
    try:
        get(port, "/", 10)
        meanwhile: float | None = time.perf_counter() - start
    except OSError:
        meanwhile = None
    closed: list[float] = []
    open_left = 0
    for s in socks:
        s.settimeout(max(0.1, limit - (time.perf_counter() - opened)))
        try:
            while s.recv(4096):  # an answer (408) or nothing, then the end of the stream
                pass
            closed.append(time.perf_counter() - opened)
        except TimeoutError:
            open_left += 1
        except OSError:  # reset: closed as well
            closed.append(time.perf_counter() - opened)
        finally:
            s.close()
    return closed, open_left, meanwhile


def make_root(root: Path, traces: int) -> None:
    for i in range(traces):
        run = root / f"20261206-1200{i:02d}_bench"
        run.mkdir(parents=True)
        shutil.copy(FIXTURE, run / "rank0_host.pt.trace.json.gz")
    run = root / "20261206-120000_bench"
    shutil.copy(FIXTURE, run / "rank1_host.pt.trace.json.gz")  # a folder of two ranks: the run's Overview


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, default=200, help="concurrent clients per route")
    parser.add_argument("--half-open", type=int, default=50)
    parser.add_argument("--traces", type=int, default=20, help="gzip traces in the results folder")
    parser.add_argument("--client-timeout", type=float, default=30.0)
    parser.add_argument("--half-open-limit", type=float, default=60.0, help="seconds to wait for the closes")
    args = parser.parse_args()
    if args.traces < 5:
        parser.error("--traces: at least 5 (copies 1-4 are the cold bursts' traces)")
    gz = "20261206-120000_bench/rank0_host.pt.trace.json.gz"
    routes = {
        "list /": "/",
        "/api/traces": "/api/traces",
        "Overview (trace)": f"/overview/{gz}",
        "Overview (run, 2 ranks)": "/overview/20261206-120000_bench/",
        "Timeline window (gzip)": f"/api/timeline/window/{gz}?step=0",
    }
    copy = "20261206-1200{:02d}_bench/rank0_host.pt.trace.json.gz"  # copies 1-4: asked for first in the cold bursts
    cold = [("Overview (trace, cold)", "/overview/" + copy, 1, 2),
            ("Timeline window (gzip, cold)", "/api/timeline/window/" + copy + "?step=0", 3, 4)]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))
    with tempfile.TemporaryDirectory(prefix="bench_server_load.") as tmp:
        root = Path(tmp) / "save_results"
        make_root(root, args.traces)
        port = free_port()
        server = subprocess.Popen([sys.executable, "-m", "lightx2v.trace_browser", "--root", str(root), "--port",
                                   str(port), "--host", "127.0.0.1"], env=env, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL, start_new_session=True)
        try:
            deadline = time.monotonic() + 60
            while True:
                try:
                    if get(port, "/api/traces", 2) == 200:
                        break
                except OSError:
                    pass
                if time.monotonic() > deadline or server.poll() is not None:
                    raise SystemExit("the trace browser did not answer within 60 s")
                time.sleep(0.1)
            print(f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}; {args.traces + 1} traces; "
                  f"{args.requests} concurrent clients per route (loopback)", flush=True)
            worst, failed = 0.0, 0

            def report(label: str, alone: float, times: list[float], errors: list[str]) -> None:
                nonlocal worst, failed
                failed += len(errors)
                p50, p95, p99 = (percentile(times, q) for q in (50, 95, 99)) if times else (float("nan"),) * 3
                worst = max(worst, p99 if times else float("inf"))
                print(f"  {label:<30} alone {alone * 1000:7.1f} ms; burst: {len(errors):3d} errors, p50 {p50:6.2f} s, "
                      f"p95 {p95:6.2f} s, p99 {p99:6.2f} s ({p99 / alone:.0f}x alone)", flush=True)
                for line in sorted(set(errors))[:3]:
                    print(f"      {errors.count(line)} x {line}")

            for label, path in routes.items():
                status = get(port, path, 120)  # builds what the route keeps (index, summary, points)
                if status != 200:
                    raise SystemExit(f"{path}: HTTP {status}")
                start = time.perf_counter()
                get(port, path, 120)
                alone = time.perf_counter() - start
                times, errors = burst(port, path, args.requests, args.client_timeout)
                report(label, alone, times, errors)
            for label, path, alone_copy, burst_copy in cold:
                start = time.perf_counter()
                status = get(port, path.format(alone_copy), 120)  # nobody asked for it yet: made for this request
                alone = time.perf_counter() - start
                if status != 200:
                    raise SystemExit(f"{path}: HTTP {status}")
                times, errors = burst(port, path.format(burst_copy), args.requests, args.client_timeout)
                report(label, alone, times, errors)
            closed, left, meanwhile = half_open(port, args.half_open, args.half_open_limit)
            shown = "no answer" if meanwhile is None else f"{meanwhile * 1000:.0f} ms"
            if closed:
                print(f"  half-open clients: {len(closed)} of {args.half_open} closed by the server after "
                      f"{min(closed):.1f}-{max(closed):.1f} s (median {statistics.median(closed):.1f} s); "
                      f"{left} still open after {args.half_open_limit:.0f} s; `/` meanwhile: {shown}")
            else:
                print(f"  half-open clients: none of {args.half_open} closed within {args.half_open_limit:.0f} s; "
                      f"`/` meanwhile: {shown}")
        finally:
            server.terminate()
            try:
                server.wait(15)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait(5)
    ok = failed == 0 and worst <= P99_GOAL_S and left == 0
    print(f"errors {failed}, worst p99 {worst:.2f} s (goal: no error, p99 <= {P99_GOAL_S} s), half-open left open "
          f"{left} (goal 0) -> {'ok' if ok else 'OVER'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
