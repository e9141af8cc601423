"""The offline Overview: one trace's or one run's `lightx2v.trace_summary` as a self-contained HTML page.

What users miss most from the plugin's Overview, with no script, external style or font (so it renders with no
internet): per-step wall time with GPU busy / idle as inline SVG bars, top GPU kernels, top CPU ops,
memcpy/memset, GPU idle gaps, with ``profile_memory=True`` the memory curve per device (allocated and reserved over
time, steps shaded, the peak marked) with the steps' growth, the top allocating ops and what held a snapshot's
peak, for several ranks the rank comparison and the straggler, and with collectives each rank's compute / exposed
communication / idle per step, who waited for whom and the late rank (`comm_view`).
"""

from __future__ import annotations

from lightx2v.trace_summary import memory as memory_answers
from lightx2v.trace_summary.analyze import IDLE_FLAG_RATIO
from lightx2v.trace_summary.devices import unlisted
from lightx2v.trace_summary.model import DeviceMemory, IdleStats, MemorySummary, RankSummary, RunSummary, SyncWait
from lightx2v.trace_summary.render import format_bytes, format_signed_bytes, gpu_clock_line, gpu_columns
from lightx2v.trace_summary.steps import cause_times, idle_advice

from .comm_view import COMM_STYLE, comm_section
from .flame import FLAME_STYLE, flame_section
from .html_page import BAR_WIDTH, BUSY, CPU, IDLE, WARN, bar, escape, ms, name_cell, num_cell, page, pct, table
from .roofline import ROOFLINE_STYLE, roofline_section

CURVE_WIDTH, CURVE_HEIGHT = 3 * BAR_WIDTH, 120  # the memory curve, in the bars' style
MAX_STEPS = 64  # rows of the step table; longer captures show the first and last ones


def render_overview(run: RunSummary, *, timeline_url=None, back_url: str = "/", merged_url=None,
                    step_timeline_url=None) -> str:
    """The page for `run` (one file, or several ranks); `timeline_url(file)` links each rank to its timeline,
    `merged_url(step)` each step of several ranks to its merged file (`merged`) and `step_timeline_url(step)` to
    the run's Timeline at that step."""
    parts = [f'<p class=nav><a href="{escape(back_url)}">← all traces</a></p>']
    if len(run.ranks) > 1:
        parts.append(f"<h1>Run {escape(run.label)}: {len(run.ranks)} ranks</h1><p class=path>{escape(run.path)}</p>")
        parts.append(_ranks_section(run))
        parts.append(comm_section(run, merged_url, step_timeline_url))
    for rank in run.ranks:
        parts.append(_rank_section(rank, timeline_url(rank.file) if timeline_url else None, len(run.ranks) > 1))
    if len(run.ranks) == 1:
        parts.append(comm_section(run))
    title = run.label if len(run.ranks) > 1 else run.ranks[0].worker
    return page(f"{title} · Overview", "\n".join(parts), css=OVERVIEW_STYLE + COMM_STYLE)


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
            f"<tr{' class=straggler' if is_straggler else ''}><td>{escape('–' if row.rank is None else row.rank)}</td>"
            f"<td>{escape(row.worker)}</td>{num_cell(row.steps)}{num_cell(ms(row.step_wall_us))}"
            f"<td>{bar(parts, longest, f'step {ms(row.step_wall_us)} ms')}</td>"
            f"{num_cell(ms(row.gpu_busy_us))}{num_cell(pct(row.gpu_busy_pct))}"
            f"{num_cell(ms(row.gpu_comm_us))}</tr>")
    out = ["<section id=ranks><h2>Ranks compared (mean per step)</h2>",
           table(["rank", "worker", "steps", "step ms", "", "GPU busy ms", "busy %", "comm ms"], body, "ranks")]
    if s is not None:
        who = f"rank {s.rank} ({s.worker})" if s.rank is not None else s.worker
        if s.criterion == "waits_caused":
            why = (f"the others waited {ms(s.waits_caused_us)} ms per step for it in collectives (step "
                   f"{ms(s.step_wall_us)} ms)")
        elif s.criterion == "step_wall":
            why = (f"step {ms(s.step_wall_us)} ms, {s.slower_than_fastest_pct:+.1f}% vs the fastest rank "
                   f"(spread {s.spread_pct:.1f}%)")
        else:
            why = (f"step times are in lock-step (spread {s.spread_pct:.1f}%: ranks wait for each other in "
                   "collectives); it has the most GPU compute per step, "
                   f"{s.slower_than_fastest_pct:+.1f}% vs the least")
        out.append(f"<p class=straggler-line><strong>Straggler: {escape(who)}</strong>: {escape(why)}</p>")
    out.append("</section>")
    return "\n".join(out)


