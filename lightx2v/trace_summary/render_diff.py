"""The plain-text report of ``--diff``: the verdict first, then BASE / NEW / delta tables (ASCII, <= ~110 columns).

Every figure is per profiled step (see ``diff``); "calls" columns read ``BASE>NEW``. Names follow the summary's
rule (``render``): kernels by ``names.short_name``, and the last column of a row (kernel, op, group, workers,
the kernels listed under a group) is never cut.
"""

from __future__ import annotations

from .diff import ADDED, REMOVED, SAME, Delta, OpKernels, RankDiff, RunDiff, group_path, pair_label
from .frames_diff import FramesChange, frame_name
from .names import short_name
from .noise import NO_TEST, NOISE, RANGES, RANK_TEST, REAL, UNTESTED, Noise
from .render import format_bytes, format_ms

KERNEL_LIST = 3  # kernels named under an op group whose kernels changed, per side


def render_diff(diff: RunDiff, top: int = 10) -> str:
    """The report for a terminal; ``top``: rows per table (kernels, CPU ops, op groups)."""
    b, n = diff.base, diff.new
    lines = [diff.verdict, ""]
    for tag, side in (("BASE", b), ("NEW ", n)):
        if side.spans:
            ranks = f"{side.ranks} spans, the newest compared"
        elif side.straggler:
            ranks = f"{side.ranks} ranks, straggler {side.straggler}"
        else:
            ranks = f"{side.ranks} rank{'s' if side.ranks != 1 else ''}"
        lines.append(f"  {tag}  {side.label} ({side.path}): {ranks}")
    for note in diff.notes:
        lines.append(f"  note  {note}")
    for tag, lone in (("BASE", diff.unmatched_base), ("NEW", diff.unmatched_new)):
        if lone:
            lines.append(f"  only in {tag}: {', '.join(lone)}")
    if diff.communication is not None:
        lines.append(f"  {diff.communication.line}")
    several = len(diff.ranks) > 1 or any(side.ranks > 1 and not side.spans for side in (b, n))
    if several:
        cells = [_rank_cell(r) for r in diff.ranks]
        width = max([4, *map(len, cells)])
        lines += ["", "Run step time: each side's slowest rank's mean step wall", _table_head("per step"),
                  _row("step wall ms", diff.step_wall_us),
                  "", f"Ranks, paired {diff.pairing}"
                  + (" (rank B>N: BASE's and NEW's rank differ)" if any(">" in c for c in cells) else ""),
                  f"  {'rank':>{width}}  {'BASE step ms':>12} {'NEW step ms':>12} {'delta ms':>10} {'%':>7}  workers"]
        for r, cell in zip(diff.ranks, cells, strict=True):
            d = r.step_wall_us
            lines.append(f"  {cell:>{width}}  {format_ms(d.base):>12} {format_ms(d.new):>12} {_sms(d.delta):>10} "
                         f"{_pct(d.delta_pct):>7}  {r.base_worker} > {r.new_worker}")
    for r in diff.ranks:
        if several:
            lines += ["", "=" * 100, f"{_capital(pair_label(r))}: {r.verdict}"]
        elif r.base_rank != r.new_rank:
            lines += ["", f"{_capital(pair_label(r))}, paired {diff.pairing}"]
        lines += ["", render_rank_diff(r, top)]
    return "\n".join(lines) + "\n"


