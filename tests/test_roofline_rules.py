"""The Overview's "How far from the limit" section (`lightx2v.trace_browser.roofline`), fast: hand-made
efficiency figures and the HTML a reader gets for them: the headline, peak and step lines, the classes and ops
tables cell by cell, and the roofline chart's decades, roofs, dots, labels and legend. The chart's geometry, by
which the expected coordinates are worked out here: a 660 x 300 picture, the plot 56 px from the left and 12 px
from the right (592 px), 12 px from the top and 36 px from the bottom (252 px); log-log, decades spread evenly;
x from a decade below the smallest intensity (ops and ridge points) to a decade above the largest, y from the
decade of the smallest rate (ops and roofs) to 0.3 decade above the largest's. tests/test_overview_roofline.py
looks at the chart in a browser."""

from __future__ import annotations

import re

from lightx2v.trace_browser.roofline import roofline_chart, roofline_section
from lightx2v.trace_summary.model import ClassEfficiency, Efficiency, OpEfficiency, PeakSpec

PEAK = PeakSpec(device="NVIDIA X", gpu="X", tflops={"bf16": 1000.0, "fp32": 100.0}, tbps=10.0, source="spec")


def op(name: str, op_class: str, dtype: str, intensity: float | None, tflops: float | None, *, tbps: float = 0.5,
       roof: float | None = 50.0, headroom: float | None = 3000.0, shapes: str = "[4, 4] x [4, 4] bf16",
       kernels: tuple[str, ...] = ("gemm_k",), time_us: float = 4000.0) -> OpEfficiency:
    return OpEfficiency(op=name, op_class=op_class, shapes=shapes, dtype=dtype, calls=4, kernels=list(kernels),
                        time_us=time_us, flops=None, bytes=None, tflops_per_s=tflops, tb_per_s=tbps,
                        intensity=intensity, bound="compute", roofline_pct=roof, headroom_us=headroom)


MM = op("aten::mm", "GEMM", "bf16", 1000.0, 500.0)
ADD = op("aten::add", "elementwise", "bf16", 1.0, 1.0, tbps=1.0, roof=10.0, headroom=0.2, shapes="", kernels=())
COPY = op("aten::copy_", "copy", "bf16", None, None, tbps=0.0, roof=None, headroom=None, shapes="<b>", kernels=())


def eff(**changes) -> Efficiency:
    fields = dict(shapes_recorded=True, hint="", peak=PEAK, target_pct=80.0, steps=2, step_wall_us=20_000.0,
                  gpu=True, modeled_us=8000.0, unmodeled_us=0.0, matrix_flops=8e12, step_tflops_per_s=400.0,
                  mfu_pct=40.0, headline="GEMM: 4.000 ms at 50% of its roofline", classes=[], ops=[MM, ADD, COPY])
    fields.update(changes)
    return Efficiency(**fields)


def attrs(svg: str, tag: str, name: str) -> list[str]:
    return re.findall(rf'<{tag} [^>]*?{name}="([^"]*)"', svg)


# --- the section --------------------------------------------------------------------------------------------------

def test_no_section_without_efficiency_figures():
    assert roofline_section(None) == ""


def test_the_section_opens_with_the_headline_the_peak_and_the_step_line_and_a_note_that_is_no_headline():
    html = roofline_section(eff(hint="run with record_shapes=True & more", ops=[]))
    assert html.split("\n") == [
        "<h3>How far from the limit</h3>",
        "<p class=headline>GEMM: 4.000 ms at 50% of its roofline</p>",
        "<p class=meta>peak: X (NVIDIA X): bf16 1000, fp32 100 TFLOP/s, 10 TB/s; source: spec<br>step: 400.0 TFLOP/s "
        "(4000.0 GFLOP of GEMM, convolution and attention per step in 10.000 ms), MFU 40.0%</p>",
        "<p class=note>run with record_shapes=True &amp; more</p>",
    ]


def test_without_a_step_rate_or_a_hint_other_than_the_headline_those_lines_are_left_out():
    html = roofline_section(eff(hint="GEMM: 4.000 ms at 50% of its roofline", step_tflops_per_s=None, ops=[],
                                peak=None))
    assert html.split("\n") == ["<h3>How far from the limit</h3>",
                                "<p class=headline>GEMM: 4.000 ms at 50% of its roofline</p>",
                                "<p class=meta>peak: none (the device is not in the peak table: --peak TFLOPS,TBps)"
                                "</p>"]


