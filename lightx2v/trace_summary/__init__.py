"""Answers from a torch.profiler trace in the terminal: ``python -m lightx2v.trace_summary PATH...``.

    from lightx2v.trace_summary import summarize_paths, render_runs, to_json
    runs = summarize_paths(["save_results/torch_profile"], top=10)   # newest run of a logdir
    print(render_runs(runs))

Modules, one idea each: ``reader`` (streaming JSON events, plain or gzip), ``discover`` (which files a PATH
means, by the stack's one trace rule in ``lightx2v.trace_files``), ``analyze`` (one file -> RankSummary),
``intervals`` (busy-time unions), ``ranks`` (straggler), ``render`` (text), ``model`` (dataclasses = the --json
schema), ``hook`` (the profiler's per-capture summary).
Reads JSON only: importing this package never imports torch.
"""

from .errors import TraceError
from .hook import write_capture_summary
from .model import SCHEMA, RunSummary, to_json
from .render import render_runs
from .summarize import summarize_paths

__all__ = ["SCHEMA", "RunSummary", "TraceError", "render_runs", "summarize_paths", "to_json",
           "write_capture_summary"]
