"""The offline Compare page: two captures' `lightx2v.trace_summary` diff as one self-contained HTML page.

BASE and NEW are each a trace or a run folder (several ranks). The page shows what `--diff` prints, laid out for
reading: the verdict, the per-step figures side by side, paired per-step bars (BASE over NEW, one scale), the ops
whose GPU work changed most (and which kernels they now launch), kernels added and removed, kernels, CPU ops and
memory operations by change, and for several ranks one row per rank pair. The noise verdicts are the terminal's,
from the same functions (`render_diff.noise_word`, `noise_line`): each change row says real, noise or ?, and only
a change beyond noise is red or green. Like the Overview it has no script, external style or font, so it renders
with no internet; the choice of sides is a plain GET form, opening on the newest two runs whose traces are whole.

Which run is "the previous run of this label" is decided here too: the profiler names run folders
``<time>_<label>`` (``_2``... on a clash, ``_job<pid>`` for torchrun without a store), so the previous run is the
newest older folder beside it with the same label.
"""

from __future__ import annotations

import os
import posixpath
import re
import urllib.parse
from collections.abc import Sequence
from dataclasses import dataclass

from lightx2v.trace_browser.files import Trace, run_traces, shown, summarized
from lightx2v.trace_browser.flame import FLAME_STYLE, diff_flame_section
from lightx2v.trace_summary.diff import ADDED, REMOVED, Delta, RankDiff, RunDiff, pair_label
from lightx2v.trace_summary.model import RankSummary, RunSummary
from lightx2v.trace_summary.noise import NOISE, REAL, UNTESTED, Noise
from lightx2v.trace_summary.render import format_ms
from lightx2v.trace_summary.render_diff import noise_line, noise_word

from .html_page import BUSY, CPU, FASTER, IDLE, NONE, SLOWER, bar, count, escape, ms, name_cell, num_cell, page, table

ROUTE = "/compare"
TOP = 15  # rows of each change table
MAX_PAIRED_STEPS = 32  # paired step bars per rank pair; longer captures show the first ones and say so
BAR_WIDTH = 260
NOT_JUDGED_BAR = "#b5b5b5"  # a change within noise (or not testable): drawn, in neither faster's nor slower's colour
JUDGED_CLASS = {REAL: "real", NOISE: "noise", UNTESTED: "untested"}  # a change row's class by its noise verdict
JUDGED_TITLE = {REAL: "beyond noise: the steps of the two sides differ", NOISE: "within noise: the steps overlap",
                UNTESTED: "one step a side: noise cannot be told from change"}

# `<time>_<label>[_N | _job<pid>]`: the profiler's run-folder names (see lightx2v/utils/torch_trace_profiler.py)
_RUN_NAME = re.compile(r"^(?P<stamp>\d{8}(?:-\d{6})?)_(?P<label>.+?)(?:_(?P<n>\d+)|_job\d+)?$")


# --- which sides ------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Side:
    """One choosable side: a run folder (``path`` ends with "/", or is "" for the root) or one trace file, relative
    to the root; ``damaged``: why it cannot be read whole (a rank of a run folder, or the file: `files.damage`)."""

    path: str
    title: str
    damaged: str = ""

    @property
    def run(self) -> bool:
        return self.path == "" or self.path.endswith("/")


def run_label(folder: str) -> str | None:
    """The capture label of a run folder named by the profiler (``20261202-044934_infer_main`` -> ``infer_main``)."""
    m = _RUN_NAME.match(posixpath.basename(folder.rstrip("/")))
    return m.group("label") if m else None


def _run_order(folder: str) -> tuple[str, int]:
    m = _RUN_NAME.match(posixpath.basename(folder))
    return (m.group("stamp"), int(m.group("n") or 1)) if m else ("", 0)


def run_folders(traces: Sequence[Trace]) -> list[str]:
    """Folders (relative, "" for the root) holding at least one JSON trace, newest capture first."""
    newest: dict[str, float] = {}
    for t in traces:
        if summarized(t):
            folder = posixpath.dirname(t.path)
            newest[folder] = max(newest.get(folder, 0.0), t.mtime)
    return sorted(newest, key=lambda f: (-newest[f], f))


