"""Efficiency before and after (``efficiency_change``) as pure logic: hand-made ``Efficiency`` answers on each
side, the MFU, each op class's time per step and roofline share, and the one line, every figure worked out
here."""

from __future__ import annotations

import pytest

from lightx2v.trace_summary.efficiency_diff import ClassChange, efficiency_change
from lightx2v.trace_summary.model import ClassEfficiency, Efficiency


def cls(name: str, time_us: float, roofline_pct: float | None = None, dtype: str = "bf16") -> ClassEfficiency:
    return ClassEfficiency(op_class=name, dtype=dtype, calls=1, time_us=time_us, flops=None, bytes=None,
                           tflops_per_s=None, tb_per_s=None, intensity=None, bound="", roofline_pct=roofline_pct,
                           headroom_us=None)


def eff(*classes: ClassEfficiency, steps: int = 1, mfu: float | None = None, tflops: float | None = None,
        shapes: bool = True) -> Efficiency:
    return Efficiency(shapes_recorded=shapes, hint="", peak=None, target_pct=80.0, steps=steps, step_wall_us=0.0,
                      gpu=True, modeled_us=0.0, unmodeled_us=0.0, matrix_flops=0.0, step_tflops_per_s=tflops,
                      mfu_pct=mfu, headline="", classes=list(classes), ops=[])


def test_neither_side_with_answers_has_no_change():
    assert efficiency_change(None, None) is None


def test_the_mfu_and_the_class_whose_time_changed_most_make_the_line():
    base = eff(cls("GEMM", 15383.0, 73.2), cls("attention", 4253.0, 59.0), steps=1, mfu=61.84, tflops=600.0)
    new = eff(cls("GEMM", 9614.0, 41.0, "fp8"), cls("attention", 4000.0, 60.0), steps=1, mfu=45.16, tflops=700.0)
    ch = efficiency_change(base, new)
    assert (ch.base_mfu_pct, ch.new_mfu_pct, ch.base_step_tflops_per_s, ch.new_step_tflops_per_s) == (
        61.84, 45.16, 600.0, 700.0)
    assert ch.classes[0] == ClassChange("GEMM", pytest.approx(15.383), pytest.approx(9.614), 73.2, 41.0, "bf16",
                                        "fp8")
    assert ch.line == ("efficiency: MFU 61.8% -> 45.2%; GEMM 1.60x faster (15.383 -> 9.614 ms per step), now at 41% "
                       "of its roofline (was 73%; fp8 peak, was bf16)")


def test_a_class_s_time_is_per_step_on_each_side():
    ch = efficiency_change(eff(cls("GEMM", 4000.0), steps=2), eff(cls("GEMM", 9000.0), steps=3))
    assert ch.classes[0].base_ms_per_step == pytest.approx(2.0) and ch.classes[0].new_ms_per_step == \
        pytest.approx(3.0)
    assert ch.line == "efficiency: GEMM 1.50x slower (2.000 -> 3.000 ms per step)"


def test_classes_come_largest_time_change_first_either_way_and_from_both_sides():
    base = eff(cls("GEMM", 10000.0), cls("softmax", 1000.0), cls("copy", 500.0))
    new = eff(cls("GEMM", 9000.0), cls("softmax", 4000.0), cls("attention", 2000.0))
    ch = efficiency_change(base, new)
    # softmax +3 ms, attention +2 (new only), GEMM -1, copy -0.5 (base only)
    assert [c.op_class for c in ch.classes] == ["softmax", "attention", "GEMM", "copy"]
    only_new, only_base = ch.classes[1], ch.classes[3]
    assert (only_new.base_ms_per_step, only_new.base_roofline_pct, only_new.base_dtype) == (None, None, "")
    assert (only_base.new_ms_per_step, only_base.new_roofline_pct, only_base.new_dtype) == (None, None, "")
    assert ch.line == "efficiency: softmax 4.00x slower (1.000 -> 4.000 ms per step)"


def test_a_class_on_one_side_only_says_which():
    ch = efficiency_change(eff(cls("GEMM", 1000.0)), eff(cls("attention", 3000.0)))
    assert ch.line == "efficiency: attention only in NEW"
    ch = efficiency_change(eff(cls("GEMM", 3000.0)), eff(cls("attention", 1000.0)))
    assert ch.line == "efficiency: GEMM only in BASE"