def _rank_section(r: RankSummary, timeline: str | None, several: bool) -> str:
    rank = "" if r.rank is None else f" (rank {r.rank}" + (f" of {r.world_size})" if r.world_size else ")")
    heading = "h2" if several else "h1"
    devices = "; ".join(f"{d.id if d.id is not None else '?'}: {d.name}"
                        + (f", sm {d.compute_capability}" if d.compute_capability else "")
                        + (f", {d.memory_bytes / 2**30:.1f} GiB" if d.memory_bytes else "") for d in r.devices)
    versions = ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in r.versions.items())
    link = f' · <a href="{escape(timeline)}">Timeline</a>' if timeline else ""
    out = [f"<section class=rank id=\"rank-{escape(r.rank if r.rank is not None else r.worker)}\">",
           f"<{heading}>{escape(r.worker)}{escape(rank)}</{heading}>",
           f"<p class=meta>{escape(r.file)} · {format_bytes(r.size_bytes, '–')}{' gzip' if r.compressed else ''} · "
           f"{r.event_count:,} events · span {ms(r.trace_span_us)} ms{link}<br>"
           f"devices: {escape(devices or unlisted(r.gpu))}"
           + (f"<br>versions: {escape(versions)}" if versions else "") + "</p>"]
    out += [f"<p class=note>{escape(note)}</p>" for note in r.notes]
    if r.gpu_clock is not None and r.gpu_clock.off:
        out.append(f"<p class=note>{escape(gpu_clock_line(r.gpu_clock))}</p>")
    out.append(_steps(r))
    out.append(_device_memory(r.memory))
    if r.idle is not None:
        out.append(_idle(r.idle))
    out.append(roofline_section(r.efficiency))
    out.append(flame_section(r))
    out.append(_kernels(r))
    out.append(_memory(r))
    out.append(_cpu_ops(r))
    out.append("</section>")
    return "\n".join(out)


def _steps(r: RankSummary) -> str:
    steps = r.steps if len(r.steps) <= MAX_STEPS else r.steps[:MAX_STEPS - 4] + r.steps[-4:]
    longest = max((s.wall_us for s in r.steps), default=0.0)
    gpu = gpu_columns(r)  # and the legend: none on a CPU-only trace
    head = ["step", "wall ms", "", "CPU ms"] + (["GPU busy ms", "busy %", "kernels", "idle %"] if gpu else [])
    rows = []
    for i, s in enumerate(steps):
        if len(steps) < len(r.steps) and i == MAX_STEPS - 4:
            rows.append(f"<tr><td colspan={len(head)}>… {len(r.steps) - len(steps)} more steps …</td></tr>")
        if s.gpu_busy_us is not None:
            parts, label = [(s.gpu_busy_us, BUSY), (s.wall_us - s.gpu_busy_us, IDLE)], "GPU busy / idle"
        else:
            parts, label = [(s.wall_us, CPU)], "CPU step"
        idle = s.idle
        rows.append(
            f"<tr><td>{escape(s.name)}</td>{num_cell(ms(s.wall_us))}"
            f"<td>{bar(parts, longest, f'{s.name}: {ms(s.wall_us)} ms, {label}')}</td>"
            f"{num_cell(ms(s.cpu_us))}"
            + (f"{num_cell(ms(s.gpu_busy_us))}{num_cell(pct(s.gpu_busy_pct))}"
               f"{num_cell('–' if s.kernel_count is None else s.kernel_count)}"
               f"{num_cell(pct(100 * idle.ratio if idle else None))}" if gpu else "") + "</tr>")
    legend = (f"<p class=legend><span style='color:{BUSY}'>■</span> GPU busy <span style='color:{IDLE}'>■</span> "
              f"GPU idle <span style='color:{CPU}'>■</span> CPU step (no GPU work recorded)</p>" if gpu else "")
    return "<h3>Steps</h3>" + legend + table(head, rows, "steps")