def previous_runs(traces: Sequence[Trace]) -> dict[str, str]:
    """{run folder: the previous run folder of the same label beside it}, for the list's "compare" links."""
    groups: dict[tuple[str, str], list[str]] = {}
    for folder in run_folders(traces):
        label = run_label(folder) if folder else None
        if label:
            groups.setdefault((posixpath.dirname(folder), label), []).append(folder)
    previous: dict[str, str] = {}
    for folders in groups.values():
        folders.sort(key=_run_order)
        previous.update(zip(folders[1:], folders[:-1], strict=True))
    return previous


def choices(traces: Sequence[Trace]) -> list[Side]:
    """What the form offers: every run folder (newest first), then every JSON trace file."""
    by_folder: dict[str, list[Trace]] = {}
    for t in traces:
        by_folder.setdefault(posixpath.dirname(t.path), []).append(t)
    sides = [Side(f + "/" if f else "", f"run {f or '.'}/", _run_damage(by_folder[f])) for f in run_folders(traces)]
    return sides + [Side(t.path, t.path, t.damaged) for t in traces if summarized(t)]


def _run_damage(traces: list[Trace]) -> str:
    """Why a run folder cannot be compared: its damaged ranks, each with why ("" when none is)."""
    return "; ".join(f"{posixpath.basename(t.path)}: {t.damaged}" for t in run_traces(traces) if t.damaged)


def preselected(sides: Sequence[Side]) -> tuple[str, str] | None:
    """(BASE, NEW) the form opens with: the newest two run folders none of whose ranks is damaged, NEW the newest;
    None when there are fewer. Files are never preselected: a file and its folder, or two ranks of one folder, are
    the same capture."""
    runs = [s.path for s in sides if s.run and not s.damaged]
    return (runs[1], runs[0]) if len(runs) > 1 else None


def compare_url(base: str, new: str) -> str:
    """The page comparing two sides (root-relative paths; a folder ends with "/")."""
    return f"{ROUTE}?" + urllib.parse.urlencode({"base": base, "new": new}, errors="surrogateescape")  # any bytes


def previous_link(trace: Trace, previous: dict[str, str]) -> str:
    """The trace list's "compare with previous run" link of one row ("" when its run has no previous one)."""
    folder = posixpath.dirname(trace.path)
    if folder not in previous or not summarized(trace):
        return ""
    label = run_label(folder) or ""
    href = compare_url(previous[folder] + "/", folder + "/")
    return (f' <a class=compare-previous href="{escape(href)}" target=_blank '
            f'title="{escape(previous[folder])}/ → {escape(folder)}/">Compare with previous {escape(label)}</a>')


# --- pages ------------------------------------------------------------------------------------------------------

def _signed_ms(us: float | None) -> str:
    return NONE if us is None else ("+" if us > 0 else "") + format_ms(us)


def _signed_pct(pct: float | None) -> str:
    return NONE if pct is None else f"{pct:+.1f}%"


def _signed_count(value: float | None) -> str:
    return NONE if value is None else ("+" if value > 0 else "") + count(value)


def _change(d: Delta) -> float | None:
    """NEW minus BASE, a side that has none counting as 0 (an added or removed row has a change too)."""
    if d.delta is not None or (d.base is None and d.new is None):
        return d.delta
    return (d.new or 0.0) - (d.base or 0.0)


def _change_class(delta: float | None) -> str:
    """What a figure cell's class adds by the sign of its change: ``slower``, ``faster``, or nothing."""
    return "" if not delta else ("slower" if delta > 0 else "faster")


def _judged_change_class(noise: Noise | None, delta: float | None) -> str:
    """A change is coloured only when it is beyond noise (``noise.judge``, as the terminal's ``noise`` column
    says): within it, or with one step a side (not judged), a red or green figure would say "slower" or "faster"
    where the verdict does not. A figure without a judgement (none made) is coloured by its sign."""
    return "" if noise is not None and noise.verdict != REAL else _change_class(delta)


def _wall_change_class(rd: RankDiff) -> str:
    """The step wall's change is coloured only when it is beyond noise: within it the verdict says "no change" or
    "inconclusive"."""
    return _judged_change_class(rd.step_noise, rd.step_wall_us.delta)