def test_the_classes_table_has_a_row_per_class_with_its_figures_per_step():
    classes = [ClassEfficiency(op_class="GEMM", dtype="bf16", calls=4, time_us=8000.0, flops=None, bytes=None,
                               tflops_per_s=500.0, tb_per_s=0.5, intensity=1000.0, bound="compute", roofline_pct=50.0,
                               headroom_us=3000.0),
               ClassEfficiency(op_class="<copy>", dtype="", calls=1, time_us=1.0, flops=None, bytes=None,
                               tflops_per_s=None, tb_per_s=0.25, intensity=None, bound="", roofline_pct=None,
                               headroom_us=0.4)]
    html = roofline_section(eff(classes=classes, ops=[], target_pct=62.0)).split("\n")
    assert html[-1] == (
        "<table class='efficiency classes'><thead><tr><th>class</th><th>ms / step</th><th>TFLOP/s</th><th>TB/s</th>"
        "<th>FLOP/byte</th><th>bound</th><th>% of roofline</th><th>ms / step at 62%</th></tr></thead><tbody>"
        "<tr><td>GEMM</td><td class=num>4.000</td><td class=num>500.0</td><td class=num>0.500</td>"
        "<td class=num>1000.0</td><td>compute</td><td class=num>50.0</td><td class='num win'>−3.000</td></tr>"
        "<tr><td>&lt;copy&gt;</td><td class=num>0.001</td><td class=num>–</td><td class=num>0.250</td>"
        "<td class=num>–</td><td>–</td><td class=num>–</td><td class='num win'>0</td></tr></tbody></table>")


def test_the_ops_table_has_a_row_per_op_with_its_shapes_and_kernels():
    html = roofline_section(eff()).split("\n")
    assert html[-1] == (
        "<table class='efficiency ops'><thead><tr><th>ms / step</th><th>TFLOP/s</th><th>TB/s</th>"
        "<th>% of roofline</th><th>at 80%</th><th>op, shapes ← kernels</th></tr></thead><tbody>"
        "<tr><td class=num>2.000</td><td class=num>500.0</td><td class=num>0.500</td><td class=num>50.0</td>"
        "<td class='num win'>−3.000</td><td class=name>aten::mm [4, 4] x [4, 4] bf16<br>← gemm_k</td></tr>"
        "<tr><td class=num>2.000</td><td class=num>1.0</td><td class=num>1.000</td><td class=num>10.0</td>"
        "<td class='num win'>0</td><td class=name>aten::add </td></tr>"
        "<tr><td class=num>2.000</td><td class=num>–</td><td class=num>0.000</td><td class=num>–</td>"
        "<td class='num win'>–</td><td class=name>aten::copy_ &lt;b&gt;</td></tr></tbody></table>")


def test_a_saving_under_half_a_microsecond_reads_0_and_kernels_are_listed_by_comma():
    ops = [op("a", "GEMM", "bf16", 5.0, 5.0, headroom=0.5, kernels=("k1", "k2")), op("b", "GEMM", "bf16", 5.0, 5.0,
                                                                                        headroom=1.0),
           op("c", "GEMM", "bf16", 5.0, 5.0, headroom=0.49)]
    html = roofline_section(eff(ops=ops))
    assert "<td class='num win'>−0.001</td><td class=name>a [4, 4] x [4, 4] bf16<br>← k1, k2</td>" in html
    assert "<td class='num win'>−0.001</td><td class=name>b " in html
    assert "<td class='num win'>0</td><td class=name>c " in html


def test_a_zero_figure_reads_with_its_decimal():
    classes = [ClassEfficiency(op_class="copy", dtype="", calls=1, time_us=0.0, flops=None, bytes=None,
                               tflops_per_s=0.0, tb_per_s=0.0, intensity=0.0, bound="memory", roofline_pct=0.0,
                               headroom_us=None)]
    assert ("<tr><td>copy</td><td class=num>0.000</td><td class=num>0.0</td><td class=num>0.000</td>"
            "<td class=num>0.0</td><td>memory</td><td class=num>0.0</td><td class='num win'>–</td></tr>"
            ) in roofline_section(eff(classes=classes, ops=[]))


