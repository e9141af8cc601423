"""The offline Overview: one trace's or one run's `lightx2v.trace_summary` as a self-contained HTML page.

What users miss most from the plugin's Overview, with no script, external style or font (so it renders with no
internet): per-step wall time with GPU busy / idle as inline SVG bars, top GPU kernels, top CPU ops,
memcpy/memset, GPU idle gaps and, for several ranks, the rank comparison and the straggler.
"""

from __future__ import annotations

import html
from collections.abc import Iterable

from lightx2v.trace_summary.analyze import IDLE_FLAG_RATIO
from lightx2v.trace_summary.model import IdleStats, RankSummary, RunSummary
from lightx2v.trace_summary.render import format_bytes, format_ms, format_pct

BAR_WIDTH = 220
MAX_STEPS = 64  # rows of the step table; longer captures show the first and last ones

BUSY, IDLE, CPU, WARN = "#3b6fb6", "#d6dde8", "#4f9a6a", "#c0392b"


def _e(value) -> str:
    return html.escape(str(value))


def _ms(us: float | None) -> str:
    return format_ms(us, "–")


def _pct(value: float | None) -> str:
    return format_pct(value, "–")


def bar(parts: Iterable[tuple[float, str]], scale: float, label: str, width: int = BAR_WIDTH) -> str:
    """An inline SVG bar of stacked (value, colour) parts, `scale` being the value of the full width."""
    x, rects = 0.0, []
    for value, colour in parts:
        w = 0.0 if scale <= 0 else max(0.0, min(width - x, width * value / scale))
        if w > 0:
            rects.append(f'<rect x="{x:.1f}" width="{w:.1f}" height="12" fill="{colour}"/>')
        x += w
    return (f'<svg class=bar width="{width}" height="12" viewBox="0 0 {width} 12" role="img" '
            f'aria-label="{_e(label)}">{"".join(rects)}</svg>')


def _table(head: list[str], rows: list[str], cls: str) -> str:
    header = "".join(f"<th>{_e(h)}</th>" for h in head)
    return f"<table class={cls}><thead><tr>{header}</tr></thead><tbody>{''.join(rows)}</tbody></table>"


def render_overview(run: RunSummary, *, timeline_url=None, back_url: str = "/") -> str:
    """The page for `run` (one file, or several ranks); `timeline_url(file)` links each rank to its timeline."""
    parts = [f'<p class=nav><a href="{_e(back_url)}">← all traces</a></p>']
    if len(run.ranks) > 1:
        parts.append(f"<h1>Run {_e(run.label)}: {len(run.ranks)} ranks</h1><p class=path>{_e(run.path)}</p>")
        parts.append(_ranks_section(run))
    for rank in run.ranks:
        parts.append(_rank_section(rank, timeline_url(rank.file) if timeline_url else None, len(run.ranks) > 1))
    title = run.label if len(run.ranks) > 1 else run.ranks[0].worker
    return _PAGE.format(title=_e(title), body="\n".join(parts))


def _ranks_section(run: RunSummary) -> str:
    rows = run.comparison or []
    longest = max((row.step_wall_us for row in rows), default=0.0)
    s = run.straggler
    body = []
    for row in rows:
        is_straggler = s is not None and row.rank == s.rank and row.worker == s.worker
        busy = row.gpu_busy_us or 0.0
        parts = [(busy, BUSY), (max(0.0, row.step_wall_us - busy), IDLE if row.gpu_busy_us is not None else CPU)]
        body.append(
            f"<tr{' class=straggler' if is_straggler else ''}><td>{_e('–' if row.rank is None else row.rank)}</td>"
            f"<td>{_e(row.worker)}</td><td class=num>{row.steps}</td><td class=num>{_ms(row.step_wall_us)}</td>"
            f"<td>{bar(parts, longest, f'step {_ms(row.step_wall_us)} ms')}</td>"
            f"<td class=num>{_ms(row.gpu_busy_us)}</td><td class=num>{_pct(row.gpu_busy_pct)}</td>"
            f"<td class=num>{_ms(row.gpu_comm_us)}</td></tr>")
    out = ["<section id=ranks><h2>Ranks compared (mean per step)</h2>",
           _table(["rank", "worker", "steps", "step ms", "", "GPU busy ms", "busy %", "comm ms"], body, "ranks")]
    if s is not None:
        who = f"rank {s.rank} ({s.worker})" if s.rank is not None else s.worker
        if s.criterion == "step_wall":
            why = (f"step {_ms(s.step_wall_us)} ms, {s.slower_than_fastest_pct:+.1f}% vs the fastest rank "
                   f"(spread {s.spread_pct:.1f}%)")
        else:
            why = (f"step times are in lock-step (spread {s.spread_pct:.1f}%: ranks wait for each other in "
                   "collectives); it has the most GPU compute per step, "
                   f"{s.slower_than_fastest_pct:+.1f}% vs the least")
        out.append(f"<p class=straggler-line><strong>Straggler: {_e(who)}</strong>: {_e(why)}</p>")
    out.append("</section>")
    return "\n".join(out)