def render_rank_diff(r: RankDiff, top: int = 10) -> str:
    lines = [f"  BASE  {r.base_steps} step{'s' if r.base_steps != 1 else ''}  {r.base_file}",
             f"  NEW   {r.new_steps} step{'s' if r.new_steps != 1 else ''}  {r.new_file}", "",
             _table_head("per step"),
             _row("step wall ms", r.step_wall_us),
             _row("GPU busy ms", r.gpu_busy_us),
             _row("GPU idle ms", r.gpu_idle_us),
             _row("kernels", r.kernel_calls_per_step, count=True),
             _row("kernel time ms", r.kernel_time_per_step_us),
             _row("CPU op self ms", r.cpu_self_per_step_us)]
    for m in r.memory:
        lines.append(_row(f"{m.kind} ms", m.time_per_step_us))
        lines.append(_row(f"{m.kind} calls", m.calls_per_step, count=True))
        if m.bytes_per_step.base is not None or m.bytes_per_step.new is not None:
            lines.append(f"  {m.kind + ' bytes':<18} {_bytes(m.bytes_per_step.base):>12} "
                         f"{_bytes(m.bytes_per_step.new):>12}")
    if r.step_noise is not None:
        lines.append(noise_line(r.step_noise, r.base_steps, r.new_steps))
    if r.efficiency is not None and r.efficiency.line:
        lines.append(f"  {r.efficiency.line}")
    if r.frames is not None:
        lines.append(f"  {r.frames.line}")
        lines += frame_change_lines(r.frames, top)

    changed_ops = [o for o in r.ops if o.status != SAME]
    lines += ["", f"Op groups (label / top-level op) whose GPU work changed: {len(changed_ops)} of {len(r.ops)}"]
    if changed_ops:
        lines.append(f"  {'status':<15} {'calls B>N':>13} {'BASE ms':>9} {'NEW ms':>9} {'delta ms':>9} {'%':>7} "
                     f"{'noise':>6}  group")
        for o in changed_ops[:top]:
            lines += _op_lines(o)
        if len(changed_ops) > top:
            lines.append(f"  ... {len(changed_ops) - top} more")

    kernels = [k for k in r.kernels if k.status != SAME]
    counts = {s: sum(1 for k in r.kernels if k.status == s) for s in (ADDED, REMOVED, "changed", SAME)}
    lines += ["", f"Kernels: {counts[ADDED]} added, {counts[REMOVED]} removed, {counts['changed']} changed, "
                  f"{counts[SAME]} the same (per step, by |delta time|)"]
    if kernels:
        lines.append(f"  {'status':<8} {'calls B>N':>13} {'BASE ms':>9} {'NEW ms':>9} {'delta ms':>9} {'%':>7} "
                     f"{'noise':>6}  kernel")
        for k in kernels[:top]:
            row = (f"  {k.status:<8} {_calls(k.calls_per_step):>13} {format_ms(k.time_per_step_us.base):>9} "
                   f"{format_ms(k.time_per_step_us.new):>9} {_sms(k.time_per_step_us.delta):>9} "
                   f"{_pct(k.time_per_step_us.delta_pct):>7} {noise_word(k.noise):>6}  {k.short_name}")
            lines.append(row)
            if k.status in (ADDED, REMOVED) and k.ops:  # where it came from or went: the op group table's row
                more = f" (and {len(k.ops) - 1} more)" if len(k.ops) > 1 else ""
                lines.append(f"      launched by {k.ops[0]}{more}")
        if len(kernels) > top:
            lines.append(f"  ... {len(kernels) - top} more")

    ops = [o for o in r.cpu_ops if o.status != SAME]
    lines += ["", f"CPU ops: {sum(1 for o in r.cpu_ops if o.status == ADDED)} added, "
                  f"{sum(1 for o in r.cpu_ops if o.status == REMOVED)} removed, "
                  f"{sum(1 for o in r.cpu_ops if o.status == 'changed')} changed (per step, by |delta self time|)"]
    if ops:
        lines.append(f"  {'status':<8} {'calls B>N':>13} {'BASE self':>9} {'NEW self':>9} {'delta ms':>9} "
                     f"{'%':>7} {'noise':>6}  op")
        for op in ops[:top]:
            d = op.self_per_step_us
            lines.append(f"  {op.status:<8} {_calls(op.calls_per_step):>13} {format_ms(d.base):>9} "
                         f"{format_ms(d.new):>9} {_sms(d.delta):>9} {_pct(d.delta_pct):>7} {noise_word(op.noise):>6}  "
                         f"{op.name}")
        if len(ops) > top:
            lines.append(f"  ... {len(ops) - top} more")
    return "\n".join(lines)


