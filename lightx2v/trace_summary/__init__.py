"""Answers from a torch.profiler trace in the terminal: ``python -m lightx2v.trace_summary PATH...``.

    from lightx2v.trace_summary import summarize_paths, render_runs, to_json
    runs = summarize_paths(["save_results/torch_profile"], top=10)   # newest run of a logdir
    print(render_runs(runs))

Modules, one idea each, in the order data flows:

- input: ``discover`` (which files a PATH means, by the stack's one trace rule in ``lightx2v.trace_files``),
  ``reader`` (streaming JSON events, plain or gzip, into the typed ``records`` or dicts), ``errors`` (the one
  exception for bad input);
- one file: ``analyze`` (file -> RankSummary, a thin front) over ``collect`` (the one streaming pass; a large
  plain file's two halves read side by side by ``halves``), then one
  module per question: ``launch``, ``enclosing`` and ``ids`` (the launch chain: GPU event -> runtime call ->
  enclosing ops), ``gpu_clock`` (GPU events whose times contradict the host's: kept out of what lays them on the
  CPU's timeline), ``attribution`` (GPU time by launching op), ``steps`` (steps by launch, idle by cause), ``series``
  (per-step values), ``kernels``, ``cpu_ops`` over ``optree``, ``memory`` (``[memory]`` events) and
  ``snapshot`` (the CUDA memory snapshot beside a trace), ``devices``, ``intervals`` (busy-time unions),
  ``flops`` (FLOPs and bytes per op from its recorded shapes), ``peaks`` (what the GPU can do) and
  ``efficiency`` (achieved rates against the roofline, the step's MFU), ``frames`` (where in your code: work by
  the Python frames of a with_stack capture);
- collectives: ``comm`` (each call of a collective on one rank, from every schema; matched across ranks),
  ``exposed`` (communication not hidden by compute, per step: HTA's definition);
- a run: ``summarize`` (PATHs -> runs; its files read side by side by ``parallel``), ``ranks`` (straggler; or
  spans, captures at different times), ``run_comm`` (its communication across ranks) over ``clocks`` (the ranks'
  clocks from collectives' ends), ``comm_waits`` (who waited for whom, the late rank per step) and ``bandwidth``
  (nccl-tests' algbw/busbw against the link);
- two runs: ``diff`` with ``noise`` (change or noise, from the steps' own spread), ``efficiency_diff``,
  ``frames_diff`` (per frame of your code) and ``comm_diff`` (exposed communication and waits);
- output: ``model`` (dataclasses = the --json schema), ``render`` / ``render_diff`` / ``render_efficiency`` /
  ``render_frames`` / ``render_comm`` (text), ``names``, ``ratios`` and ``units`` (one rule each for names, shares
  and byte sizes), ``hook`` (the profiler's per-capture summary).

Reads JSON only: importing this package never imports torch.
"""

from .diff import DIFF_SCHEMA, RunDiff, compare_runs, diff_to_json
from .errors import TraceError
from .hook import write_capture_summary
from .model import SCHEMA, RunSummary, to_json
from .render import render_runs
from .render_diff import render_diff
from .summarize import summarize_paths

__all__ = ["DIFF_SCHEMA", "SCHEMA", "RunDiff", "RunSummary", "TraceError", "compare_runs", "diff_to_json",
           "render_diff", "render_runs", "summarize_paths", "to_json", "write_capture_summary"]