def _noise_cell(noise: Noise | None) -> str:
    """A change row's ``noise`` cell: the terminal's word (``render_diff.noise_word``: real, noise or ?)."""
    if noise is None:
        return "<td></td>"
    return f'<td class=judged title="{escape(JUDGED_TITLE[noise.verdict])}">{escape(noise_word(noise))}</td>'


def _row(noise: Noise | None) -> str:
    """A change row's start tag: classed by its noise verdict (a row within noise reads grey)."""
    return "<tr>" if noise is None else f"<tr class={JUDGED_CLASS[noise.verdict]}>"


def delta_bar(delta: float | None, scale: float, label: str, width: int = 120, judged: bool = True) -> str:
    """A bar from the middle: left (green) when NEW takes less, right (red) when it takes more; grey when the
    change is not beyond noise (``judged`` False)."""
    half = width / 2
    rects = [f'<rect x="{half - 0.5:.1f}" width="1" height="12" fill="#999"/>']
    if delta and scale > 0:
        w = min(half, half * abs(delta) / scale)
        x = half if delta > 0 else half - w
        fill = NOT_JUDGED_BAR if not judged else SLOWER if delta > 0 else FASTER
        rects.append(f'<rect x="{x:.1f}" width="{w:.1f}" height="12" fill="{fill}"/>')
    return (f'<svg class=delta width="{width}" height="12" viewBox="0 0 {width} 12" role="img" '
            f'aria-label="{escape(label)}">{"".join(rects)}</svg>')


def _side_link(side_path: str, overview_url) -> str:
    return f'<a href="{escape(overview_url(side_path))}">{escape(side_path or "./")}</a>'


def render_compare(diff: RunDiff, base: RunSummary, new: RunSummary, *, base_path: str, new_path: str,
                   overview_url, back_url: str = "/") -> str:
    """The page; ``base_path``/``new_path``: the sides as the URL names them, ``overview_url(path)``: their pages."""
    swap = compare_url(new_path, base_path)
    parts = [f'<p class=nav><a href="{escape(back_url)}">← all traces</a> · <a class=choose href="{ROUTE}">choose '
             f'other captures</a> · <a class=swap href="{escape(swap)}">swap BASE and NEW</a></p>',
             f"<h1>Compare {escape(diff.base.label)} → {escape(diff.new.label)}</h1>",
             f"<p class=verdict id=verdict>{escape(diff.verdict)}</p>", _same_files(diff),
             "<table class=sides><tbody>"
             f"<tr><th>BASE</th><td>{_side_link(base_path, overview_url)}</td>"
             f"<td>{escape(_side_text(diff.base))}</td></tr>"
             f"<tr><th>NEW</th><td>{_side_link(new_path, overview_url)}</td>"
             f"<td>{escape(_side_text(diff.new))}</td></tr></tbody></table>"]
    parts += [f"<p class=note>{escape(note)}</p>" for note in diff.notes]
    for side, names in (("BASE", diff.unmatched_base), ("NEW", diff.unmatched_new)):
        if names:
            parts.append(f"<p class=note>{side} only, not compared: {escape(', '.join(names))}</p>")
    if len(diff.ranks) > 1 or len(base.ranks) > 1 or len(new.ranks) > 1:
        parts.append(_ranks_section(diff))
    base_by_file = {r.file: r for r in base.ranks}  # one trace file is one rank: its summary, for the step bars
    new_by_file = {r.file: r for r in new.ranks}
    for rd in diff.ranks:
        parts.append(_rank_pair(rd, base_by_file.get(rd.base_file), new_by_file.get(rd.new_file),
                                len(diff.ranks) > 1))
    return page(f"{diff.base.label} → {diff.new.label} · Compare", "\n".join(parts), css=COMPARE_STYLE)


def _same_files(diff: RunDiff) -> str:
    """Words for the pairs whose two sides are one file (a capture chosen twice, a file and its run folder): every
    change is then 0 by construction, which "about as fast" alone does not tell. "" when there is none."""
    same = [os.path.basename(r.base_file) for r in diff.ranks
            if os.path.realpath(r.base_file) == os.path.realpath(r.new_file)]
    if not same:
        return ""
    names = ", ".join(same)
    if len(same) == len(diff.ranks) and not (diff.unmatched_base or diff.unmatched_new):
        what = "the same file" if len(same) == 1 else f"the same {len(same)} files"
        return (f"<p class=note id=same-file>BASE and NEW are {what} ({escape(names)}): a trace compared with "
                "itself, so nothing can differ. Choose two captures to compare.</p>")
    return (f"<p class=note id=same-file>{len(same)} of the {len(diff.ranks)} pairs compare a file with itself "
            f"({escape(names)}): nothing in them can differ.</p>")