def _device_memory(m: MemorySummary | None) -> str:
    """Per device: the curve, the steps' memory (growth flagged), the top allocating ops; then the snapshots."""
    if m is None:
        return f"<h3>Device memory</h3><p class=meta>{escape(memory_answers.HINT)}.</p>"
    out = []
    for d in m.devices:
        reserved = f", {format_bytes(d.peak_reserved_bytes)} reserved" if d.peak_reserved_bytes is not None else ""
        leak = (f" <strong class=flagged>Leak: allocated grows in {sum(s.grew for s in d.steps)} of "
                f"{len(d.steps)} steps.</strong>" if d.leak else "")
        out.append(f"<h3>Device memory: {escape(d.device)}</h3><p class=meta>peak "
                   f"{format_bytes(d.peak_allocated_bytes)} "
                   f"allocated{' in ' + escape(d.peak_step) if d.peak_step else ''}{reserved}; {d.allocations:,} "
                   f"allocations, {format_bytes(d.allocated_bytes)} in all.{leak}</p>")
        out.append(memory_curve(d))
        rows = [f"<tr{' class=grew' if s.grew else ''}><td>{escape(s.name)}</td>"
                f"{num_cell(format_bytes(s.allocated_start_bytes))}"
                f"{num_cell(format_bytes(s.allocated_end_bytes))}"
                f"{num_cell(format_signed_bytes(s.growth_bytes))}"
                f"{num_cell(format_bytes(s.peak_allocated_bytes))}"
                f"{num_cell(format_bytes(s.peak_reserved_bytes, '–'))}</tr>" for s in d.steps]
        if rows:
            out.append(table(["step", "allocated at start", "at end", "growth", "peak allocated", "peak reserved"],
                              rows, "memory-steps"))
        ops = [f"<tr>{name_cell(op.name)}{num_cell(format_bytes(op.self_bytes))}"
               f"{num_cell(format_bytes(op.total_bytes))}{num_cell(format_bytes(op.live_at_peak_bytes))}"
               f"{num_cell(op.allocations)}</tr>" for op in d.top_ops]
        if ops:
            out.append(table(["op", "allocated (self)", "with children", "live at the peak", "allocations"], ops,
                              "memory-ops"))
    for snap in m.snapshots:
        sites = [f"<tr>{name_cell(site.location, site.filename)}<td>{escape(site.function)}"
                 f"</td>{num_cell(format_bytes(site.bytes))}{num_cell(site.blocks)}</tr>"
                 for site in snap.sites]
        sites.append(f"<tr><td colspan=2>no frame in your code</td>{num_cell(format_bytes(snap.other_bytes))}"
                     "<td></td></tr>")
        out.append(f"<h3>What holds the peak: cuda:{escape(snap.device)} snapshot</h3><p class=meta>peak "
                   f"{format_bytes(snap.peak_bytes)} live, {format_bytes(snap.reserved_bytes)} reserved "
                   f"({escape(snap.file)})</p>" + table(["where", "function", "live at the peak", "blocks"], sites,
                                                     "snapshot-sites"))
    return "\n".join(out)