def _rank_section(r: RankSummary, timeline: str | None, several: bool) -> str:
    rank = "" if r.rank is None else f" (rank {r.rank}" + (f" of {r.world_size})" if r.world_size else ")")
    heading = "h2" if several else "h1"
    devices = "; ".join(f"{d.id if d.id is not None else '?'}: {d.name}"
                        + (f", sm {d.compute_capability}" if d.compute_capability else "")
                        + (f", {d.memory_bytes / 2**30:.1f} GiB" if d.memory_bytes else "") for d in r.devices)
    versions = ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in r.versions.items())
    link = f' · <a href="{_e(timeline)}">Timeline</a>' if timeline else ""
    out = [f"<section class=rank id=\"rank-{_e(r.rank if r.rank is not None else r.worker)}\">",
           f"<{heading}>{_e(r.worker)}{_e(rank)}</{heading}>",
           f"<p class=meta>{_e(r.file)} · {format_bytes(r.size_bytes, '–')}{' gzip' if r.compressed else ''} · "
           f"{r.event_count:,} events · span {_ms(r.trace_span_us)} ms{link}<br>"
           f"devices: {_e(devices or 'none recorded (CPU-only trace)')}"
           + (f"<br>versions: {_e(versions)}" if versions else "") + "</p>"]
    out += [f"<p class=note>{_e(note)}</p>" for note in r.notes]
    out.append(_steps(r))
    if r.idle is not None:
        out.append(_idle(r.idle))
    out.append(_kernels(r))
    out.append(_memory(r))
    out.append(_cpu_ops(r))
    out.append("</section>")
    return "\n".join(out)


def _steps(r: RankSummary) -> str:
    steps = r.steps if len(r.steps) <= MAX_STEPS else r.steps[:MAX_STEPS - 4] + r.steps[-4:]
    longest = max((s.wall_us for s in r.steps), default=0.0)
    rows = []
    for i, s in enumerate(steps):
        if len(steps) < len(r.steps) and i == MAX_STEPS - 4:
            rows.append(f"<tr><td colspan=8>… {len(r.steps) - len(steps)} more steps …</td></tr>")
        if s.gpu_busy_us is not None:
            parts, label = [(s.gpu_busy_us, BUSY), (s.wall_us - s.gpu_busy_us, IDLE)], "GPU busy / idle"
        else:
            parts, label = [(s.wall_us, CPU)], "CPU step"
        idle = s.idle
        rows.append(
            f"<tr><td>{_e(s.name)}</td><td class=num>{_ms(s.wall_us)}</td>"
            f"<td>{bar(parts, longest, f'{s.name}: {_ms(s.wall_us)} ms, {label}')}</td>"
            f"<td class=num>{_ms(s.cpu_us)}</td><td class=num>{_ms(s.gpu_busy_us)}</td>"
            f"<td class=num>{_pct(s.gpu_busy_pct)}</td>"
            f"<td class=num>{'–' if s.kernel_count is None else s.kernel_count}</td>"
            f"<td class=num>{_pct(100 * idle.ratio if idle else None)}</td></tr>")
    legend = (f"<p class=legend><span style='color:{BUSY}'>■</span> GPU busy <span style='color:{IDLE}'>■</span> "
              f"GPU idle <span style='color:{CPU}'>■</span> CPU step (no GPU work recorded)</p>")
    return ("<h3>Steps</h3>" + legend +
            _table(["step", "wall ms", "", "CPU ms", "GPU busy ms", "busy %", "kernels", "idle %"], rows, "steps"))


def _idle(idle: IdleStats) -> str:
    flagged = idle.flagged
    verdict = (f"high: ≥ {100 * IDLE_FLAG_RATIO:.0f}% of step time" if flagged
               else f"ok (flagged at ≥ {100 * IDLE_FLAG_RATIO:.0f}%)")
    hint = ""
    if flagged:
        hint = (" Mostly one long stall: look for a host sync, data loading or CPU work at that offset."
                if idle.largest_gap_us >= idle.idle_us / 2 else
                " Many short gaps: launch-bound (small kernels); CUDA graphs or torch.compile may help.")
    busy_bar = bar([(idle.window_us - idle.idle_us, BUSY), (idle.idle_us, WARN if flagged else IDLE)],
                   idle.window_us, "GPU busy vs idle inside steps")
    return (f"<h3>GPU idle gaps</h3><p class=\"idle{' flagged' if flagged else ''}\">"
            f"{busy_bar} "
            f"idle {_ms(idle.idle_us)} of {_ms(idle.window_us)} ms ({100 * idle.ratio:.1f}%), {_e(verdict)}; "
            f"largest gap {_ms(idle.largest_gap_us)} ms at +{_ms(idle.largest_gap_at_us)} ms into "
            f"{_e(idle.largest_gap_step)}; {idle.gaps_over_10us} gaps ≥ 10 µs.{_e(hint)}</p>")


