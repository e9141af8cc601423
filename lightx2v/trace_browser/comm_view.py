"""The Overview's communication section: per step and rank, compute / exposed communication / idle as one stacked
bar, the rank's wait in collectives, and the step's late rank with what it was doing (``lightx2v.trace_summary``'s
``exposed`` and ``comm_waits``); then who waited for whom, the top collectives and the notes. Inline SVG, as the
rest of the page.

A bar's parts (their sum is at most the step's wall): compute (compute kernels; a CPU rank: its ops), exposed
communication (communication compute did not hide), idle (neither), and the rest of the wall (communication hidden
under compute, or memory copies alone) left blank.
"""

from __future__ import annotations

from collections.abc import Callable

from lightx2v.trace_summary.model import RunComm, RunSummary, StepWaits

from .html_page import BUSY, IDLE, bar, escape, ms, name_cell, num_cell, pct, table

EXPOSED = "#e08a2b"  # exposed communication: the time the step lost to it
MAX_STEPS = 24  # steps shown; longer captures show the first and the last ones
COMM_STYLE = "tr.late td { background: #fdf1e4; } p.late { margin: .2em 0; }"


def comm_section(run: RunSummary, merged_url: Callable[[str], str] | None = None,
                 timeline_url: Callable[[str], str] | None = None) -> str:
    """The section, "" when no rank has communication; `merged_url(step)` links each step of several ranks to
    its merged file (every rank on one clock, for Perfetto UI: `merged`), `timeline_url(step)` to the run's
    Timeline at that step (the same file, drawn here)."""
    ranks = [(r, r.communication) for r in run.ranks if r.communication is not None]
    if not ranks:
        return ""
    c = run.communication
    by_step = {s.step: s for s in c.steps} if c is not None else {}
    names = [s.step for s in ranks[0][1].steps]
    shown = names if len(names) <= MAX_STEPS else names[:MAX_STEPS - 4] + names[-4:]
    longest = max((s.wall_us for _, rc in ranks for s in rc.steps), default=0.0)
    how = ("communication kernels against compute kernels (HTA's definition)" if ranks[0][1].on_gpu
           else "the collectives' walls on the calling thread against its other ops (a CPU-only trace)")
    waits = c is not None and c.complete > 0
    step_links = (merged_url, timeline_url) if c is not None else (None, None)  # a run's steps: several ranks
    rows = []
    for i, name in enumerate(shown):
        if len(shown) < len(names) and i == MAX_STEPS - 4:
            rows.append(f"<tr><td colspan=9>… {len(names) - len(shown)} more steps …</td></tr>")
        step = by_step.get(name)
        waited = {(w.rank, w.worker): w.waited_us for w in step.ranks} if step is not None else {}
        for j, (r, rc) in enumerate(ranks):
            s = next((x for x in rc.steps if x.step == name), None)
            if s is None:
                continue
            who = f"rank {r.rank}" if r.rank is not None else r.worker
            late = step is not None and step.late_worker == r.worker and step.late_rank == r.rank
            label = (f"{name}, {who}: compute {ms(s.compute_us)} ms, exposed communication {ms(s.exposed_us)} ms, "
                     f"idle {ms(s.idle_us)} ms of {ms(s.wall_us)} ms")
            share = 100 * s.exposed_us / s.wall_us if s.wall_us > 0 else None
            rows.append(
                f"<tr{' class=late' if late else ''}>"
                + (f"<td rowspan={len(ranks)}>{_step_cell(name, *step_links)}</td>"
                   if j == 0 else "")
                + f"<td>{escape(who)}</td>{num_cell(ms(s.wall_us))}"
                f"<td>{bar([(s.compute_us, BUSY), (s.exposed_us, EXPOSED), (s.idle_us, IDLE)], longest, label)}</td>"
                f"{num_cell(ms(s.compute_us))}{num_cell(ms(s.exposed_us))}{num_cell(pct(share))}"
                f"{num_cell(ms(s.idle_us))}"
                f"{num_cell(ms(waited.get((r.rank, r.worker))) if waits else '–')}</tr>")
    legend = (f"<p class=legend><span style='color:{BUSY}'>■</span> compute <span style='color:{EXPOSED}'>■</span> "
              f"exposed communication <span style='color:{IDLE}'>■</span> idle; {escape(how)}</p>")
    out = ["<section id=communication><h2>Communication per step</h2>", legend,
           table(["step", "rank", "wall ms", "", "compute ms", "exposed ms", "exposed %", "idle ms", "waited ms"],
                 rows, "comm")]
    if c is not None:
        out.append(_run_lines(c))
    out.append("</section>")
    return "\n".join(out)


def _run_lines(c: RunComm) -> str:
    """The late rank of each step that has one, who waited for whom, the top collectives, the notes."""
    out = [f"<p class=late>{escape(_late(s))}</p>" for s in c.steps if s.late_worker]
    if c.complete and not any(s.late_worker for s in c.steps):
        out.append("<p class=late>No rank made the others wait in any step (the ranks ran in step).</p>")
    if c.pairs:
        out.append("<p class=meta>Who waited for whom (ms per step): " + escape("; ".join(
            f"{_who(p.waiter, p.waiter_worker)} → {_who(p.late, p.late_worker)} {ms(p.wait_us)}"
            for p in c.pairs[:8])) + "</p>")
    if c.top:
        rows = [f"<tr>{num_cell(ms(t.exposed_us))}{num_cell(ms(t.wait_us))}{num_cell(ms(t.transfer_us))}"
                f"{num_cell(t.instances)}{num_cell('–' if t.busbw_gbps is None else f'{t.busbw_gbps:.2f}')}"
                f"{num_cell(pct(t.link_pct))}{name_cell(t.kind + (' at ' + t.site if t.site else ''))}</tr>"
                for t in c.top]
        out += ["<h3>Top collectives by exposed time (per step, mean over ranks)</h3>",
                table(["exposed ms", "wait ms", "transfer ms", "calls", "busbw GB/s", "% link", "collective"],
                      rows, "collectives")]
    out += [f"<p class=meta>Note: {escape(note)}</p>" for note in c.notes]
    return "\n".join(out)


def _step_cell(name: str, merged_url: Callable[[str], str] | None, timeline_url: Callable[[str], str] | None) -> str:
    links = []
    if timeline_url is not None:
        links.append(f'<a class=run-timeline href="{escape(timeline_url(name))}" target=_blank title="this step of '
                     'every rank on one clock, the same collective linked: in the Timeline">Timeline</a>')
    if merged_url is not None:
        links.append(f'<a class=merged href="{escape(merged_url(name))}" title="this step of every rank on one '
                     'clock, the same collective linked: a file for Perfetto UI">merged file</a>')
    return escape(name) + ("<br>" + " · ".join(links) if links else "")


def _who(rank: int | None, worker: str) -> str:
    return f"rank {rank}" if rank is not None else worker


def _late(s: StepWaits) -> str:
    text = (f"{s.step}: the others waited {ms(s.late_wait_us)} ms for {_who(s.late_rank, s.late_worker)}, "
            f"{ms(s.collective_wait_us)} ms at {s.collective}" + (f" ({s.site})" if s.site else ""))
    if s.doing:
        text += f"; before it, it ran {s.doing} for {ms(s.doing_us)} ms" + (f" at {s.doing_line}" if s.doing_line
                                                                              else "")
    return text