def memory_curve(d: DeviceMemory) -> str:
    """Allocated (and reserved) over time as an inline SVG: steps shaded, the peak marked; totals change in steps,
    so the lines are drawn as steps too."""
    c, w, h = d.curve, CURVE_WIDTH, CURVE_HEIGHT
    if not c.ts_us:
        return ""
    t0 = min([c.ts_us[0], *(s.start_us for s in d.steps)])
    t1 = max([c.ts_us[-1], *(s.end_us for s in d.steps)])
    top = max([*c.allocated_bytes, *(r for r in c.reserved_bytes if r is not None), 1])

    def x(t: float) -> float:
        return 0.0 if t1 <= t0 else w * (t - t0) / (t1 - t0)

    def y(v: float) -> float:
        return h - 2 - (h - 14) * v / top

    def line(values: list) -> str:
        points, last = [], None
        for t, v in zip(c.ts_us, values, strict=True):
            if v is None:
                continue
            if last is not None:
                points.append(f"{x(t):.1f},{y(last):.1f}")
            points.append(f"{x(t):.1f},{y(v):.1f}")
            last = v
        if last is not None:
            points.append(f"{w:.1f},{y(last):.1f}")
        return " ".join(points)

    shades = "".join(f'<rect class=step x="{x(s.start_us):.1f}" width="{max(1.0, x(s.end_us) - x(s.start_us)):.1f}" '
                     f'height="{h}" fill="{IDLE if i % 2 else "#e6ebf3"}"><title>{escape(s.name)}: peak '
                     f"{format_bytes(s.peak_allocated_bytes)}</title></rect>" for i, s in enumerate(d.steps))
    reserved = line(c.reserved_bytes)
    px, py = x(c.ts_us[c.peak_index]), y(c.allocated_bytes[c.peak_index])
    label = f"peak {format_bytes(d.peak_allocated_bytes)}"
    anchor = "end" if px > w / 2 else "start"
    return (f'<svg class=memory-curve width="{w}" height="{h}" viewBox="0 0 {w} {h}" role="img" '
            f'aria-label="{escape(d.device)}: allocated{" and reserved" if reserved else ""} over time, '
            f'{escape(label)}">'
            f"{shades}"
            + (f'<polyline class=reserved points="{reserved}" fill="none" stroke="{CPU}" stroke-width="1.5" '
               'stroke-dasharray="4 2"/>' if reserved else "")
            + f'<polyline class=allocated points="{line(c.allocated_bytes)}" fill="none" stroke="{BUSY}" '
              f'stroke-width="1.5"/><circle class=peak cx="{px:.1f}" cy="{py:.1f}" r="3.5" fill="{WARN}"/>'
              f'<text x="{px + (-6 if anchor == "end" else 6):.1f}" y="{max(11.0, py - 3):.1f}" text-anchor="{anchor}" '
              f'font-size="11" fill="{WARN}">{escape(label)}</text></svg>'
            f"<p class=legend><span style='color:{BUSY}'>■</span> allocated "
            + (f"<span style='color:{CPU}'>■</span> reserved (dashed) " if reserved else "")
            + f"<span style='color:{WARN}'>●</span> peak; shaded: steps; "
              f"{ms(t1 - t0)} ms, top {format_bytes(top)}</p>")


def _idle(idle: IdleStats) -> str:
    flagged = idle.flagged
    verdict = (f"high: ≥ {100 * IDLE_FLAG_RATIO:.0f}% of step time" if flagged
               else f"ok (flagged at ≥ {100 * IDLE_FLAG_RATIO:.0f}%)")
    hint = f" {idle_advice(idle)}." if flagged and idle_advice(idle) else ""
    busy_bar = bar([(idle.window_us - idle.idle_us, BUSY), (idle.idle_us, WARN if flagged else IDLE)],
                   idle.window_us, "GPU busy vs idle inside steps")
    causes = ""
    if idle.causes is not None and idle.idle_us > 0:
        rows = [f"<tr><td>{escape(cause)}</td><td>{bar([(us, WARN if flagged else IDLE)], idle.idle_us, cause)}</td>"
                f"{num_cell(ms(us))}{num_cell(pct(100 * us / idle.idle_us))}</tr>"
                for cause, us in cause_times(idle.causes) if us > 0]
        rows += [f"<tr>{name_cell(_sync_name(w))}<td></td>"
                 f"{num_cell(ms(w.idle_us))}{num_cell(f'{w.gaps} gap' + ('s' if w.gaps != 1 else ''))}"
                 f"</tr>" for w in idle.causes.syncs[:3]]
        causes = table(["idle by cause", "", "ms", "% of idle"], rows, "idle-causes")
    return (f"<h3>GPU idle gaps</h3><p class=\"idle{' flagged' if flagged else ''}\">"
            f"{busy_bar} "
            f"idle {ms(idle.idle_us)} of {ms(idle.window_us)} ms ({100 * idle.ratio:.1f}%), {escape(verdict)}; "
            f"largest gap {ms(idle.largest_gap_us)} ms at +{ms(idle.largest_gap_at_us)} ms into "
            f"{escape(idle.largest_gap_step)}; {idle.gaps_over_10us} gaps ≥ 10 µs.{escape(hint)}</p>{causes}")