def test_small_rates_read_three_significant_digits():
    html = roofline_section(eff(ops=[op("aten::mm", "GEMM", "bf16", 0.5, 0.0123, tbps=0.5, roof=0.25)]))
    assert "<td class=num>0.0123</td><td class=num>0.500</td><td class=num>0.25</td>" in html


def test_the_chart_comes_between_the_lines_and_the_tables_only_with_ops_to_plot():
    parts = roofline_section(eff()).split("\n")
    assert parts[3].startswith("<svg class=roofline ") and parts[4].startswith("<table class='efficiency ops'>")
    assert "<svg" not in roofline_section(eff(ops=[COPY, op("x", "GEMM", "bf16", 5.0, 0.0)]))


# --- the chart ----------------------------------------------------------------------------------------------------

def chart() -> str:
    return roofline_chart(eff(), [MM, ADD])


def test_the_chart_is_one_picture_with_its_size_and_name():
    svg = chart()
    assert svg.startswith('<svg class=roofline width="660" height="300" viewBox="0 0 660 300" role="img" '
                          'aria-label="roofline: arithmetic intensity against achieved TFLOP/s">')
    assert svg.endswith("</svg>")
    assert 'TFLOP/s"><line class=grid x1="56.0" x2="56.0" y1="12" y2="264"/><text x="56.0" y="278"' in svg
    assert '>1e-1</text><line class=grid x1="174.4"' in svg  # one decade's line and label after another


def test_the_chart_has_a_grid_line_per_decade_of_intensity_and_of_rate():
    # intensities 1 .. 1000 (ridges 10, 100): 1e-1 .. 1e4, 118.4 px a decade; rates 1 .. 1000: 1e0 .. 1e3
    svg = chart()
    xs = re.findall(r'<text x="([\d.]+)" y="278" text-anchor=middle>1e(-?\d+)</text>', svg)
    assert xs == [("56.0", "-1"), ("174.4", "0"), ("292.8", "1"), ("411.2", "2"), ("529.6", "3"), ("648.0", "4")]
    assert '<line class=grid x1="174.4" x2="174.4" y1="12" y2="264"/>' in svg
    ys = re.findall(r'<text x="50" y="(-?[\d.]+)" text-anchor=end>1e(-?\d+)</text>', svg)
    assert ys == [("268.0", "0"), ("191.6", "1"), ("115.3", "2"), ("38.9", "3")]
    assert '<line class=grid x1="56" x2="648" y1="187.6" y2="187.6"/>' in svg


def test_the_axes_are_named_at_the_middle_of_the_plot():
    svg = chart()
    assert '<text x="352" y="296" text-anchor=middle>arithmetic intensity (FLOP / byte)</text>' in svg
    assert '<text x="12" y="138" text-anchor=middle transform="rotate(-90 12 138)">achieved TFLOP/s</text>' in svg


def test_each_roof_rises_with_the_bandwidth_to_its_ridge_then_stays_flat_at_its_peak():
    svg = chart()
    # bf16: ridge 1000 / 10 = 100 FLOP/byte; the fp32 vector roof: 100 / 10 = 10; both start at the grid's
    # corner (intensity 0.1 at 10 TB/s is 1 TFLOP/s)
    assert ('<polyline class=roof data-roof="bf16" points="56.0,264.0 411.2,34.9 648.0,34.9"><title>bf16: 1000 '
            'TFLOP/s, 10 TB/s (ridge 100 FLOP/byte)</title></polyline>'
            '<text x="644" y="30.9" text-anchor=end>bf16 1000 TFLOP/s</text>') in svg
    assert ('<polyline class=roof data-roof="fp32 (vector)" points="56.0,264.0 292.8,111.3 648.0,111.3"><title>'
            'fp32 (vector): 100 TFLOP/s, 10 TB/s (ridge 10 FLOP/byte)</title></polyline>'
            '<text x="644" y="107.3" text-anchor=end>fp32 (vector) 100 TFLOP/s</text>') in svg
    assert '<text x="62.0" y="24">memory 10 TB/s</text>' in svg


