"""Waiting for traces as a user would: a file lands in a host folder, then TensorBoard lists its run."""

from __future__ import annotations

import time
import urllib.error
from pathlib import Path

RUN_GLOB = "torch_profile/*/*.pt.trace.json*"  # the fixed module: one run directory per capture
STRAIGHT_GLOB = "torch_profile/*.pt.trace.json*"  # LightX2V's original module: files in the logdir itself


def traces(results: Path, pattern: str = RUN_GLOB) -> set[Path]:
    """Trace files under the results folder: what the plugin reads (not the summaries written beside them,
    not the profiler's hidden temporary names)."""
    return {
        p
        for p in results.glob(pattern)
        if p.name.endswith((".pt.trace.json", ".pt.trace.json.gz")) and not p.name.startswith(".")
    }


def wait_for(what: str, predicate, timeout: float, interval: float = 0.1):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


def listed_runs(stack) -> list[str]:
    try:
        return stack.runs()
    except (OSError, urllib.error.URLError):
        return []


def land_then_list(stack, results: Path, known: set[Path], timeout: float,
                   pattern: str = RUN_GLOB) -> tuple[Path, float, float]:
    """Wait for a new trace file under the host's results folder, then for its run in TensorBoard.
    Returns the trace and the monotonic times it landed and was listed."""
    trace = wait_for(
        "a new trace in " + str(results / pattern),
        lambda: next(iter(traces(results, pattern) - known), None),
        timeout,
    )
    landed = time.monotonic()
    logdir = results / "torch_profile"
    run = logdir.name if trace.parent == logdir else trace.parent.relative_to(logdir).as_posix()
    wait_for(f"run {run} listed by /runs", lambda: run in listed_runs(stack), 60)
    return trace, landed, time.monotonic()


def owners_paths(root: Path) -> list[Path]:
    return [root, *root.rglob("*")]


def owners(root: Path) -> set[tuple[int, int]]:
    return {(p.lstat().st_uid, p.lstat().st_gid) for p in owners_paths(root)}


def owner_report(root: Path) -> list[tuple[str, int]]:
    return sorted((str(p), p.lstat().st_uid) for p in owners_paths(root))