def _kernels(r: RankSummary) -> str:
    if r.gpu is None:
        return "<h3>GPU kernels</h3><p>No kernels, copies or sets in this trace.</p>"
    g = r.gpu
    top = max((k.pct_of_gpu_time for k in r.top_kernels), default=0.0)
    rows = [f"<tr>{name_cell(k.short_name, k.name)}"
            f"<td>{bar([(k.pct_of_gpu_time, BUSY)], top, f'{k.pct_of_gpu_time:.1f}% of GPU time')}</td>"
            f"{num_cell(pct(k.pct_of_gpu_time))}{num_cell(ms(k.total_us))}"
            f"{num_cell(k.calls)}{num_cell(f'{k.mean_us:.1f}')}</tr>" for k in r.top_kernels]
    return (f"<h3>Top {len(r.top_kernels)} GPU kernels</h3><p class=meta>GPU activity {ms(g.activity_us)} ms, busy "
            f"{ms(g.busy_us)} ms, {g.kernel_count:,} kernels on {g.streams} stream(s)</p>"
            + table(["kernel", "", "% GPU", "total ms", "calls", "mean µs"], rows, "kernels"))


def _memory(r: RankSummary) -> str:
    if r.gpu is None:
        return ""
    if not r.memory_ops:
        return "<h3>Memory copies and sets</h3><p>None.</p>"
    rows = [f"<tr><td>{escape(m.kind)}</td><td>{escape(m.name)}</td>{num_cell(m.calls)}"
            f"{num_cell(ms(m.total_us))}{num_cell(format_bytes(m.bytes, '–'))}</tr>"
            for m in r.memory_ops]
    return "<h3>Memory copies and sets</h3>" + table(["kind", "what", "calls", "total ms", "bytes"], rows, "memory")


def _cpu_ops(r: RankSummary) -> str:
    if not r.top_cpu_ops:
        return "<h3>CPU ops</h3><p>None recorded.</p>"
    top = max(op.pct_of_cpu_self for op in r.top_cpu_ops)
    rows = [f"<tr>{name_cell(op.name)}"
            f"<td>{bar([(op.pct_of_cpu_self, CPU)], top, f'{op.pct_of_cpu_self:.1f}% of CPU self time')}</td>"
            f"{num_cell(pct(op.pct_of_cpu_self))}{num_cell(ms(op.self_us))}"
            f"{num_cell(ms(op.total_us))}{num_cell(op.calls)}</tr>" for op in r.top_cpu_ops]
    return (f"<h3>Top {len(r.top_cpu_ops)} CPU ops by self time</h3><p class=meta>all CPU ops: "
            f"{ms(r.cpu_self_total_us)} ms self</p>"
            + table(["op", "", "% self", "self ms", "total ms", "calls"], rows, "cpu-ops"))


def _sync_name(w: SyncWait) -> str:
    return f"sync: {w.op + ' → ' if w.op else ''}{w.call}{' at ' + w.line if w.line else ''}"


def render_error(title: str, message: str, back_url: str = "/") -> str:
    body = (f'<p class=nav><a href="{escape(back_url)}">← all traces</a></p>'
            f"<h1>{escape(title)}</h1><p class=error>{escape(message)}</p>")
    return page(f"{title} · Overview", body, css=OVERVIEW_STYLE)


# The Overview's own rules, after the base's (html_page.STYLE), then its roofline section's
OVERVIEW_STYLE = """
td.name { max-width: 60em; } .path { color: #555; }
tr.straggler td { background: #fdecea; } .straggler-line strong, .flagged { color: """ + WARN + """; }
svg.memory-curve { display: block; background: #f4f4f4; } tr.grew td { background: #fdecea; }
table.memory-steps, table.memory-ops, table.snapshot-sites { margin-top: .8em; }
""" + ROOFLINE_STYLE + FLAME_STYLE