def test_a_roof_starts_where_the_memory_roof_enters_the_plot():
    # intensities 10 .. 1000 and a 1 TB/s memory: x from 1e0, rates from 1e2: the memory roof enters at 100
    # TFLOP/s, intensity 100 (x 56 + 2 x 148), not at the left edge
    peak = PeakSpec(device="", gpu="X", tflops={"bf16": 1000.0}, tbps=1.0, source="spec")
    svg = roofline_chart(eff(peak=peak), [op("aten::mm", "GEMM", "bf16", 10.0, 100.0)])
    assert 'data-roof="bf16" points="352.0,264.0 500.0,70.2 648.0,70.2"' in svg  # rates 1e2 .. 10^3.3
    assert re.findall(r'text-anchor=end>1e(-?\d+)</text>', svg) == ["2", "3"]


def test_a_roof_starts_at_the_grids_first_intensity_when_the_memory_roof_is_inside_the_plot_there():
    # intensities 1 .. 100 (ridge): x from 1e-1, 148 px a decade; rates 0.5 .. 1000: y from 1e-1 to 10^3.3; at
    # intensity 0.1 the memory roof (10 TB/s) is at 1 TFLOP/s, above the plot's floor (0.1): it starts there
    peak = PeakSpec(device="", gpu="X", tflops={"bf16": 1000.0}, tbps=10.0, source="spec")
    svg = roofline_chart(eff(peak=peak), [op("aten::mm", "GEMM", "bf16", 1.0, 0.5)])
    assert 'data-roof="bf16" points="56.0,205.4 500.0,29.6 648.0,29.6"' in svg


def test_each_op_is_a_dot_at_its_intensity_and_rate_coloured_by_class_with_its_figures_on_hover():
    svg = chart()
    assert ('<circle class=op data-class="GEMM" cx="529.6" cy="57.9" r="5" fill="#3b6fb6" fill-opacity=".8">'
            '<title>aten::mm [4, 4] x [4, 4] bf16: 500.0 TFLOP/s, 0.500 TB/s, 1000.0 FLOP/byte, 50.0% of its '
            'roofline</title></circle>') in svg
    assert ('<circle class=op data-class="elementwise" cx="174.4" cy="264.0" r="5" fill="#7f8c8d" '
            'fill-opacity=".8"><title>aten::add : 1.0 TFLOP/s, 1.000 TB/s, 1.0 FLOP/byte, 10.0% of its roofline'
            '</title></circle>') in svg


def test_the_legend_names_each_class_once_in_its_colour_in_the_order_first_plotted():
    svg = roofline_chart(eff(), [MM, ADD, op("aten::bmm", "GEMM", "bf16", 100.0, 50.0), op("x", "custom", "bf16",
                                                                                       2.0, 2.0)])
    assert ('<text x="62" y="258"><tspan fill="#3b6fb6">● GEMM</tspan> <tspan fill="#7f8c8d">● elementwise</tspan> '
            '<tspan fill="#555">● custom</tspan></text>') in svg
    assert attrs(svg, "circle", "fill")[-1] == "#555"


def test_without_a_peak_the_chart_has_no_roofs_and_spans_the_ops_alone():
    svg = roofline_chart(eff(peak=None), [MM, ADD])
    assert "polyline" not in svg and "memory" not in svg
    # intensities 1 .. 1000: 1e-1 .. 1e4 as before; rates 1 .. 500: 1e0 .. 1e3 (0.3 decade over 500: 10^2.999)
    assert re.findall(r'text-anchor=middle>1e(-?\d+)</text>', svg) == ["-1", "0", "1", "2", "3", "4"]
    assert attrs(svg, "circle", "cx") == ["529.6", "174.4"]


def test_a_matrix_op_has_its_dtypes_roof_an_fp32_convolution_tf32s_and_a_dtype_without_a_peak_none():
    peak = PeakSpec(device="", gpu="X", tflops={"bf16": 1000.0, "tf32": 500.0, "fp32": 100.0}, tbps=10.0,
                    source="spec")
    conv = op("aten::conv2d", "convolution", "fp32", 100.0, 100.0)
    fp8 = op("aten::_scaled_mm", "GEMM", "fp8", 100.0, 100.0)
    attn = op("aten::sdpa", "attention", "bf16", 100.0, 100.0)
    svg = roofline_chart(eff(peak=peak), [conv, fp8, attn])
    assert attrs(svg, "polyline", "data-roof") == ["fp32", "bf16"]
    assert "<title>fp32: 500 TFLOP/s, 10 TB/s (ridge 50 FLOP/byte)</title>" in svg
    assert "<title>bf16: 1000 TFLOP/s, 10 TB/s (ridge 100 FLOP/byte)</title>" in svg  # attention's roof