def test_one_side_without_answers_leaves_its_figures_out():
    ch = efficiency_change(None, eff(cls("GEMM", 2000.0, 50.0), mfu=30.0, tflops=100.0))
    assert (ch.base_mfu_pct, ch.base_step_tflops_per_s, ch.new_mfu_pct, ch.new_step_tflops_per_s) == (
        None, None, 30.0, 100.0)
    assert ch.classes == [ClassChange("GEMM", None, pytest.approx(2.0), None, 50.0, "", "bf16")]
    assert ch.line == "efficiency: MFU - -> 30.0%; GEMM only in NEW"
    ch = efficiency_change(eff(cls("GEMM", 2000.0, 50.0), mfu=30.0, tflops=100.0), None)
    assert (ch.base_mfu_pct, ch.base_step_tflops_per_s, ch.new_mfu_pct, ch.new_step_tflops_per_s) == (
        30.0, 100.0, None, None)
    assert ch.line == "efficiency: MFU 30.0% -> -; GEMM only in BASE"


def test_without_shapes_on_either_side_the_line_says_to_record_them():
    ch = efficiency_change(eff(cls("GEMM", 2000.0), shapes=False), eff(cls("GEMM", 1000.0), shapes=False))
    assert ch.line == ("efficiency: no op shapes on either side (record_shapes=True) for rates and MFU; GEMM 2.00x "
                       "faster (2.000 -> 1.000 ms per step)")
    ch = efficiency_change(eff(shapes=False), None)
    assert ch.line == "efficiency: no op shapes on either side (record_shapes=True) for rates and MFU"


def test_shapes_on_one_side_without_an_mfu_say_nothing_of_it():
    for base, new in ((True, False), (False, True)):
        ch = efficiency_change(eff(cls("GEMM", 2000.0), shapes=base), eff(cls("GEMM", 1000.0), shapes=new))
        assert ch.line == "efficiency: GEMM 2.00x faster (2.000 -> 1.000 ms per step)"


def test_nothing_to_say_is_an_empty_line():
    assert efficiency_change(eff(), eff()).line == ""
    assert efficiency_change(eff(), eff()).classes == []


def test_an_unchanged_time_reads_as_1x_faster():
    ch = efficiency_change(eff(cls("GEMM", 2000.0)), eff(cls("GEMM", 2000.0)))
    assert ch.line == "efficiency: GEMM 1.00x faster (2.000 -> 2.000 ms per step)"


def test_the_roofline_share_then_is_left_out_when_base_has_none():
    ch = efficiency_change(eff(cls("GEMM", 2000.0, None, "")), eff(cls("GEMM", 1000.0, 40.0, "fp8")))
    assert ch.line == ("efficiency: GEMM 2.00x faster (2.000 -> 1.000 ms per step), now at 40% of its roofline "
                       "(fp8 peak, was ?)")
    ch = efficiency_change(eff(cls("GEMM", 2000.0, None)), eff(cls("GEMM", 1000.0, 40.0)))
    assert ch.line == "efficiency: GEMM 2.00x faster (2.000 -> 1.000 ms per step), now at 40% of its roofline"


def test_no_roofline_share_now_says_nothing_of_the_roofline():
    ch = efficiency_change(eff(cls("GEMM", 2000.0, 70.0)), eff(cls("GEMM", 1000.0, None, "fp8")))
    assert ch.line == "efficiency: GEMM 2.00x faster (2.000 -> 1.000 ms per step)"


def test_a_dtype_lost_on_the_new_side_is_not_called_a_peak_change():
    ch = efficiency_change(eff(cls("GEMM", 2000.0, 70.0, "bf16")), eff(cls("GEMM", 1000.0, 40.0, "")))
    assert ch.line == ("efficiency: GEMM 2.00x faster (2.000 -> 1.000 ms per step), now at 40% of its roofline "
                       "(was 70%)")


def test_a_class_gone_from_new_counts_all_its_time_as_its_change():
    base = eff(cls("copy", 2500.0), cls("softmax", 1000.0))
    new = eff(cls("softmax", 3000.0))
    ch = efficiency_change(base, new)
    assert [c.op_class for c in ch.classes] == ["copy", "softmax"]  # -2.5 ms, then +2.0
    assert ch.line == "efficiency: copy only in BASE"