def _side_text(side) -> str:
    ranks = f"{side.ranks} rank{'s' if side.ranks != 1 else ''}"
    straggler = f", straggler {side.straggler}" if side.straggler else ""
    return f"{ranks}, step {ms(side.step_wall_us)} ms{straggler}"


def _ranks_section(diff: RunDiff) -> str:
    longest = max([r.step_wall_us.base or 0.0 for r in diff.ranks] + [r.step_wall_us.new or 0.0 for r in diff.ranks]
                  + [0.0])
    rows = []
    for r in diff.ranks:
        d = r.step_wall_us
        rows.append(
            f"<tr><td>{escape(_rank_cell(r))}</td><td>{escape(r.base_worker)}</td>"
            f"<td>{escape(r.new_worker)}</td>{num_cell(ms(d.base))}{num_cell(ms(d.new))}"
            f"<td class=pair>{_pair_bars(d, longest)}</td>"
            f"{num_cell(_signed_ms(d.delta), _wall_change_class(r))}"
            f"{num_cell(_signed_pct(d.delta_pct), _wall_change_class(r))}</tr>")
    stragglers = "".join(f"<p class=straggler-line>{side} straggler: <strong>{escape(s.straggler)}</strong></p>"
                         for side, s in (("BASE", diff.base), ("NEW", diff.new)) if s.straggler)
    return (f"<section id=ranks><h2>Ranks, paired {escape(diff.pairing)} (mean step wall)</h2>"
            + table(["rank", "BASE worker", "NEW worker", "BASE ms", "NEW ms", "BASE over NEW", "Δ ms", "Δ %"],
                     rows, "ranks", "no rank pairs") + stragglers + "</section>")


def _rank_cell(r: RankDiff) -> str:
    """``1``, or ``3 → 1`` for a pair whose traces record different ranks (paired by file order)."""
    if r.base_rank == r.new_rank:
        return "–" if r.rank is None else str(r.rank)
    return " → ".join("–" if rank is None else str(rank) for rank in (r.base_rank, r.new_rank))


