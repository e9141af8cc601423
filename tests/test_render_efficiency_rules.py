"""The text of the efficiency answers (`lightx2v.trace_summary.render_efficiency`), fast: hand-made efficiency
figures and the exact lines a user reads for them (the summary's section, the capture log's line), each written
out here by hand: padding, decimals, units, signs and order."""

from __future__ import annotations

from lightx2v.trace_summary.model import ClassEfficiency, Efficiency, OpEfficiency, PeakSpec
from lightx2v.trace_summary.render_efficiency import efficiency_lines, log_line, peak_line, step_line

H200 = PeakSpec(device="NVIDIA H200", gpu="H200 SXM", tflops={"fp32": 66.9, "tf32": 494.7, "fp8": 1979.0,
                                                              "bf16": 989.4}, tbps=4.8, source="NVIDIA datasheet")
HEADLINE = "GEMM: 15.383 ms at 73% of its roofline; at 80%, -2.64 ms per step"


def klass(name: str, time_us: float, tflops: float | None, tbps: float | None, intensity: float | None,
          bound: str, roof: float | None, headroom: float | None) -> ClassEfficiency:
    return ClassEfficiency(op_class=name, dtype="bf16", calls=4, time_us=time_us, flops=None, bytes=None,
                           tflops_per_s=tflops, tb_per_s=tbps, intensity=intensity, bound=bound, roofline_pct=roof,
                           headroom_us=headroom)


def op(name: str, shapes: str, kernels: list[str], time_us: float, calls: int, tflops: float | None,
       tbps: float | None, roof: float | None, headroom: float | None) -> OpEfficiency:
    return OpEfficiency(op=name, op_class="GEMM", shapes=shapes, dtype="bf16", calls=calls, kernels=kernels,
                        time_us=time_us, flops=None, bytes=None, tflops_per_s=tflops, tb_per_s=tbps, intensity=None,
                        bound="compute", roofline_pct=roof, headroom_us=headroom)


def eff(**changes) -> Efficiency:
    fields = dict(shapes_recorded=True, hint="", peak=H200, target_pct=80.0, steps=2, step_wall_us=44_482.0,
                  gpu=True, modeled_us=31_766.0, unmodeled_us=234.0, matrix_flops=27.22e12,
                  step_tflops_per_s=611.8, mfu_pct=61.8, headline=HEADLINE, classes=[], ops=[])
    fields.update(changes)
    return Efficiency(**fields)


# --- the peak and step lines --------------------------------------------------------------------------------------

def test_a_tables_peak_lists_its_rates_in_a_fixed_dtype_order_with_bandwidth_and_source():
    assert peak_line(H200) == ("H200 SXM (NVIDIA H200): bf16 989.4, fp8 1979, tf32 494.7, fp32 66.9 TFLOP/s, "
                               "4.8 TB/s; source: NVIDIA datasheet")
    two = PeakSpec(device="NVIDIA L4", gpu="L4", tflops={"fp32": 30.3, "bf16": 121.0}, tbps=0.3, source="spec")
    assert peak_line(two) == "L4 (NVIDIA L4): bf16 121, fp32 30.3 TFLOP/s, 0.3 TB/s; source: spec"


def test_a_given_peak_reads_its_rate_bandwidth_and_where_it_came_from():
    given = PeakSpec(device="", gpu="--peak", tflops={"bf16": 500.0}, tbps=2.0, source="given with --peak")
    assert peak_line(given) == "500.0 TFLOP/s, 2 TB/s, given with --peak"
    small = PeakSpec(device="", gpu="--peak", tflops={"bf16": 0.25}, tbps=0.05, source="given with --peak")
    assert peak_line(small) == "0.25 TFLOP/s, 0.05 TB/s, given with --peak"


def test_an_unknown_device_says_how_to_give_a_peak():
    assert peak_line(None) == "none (the device is not in the peak table: --peak TFLOPS,TBps)"


def test_the_step_line_gives_the_rate_the_matrix_work_per_step_its_time_and_mfu():
    assert step_line(eff()) == ("step: 611.8 TFLOP/s (13610.0 GFLOP of GEMM, convolution and attention per step in "
                                "22.241 ms), MFU 61.8%")
    assert step_line(eff(mfu_pct=None, step_tflops_per_s=0.0123, matrix_flops=3e9, step_wall_us=1500.0)) == \
        "step: 0.0123 TFLOP/s (1.5 GFLOP of GEMM, convolution and attention per step in 0.750 ms)"


def test_no_step_line_without_a_step_rate():
    assert step_line(eff(step_tflops_per_s=None)) == ""


def test_the_matrix_work_per_step_is_given_in_gflop_rounded_to_a_tenth():
    assert step_line(eff(mfu_pct=None, step_tflops_per_s=2.0, matrix_flops=2.1e9, step_wall_us=2000.0)) == \
        "step: 2.0 TFLOP/s (1.1 GFLOP of GEMM, convolution and attention per step in 1.000 ms)"


# --- the summary's section ----------------------------------------------------------------------------------------

def test_no_section_without_efficiency_figures():
    assert efficiency_lines(None) == []


def test_the_section_without_classes_has_its_headline_peak_note_step_and_torch_flops_lines():
    lines = efficiency_lines(eff(hint="record_shapes=True for more", torch_flops_checked=5, torch_flops_disagree=1))
    assert lines == [
        "",
        "How far from the limit: " + HEADLINE,
        "  peak  H200 SXM (NVIDIA H200): bf16 989.4, fp8 1979, tf32 494.7, fp32 66.9 TFLOP/s, 4.8 TB/s; source: "
        "NVIDIA datasheet",
        "  note: record_shapes=True for more",
        "  step: 611.8 TFLOP/s (13610.0 GFLOP of GEMM, convolution and attention per step in 22.241 ms), MFU 61.8%",
        "  torch's own flops (with_flops) used for 5 calls; the model differs by more than 1% on 1",
    ]


