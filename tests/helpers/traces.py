"""Reading what the profiler wrote: trace files, their events, and the plugin's file-name rule."""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path

# The rule itself, from the installed plugin: the files TensorBoard's PyTorch Profiler lists as workers.
from torch_tb_profiler.consts import WORKER_PATTERN as PLUGIN_TRACE_RE


def load_trace(path: os.PathLike | str) -> dict:
    path = Path(path)
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as f:
        return json.load(f)


def event_names(trace: dict, category: str | None = None) -> list[str]:
    return [e.get("name", "") for e in trace["traceEvents"] if category is None or e.get("cat") == category]


def plugin_traces(log_dir: os.PathLike | str) -> list[Path]:
    """Every file under ``log_dir`` that the TensorBoard plugin would load."""
    return sorted(p for p in Path(log_dir).rglob("*") if p.is_file() and PLUGIN_TRACE_RE.match(p.name))


def run_dirs(log_dir: os.PathLike | str) -> list[Path]:
    return sorted({p.parent for p in plugin_traces(log_dir)})
