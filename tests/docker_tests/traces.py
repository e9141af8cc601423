"""Waiting for traces as a user would: a file lands in a host folder, then TensorBoard lists its run."""

from __future__ import annotations

import time
import urllib.error
from datetime import datetime, timezone
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



def found_after(stack, run: str, landed_wall: float, timeout: float = 60) -> float:
    """Seconds from `landed_wall` (a trace file's mtime) to the launcher's "loading run <run>" (or "reloading
    run") log line, by the engine's own timestamps of the log: when the run monitor found the new file. This
    is what the launcher's rescan interval bounds; listing it also waits for the plugin to parse the trace."""

    def found() -> float | None:
        (container,) = stack.container_ids()
        result = stack.engine.run("logs", "--timestamps", container, check=False)
        for line in (result.stdout + result.stderr).splitlines():  # `<RFC 3339 time> <line>`, both streams
            stamp, _, message = line.partition(" ")
            if not message.rstrip().endswith((f"loading run {run}", f"reloading run {run}")):
                continue
            seen = _engine_time(stamp)
            if seen is not None and seen >= landed_wall - 0.05:  # the same run may have been loaded before
                return seen - landed_wall
        return None

    value = wait_for(f"the launcher to find run {run}", lambda: (v := found()) is not None and (v,), timeout)
    return value[0]


def _engine_time(stamp: str) -> float | None:
    """`2026-12-01T22:56:01.613456789Z` (docker's RFC 3339 with nanoseconds) as a Unix time."""
    try:
        whole, _, fraction = stamp.rstrip("Z").partition(".")
        return datetime.fromisoformat(whole).replace(tzinfo=timezone.utc).timestamp() + float(f"0.{fraction or 0}")
    except ValueError:
        return None