def frame_change_lines(ch: FramesChange, top: int) -> list[str]:
    """The frames whose time moved: inclusive and self per step on both sides, the self time's noise verdict."""
    moved = [c for c in ch.frames if c.status != SAME]
    if not ch.value:
        return []
    what = "GPU time" if ch.value == "gpu" else "CPU op time"
    lines = ["", f"Where in your code: frames whose {what} changed: {len(moved)} of {len(ch.frames)} (per step; "
                 "by |delta self|, beyond noise first)"]
    if moved:
        lines.append(f"  {'status':<8} {'BASE ms':>9} {'NEW ms':>9} {'self B ms':>9} {'self N ms':>9} "
                     f"{'delta ms':>9} {'noise':>6}  frame")
    for c in moved[:top]:
        i, s = c.inclusive_per_step_us, c.self_per_step_us
        lines.append(f"  {c.status:<8} {format_ms(i.base):>9} {format_ms(i.new):>9} {format_ms(s.base):>9} "
                     f"{format_ms(s.new):>9} {_sms(s.delta):>9} {noise_word(c.noise):>6}  {frame_name(c)}")
    if len(moved) > top:
        lines.append(f"  ... {len(moved) - top} more")
    return lines


def _op_lines(o: OpKernels) -> list[str]:
    d = o.gpu_time_per_step_us
    lines = [f"  {o.status:<15} {_calls(o.kernel_calls_per_step):>13} {format_ms(d.base):>9} {format_ms(d.new):>9} "
             f"{_sms(d.delta):>9} {_pct(d.delta_pct):>7} {noise_word(o.noise):>6}  {group_path(o.label, o.op)}"]
    for sign, names in (("-", o.kernels_removed), ("+", o.kernels_added)):
        if o.status in (ADDED, REMOVED):
            break
        for name in names[:KERNEL_LIST]:
            lines.append(f"      {sign} {short_name(name)}")
        if len(names) > KERNEL_LIST:
            lines.append(f"      {sign} ... {len(names) - KERNEL_LIST} more")
    if o.launchers_base and o.launchers_new and set(o.launchers_base) != set(o.launchers_new):
        lines.append(f"      launched by: {', '.join(o.launchers_base[:2])} -> {', '.join(o.launchers_new[:2])}")
    return lines


def noise_word(n: Noise | None) -> str:
    """A row's noise column: ``real`` (beyond noise), ``noise`` (within it), ``?`` (one step a side)."""
    if n is None:
        return ""
    return {REAL: "real", NOISE: "noise", UNTESTED: "?"}[n.verdict]


def noise_line(n: Noise | None, base_steps: int, new_steps: int) -> str:
    """How the step wall was judged: the test, its p and the steps' own spread."""
    if n is None:
        return ""
    how = {RANK_TEST: f"Mann-Whitney p={n.p_value:.3g}" if n.p_value is not None else "",
           RANGES: "ranges " + ("apart" if n.verdict == REAL else "overlap"),
           NO_TEST: "one step a side: not tested"}[n.test]
    spread = f", steps vary ±{n.noise_pct:.1f}%" if n.noise_pct is not None else ""
    return f"  step wall: {n.verdict} ({base_steps} vs {new_steps} steps, {how}{spread})"


def _table_head(what: str) -> str:
    return f"  {what:<18} {'BASE':>12} {'NEW':>12} {'delta':>12} {'%':>7}"


def _row(name: str, d: Delta, count: bool = False) -> str:
    fmt = _num if count else format_ms
    delta = "-" if d.delta is None else (f"{d.delta:+.1f}" if count else _sms(d.delta))
    return f"  {name:<18} {fmt(d.base):>12} {fmt(d.new):>12} {delta:>12} {_pct(d.delta_pct):>7}"


def _calls(d: Delta) -> str:
    return f"{_num(d.base)}>{_num(d.new)}"


def _num(value: float | None) -> str:
    if value is None:
        return "-"
    return str(int(value)) if value == int(value) else f"{value:.1f}"


def _sms(us: float | None) -> str:
    return "-" if us is None else f"{us / 1000:+.3f}"


def _pct(pct: float | None) -> str:
    return "-" if pct is None else f"{pct:+.1f}"


def _bytes(value: float | None) -> str:
    return format_bytes(round(value)) if value is not None else "-"


def _rank_cell(r: RankDiff) -> str:
    """The rank table's rank: ``1``, or ``3>1`` for a pair of different ranks (BASE>NEW, as the calls columns)."""
    if r.base_rank == r.new_rank:
        return _opt(r.rank)
    return f"{_opt(r.base_rank)}>{_opt(r.new_rank)}"


def _capital(text: str) -> str:
    return text[:1].upper() + text[1:]


def _opt(value: object) -> str:
    return "-" if value is None else str(value)
