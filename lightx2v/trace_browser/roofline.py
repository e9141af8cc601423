"""The Overview's "How far from the limit" section: the efficiency answers (``trace_summary.efficiency``) with an
offline roofline chart (inline SVG, log-log: arithmetic intensity in FLOP/byte against achieved TFLOP/s, the
memory roof ``bandwidth x intensity`` and the compute roof of each dtype's peak, one dot per op and shape), the
op classes ranked by headroom and the top ops. No script, no font, nothing from elsewhere.

``roofline_section(efficiency)`` returns the section's HTML; its CSS is ``ROOFLINE_STYLE``, kept apart so it can
move with the section onto any page base.
"""

from __future__ import annotations

import math

from lightx2v.trace_summary.model import Efficiency, OpEfficiency
from lightx2v.trace_summary.peaks import peak_tflops
from lightx2v.trace_summary.render_efficiency import peak_line, step_line, without_roof

from .html_page import NONE, escape, table

WIDTH, HEIGHT, PAD_L, PAD_B, PAD_T, PAD_R = 660, 300, 56, 36, 12, 12
CLASS_COLOURS = {"GEMM": "#3b6fb6", "attention": "#8e44ad", "convolution": "#16a085", "normalization": "#d35400",
                 "softmax": "#c0392b", "activation": "#e67e22", "elementwise": "#7f8c8d", "copy": "#2c3e50"}
ROOF = "#222"

ROOFLINE_STYLE = """
svg.roofline { display: block; background: #f8f8f8; margin: .6em 0; }
svg.roofline text { font: 11px system-ui, sans-serif; fill: #444; }
svg.roofline .grid { stroke: #e2e2e2; } svg.roofline .roof { stroke: #222; stroke-width: 1.5; fill: none; }
table.efficiency td.win { color: #c0392b; } .headline { font-weight: 600; }
"""


def _num(v: float | None, digits: int = 1) -> str:
    if v is None:
        return NONE
    return f"{v:.3g}" if 0 < abs(v) < 1 and digits < 3 else f"{v:.{digits}f}"


def _ms(us: float | None, steps: int) -> str:
    return NONE if us is None else f"{us / steps / 1000:.3f}"


def _win(us: float | None) -> str:
    return NONE if us is None else "0" if us < 0.5 else f"−{us / 1000:.3f}"


def roofline_section(e: Efficiency | None) -> str:
    if e is None:
        return ""
    if without_roof(e):
        return f"<h3>How far from the limit</h3><p class=meta>{escape(e.headline)}</p>"
    out = ["<h3>How far from the limit</h3>", f"<p class=headline>{escape(e.headline)}</p>",
           f"<p class=meta>peak: {escape(peak_line(e.peak))}" + (f"<br>{escape(step_line(e))}" if step_line(e) else "")
           + "</p>"]
    if e.hint and e.hint != e.headline:
        out.append(f"<p class=note>{escape(e.hint)}</p>")
    plotted = [r for r in e.ops if r.intensity and r.tflops_per_s]
    if plotted:
        out.append(roofline_chart(e, plotted))
    rows = [f"<tr><td>{escape(c.op_class)}</td><td class=num>{_ms(c.time_us, e.steps)}</td>"
            f"<td class=num>{_num(c.tflops_per_s)}</td><td class=num>{_num(c.tb_per_s, 3)}</td>"
            f"<td class=num>{_num(c.intensity)}</td><td>{escape(c.bound or '–')}</td>"
            f"<td class=num>{_num(c.roofline_pct)}</td><td class='num win'>{_win(c.headroom_us)}</td></tr>"
            for c in e.classes]
    head = ["class", "ms / step", "TFLOP/s", "TB/s", "FLOP/byte", "bound", "% of roofline",
            f"ms / step at {e.target_pct:.0f}%"]
    if rows:
        out.append(table(head, rows, "efficiency classes"))
    ops = [f"<tr><td class=num>{_ms(r.time_us, e.steps)}</td><td class=num>{_num(r.tflops_per_s)}</td>"
           f"<td class=num>{_num(r.tb_per_s, 3)}</td><td class=num>{_num(r.roofline_pct)}</td>"
           f"<td class='num win'>{_win(r.headroom_us)}</td><td class=name>{escape(r.op)} {escape(r.shapes)}"
           + (f"<br>← {escape(', '.join(r.kernels))}" if r.kernels else "") + "</td></tr>" for r in e.ops]
    if ops:
        out.append(table(["ms / step", "TFLOP/s", "TB/s", "% of roofline", f"at {e.target_pct:.0f}%",
                           "op, shapes ← kernels"], ops, "efficiency ops"))
    return "\n".join(out)