def _kernels(r: RankSummary) -> str:
    if r.gpu is None:
        return "<h3>GPU kernels</h3><p>No kernels, copies or sets in this trace.</p>"
    g = r.gpu
    top = max((k.pct_of_gpu_time for k in r.top_kernels), default=0.0)
    rows = [f"<tr><td class=name title=\"{_e(k.name)}\">{_e(k.short_name)}</td>"
            f"<td>{bar([(k.pct_of_gpu_time, BUSY)], top, f'{k.pct_of_gpu_time:.1f}% of GPU time')}</td>"
            f"<td class=num>{_pct(k.pct_of_gpu_time)}</td><td class=num>{_ms(k.total_us)}</td>"
            f"<td class=num>{k.calls}</td><td class=num>{k.mean_us:.1f}</td></tr>" for k in r.top_kernels]
    return (f"<h3>Top {len(r.top_kernels)} GPU kernels</h3><p class=meta>GPU activity {_ms(g.activity_us)} ms, busy "
            f"{_ms(g.busy_us)} ms, {g.kernel_count:,} kernels on {g.streams} stream(s)</p>"
            + _table(["kernel", "", "% GPU", "total ms", "calls", "mean µs"], rows, "kernels"))


def _memory(r: RankSummary) -> str:
    if r.gpu is None:
        return ""
    if not r.memory_ops:
        return "<h3>Memory copies and sets</h3><p>None.</p>"
    rows = [f"<tr><td>{_e(m.kind)}</td><td>{_e(m.name)}</td><td class=num>{m.calls}</td>"
            f"<td class=num>{_ms(m.total_us)}</td><td class=num>{format_bytes(m.bytes, '–')}</td></tr>"
            for m in r.memory_ops]
    return "<h3>Memory copies and sets</h3>" + _table(["kind", "what", "calls", "total ms", "bytes"], rows, "memory")


def _cpu_ops(r: RankSummary) -> str:
    if not r.top_cpu_ops:
        return "<h3>CPU ops</h3><p>None recorded.</p>"
    top = max(op.pct_of_cpu_self for op in r.top_cpu_ops)
    rows = [f"<tr><td class=name>{_e(op.name)}</td>"
            f"<td>{bar([(op.pct_of_cpu_self, CPU)], top, f'{op.pct_of_cpu_self:.1f}% of CPU self time')}</td>"
            f"<td class=num>{_pct(op.pct_of_cpu_self)}</td><td class=num>{_ms(op.self_us)}</td>"
            f"<td class=num>{_ms(op.total_us)}</td><td class=num>{op.calls}</td></tr>" for op in r.top_cpu_ops]
    return (f"<h3>Top {len(r.top_cpu_ops)} CPU ops by self time</h3><p class=meta>all CPU ops: "
            f"{_ms(r.cpu_self_total_us)} ms self</p>"
            + _table(["op", "", "% self", "self ms", "total ms", "calls"], rows, "cpu-ops"))


def render_error(title: str, message: str, back_url: str = "/") -> str:
    return _PAGE.format(title=_e(title), body=f'<p class=nav><a href="{_e(back_url)}">← all traces</a></p>'
                                              f"<h1>{_e(title)}</h1><p class=error>{_e(message)}</p>")


_PAGE = """<!doctype html>
<html lang=en><head><meta charset=utf-8><title>{title} · Overview · LightX2V</title>
<style>
body {{ font: 14px system-ui, sans-serif; margin: 1.5em 2em; color: #222; }}
h1 {{ font-size: 1.4em; }} h2 {{ font-size: 1.2em; margin-top: 2em; }} h3 {{ font-size: 1.05em; margin: 1.4em 0 .4em; }}
table {{ border-collapse: collapse; }}
td, th {{ padding: .2em .7em; border-bottom: 1px solid #e3e3e3; text-align: left; }}
td.num {{ text-align: right; font-variant-numeric: tabular-nums; }}
td.name {{ font-family: monospace; max-width: 60em; overflow-wrap: anywhere; }}
.meta, .path, .legend {{ color: #555; }} .path {{ font-family: monospace; }}
tr.straggler td {{ background: #fdecea; }} .straggler-line strong, .flagged {{ color: {warn}; }}
svg.bar {{ vertical-align: middle; background: #f4f4f4; }} .error {{ color: {warn}; }}
</style></head>
<body>
{body}
</body></html>
""".replace("{warn}", WARN)
