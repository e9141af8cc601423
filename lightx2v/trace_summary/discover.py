"""Which trace files a command-line PATH means: a file, a run directory (one file per rank), or a logdir.

- A file is read as a trace, whatever its name; one that is not a trace is an error naming it. Files given
  together that sit in the same directory are the ranks of one run (``trace.rank0.json trace.rank1.json``).
- A directory holding trace files is one run; its traces are its ranks / workers.
- A directory holding none, but with runs below it (a TensorBoard logdir, or ``save_results`` above one), means
  its newest run: the one whose newest trace file was modified last.

What a trace is comes from the stack's one rule (:mod:`lightx2v.trace_files`, shared with the trace browser and the
profiler notice). In a directory, the TensorBoard-named traces (``*.pt.trace.json[.gz]``) are the run when there
are any; otherwise the JSON traces recognized by content (chrome traces such as ``trace.json``). Every other file
of the directory named and of the run taken is skipped and listed in ``RunFiles.skipped`` with the reason (the
demo's ``qwen_image_t2i.json`` and ``.png`` beside ``torch_profile/``), except hidden files (writers' temp names,
``.trace_browser.json``) and the summaries the profiler writes beside each trace (``<trace>.summary.txt``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from lightx2v.trace_files import FOREIGN, FOREIGN_REASON, JSON_KINDS, PERFETTO, classify, run_members

from .errors import TraceError
from .hook import SUMMARY_SUFFIX
from .model import SkippedFile

PERFETTO_REASON = "Perfetto's binary format: the summary reads JSON traces (open it in Perfetto)"


@dataclass
class RunFiles:
    label: str
    path: str
    files: list[str]
    skipped: list[SkippedFile] = field(default_factory=list)  # files of the folders read that are not traces


def resolve(paths: list[str], errors: list[TraceError] | None = None) -> list[RunFiles]:
    """The runs the PATHs mean, in order. A PATH that means nothing raises TraceError, or, with ``errors`` given,
    is appended to it and left out (so the other PATHs are still reported)."""
    runs: list[RunFiles] = []
    by_dir: dict[str, RunFiles] = {}
    for path in paths:
        try:
            if os.path.isdir(path):
                runs.append(_from_dir(path))
                continue
            _check_file(path)
        except TraceError as exc:
            if errors is None:
                raise
            errors.append(exc)
            continue
        parent = os.path.dirname(os.path.abspath(path))
        run = by_dir.get(parent)
        if run is None:
            run = by_dir[parent] = RunFiles(os.path.basename(path), parent, [])
            runs.append(run)
        if path not in run.files:
            if len(run.files) == 1:  # a second file: the folder's ranks, labelled by the folder
                run.label = os.path.basename(parent)
            run.files.append(path)
    return runs


def _check_file(path: str) -> None:
    if not os.path.exists(path):
        raise TraceError(path, "no such file or directory")
    if not os.path.isfile(path):
        raise TraceError(path, "not a regular file or directory")
    kind = classify(path).kind
    if kind == PERFETTO:
        raise TraceError(path, PERFETTO_REASON)
    if kind == FOREIGN:
        raise TraceError(path, FOREIGN_REASON)


def scan(directory: str) -> tuple[list[str], list[SkippedFile]]:
    """(the trace files directly inside ``directory``, sorted by name; the files skipped there, with why)."""
    try:
        with os.scandir(directory) as it:
            entries = sorted((e for e in it if not e.name.startswith(".") and e.is_file()), key=lambda e: e.name)
    except OSError as exc:
        raise TraceError(directory, f"cannot list directory ({exc.strerror or exc})") from None
    names = {e.name for e in entries}
    traces: list[tuple[str, str]] = []
    skipped: list[SkippedFile] = []
    for entry in entries:
        verdict = classify(entry.path)
        if verdict.kind in JSON_KINDS:
            traces.append((entry.path, verdict.kind))
        elif verdict.kind == PERFETTO:
            skipped.append(SkippedFile(file=entry.path, reason=PERFETTO_REASON))
        elif verdict.kind == FOREIGN:
            skipped.append(SkippedFile(file=entry.path, reason=FOREIGN_REASON))
        elif not (entry.name.endswith(SUMMARY_SUFFIX) and entry.name[: -len(SUMMARY_SUFFIX)] in names):
            skipped.append(SkippedFile(file=entry.path, reason=verdict.reason))
    members = run_members(traces)
    skipped += [SkippedFile(file=path, reason="a JSON trace beside TensorBoard traces: name it to summarize it")
                for path, _ in traces if path not in members]
    return members, sorted(skipped, key=lambda s: s.file)


def trace_files(directory: str) -> list[str]:
    """The trace files directly inside ``directory``, sorted by name."""
    return scan(directory)[0]


def _from_dir(path: str) -> RunFiles:
    files, skipped = scan(path)
    if files:
        return RunFiles(os.path.basename(os.path.abspath(path)), path, files, skipped)
    runs = _runs_below(path, skipped)
    if not runs:
        raise _no_traces(path, skipped)
    return runs[-1]


def newest_runs(path: str, count: int = 2) -> list[RunFiles]:
    """The ``count`` newest runs below the logdir ``path``, oldest first (by their newest trace file's mtime);
    raises TraceError when there are fewer."""
    files, skipped = scan(path)
    if files:
        raise TraceError(path, f"a run directory (its traces are one run), not a logdir of {count} runs: name "
                               "the runs to compare")
    runs = _runs_below(path, skipped)
    if not runs:
        raise _no_traces(path, skipped)
    if len(runs) < count:
        raise TraceError(path, f"holds {len(runs)} run{'s' if len(runs) != 1 else ''} ({runs[0].path}), "
                               f"{count} are needed to compare")
    return runs[-count:]


def _runs_below(path: str, skipped: list[SkippedFile]) -> list[RunFiles]:
    """The runs in the subdirectories of ``path``, oldest first (ties: by path)."""
    found_runs: list[tuple[float, str, RunFiles]] = []
    for root, dirs, _ in os.walk(path):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        if root == path:
            continue
        found, found_skipped = scan(root)
        if found:
            mtime = max(_mtime(f) for f in found)
            found_runs.append((mtime, root, RunFiles(os.path.basename(root), root, found, skipped + found_skipped)))
    return [run for _, _, run in sorted(found_runs, key=lambda item: (item[0], item[1]))]


def _no_traces(path: str, skipped: list[SkippedFile]) -> TraceError:
    return TraceError(path, "no trace files here or in its subdirectories (expected *.pt.trace.json[.gz] or "
                            "chrome *.json traces" + (f"; skipped {skipped_phrase(len(skipped))})"
                                                      if skipped else ")"))


def _mtime(path: str) -> float:
    try:
        return os.path.getmtime(path)
    except OSError:  # removed since the listing: the run's other files decide
        return -1.0


def skipped_phrase(count: int) -> str:
    """``1 file that is not a trace`` / ``3 files that are not traces``."""
    return f"{count} file that is not a trace" if count == 1 else f"{count} files that are not traces"
