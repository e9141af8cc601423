"""The per-capture hook: the profiler calls ``write_capture_summary(trace_path)`` after writing each trace.

It writes the same report as ``python -m lightx2v.trace_summary <trace>`` to ``<trace>.summary.txt`` (a name
the TensorBoard plugin's ``^(.*?)(\\.\\d+)?\\.pt\\.trace\\.json(\\.gz)?$`` does not match, so the run stays
clean), atomically (``lightx2v.fileio.write_atomically``), and returns a few short lines for the capture log.

The drop-in finds this hook by name: ``lightx2v/__init__.py`` declares it as ``TORCH_TRACE_SUMMARY_HANDLER``.
"""

from __future__ import annotations

from ..fileio import write_atomically
from .analyze import analyze_trace
from .model import MemorySummary, RankSummary
from .names import cut
from .ranks import mean_busy
from .render import format_bytes, render_rank, snapshot_device, snapshot_holders
from .render_efficiency import log_line as efficiency_log_line
from .render_frames import log_line as frames_log_line

LOG_TOP = 3
LOG_NAME_WIDTH = 60
SUMMARY_SUFFIX = ".summary.txt"


def write_capture_summary(trace_path: str) -> list[str]:
    """Summarize one freshly written trace; returns 3-8 lines (step, top kernels or CPU ops, efficiency: MFU and
    the top headroom or how to record shapes, with_stack: the user frame with the most self time, report path),
    plus one per device with memory events (its peak, a leak) and per memory snapshot (what holds its peak)."""
    summary = analyze_trace(trace_path)
    out_path = trace_path + SUMMARY_SUFFIX
    write_atomically(out_path, render_rank(summary) + "\n")
    return log_lines(summary, out_path)


def log_lines(r: RankSummary, out_path: str) -> list[str]:
    lines = []
    if r.steps:
        s = r.steps[0] if len(r.steps) == 1 else None
        wall = sum(x.wall_us for x in r.steps) / len(r.steps)
        head = s.name if s else f"{len(r.steps)} steps, mean"
        line = f"{head}: {wall / 1000:.2f} ms"
        busy = mean_busy(r)
        if busy is not None:
            line += f", GPU busy {busy / 1000:.2f} ms ({100 * busy / wall if wall else 0:.1f}%)"
            if r.idle is not None and r.idle.flagged:
                line += f" - GPU idle {100 * r.idle.ratio:.0f}% of the step!"
        lines.append(line)
    if r.gpu is not None and r.top_kernels:
        lines.append("top GPU kernels (share of GPU time, total, calls):")
        for k in r.top_kernels[:LOG_TOP]:
            lines.append(f"  {k.pct_of_gpu_time:5.1f}% {k.total_us / 1000:9.3f} ms x{k.calls:<5} "
                         f"{cut(k.short_name, LOG_NAME_WIDTH)}")
    elif r.top_cpu_ops:
        lines.append("top CPU ops by self time (share, self, calls):")
        for op in r.top_cpu_ops[:LOG_TOP]:
            lines.append(f"  {op.pct_of_cpu_self:5.1f}% {op.self_us / 1000:9.3f} ms x{op.calls:<5} "
                         f"{cut(op.name, LOG_NAME_WIDTH)}")
    lines += _memory_lines(r.memory)
    if efficiency_log_line(r.efficiency):
        lines.append(efficiency_log_line(r.efficiency))
    if frames_log_line(r.frames):
        lines.append(frames_log_line(r.frames))
    lines.append(f"summary: {out_path}")
    return lines


def _memory_lines(m: MemorySummary | None) -> list[str]:
    """One line per device with memory events (its peak, a leak) and per snapshot (what holds its peak)."""
    if m is None:
        return []
    lines = []
    for d in m.devices:
        line = f"memory {d.device}: peak allocated {format_bytes(d.peak_allocated_bytes)}" + (
            f" in {d.peak_step}" if d.peak_step else "")
        if d.leak:
            line += f" - LEAK: allocated grows in {sum(1 for s in d.steps if s.grew)} of {len(d.steps)} steps"
        lines.append(line)
    for snap in m.snapshots:
        held = snapshot_holders(snap, 2)
        lines.append(f"memory snapshot {snapshot_device(snap)}: peak {format_bytes(snap.peak_bytes)}"
                     + (f": {held}" if held else ""))
    return lines