def _pair_bars(d: Delta, scale: float) -> str:
    return (bar([(d.base or 0.0, IDLE)], scale, f"BASE {ms(d.base)} ms", BAR_WIDTH // 2) + "<br>"
            + bar([(d.new or 0.0, BUSY)], scale, f"NEW {ms(d.new)} ms", BAR_WIDTH // 2))


def _rank_pair(rd: RankDiff, base: RankSummary | None, new: RankSummary | None, several: bool) -> str:
    h3 = "h3"
    out = [f"<section class=rank-pair id=\"pair-{escape(rd.rank if rd.rank is not None else rd.base_worker)}\">"]
    if several:  # one pair: the page's heading and verdict are this pair's
        label = pair_label(rd) if rd.rank is not None or rd.base_rank != rd.new_rank else "rank ?"
        who = f"{label[:1].upper()}{label[1:]}: "
        out.append(f"<h2>{escape(who)}{escape(rd.base_worker)} → {escape(rd.new_worker)}</h2>")
        out.append(f"<p class=verdict>{escape(rd.verdict)}</p>")
    out.append(_figures(rd))
    judged = noise_line(rd.step_noise, rd.base_steps, rd.new_steps).strip()
    if judged:
        out.append(f"<p class=noise-line>{escape(judged)}</p>")
    out.append(diff_flame_section(base, new))
    if base is not None and new is not None:
        out.append(f"<{h3}>Steps, BASE over NEW</{h3}>" + _paired_steps(base, new))
    cpu_ops = f"<{h3}>CPU ops by change of self time per step</{h3}>" + _cpu_ops(rd)
    if not (rd.ops or rd.kernels or rd.memory):  # CPU-only captures: their changes are the CPU ops
        out.append(cpu_ops)
        out.append("<p class=none id=no-gpu>No GPU activity in either capture: no kernels, copies or sets to "
                   "compare.</p>")
    else:
        out.append(f"<{h3}>Top changes: ops by GPU time per step</{h3}>" + _ops(rd))
        out.append(f"<{h3}>Kernels added and removed</{h3}>" + _added_removed(rd))
        out.append(f"<{h3}>Kernels by change of time per step</{h3}>" + _kernels(rd))
        out.append(f"<{h3}>Memory copies and sets per step</{h3}>" + _memory(rd))
        out.append(cpu_ops)
    out.append("</section>")
    return "\n".join(out)


def _figures(rd: RankDiff) -> str:
    rows = []
    for name, d, fmt, signed in (
            ("steps", Delta(rd.base_steps, rd.new_steps, rd.new_steps - rd.base_steps, None), count, _signed_count),
            ("step wall ms", rd.step_wall_us, ms, _signed_ms),
            ("GPU busy ms", rd.gpu_busy_us, ms, _signed_ms),
            ("GPU idle ms", rd.gpu_idle_us, ms, _signed_ms),
            ("kernel calls", rd.kernel_calls_per_step, count, _signed_count),
            ("kernel time ms", rd.kernel_time_per_step_us, ms, _signed_ms),
            ("CPU self ms", rd.cpu_self_per_step_us, ms, _signed_ms)):
        change = "" if name == "steps" else _wall_change_class(rd) if name == "step wall ms" else _change_class(d.delta)
        rows.append(f"<tr><th>{escape(name)}</th>{num_cell(fmt(d.base))}{num_cell(fmt(d.new))}"
                    f"{num_cell(signed(d.delta), change)}{num_cell(_signed_pct(d.delta_pct), change)}</tr>")
    return table(["per step (mean)", "BASE", "NEW", "Δ", "Δ %"], rows, "figures", "")


def _paired_steps(base: RankSummary, new: RankSummary) -> str:
    steps_in_all = max(len(base.steps), len(new.steps))
    shown = min(steps_in_all, MAX_PAIRED_STEPS)
    longest = max([s.wall_us for s in base.steps] + [s.wall_us for s in new.steps] + [0.0])
    rows = []
    for i in range(shown):
        cells = []
        for side, steps in (("BASE", base.steps), ("NEW", new.steps)):
            if i >= len(steps):
                cells.append(f"<td class=side>{side}</td><td>–</td>{num_cell(NONE)}<td></td>")
                continue
            s = steps[i]
            if s.gpu_busy_us is not None:
                parts = [(s.gpu_busy_us, BUSY), (max(0.0, s.wall_us - s.gpu_busy_us), IDLE)]
            else:
                parts = [(s.wall_us, CPU)]
            cells.append(f"<td class=side>{side}</td><td>{escape(s.name)}</td>{num_cell(ms(s.wall_us))}"
                         f"<td>{bar(parts, longest, f'{side} {s.name}: {ms(s.wall_us)} ms', BAR_WIDTH)}</td>")
        rows.append(f"<tr class=base-step>{cells[0]}</tr><tr class=new-step>{cells[1]}</tr>")
    more = (f"<p class=meta>first {shown} of {steps_in_all} steps shown; the figures above are means over all.</p>"
            if shown < steps_in_all else "")
    legend = (f"<p class=legend><span style='color:{BUSY}'>■</span> GPU busy <span style='color:{IDLE}'>■</span> "
              f"GPU idle <span style='color:{CPU}'>■</span> CPU step (no GPU work recorded); one scale for both</p>")
    return legend + table(["", "step", "wall ms", ""], rows, "paired-steps", "no steps") + more


def _scale(deltas) -> float:
    return max([abs(d or 0.0) for d in deltas] + [0.0])


def _change_cells(calls: Delta, time: Delta, scale: float, noise: Noise | None) -> str:
    """The cells every change row shares: calls and ms of both sides, the bar from the middle, Δ ms and Δ %
    (coloured when beyond noise), the noise verdict."""
    change = _change(time)
    judged, beyond = _judged_change_class(noise, change), noise is None or noise.verdict == REAL
    return (f"{num_cell(count(calls.base))}{num_cell(count(calls.new))}"
            f"{num_cell(ms(time.base))}{num_cell(ms(time.new))}"
            f"<td>{delta_bar(change, scale, f'{_signed_ms(change)} ms', judged=beyond)}</td>"
            f"{num_cell(_signed_ms(change), judged)}"
            f"{num_cell(_signed_pct(time.delta_pct), judged)}{_noise_cell(noise)}")


def _ops(rd: RankDiff) -> str:
    ops = rd.ops[:TOP]
    scale = _scale(_change(o.gpu_time_per_step_us) for o in ops)
    rows = []
    for o in ops:
        name = " / ".join(x for x in (o.label, o.op) if x) or "(no launching op)"
        kernels = "".join(
            f"<div class=removed>− {escape(k)}</div>" for k in o.kernels_removed) + "".join(
            f"<div class=added>+ {escape(k)}</div>" for k in o.kernels_added)
        lowering = ""
        if o.launchers_base != o.launchers_new:
            lowering = (f"<div class=meta>launched by {escape(', '.join(o.launchers_base) or '–')} → "
                        f"{escape(', '.join(o.launchers_new) or '–')}</div>")
        rows.append(
            f"{_row(o.noise)}<td class=name>{escape(name)}{lowering}</td><td>{escape(o.status)}</td>"
            f"{_change_cells(o.kernel_calls_per_step, o.gpu_time_per_step_us, scale, o.noise)}"
            f"<td class=kernels>{kernels}</td></tr>")
    return table(["label / op", "status", "kernels BASE", "NEW", "GPU ms BASE", "NEW", "", "Δ ms", "Δ %", "noise",
                   "kernels changed"], rows, "ops", "No GPU work attributed to ops on either side.")


def _added_removed(rd: RankDiff) -> str:
    rows = []
    for k in [k for k in rd.kernels if k.status in (ADDED, REMOVED)][:2 * TOP]:
        mark = "+" if k.status == ADDED else "−"
        t, c = k.time_per_step_us, k.calls_per_step
        rows.append(f"<tr class={escape(k.status)}><td>{mark} {escape(k.status)}</td>"
                    f"{name_cell(k.short_name, k.name)}"
                    f"{num_cell(count(c.new if k.status == ADDED else c.base))}"
                    f"{num_cell(ms(t.new if k.status == ADDED else t.base))}"
                    f"<td>{escape(', '.join(k.ops))}</td></tr>")
    return table(["", "kernel", "calls", "ms", "launched under"], rows, "added-removed",
                  "None: both sides launch the same kernels.")


def _kernels(rd: RankDiff) -> str:
    kernels = rd.kernels[:TOP]
    scale = _scale(_change(k.time_per_step_us) for k in kernels)
    rows = []
    for k in kernels:
        rows.append(
            f"{_row(k.noise)}{name_cell(k.short_name, k.name)}<td>{escape(k.status)}</td>"
            f"{_change_cells(k.calls_per_step, k.time_per_step_us, scale, k.noise)}</tr>")
    return table(["kernel", "status", "calls BASE", "NEW", "ms BASE", "NEW", "", "Δ ms", "Δ %", "noise"], rows,
                 "kernels", "No kernels on either side.")


def _memory(rd: RankDiff) -> str:
    rows = []
    for m in rd.memory:
        t, c = m.time_per_step_us, m.calls_per_step
        change = _change(t)
        rows.append(f"<tr><td>{escape(m.kind)}</td>{num_cell(count(c.base))}{num_cell(count(c.new))}"
                    f"{num_cell(ms(t.base))}{num_cell(ms(t.new))}"
                    f"{num_cell(_signed_ms(change), _change_class(change))}</tr>")
    return table(["kind", "calls BASE", "NEW", "ms BASE", "NEW", "Δ ms"], rows, "memory", "None on either side.")


def _cpu_ops(rd: RankDiff) -> str:
    ops = rd.cpu_ops[:TOP]
    scale = _scale(_change(o.self_per_step_us) for o in ops)
    rows = []
    for o in ops:
        rows.append(f"{_row(o.noise)}{name_cell(o.name)}<td>{escape(o.status)}</td>"
                    f"{_change_cells(o.calls_per_step, o.self_per_step_us, scale, o.noise)}</tr>")
    return table(["op", "status", "calls BASE", "NEW", "self ms BASE", "NEW", "", "Δ ms", "Δ %", "noise"], rows,
                 "cpu-ops", "No CPU ops on either side.")


def render_chooser(sides: Sequence[Side], *, base: str | None = None, new: str | None = None, message: str = "",
                   back_url: str = "/") -> str:
    """The form that names two sides (a GET to this route, so the URL it opens names both); without `base` and
    `new` it opens with the `preselected` pair, or, when there is none, says that a second capture is needed and
    selects nothing (a placeholder the form cannot send). A damaged side is offered, marked. A form sends text, so
    a side whose name is not UTF-8 cannot be chosen here: it is left out and counted (its row's links still
    work)."""
    unnamed = sum(shown(s.path) != s.path for s in sides)
    sides = [s for s in sides if shown(s.path) == s.path]
    needed = ""
    if base is None and new is None:
        pair = preselected(sides)
        if pair is not None:
            base, new = pair
        elif sides:
            needed = _second_capture_needed(sides)

    def select(name: str, chosen: str | None) -> str:
        options = "".join(f"<option value=\"{escape(s.path)}\"{' selected' if s.path == chosen else ''}>"
                          f"{escape(s.title)}{escape(f' (damaged: {s.damaged})' if s.damaged else '')}</option>"
                          for s in sides)
        if chosen is None:  # the first option, empty and selected: a required select will not send it
            return (f"<select name={name} id={name} required><option value=\"\" disabled selected>choose a "
                    f"capture</option>{options}</select>")
        return f"<select name={name} id={name}>{options}</select>"

    form = ("<p class=none>No JSON traces under the root yet.</p>" if not sides else
            f'<form method=get action="{ROUTE}"><p><label for=base>BASE</label> {select("base", base)}</p>'
            f'<p><label for=new>NEW</label> {select("new", new)}</p><p><button type=submit>Compare</button></p>'
            "</form>")
    error = f"<p class=error>{escape(message)}</p>" if message else ""
    if needed:
        error += f"<p class=note id=second-capture>{escape(needed)}</p>"
    if unnamed:
        error += (f"<p class=note id=unnamed>{unnamed} capture(s) not offered: their names are not UTF-8, which a form "
                  "cannot send. Use their \"Compare with previous\" links on the trace list, or rename them.</p>")
    body = (f'<p class=nav><a href="{escape(back_url)}">← all traces</a></p><h1>Compare two captures</h1>{error}'
            "<p>Each side is a run folder (all its ranks, compared rank to rank) or one trace file. Figures are per "
            "profiled step, so captures with different <code>active</code> counts compare fairly. The terminal "
            "gives the same: <code>python -m lightx2v.trace_summary --diff BASE NEW</code>.</p>" + form)
    return page("Compare · Compare", body, css=COMPARE_STYLE)


def _second_capture_needed(sides: Sequence[Side]) -> str:
    """The chooser's words when no two healthy run folders are there to preselect."""
    healthy = [s for s in sides if s.run and not s.damaged]
    if healthy:
        return (f"A second capture is needed to compare: {healthy[0].title} is the only one here whose traces are "
                "whole. Capture again, then reload this page.")
    return ("A second capture is needed to compare: no run here has whole traces (the trace list says which file is "
            "damaged and why). Capture again, then reload this page.")


# The Compare page's own rules, after the base's (html_page.STYLE)
COMPARE_STYLE = """
td.name, td.kernels { max-width: 48em; } td.kernels { font-family: monospace; overflow-wrap: anywhere; }
.verdict { font-size: 1.1em; font-weight: 600; } #verdict { font-size: 1.25em; }
.none { color: #555; } .note { color: #8a5a00; }
.faster, .added { color: """ + FASTER + """; }
.slower, .removed { color: """ + SLOWER + """; }
tr.new-step td { border-bottom: 1px solid #bbb; } tr.base-step td { border-bottom: none; }
td.side { color: #555; font-size: .85em; }
tr.noise td, tr.untested td, .noise-line { color: #777; } td.judged { font-size: .85em; }
svg.delta { vertical-align: middle; background: #f4f4f4; }
select { font: inherit; max-width: 60em; }
""" + FLAME_STYLE
