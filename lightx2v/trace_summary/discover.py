"""Which trace files a command-line PATH means: a file, a run directory (one file per rank), or a logdir.

- A file is a trace. Files given together that sit in the same directory are the ranks of one run
  (``trace.rank0.json trace.rank1.json``).
- A directory holding trace files is one run; its files are its ranks / workers.
- A directory holding none, but with runs below it (a TensorBoard logdir), means its newest run: the one whose
  newest trace file was modified last.

Trace files in a directory: names the TensorBoard plugin loads (``*.pt.trace.json[.gz]``); if there are none,
any ``*.json`` / ``*.json.gz`` (chrome traces such as ``trace.json``). Hidden files (temp names of writers in
progress, ``.trace_browser.json``) are never taken.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from .errors import TraceError
from .names import PLUGIN_TRACE_RE


@dataclass
class RunFiles:
    label: str
    path: str
    files: list[str]


def resolve(paths: list[str]) -> list[RunFiles]:
    runs: list[RunFiles] = []
    by_dir: dict[str, RunFiles] = {}
    for path in paths:
        if os.path.isdir(path):
            runs.append(_from_dir(path))
        elif os.path.isfile(path):
            parent = os.path.dirname(os.path.abspath(path))
            run = by_dir.get(parent)
            if run is None:
                run = by_dir[parent] = RunFiles(os.path.basename(path), parent, [])
                runs.append(run)
            elif len(run.files) == 1:
                run.label = os.path.basename(parent)
            if path not in run.files:
                run.files.append(path)
        elif os.path.exists(path):
            raise TraceError(path, "not a regular file or directory")
        else:
            raise TraceError(path, "no such file or directory")
    return runs


def trace_files(directory: str) -> list[str]:
    """The trace files directly inside ``directory``, sorted by name."""
    try:
        entries = [e for e in os.scandir(directory) if not e.name.startswith(".") and e.is_file()]
    except OSError as exc:
        raise TraceError(directory, f"cannot list directory ({exc.strerror or exc})") from None
    plugin = sorted(e.path for e in entries if PLUGIN_TRACE_RE.match(e.name))
    if plugin:
        return plugin
    return sorted(e.path for e in entries if e.name.endswith((".json", ".json.gz")))


def _from_dir(path: str) -> RunFiles:
    files = trace_files(path)
    if files:
        return RunFiles(os.path.basename(os.path.abspath(path)), path, files)
    newest, newest_mtime = None, -1.0
    for root, dirs, _ in os.walk(path):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        if root == path:
            continue
        found = trace_files(root)
        if found:
            mtime = max(os.path.getmtime(f) for f in found)
            if mtime > newest_mtime or (mtime == newest_mtime and root > newest.path):
                newest, newest_mtime = RunFiles(os.path.basename(root), root, found), mtime
    if newest is None:
        raise TraceError(path, "no trace files here or in its subdirectories "
                               "(expected *.pt.trace.json[.gz] or chrome *.json traces)")
    return newest
