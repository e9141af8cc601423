"""Benchmark: every view on a with_stack trace of 0.5, 1 and 2 GB (issue 28): time, peak RSS, and whether it answered.

    nice -n 10 python benchmarks/bench_large_traces.py                     # 500, 1000 and 2000 MB
    python benchmarks/bench_large_traces.py --sizes-mb 100 --no-browser    # a quick look

Each trace is the H200 fixture (a with_stack capture) replicated to the size, one ProfilerStep per copy,
timestamps, correlation and External ids shifted per copy so the launch chain links every copy as it does the
original, metadata once as kineto writes it (bench_efficiency.replicate). It is written to a temporary folder,
measured, and deleted before the next size is made. Paths, each in its own process:

- summary: ``python -m lightx2v.trace_summary TRACE --frames`` (the text report with "where in your code"): wall
  time to exit and peak RSS (the goals: 2 GB in at most 60 s here, RSS at most 0.3x the file);
- Timeline: the real trace browser serving the folder. The index route builds the step index (streaming, cached
  beside the trace), then the first step's window and the middle step's with its Python frames; each request
  timed; the server's peak RSS (VmHWM) after them (goal: at most 0.3x the file). With Chromium and selenium
  installed (the tests' browser), the Timeline page in headless Chromium with no internet: seconds from opening
  the page to the first step drawn, the index already built (goal: at most 10 s);
- Perfetto window file: the first step's window as the download the Timeline offers, bytes against the file;
- with --gzip, the Timeline again on the trace gzipped: the index, the first window (the server's one pass
  that makes the decompression points, ``gzip_seek``) and the next step's window (from a point).

TensorBoard at these sizes: benchmarks/bench_tensorboard_large.py; the capture side (export and gzip):
benchmarks/bench_export.py. A path that fails or runs past --timeout is reported as such, and the others go on.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_efficiency import replicate
from bench_tensorboard_latency import free_port
from bench_trace_summary import measure

REPO = Path(__file__).resolve().parents[1]
FIXTURE = REPO / "tests" / "fixtures" / "h200_dit_stack.pt.trace.json.gz"
RUN, NAME = "run", "rank0_host.pt.trace.json"
SUMMARY_SECONDS_2GB, MEMORY_GOAL, DRAW_SECONDS = 60.0, 0.3, 10.0
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}


def summary(trace: Path, work: Path, timeout: float) -> dict:
    cmd = [sys.executable, "-m", "lightx2v.trace_summary", str(trace), "--frames"]
    try:
        res = measure(cmd, work / "summary.out", timeout)
    except SystemExit as exc:
        return {"failed": str(exc).splitlines()[-1]}
    return res if not res["timeout"] else {"failed": f"no answer in {timeout:.0f} s"}


def _get(url: str, timeout: float) -> tuple[float, bytes]:
    start = time.perf_counter()
    with urllib.request.urlopen(url, timeout=timeout) as resp:
        body = resp.read()
    return time.perf_counter() - start, body


def _vm_hwm_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def timeline(root: Path, timeout: float, browser: bool, rel: str = f"{RUN}/{NAME}") -> dict:
    """The trace browser's Timeline routes (and page, with ``browser``) on ``root``; the server's peak RSS."""
    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "lightx2v.trace_browser", "--root", str(root), "--port",
                               str(port), "--host", "127.0.0.1"], env=ENV, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    out: dict = {}
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                _get(url + "/", 2)
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    why = server.stderr.read().decode(errors="replace")[-500:] if server.stderr else ""
                    return {"failed": f"the trace browser did not start: {why}"}
                time.sleep(0.2)
        try:
            out["index_s"], body = _get(f"{url}/api/timeline/index/{rel}", timeout)
            steps = len(json.loads(body)["steps"])
            out["window_s"], body = _get(f"{url}/api/timeline/window/{rel}?step=0", timeout)
            out["window_mb"] = len(body) / 1e6
            out["again_s"], _ = _get(f"{url}/api/timeline/window/{rel}?step=1", timeout)
            out["frames_s"], body = _get(f"{url}/api/timeline/window/{rel}?step={steps // 2}&frames=1", timeout)
            out["frames_mb"] = len(body) / 1e6
            out["steps"] = steps
            out["download_s"], body = _get(f"{url}/api/timeline/window/{rel}?step=0&download=1", timeout)
            out["download_mb"] = len(body) / 1e6
            if browser:
                out["drawn_s"] = _drawn(f"{url}/timeline/{rel}", timeout)
        except (OSError, ValueError, KeyError) as exc:
            out["failed"] = f"{type(exc).__name__}: {exc}"
        out["server_rss_mb"] = _vm_hwm_mb(server.pid)
    finally:
        server.terminate()
        try:
            server.wait(10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
    return out


def _drawn(page: str, timeout: float) -> float | str:
    """Seconds from opening the Timeline page to its first step drawn, in headless Chromium with no internet."""
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.options import Options
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        return "no selenium"
    binary, driver_path = shutil.which("chromium"), shutil.which("chromedriver")
    if not (binary and driver_path):
        return "no chromium"
    options = Options()
    options.binary_location = binary
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
                "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1"):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(driver_path), options=options)
    try:
        driver.set_page_load_timeout(timeout)
        start = time.perf_counter()
        driver.get(page)
        while time.perf_counter() - start < timeout:
            state = driver.execute_script("const t = window.lightx2vTimeline; return t && t.state;")
            if state == "drawn":
                return time.perf_counter() - start
            if state == "failed":
                return "failed: " + str(driver.execute_script("return window.lightx2vTimeline.error"))
            time.sleep(0.05)
        return f"not drawn in {timeout:.0f} s"
    finally:
        driver.quit()


def _fmt(value: object, unit: str = "", digits: int = 2) -> str:
    return f"{value:.{digits}f}{unit}" if isinstance(value, float) else str(value)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes-mb", type=float, nargs="+", default=[500, 1000, 2000])
    parser.add_argument("--timeout", type=float, default=600, help="seconds one path may take (default 600)")
    parser.add_argument("--no-browser", action="store_true", help="skip the Timeline page in headless Chromium")
    parser.add_argument("--gzip", action="store_true", help="also the Timeline on the trace gzipped (level 6)")
    args = parser.parse_args()
    rows = []
    gz_rows: list[tuple[float, dict]] = []
    for size in args.sizes_mb:
        with tempfile.TemporaryDirectory(prefix="bench_large_traces.") as tmp:
            root = Path(tmp) / "save_results"
            trace = root / RUN / NAME
            trace.parent.mkdir(parents=True)
            start = time.perf_counter()
            copies = replicate(FIXTURE, trace, size, metadata_once=True)
            mb = trace.stat().st_size / 1e6
            print(f"trace: {mb:.0f} MB, {copies} steps, with_stack frames (made in "
                  f"{time.perf_counter() - start:.0f} s)", flush=True)
            s = summary(trace, Path(tmp), args.timeout)
            print(f"  summary --frames: {s}", flush=True)
            t = timeline(root, args.timeout, not args.no_browser)
            print(f"  timeline: {t}", flush=True)
            rows.append((mb, copies, s, t))
            if args.gzip:
                gz = root / "gz" / (NAME + ".gz")
                gz.parent.mkdir()
                with open(trace, "rb") as src, gzip.open(gz, "wb", compresslevel=6) as dst:
                    shutil.copyfileobj(src, dst, 4 << 20)
                trace.unlink()
                g = timeline(root, args.timeout, False, f"gz/{NAME}.gz")
                print(f"  timeline, gzip ({gz.stat().st_size / 1e6:.0f} MB): {g}", flush=True)
                gz_rows.append((mb, g))
    print("\n| trace | summary `--frames` | Timeline index | first step window | frames window | first step drawn "
          "(Chromium) | server peak RSS | Perfetto file |")
    print("|---|---|---|---|---|---|---|---|")
    ok = True
    for mb, copies, s, t in rows:
        s_rss = s.get("rss_mb", float("nan")) / mb
        t_rss = t.get("server_rss_mb", float("nan")) / mb
        summary_cell = (s["failed"] if "failed" in s else f"{s['wall_s']:.1f} s, RSS {s_rss:.2f}x")
        drawn = t.get("drawn_s", "-")
        index = _fmt(t.get("index_s", t.get("failed")), " s", 1)
        print(f"| {mb / 1000:.2f} GB ({copies} steps) | {summary_cell} | {index}"
              f" | {_fmt(t.get('window_s', '-'), ' s')} | {_fmt(t.get('frames_s', '-'), ' s')} | "
              f"{_fmt(drawn, ' s', 1)} | {t_rss:.2f}x | {_fmt(t.get('download_mb', '-'), ' MB')} |")
        ok &= "failed" not in s and "failed" not in t and s_rss <= MEMORY_GOAL and t_rss <= MEMORY_GOAL
        ok &= not (isinstance(drawn, float) and drawn > DRAW_SECONDS)
        if mb >= 1900:
            ok &= "wall_s" in s and s["wall_s"] <= SUMMARY_SECONDS_2GB
    if gz_rows:
        print("\n| gzip trace | index | first window (makes the decompression points) | next step's window | "
              "server peak RSS |\n|---|---|---|---|---|")
        for mb, g in gz_rows:
            print(f"| {mb / 1000:.2f} GB plain | {_fmt(g.get('index_s', g.get('failed')), ' s', 1)} | "
                  f"{_fmt(g.get('window_s', '-'), ' s')} | {_fmt(g.get('again_s', '-'), ' s')} | "
                  f"{g.get('server_rss_mb', float('nan')) / mb:.2f}x |")
    print(f"goals: summary of 2 GB <= {SUMMARY_SECONDS_2GB:.0f} s, RSS <= {MEMORY_GOAL}x the file (summary and "
          f"server), first step drawn <= {DRAW_SECONDS:.0f} s -> {'ok' if ok else 'OVER'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
