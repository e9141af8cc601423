"""Without Docker: `python -m lightx2v.serve --checkout <LightX2V> --no-inference`, LightX2V run in another shell.

The stand-in checkout (checkout.py) first still has LightX2V's original profiler module: its per-step files
straight in the logdir are listed and explained (serve's log, the trace browser page) with the exact `cp` of
the fixed module; `python -m lightx2v.install_profiler` puts it in, and the next run is listed as its own
run. The user's shell exports PYTHONPATH to their checkout, as LightX2V's scripts do, and serve still runs
this project's viewers.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from lightx2v.profiler_notice import fix_command

from .checkout import STEPS, write_checkout
from .stack import TIMINGS
from .traces import RUN_GLOB, STRAIGHT_GLOB, traces
from conftest import REPO_ROOT, free_port
from helpers.procs import Server, answers, http_get, runs, wait_until

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

SCRIPT = "scripts/qwen_image/qwen_image_t2i_standin.sh"
NOTICE = "LightX2V's original profiler module"


def run_script(checkout, env_pythonpath: str) -> subprocess.Popen:
    """LightX2V in "another shell": its own environment (none of serve's), run from the checkout."""
    env = {"PATH": str(Path(sys.executable).parent) + ":/usr/local/bin:/usr/bin:/bin", "HOME": "/tmp",
           "PYTHONPATH": env_pythonpath}
    return subprocess.Popen(["bash", SCRIPT], cwd=checkout, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)


def landed_and_listed(port: int, results, pattern: str, known: set, run_of) -> tuple[float, float]:
    trace = wait_until(lambda: next(iter(traces(results, pattern) - known), None), 240, what="a new trace")
    landed = time.monotonic()
    run = run_of(trace)
    wait_until(lambda: run in runs(port), 60, what=f"run {run} listed")
    return landed, time.monotonic()


def test_serve_a_checkout_whose_inference_runs_elsewhere(tmp_path):
    checkout = write_checkout(tmp_path / "LightX2V", str(tmp_path / "LightX2V"), "original", 0, 0)
    results = checkout / "save_results"
    tb, browser = free_port(), free_port()
    serve = Server([sys.executable, "-m", "lightx2v.serve", "--checkout", str(checkout), "--no-inference",
                    "--host", "127.0.0.1", "--port", str(tb), "--browser-port", str(browser)],
                   cwd=REPO_ROOT, PYTHONPATH=str(checkout), LIGHTX2V_TORCH_PROFILE_DIR="", LIGHTX2V_RESULTS_DIR="",
                   TENSORBOARD_PORT="", TRACE_BROWSER_PORT="")
    try:
        started = time.monotonic()
        wait_until(lambda: answers(tb) and answers(browser), 120, what="TensorBoard and the trace browser")
        TIMINGS["no Docker: serve start -> TensorBoard answers"] = f"{time.monotonic() - started:.1f} s"
        assert f"logdir {results / 'torch_profile'}" in serve.output()

        run = run_script(checkout, str(checkout))
        landed, listed = landed_and_listed(tb, results, STRAIGHT_GLOB, set(), lambda t: "torch_profile")
        assert run.wait(240) == 0, run.stdout.read()
        assert len(traces(results, STRAIGHT_GLOB)) == STEPS
        TIMINGS["no Docker, original module: landed -> listed"] = f"{listed - landed:.1f} s"
        assert listed - landed < 10

        fix = fix_command(str(checkout))  # `cp <this module> <checkout>/...`, or the command once it is installed
        assert fix.startswith((f"cp {REPO_ROOT / 'lightx2v' / 'utils' / 'torch_trace_profiler.py'} {checkout}/",
                               f"lightx2v-install-profiler {checkout}"))
        wait_until(lambda: NOTICE in serve.output(), 60, what="the notice in serve's log")
        assert serve.output().count(NOTICE) == 1 and fix in serve.output()
        _, _, page = http_get(f"http://127.0.0.1:{browser}/")
        assert b"id=profiler-notice" in page and fix.encode() in page

        installed = subprocess.run([sys.executable, "-m", "lightx2v.install_profiler", str(checkout)], cwd=REPO_ROOT,
                                   capture_output=True, text=True, timeout=60)
        assert installed.returncode == 0, installed.stderr
        run_started = time.monotonic()
        run = run_script(checkout, str(checkout))
        landed, listed = landed_and_listed(tb, results, RUN_GLOB, set(),
                                           lambda t: t.parent.relative_to(results / "torch_profile").as_posix())
        assert run.wait(240) == 0, run.stdout.read()
        TIMINGS["no Docker, fixed module: run start -> listed"] = f"{listed - run_started:.1f} s"
        TIMINGS["no Docker, fixed module: landed -> listed"] = f"{listed - landed:.1f} s"
        assert listed - landed < 10
        assert len(traces(results)) == 1
    finally:
        serve.stop()


def test_a_missing_checkout_is_a_clear_error(tmp_path):
    result = subprocess.run([sys.executable, "-m", "lightx2v.serve", "--checkout", str(tmp_path / "nope")],
                            cwd=REPO_ROOT, capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and f"--checkout {tmp_path / 'nope'}: no such folder" in result.stderr
    assert "Traceback" not in result.stderr
