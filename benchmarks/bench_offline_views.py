"""The offline views against the plugin's Trace view, in Debian's headless Chromium with no internet.

1. Click -> drawn timeline: the trace browser's Timeline (our page) vs TensorBoard's Trace view (our launcher,
   which makes it work offline; stock needs cdnjs), for the H200 fixture and for synthetic traces of the given
   sizes made from the fixture's events (copies shifted in time, in a temporary folder, deleted afterwards).
   "Drawn": the GPU stream's track exists in the viewer (`stream 7` heading) after the model is set.
2. Overview page build time (summary + HTML, no cache) for each synthetic trace vs the plain-text summary of the
   same file (`lightx2v.trace_summary`) and vs the plugin loading the same run (landing -> run listed).

Usage: python benchmarks/bench_offline_views.py [--sizes-mb 100,250] [--repeat 2]
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))
FIXTURE = ROOT / "tests" / "fixtures" / "h200_dit_stack.pt.trace.json.gz"
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait(predicate, timeout: float, what: str, interval: float = 0.05):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            value = predicate()
            if value:
                return value
        except Exception:
            pass
        time.sleep(interval)
    raise SystemExit(f"timed out after {timeout} s waiting for {what}")


ID_ARGS = {"Ev Idx", "Python id", "Python parent id", "External id", "Record function id", "correlation",
           "Python module id"}
ID_STRIDE = 10_000_000  # each copy's ids (flows, correlations, python frames) stay distinct


def synthetic_trace(path: Path, size_mb: int) -> int:
    """Copies of the fixture's events, each shifted past the previous one, until the file is >= size_mb; the
    first copy keeps the step and profiler-span annotations, the others are more of the same CPU ops and kernels."""
    doc = json.loads(gzip.decompress(FIXTURE.read_bytes()))
    events = doc.pop("traceEvents")
    timed = [e for e in events if "ts" in e and e.get("ph") != "M"]
    meta = [e for e in events if e not in timed]
    start = min(float(e["ts"]) for e in timed)
    span = max(float(e["ts"]) + float(e.get("dur", 0)) for e in timed) - start + 100
    chunk = len(json.dumps(timed))
    copies = max(1, size_mb * 1_000_000 // chunk + 1)
    with open(path, "w") as f:
        f.write(json.dumps(doc)[:-1] + ', "traceEvents": [')
        f.write(json.dumps(meta)[1:-1])
        for k in range(copies):
            shifted = []
            for e in timed:
                if k and (str(e.get("name", "")).startswith("ProfilerStep#") or e.get("ph") == "i"
                          or e.get("cat") == "Trace"):
                    continue  # one step, one profiler span (the plugin computes empty steps otherwise)
                e = dict(e, ts=float(e["ts"]) + k * span)
                if isinstance(e.get("id"), int):
                    e["id"] += k * ID_STRIDE
                if "args" in e:
                    e["args"] = {key: value + k * ID_STRIDE if key in ID_ARGS and isinstance(value, int) else value
                                 for key, value in e["args"].items()}
                shifted.append(e)
            f.write(", " + json.dumps(shifted)[1:-1])
        f.write("]}")
    return path.stat().st_size


def serve(args: list[str]) -> subprocess.Popen:
    return subprocess.Popen(args, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=ROOT)


def answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as r:
            return r.status == 200
    except OSError:
        return False


def listed(port: int) -> list[str]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/data/plugin/pytorch_profiler/runs", timeout=5) as r:
        return json.loads(r.read())["runs"]


HEADINGS = ("return Array.prototype.slice.call(document.querySelectorAll('tr-ui-b-heading'))"
            ".map(e => (e.heading || '').trim()).includes('stream 7')")


def timeline_seconds(driver, browser_port: int, rel: str, timeout: float) -> float:
    driver.get(f"http://127.0.0.1:{browser_port}/")
    href = driver.find_element("css selector", f'a.timeline[href="/timeline/{rel}"]').get_attribute("href")
    t0 = time.monotonic()
    driver.get(href)
    state = wait(lambda: driver.execute_script("return window.lightx2vTimeline && window.lightx2vTimeline.state !="
                                               " 'loading' && window.lightx2vTimeline.state"), timeout, "timeline")
    if state != "drawn" or not driver.execute_script(HEADINGS):
        print(f"  timeline of {rel} did not open: {state}: "
              f"{driver.execute_script('return window.lightx2vTimeline.error')}", flush=True)
        return float("nan")
    return time.monotonic() - t0


def tensorboard_trace_seconds(driver, tb_port: int, run: str, timeout: float) -> float:
    from selenium.webdriver.common.by import By

    driver.get(f"http://127.0.0.1:{tb_port}/#pytorch_profiler")
    driver.switch_to.frame(wait(lambda: driver.find_elements(By.CSS_SELECTOR, "iframe"), 60, "plugin frame")[0])

    def choose(index: int, name: str) -> None:
        wait(lambda: len(s := driver.find_elements(By.CSS_SELECTOR, "[role=button][aria-haspopup=listbox]")) > index
             and s[index], 60, "selector").click()
        wait(lambda: [o for o in driver.find_elements(By.CSS_SELECTOR, "[role=option]") if o.text == name], 30,
             name)[0].click()

    choose(0, run)
    choose(1, "Overview")  # the plugin remembers the last view: start every run from the same one
    time.sleep(0.5)
    choose(1, "Trace")
    t0 = time.monotonic()  # the click on "Trace"
    inner = wait(lambda: driver.find_elements(By.CSS_SELECTOR, "iframe[src*='trace_embedding.html']"), timeout,
                 "Trace frame")[0]
    driver.switch_to.frame(inner)
    try:
        wait(lambda: driver.execute_script(HEADINGS), timeout, "Trace view drawn", interval=0.1)
    except SystemExit as exc:
        print(f"  TensorBoard Trace view of {run} did not draw: {exc}", flush=True)
        driver.switch_to.default_content()
        return float("nan")
    seconds = time.monotonic() - t0
    driver.switch_to.default_content()
    return seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes-mb", default="100", help="synthetic trace sizes, comma-separated (default 100)")
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=600)
    args = parser.parse_args()
    from lightx2v.trace_browser import offline
    from lightx2v.trace_summary import summarize_paths

    from helpers.browser import chromium

    work = Path(tempfile.mkdtemp(prefix="bench-offline-"))
    procs = []
    try:
        root = work / "save_results"
        logdir = root / "torch_profile"
        traces = {"fixture": "torch_profile/fixture/rank0_h200.pt.trace.json.gz"}
        (logdir / "fixture").mkdir(parents=True)
        shutil.copy(FIXTURE, root / traces["fixture"])
        sizes = {"fixture": FIXTURE.stat().st_size}
        for mb in (int(s) for s in args.sizes_mb.split(",") if s):
            name = f"synthetic_{mb}mb"
            (logdir / name).mkdir()
            traces[name] = f"torch_profile/{name}/rank0_synthetic.pt.trace.json"
            t = time.monotonic()
            sizes[name] = synthetic_trace(root / traces[name], mb)
            print(f"made {traces[name]}: {sizes[name] / 1e6:.0f} MB in {time.monotonic() - t:.1f} s", flush=True)

        print("\n== overview page build (no cache) vs text summary of the same file ==")
        overview_rows = {}
        for name, rel in traces.items():
            if name == "fixture":
                continue
            builds, texts = [], []
            for _ in range(args.repeat):  # alternating, the best of each (the machine is shared)
                offline._summary.cache_clear()
                t = time.monotonic()
                page = offline.overview_page(str(root), rel)
                builds.append(time.monotonic() - t)
                t = time.monotonic()
                summarize_paths([str(root / rel)])
                texts.append(time.monotonic() - t)
            build, text = min(builds), min(texts)
            assert page.status == 200
            overview_rows[name] = build
            print(f"{name:>16}: overview {build:.2f} s ({sizes[name] / 1e6 / build:.0f} MB/s), text summary "
                  f"{text:.2f} s, ratio {build / text:.2f}x", flush=True)

        browser_port, tb_port = free_port(), free_port()
        landed = time.monotonic()
        procs.append(serve([sys.executable, "-m", "lightx2v.tensorboard", "--logdir", str(logdir), "--port",
                            str(tb_port), "--host", "127.0.0.1"]))
        procs.append(serve([sys.executable, "-m", "lightx2v.trace_browser", "--root", str(root), "--port",
                            str(browser_port), "--host", "127.0.0.1"]))
        wait(lambda: answers(f"http://127.0.0.1:{browser_port}/"), 60, "trace browser")

        print("\n== TensorBoard: trace landed -> run listed (the plugin parses it) ==")
        wanted = set(traces)
        wait(lambda: wanted <= set(listed(tb_port)), args.timeout, "every run in TensorBoard", interval=0.5)
        print(f"  all {len(wanted)} runs listed {time.monotonic() - landed:.1f} s after TensorBoard started")

        print("\n== click -> drawn timeline, median of", args.repeat, "==")
        results = {}
        with chromium(offline=True) as driver:
            for name, rel in traces.items():
                ours = [timeline_seconds(driver, browser_port, rel, args.timeout) for _ in range(args.repeat)]
                theirs = [tensorboard_trace_seconds(driver, tb_port, name, args.timeout) for _ in range(args.repeat)]
                results[name] = (statistics.median(ours), statistics.median(theirs))
                print(f"{name:>16} ({sizes[name] / 1e6:7.1f} MB on disk): trace browser Timeline "
                      f"{results[name][0]:6.2f} s, TensorBoard Trace view {results[name][1]:6.2f} s, ratio "
                      f"{results[name][0] / results[name][1]:.2f}x", flush=True)
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