def roofline_chart(e: Efficiency, ops: list[OpEfficiency]) -> str:
    """The log-log chart: decades from the data and the roofs' ridge points, roofs first, then the dots."""
    roofs: dict[str, float] = {}
    if e.peak is not None:
        for r in ops:
            p = peak_tflops(e.peak, r.dtype, r.op_class in ("GEMM", "attention", "convolution"), r.op_class)
            if p:
                roofs[r.dtype if r.op_class in ("GEMM", "attention", "convolution") else "fp32 (vector)"] = p
    bw = e.peak.tbps if e.peak is not None else None
    xs = [r.intensity or 1.0 for r in ops] + ([p / bw for p in roofs.values()] if bw else [])
    ys = [r.tflops_per_s or 1.0 for r in ops] + list(roofs.values())
    x0, x1 = math.floor(math.log10(min(xs))) - 1, math.ceil(math.log10(max(xs))) + 1
    y0, y1 = math.floor(math.log10(min(ys))), math.ceil(math.log10(max(ys))) + 0.3
    w, h = WIDTH - PAD_L - PAD_R, HEIGHT - PAD_T - PAD_B

    def px(x: float) -> float:
        return PAD_L + w * (math.log10(x) - x0) / (x1 - x0)

    def py(y: float) -> float:
        return PAD_T + h * (1 - (math.log10(y) - y0) / (y1 - y0))

    parts = []
    for d in range(int(x0), int(x1) + 1):
        x = px(10.0 ** d)
        parts.append(f'<line class=grid x1="{x:.1f}" x2="{x:.1f}" y1="{PAD_T}" y2="{PAD_T + h}"/>'
                     f'<text x="{x:.1f}" y="{HEIGHT - PAD_B + 14}" text-anchor=middle>1e{d}</text>')
    for d in range(int(y0), int(math.floor(y1)) + 1):
        y = py(10.0 ** d)
        parts.append(f'<line class=grid x1="{PAD_L}" x2="{PAD_L + w}" y1="{y:.1f}" y2="{y:.1f}"/>'
                     f'<text x="{PAD_L - 6}" y="{y + 4:.1f}" text-anchor=end>1e{d}</text>')
    parts.append(f'<text x="{PAD_L + w / 2:.0f}" y="{HEIGHT - 4}" text-anchor=middle>arithmetic intensity '
                 '(FLOP / byte)</text>'
                 f'<text x="12" y="{PAD_T + h / 2:.0f}" text-anchor=middle transform="rotate(-90 12 '
                 f'{PAD_T + h / 2:.0f})">achieved TFLOP/s</text>')
    for name, p in roofs.items():
        assert bw is not None
        ridge, lo = p / bw, 10.0 ** x0
        start_y = max(lo * bw, 10.0 ** y0)
        start_x = start_y / bw
        parts.append(f'<polyline class=roof data-roof="{escape(name)}" points="{px(start_x):.1f},{py(start_y):.1f} '
                     f'{px(ridge):.1f},{py(p):.1f} {px(10.0 ** x1):.1f},{py(p):.1f}"><title>{escape(name)}: '
                     f'{p:g} TFLOP/s, {bw:g} TB/s (ridge {ridge:.0f} FLOP/byte)</title></polyline>'
                     f'<text x="{PAD_L + w - 4}" y="{py(p) - 4:.1f}" text-anchor=end>{escape(name)} {p:g} '
                     'TFLOP/s</text>')
    if bw:
        parts.append(f'<text x="{px(10.0 ** x0) + 6:.1f}" y="{PAD_T + 12}">memory {bw:g} TB/s</text>')
    for r in ops:
        colour = CLASS_COLOURS.get(r.op_class, "#555")
        tip = (f"{r.op} {r.shapes}: {_num(r.tflops_per_s)} TFLOP/s, {_num(r.tb_per_s, 3)} TB/s, "
               f"{_num(r.intensity)} FLOP/byte, {_num(r.roofline_pct)}% of its roofline")
        parts.append(f'<circle class=op data-class="{escape(r.op_class)}" cx="{px(r.intensity or 1):.1f}" '
                     f'cy="{py(r.tflops_per_s or 1):.1f}" r="5" fill="{colour}" fill-opacity=".8">'
                     f"<title>{escape(tip)}</title></circle>")
    legend = " ".join(f'<tspan fill="{CLASS_COLOURS.get(c, "#555")}">● {escape(c)}</tspan>'
                      for c in dict.fromkeys(r.op_class for r in ops))
    parts.append(f'<text x="{PAD_L + 6}" y="{PAD_T + h - 6}">{legend}</text>')
    return (f'<svg class=roofline width="{WIDTH}" height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" '
            f'aria-label="roofline: arithmetic intensity against achieved TFLOP/s">{"".join(parts)}</svg>')