def test_a_hint_that_is_the_headline_is_not_repeated_and_absent_lines_are_left_out():
    lines = efficiency_lines(eff(hint=HEADLINE, step_tflops_per_s=None, peak=None))
    assert lines == ["", "How far from the limit: " + HEADLINE,
                     "  peak  none (the device is not in the peak table: --peak TFLOPS,TBps)"]


def test_the_class_table_has_a_padded_header_and_a_row_per_class_in_its_order():
    classes = [klass("GEMM", 30_766.0, 725.3, 0.512, 1416.7, "compute", 73.3, 2640.0),
               klass("elementwise", 1000.0, None, 0.0004, 0.25, "", None, 0.3),
               klass("softmax", 6.0, 0.5, 1.5, None, "memory", 5.0, None),
               klass("norm", 10.0, 1.234, 0.0, 0.0, "memory", 0.0, 0.0)]
    lines = efficiency_lines(eff(classes=classes))
    assert lines[4:] == [
        "  class            ms/step  TFLOP/s    TB/s   FLOP/B bound    roof %  at 80% ms",
        "  GEMM              15.383    725.3   0.512   1416.7 compute    73.3     -2.640",
        "  elementwise        0.500        -   0.000     0.25 -             -          0",
        "  softmax            0.003      0.5   1.500        - memory      5.0          -",
        "  norm               0.005      1.2   0.000      0.0 memory      0.0          0",
        "  (GPU time of modeled ops: 15.883 ms per step; without a model or shapes: 0.117 ms, 99% covered)",
    ]


def test_the_target_share_heads_the_saving_column():
    lines = efficiency_lines(eff(target_pct=62.5, classes=[klass("GEMM", 2.0, 1.0, 1.0, 1.0, "compute", 1.0, 0.5)]))
    assert lines[4] == "  class            ms/step  TFLOP/s    TB/s   FLOP/B bound    roof %  at 62% ms"
    assert lines[5] == "  GEMM               0.001      1.0   1.000      1.0 compute     1.0     -0.001"


def test_a_cpu_trace_counts_op_time_and_without_any_time_says_no_share():
    lines = efficiency_lines(eff(gpu=False, modeled_us=0.0, unmodeled_us=0.0,
                                 classes=[klass("GEMM", 0.0, None, None, None, "", None, None)]))
    assert lines[-1] == "  (CPU op time of modeled ops: 0.000 ms per step; without a model or shapes: 0.000 ms)"


def test_the_ops_table_lists_each_ops_time_rates_saving_and_calls_per_step_with_its_shapes_and_kernels():
    ops = [op("aten::mm", "[9216, 3072] x [3072, 9216] bf16", ["nvjet_a", "nvjet_b"], 20_000.0, 6, 800.0, 0.4,
              80.9, 1200.0),
           op("aten::add", "", [], 1.0, 3, None, None, None, None)]
    lines = efficiency_lines(eff(classes=[klass("GEMM", 2.0, 1.0, 1.0, 1.0, "compute", 1.0, 0.5)], ops=ops))
    assert lines[1] == "How far from the limit: " + HEADLINE and len(lines) == 12
    assert lines[-5:] == [
        "",
        "  Top 2 ops by headroom (at 80% of the roofline; per step)",
        "        ms  TFLOP/s    TB/s roof %  win ms  calls  op  shapes  <- kernels",
        "    10.000    800.0   0.400   80.9  -1.200      3  aten::mm  [9216, 3072] x [3072, 9216] bf16  <- nvjet_a, "
        "nvjet_b",
        "     0.001        -       -      -       -      2  aten::add  (no shapes)",
    ]


# --- the capture log's line ---------------------------------------------------------------------------------------

def test_the_log_line_gives_mfu_and_the_first_class_with_a_roofline():
    classes = [klass("copy", 5.0, None, None, None, "", None, 9000.0),
               klass("GEMM", 30_766.0, 725.3, 0.512, 1416.7, "compute", 73.3, 2640.0),
               klass("softmax", 6.0, 0.5, 1.5, None, "memory", 5.0, 1.0)]
    assert log_line(eff(classes=classes)) == \
        "efficiency: MFU 61.8% (611.8 TFLOP/s); GEMM at 73% of roofline, -2.640 ms/step at 80%"
    no_headroom = [klass("GEMM", 1.0, 1.0, 1.0, 1.0, "compute", 99.6, None)]
    assert log_line(eff(classes=no_headroom, target_pct=90.0)) == \
        "efficiency: MFU 61.8% (611.8 TFLOP/s); GEMM at 100% of roofline, -0.000 ms/step at 90%"


def test_the_log_line_without_a_class_roofline_gives_mfu_alone():
    assert log_line(eff(classes=[klass("copy", 5.0, None, None, None, "", None, None)])) == \
        "efficiency: MFU 61.8% (611.8 TFLOP/s)"


def test_the_log_line_says_what_to_record_or_give_when_mfu_cannot_be_had():
    assert log_line(None) == ""
    assert log_line(eff(shapes_recorded=False, mfu_pct=None)) == \
        "efficiency: no op shapes: record_shapes=True (inference: --record_shapes) for MFU, headroom"
    assert log_line(eff(mfu_pct=None)) == \
        "efficiency: no peak for this device: --peak TFLOPS,TBps in the summary for MFU, headroom"
