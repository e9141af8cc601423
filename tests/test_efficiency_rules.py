"""How far from the limit (``efficiency``) as pure logic: hand-made kineto events (ops with their recorded shapes,
launch calls, kernels, a ProfilerStep) fed to the pass's ``Collected``, then the launch chain and the steps, then
``efficiency`` against a made-up peak (100 bf16 TFLOP/s, 10 fp32, 1 TB/s), every figure worked out here.

The shapes used: ``aten::addmm`` of a [1000] bias, [1000, 1000] x [1000, 1000] bf16: 2 * 1000^3 = 2e9 FLOPs,
2,000 + 2 * 2,000,000 bytes read and 2,000,000 written = 6,002,000 bytes: 20 us of compute at 100 TFLOP/s, 6.002
us of memory at 1 TB/s (compute bound). ``aten::gelu`` of [1000, 1000] bf16: 1e6 FLOPs, 4e6 bytes: 0.1 us at the
fp32 (CUDA cores) 10 TFLOP/s, 4 us at 1 TB/s (memory bound). tests/test_trace_summary_efficiency.py checks the
same on the H200 fixture."""

from __future__ import annotations

import pytest

from lightx2v.trace_summary.collect import Collected
from lightx2v.trace_summary.efficiency import SHAPES_HINT, efficiency
from lightx2v.trace_summary.flops import MODELED
from lightx2v.trace_summary.kernels import gpu_work
from lightx2v.trace_summary.launch import launch_chain
from lightx2v.trace_summary.model import Device, PeakSpec
from lightx2v.trace_summary.optree import op_tree
from lightx2v.trace_summary.steps import step_stats

PEAK = PeakSpec(device="", gpu="test", tflops={"bf16": 100.0, "tf32": 50.0, "fp32": 10.0, "fp8": 200.0}, tbps=1.0,
                source="")
BF16 = "c10::BFloat16"
ADDMM = {"Input Dims": [[1000], [1000, 1000], [1000, 1000], [], []], "Input type": [BF16, BF16, BF16, "Scalar",
                                                                                    "Scalar"]}
ADDMM_FLOPS, ADDMM_BYTES = 2e9, 6_002_000
ADDMM_SHAPES = "[1000] x [1000, 1000] x [1000, 1000] bf16"
GELU = {"Input Dims": [[1000, 1000]], "Input type": [BF16]}
LINEAR = {"Input Dims": [[1000, 1000], [1000, 1000], [1000]], "Input type": [BF16, BF16, BF16]}


class Trace:
    """Events on host thread (1, 1) and GPU stream (0, 7), times in us from 1000."""

    def __init__(self, step: tuple[float, float] | None = (0.0, 1000.0)) -> None:
        self.events: list[dict] = []
        self.corr = 0
        if step is not None:
            self.add("user_annotation", "ProfilerStep#1", step[0], step[1] - step[0])

    def add(self, cat, name, ts, dur, pid=1, tid=1, **args):
        self.events.append({"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": 1000.0 + ts,
                            "dur": dur, "args": args})

    def op(self, name, ts, dur, shapes=None, **more):
        self.add("cpu_op", name, ts, dur, **(shapes or {}), **more)

    def kernel(self, name, launch_ts, ts, dur, cat="kernel", call_dur=1.0):
        """A kernel (or memory op) at ``ts`` launched by a call at ``launch_ts`` on the host thread."""
        self.corr += 1
        self.add("cuda_runtime", "cudaLaunchKernel", launch_ts, call_dur, correlation=self.corr)
        self.add(cat, name, ts, dur, pid=0, tid=7, correlation=self.corr)

    def efficiency(self, peak=PEAK, devices=(), target_pct=80.0, top=10):
        c = Collected(shapes_of=MODELED)
        c.feed(self.events)
        gpu = gpu_work(c)
        chain, tree = launch_chain(c), op_tree(c)
        found = step_stats(c, gpu.busy if gpu.totals is not None else None, gpu.is_kernel, chain, tree)
        return efficiency(c, chain, found, list(devices), peak, target_pct, top)


def gemm_and_gelu() -> Trace:
    """A linear holding an addmm (100 us of GEMM kernel), a gelu (8 us), an unmodeled op's kernel (5 us) and a
    kernel launched outside every op (7 us), in one 1000 us step."""
    t = Trace()
    t.op("aten::linear", 10, 100, LINEAR)
    t.op("aten::addmm", 20, 80, ADDMM)
    t.kernel("gemm_kernel", 30, 200, 100)
    t.op("aten::gelu", 150, 20, GELU)
    t.kernel("gelu_kernel", 155, 400, 8)
    t.op("aten::foo", 175, 10)  # starts after gelu ended, and ends later
    t.kernel("foo_kernel", 177, 500, 5)
    t.kernel("stray_kernel", 900, 600, 7)
    t.op("aten::gelu", 950, 20, GELU)  # the last op, launching nothing
    return t


def by_op(e):
    return {r.op: r for r in e.ops}


def by_class(e):
    return {r.op_class: r for r in e.classes}


def test_a_gemm_is_rated_against_its_dtypes_peak_and_the_bandwidth_and_its_headroom_is_per_step():
    e = gemm_and_gelu().efficiency()
    gemm = by_op(e)["aten::addmm"]
    assert (gemm.op_class, gemm.shapes, gemm.dtype, gemm.calls, gemm.kernels) == (
        "GEMM", ADDMM_SHAPES, "bf16", 1, ["gemm_kernel"])
    assert gemm.time_us == 100.0 and gemm.flops == ADDMM_FLOPS and gemm.bytes == ADDMM_BYTES
    assert gemm.tflops_per_s == 20.0  # 2e9 FLOPs in 100 us
    assert gemm.tb_per_s == pytest.approx(0.06002, rel=1e-12)  # 6,002,000 bytes in 100 us
    assert gemm.intensity == pytest.approx(2e9 / 6_002_000)
    assert gemm.bound == "compute"
    assert gemm.roofline_pct == pytest.approx(20.0)  # 20 us ideal of 100
    assert gemm.headroom_us == pytest.approx(100 - 20 / 0.8)  # 75 us at 80% of the roofline


def test_a_vector_op_is_rated_against_the_cuda_cores_peak_and_is_memory_bound():
    gelu = by_op(gemm_and_gelu().efficiency())["aten::gelu"]
    assert (gelu.op_class, gelu.dtype, gelu.calls, gelu.kernels, gelu.time_us) == (
        "activation", "bf16", 1, ["gelu_kernel"], 8.0)
    assert gelu.flops == 1e6 and gelu.bytes == 4e6
    assert gelu.bound == "memory"
    assert gelu.roofline_pct == pytest.approx(50.0)  # 4 us ideal of 8
    assert gelu.headroom_us == pytest.approx(8 - 4 / 0.8)


def test_the_matrix_op_holding_another_is_not_counted_the_innermost_one_is():
    e = gemm_and_gelu().efficiency()
    assert sorted(r.op for r in e.ops) == ["aten::addmm", "aten::gelu"]  # not aten::linear, nor aten::foo


def test_work_of_unmodeled_ops_and_launched_outside_every_op_is_unmodeled_time():
    e = gemm_and_gelu().efficiency()
    assert e.modeled_us == 108.0 and e.unmodeled_us == 5.0 + 7.0
    assert by_op(e)["aten::gelu"].calls == 1 and by_op(e)["aten::gelu"].time_us == 8.0
    assert e.gpu and e.steps == 1 and e.step_wall_us == 1000.0


def test_the_steps_tflops_and_mfu_count_the_matrix_flops_over_the_steps_wall_time():
    e = gemm_and_gelu().efficiency()
    assert e.matrix_flops == ADDMM_FLOPS  # gelu's FLOPs are not matrix FLOPs
    assert e.step_tflops_per_s == 2.0  # 2e9 FLOPs in 1000 us
    assert e.mfu_pct == 2.0  # 20 us needed at the bf16 peak, of 1000


def test_a_gpu_bound_steps_tflops_and_mfu_are_over_its_wall_not_its_shorter_cpu_window():
    """The CPU step ends at 1000 while its GEMM runs on the GPU until 2500: the step takes 2500 us, so its 2e9
    matrix FLOPs ran at 0.8 TFLOP/s and its MFU is 20 us of 2500 (over the CPU window: 2 TFLOP/s, 2%)."""
    t = Trace()
    t.op("aten::addmm", 20, 80, ADDMM)
    t.kernel("gemm_kernel", 30, 200, 2300)
    e = t.efficiency()
    assert e.steps == 1 and e.step_wall_us == 2500.0
    assert by_op(e)["aten::addmm"].time_us == 2300.0
    assert e.step_tflops_per_s == pytest.approx(0.8)
    assert e.mfu_pct == pytest.approx(0.8)


def test_a_class_sums_its_ops_and_classes_and_ops_come_most_headroom_first():
    e = gemm_and_gelu().efficiency()
    assert [r.op_class for r in e.classes] == ["GEMM", "activation"]
    assert [r.op for r in e.ops] == ["aten::addmm", "aten::gelu"]
    gemm, act = by_class(e)["GEMM"], by_class(e)["activation"]
    assert (gemm.dtype, gemm.calls, gemm.time_us, gemm.flops, gemm.bytes, gemm.bound) == (
        "bf16", 1, 100.0, ADDMM_FLOPS, ADDMM_BYTES, "compute")
    assert gemm.roofline_pct == pytest.approx(20.0) and gemm.headroom_us == pytest.approx(75.0)
    assert gemm.tflops_per_s == pytest.approx(20.0) and gemm.intensity == pytest.approx(2e9 / 6_002_000)
    assert gemm.tb_per_s == pytest.approx(0.06002)
    assert (act.bound, act.roofline_pct, act.headroom_us) == ("memory", pytest.approx(50.0), pytest.approx(3.0))


def test_the_headline_names_the_class_with_most_headroom_its_time_share_and_saving_per_step():
    e = gemm_and_gelu().efficiency()
    assert e.headline == "GEMM: 0.100 ms per step at 20% of its roofline; at 80%, -0.075 ms per step"
    assert e.hint == "" and e.peak is PEAK and e.target_pct == 80.0


def test_top_keeps_the_ops_with_most_headroom_but_every_class():
    e = gemm_and_gelu().efficiency(top=1)
    assert [r.op for r in e.ops] == ["aten::addmm"] and len(e.classes) == 2


def test_a_lower_target_leaves_less_headroom_and_at_the_roofline_share_none():
    e = gemm_and_gelu().efficiency(target_pct=40.0)
    assert by_op(e)["aten::addmm"].headroom_us == pytest.approx(100 - 20 / 0.4)  # 50
    assert by_op(e)["aten::gelu"].headroom_us == 0.0  # 4 / 0.4 = 10 us > its 8: nothing to win
    e = gemm_and_gelu().efficiency(target_pct=20.0)
    assert by_op(e)["aten::addmm"].headroom_us == 0.0


def test_every_class_at_its_target_says_so_with_the_most_time_class():
    e = gemm_and_gelu().efficiency(target_pct=10.0)
    assert e.headline == ("every op class is at or above 10% of its roofline (the most: GEMM: 0.100 ms per step "
                          "at 20% of its roofline)")


def test_headroom_is_divided_among_the_steps():
    t = Trace(step=None)
    t.add("user_annotation", "ProfilerStep#1", 0, 500)
    t.add("user_annotation", "ProfilerStep#2", 500, 500)
    t.op("aten::addmm", 20, 80, ADDMM)
    t.kernel("gemm_kernel", 30, 100, 100)
    t.op("aten::addmm", 520, 80, ADDMM)
    t.kernel("gemm_kernel", 530, 600, 100)
    e = t.efficiency()
    gemm = by_op(e)["aten::addmm"]
    assert e.steps == 2 and e.step_wall_us == 1000.0
    assert gemm.calls == 2 and gemm.time_us == 200.0 and gemm.flops == 2 * ADDMM_FLOPS
    assert gemm.bytes == 2 * ADDMM_BYTES
    assert gemm.roofline_pct == pytest.approx(20.0)
    assert gemm.headroom_us == pytest.approx((200 - 40 / 0.8) / 2)  # 75 per step
    assert e.headline == "GEMM: 0.100 ms per step at 20% of its roofline; at 80%, -0.075 ms per step"


def test_an_op_call_is_one_call_however_many_kernels_it_launched_and_names_its_three_longest():
    t = Trace()
    t.op("aten::addmm", 20, 80, ADDMM)
    for i, (name, dur) in enumerate([("k_a", 10), ("k_b", 40), ("k_c", 30), ("k_d", 5), ("k_b", 15)]):
        t.kernel(name, 21 + i, 200 + 100 * i, dur)
    t.kernel("Memset (Device)", 27, 800, 20, cat="gpu_memset")
    gemm = by_op(t.efficiency())["aten::addmm"]
    assert gemm.calls == 1 and gemm.time_us == 120.0 and gemm.flops == ADDMM_FLOPS
    assert gemm.kernels == ["k_b", "k_c", "memset Memset (Device)"]  # k_b 55, k_c 30, the memset 20 (k_a 10)


def test_the_same_op_with_other_shapes_is_another_row():
    t = Trace()
    t.op("aten::gelu", 10, 20, GELU)
    t.kernel("gelu_kernel", 11, 100, 8)
    t.op("aten::gelu", 40, 20, {"Input Dims": [[500, 1000]], "Input type": [BF16]})
    t.kernel("gelu_kernel", 41, 200, 4)
    e = t.efficiency()
    assert sorted((r.shapes, r.calls, r.flops) for r in e.ops) == [("[1000, 1000] bf16", 1, 1e6),
                                                                  ("[500, 1000] bf16", 1, 5e5)]
    act = by_class(e)["activation"]
    assert act.calls == 2 and act.time_us == 12.0 and act.flops == 1.5e6 and act.bytes == 6e6
    assert act.roofline_pct == pytest.approx(100 * 6 / 12)  # (4 + 2) us ideal of 12


def test_a_vector_op_inside_a_matrix_op_is_the_matrix_ops_work():
    t = Trace()
    t.op("aten::addmm", 20, 80, ADDMM)
    t.op("aten::copy_", 25, 10, {"Input Dims": [[1000, 1000], [1000, 1000]], "Input type": [BF16, BF16]})
    t.kernel("copy_kernel", 26, 200, 10)
    t.kernel("gemm_kernel", 40, 300, 100)
    e = t.efficiency()
    assert [(r.op, r.time_us, r.kernels) for r in e.ops] == [("aten::addmm", 110.0, ["gemm_kernel", "copy_kernel"])]


def test_a_vector_op_holding_a_modeled_op_leaves_the_work_to_the_inner_one():
    softmax = {"Input Dims": [[1000, 1000], [], []], "Input type": [BF16, "Scalar", "Scalar"]}
    t = Trace()
    t.op("aten::softmax", 20, 40, softmax)
    t.op("aten::_softmax", 25, 30, softmax)
    t.kernel("softmax_kernel", 26, 200, 10)
    e = t.efficiency()
    assert [(r.op, r.op_class, r.flops, r.bytes) for r in e.ops] == [("aten::_softmax", "softmax", 5e6, 4e6)]


def test_a_kernel_launched_outside_the_steps_is_not_counted():
    t = Trace(step=(0.0, 100.0))
    t.op("aten::addmm", 20, 60, ADDMM)
    t.kernel("gemm_kernel", 30, 50, 40)
    t.op("aten::addmm", 200, 80, ADDMM)  # after the step
    t.kernel("gemm_kernel", 210, 300, 100)
    e = t.efficiency()
    assert [(r.op, r.calls, r.time_us) for r in e.ops] == [("aten::addmm", 1, 40.0)]
    assert e.unmodeled_us == 0.0


def test_torch_s_own_flops_argument_is_used_and_counted_as_a_disagreement_beyond_one_percent():
    t = Trace()
    t.op("aten::addmm", 10, 50, {**ADDMM, "flops": int(2.02e9)})  # 1% over: agrees
    t.kernel("gemm_kernel", 11, 100, 100)
    t.op("aten::addmm", 100, 50, {**ADDMM, "flops": int(2.03e9)})  # 1.5% over: disagrees
    t.kernel("gemm_kernel", 101, 300, 100)
    t.op("aten::addmm", 200, 50, {**ADDMM, "flops": 0})  # no figure: the model's
    t.kernel("gemm_kernel", 201, 500, 100)
    t.op("aten::addmm", 300, 50, {**ADDMM, "flops": int(1.98e9)})  # 1% under (of the model's 2e9): agrees
    t.kernel("gemm_kernel", 301, 700, 100)
    e = t.efficiency()
    assert e.torch_flops_checked == 3 and e.torch_flops_disagree == 1
    assert e.matrix_flops == 2.02e9 + 2.03e9 + 2e9 + 1.98e9


def test_a_torch_flops_argument_under_the_model_by_more_than_one_percent_disagrees():
    t = Trace()
    t.op("aten::addmm", 10, 50, {**ADDMM, "flops": int(1.97e9)})
    t.kernel("gemm_kernel", 11, 100, 100)
    e = t.efficiency()
    assert (e.torch_flops_checked, e.torch_flops_disagree, e.matrix_flops) == (1, 1, 1.97e9)


def test_a_trace_without_shapes_gives_time_by_class_and_says_how_to_record_them():
    t = Trace()
    t.op("aten::addmm", 20, 80)
    t.kernel("gemm_kernel", 30, 200, 100)
    e = t.efficiency()
    assert not e.shapes_recorded and e.hint == SHAPES_HINT and e.headline == SHAPES_HINT
    row = by_op(e)["aten::addmm"]
    assert (row.op_class, row.dtype, row.shapes, row.calls, row.time_us) == ("GEMM", "", "", 1, 100.0)
    assert (row.flops, row.bytes, row.tflops_per_s, row.roofline_pct, row.headroom_us, row.bound) == (
        None, None, None, None, None, "")
    gemm = by_class(e)["GEMM"]
    assert (gemm.dtype, gemm.calls, gemm.time_us, gemm.flops, gemm.bytes, gemm.tflops_per_s, gemm.roofline_pct,
            gemm.bound) == ("", 1, 100.0, None, None, None, None, "")
    assert e.step_tflops_per_s is None and e.mfu_pct is None and e.matrix_flops == 0
    assert e.modeled_us == 0.0 and e.unmodeled_us == 100.0


def test_an_op_whose_shapes_do_not_fit_its_model_is_unmodeled_time():
    t = Trace()
    t.op("aten::addmm", 20, 80, ADDMM)
    t.kernel("gemm_kernel", 30, 200, 100)
    t.op("aten::mm", 120, 80, {"Input Dims": [[10, 20], [30, 40]], "Input type": [BF16, BF16]})  # 20 != 30
    t.kernel("mm_kernel", 130, 400, 50)
    e = t.efficiency()
    mm = by_op(e)["aten::mm"]
    assert (mm.op_class, mm.dtype, mm.flops, mm.roofline_pct) == ("GEMM", "", None, None)
    assert e.shapes_recorded and e.modeled_us == 100.0 and e.unmodeled_us == 50.0
    assert e.mfu_pct == pytest.approx(2.0) and e.matrix_flops == ADDMM_FLOPS  # the unmodeled mm: no FLOPs
    assert by_class(e)["GEMM"].calls == 2 and by_class(e)["GEMM"].time_us == 150.0
    assert by_class(e)["GEMM"].roofline_pct == pytest.approx(20.0)  # of the modeled op's time only


def test_the_peak_is_the_devices_when_none_is_given():
    e = gemm_and_gelu().efficiency(peak=None, devices=[Device(0, "NVIDIA H200", 150 * 2**30, "9.0")])
    assert e.peak.gpu == "H200 SXM" and e.hint == ""
    assert by_op(e)["aten::addmm"].roofline_pct == pytest.approx(100 * 2e9 / 989.4e12 / 100e-6)


def test_a_given_peak_wins_over_the_devices():
    e = gemm_and_gelu().efficiency(devices=[Device(0, "NVIDIA H200", 150 * 2**30, "9.0")])
    assert e.peak is PEAK


def test_without_a_peak_the_rates_stay_and_the_hint_says_why_there_is_no_roofline():
    e = gemm_and_gelu().efficiency(peak=None, devices=[Device(0, "NVIDIA Z999", None, None)])
    assert e.peak is None and e.mfu_pct is None
    assert e.hint == "'NVIDIA Z999' is not in the peak table: give --peak TFLOPS,TBps for the roofline, MFU and " \
                     "headroom"
    assert e.headline == e.hint
    gemm = by_op(e)["aten::addmm"]
    assert gemm.tflops_per_s == pytest.approx(20.0) and gemm.bound == "" and gemm.roofline_pct is None
    assert gemm.headroom_us is None and by_class(e)["GEMM"].roofline_pct is None
    assert by_class(e)["GEMM"].bound == "" and by_class(e)["GEMM"].headroom_us is None
    assert e.step_tflops_per_s == pytest.approx(2.0)
    e = gemm_and_gelu().efficiency(peak=None)
    assert e.hint == "the trace names no GPU: give --peak TFLOPS,TBps for the roofline, MFU and headroom"


def test_a_dtype_without_a_peak_has_rates_but_no_roofline_and_no_mfu():
    fp8 = "c10::Float8_e4m3fn"
    t = Trace()
    t.op("aten::mm", 20, 80, {"Input Dims": [[1000, 1000], [1000, 1000]], "Input type": [fp8, fp8]})
    t.kernel("fp8_gemm", 30, 200, 100)
    peak = PeakSpec(device="", gpu="no fp8", tflops={"bf16": 100.0, "tf32": 50.0, "fp32": 10.0}, tbps=1.0,
                    source="")
    e = t.efficiency(peak=peak)
    mm = by_op(e)["aten::mm"]
    assert mm.dtype == "fp8" and mm.flops == 2e9 and mm.roofline_pct is None and mm.bound == ""
    assert e.mfu_pct is None and e.matrix_flops == 2e9 and e.step_tflops_per_s == pytest.approx(2.0)
    assert by_class(e)["GEMM"].roofline_pct is None and e.headline == ""


def test_a_class_takes_the_dtype_of_most_of_its_time_and_the_bound_of_most_of_its_judged_time():
    fp32 = {"Input Dims": [[1000, 1000], [1000, 1000]], "Input type": ["float", "float"]}
    t = Trace()
    t.op("aten::addmm", 20, 80, ADDMM)
    t.kernel("gemm_kernel", 30, 200, 100)
    t.op("aten::mm", 120, 80, fp32)
    t.kernel("fp32_gemm", 130, 400, 300)
    e = t.efficiency()
    gemm = by_class(e)["GEMM"]
    # fp32 mm: 2e9 FLOPs at 10 TFLOP/s = 200 us, 12e6 bytes = 12 us: compute bound, 200 of 300 us
    assert gemm.dtype == "fp32" and gemm.calls == 2 and gemm.time_us == 400.0
    assert gemm.roofline_pct == pytest.approx(100 * (20 + 200) / 400)
    assert gemm.headroom_us == pytest.approx(75 + (300 - 200 / 0.8))
    assert gemm.bound == "compute"
    assert e.mfu_pct == pytest.approx(100 * (20 + 200) / 1000)
    assert e.step_tflops_per_s == pytest.approx(4e9 / 1000e-6 / 1e12)


def test_a_class_is_memory_bound_when_most_of_its_judged_time_is():
    t = Trace()
    t.op("aten::gelu", 10, 20, GELU)  # memory bound: 4 us ideal of 8
    t.kernel("gelu_kernel", 11, 100, 8)
    t.op("aten::silu", 40, 20, GELU)  # the same shapes: 4 us ideal of 4
    t.kernel("silu_kernel", 41, 200, 4)
    act = by_class(t.efficiency())["activation"]
    assert act.bound == "memory" and act.roofline_pct == pytest.approx(100 * 8 / 12)


def test_a_class_half_compute_bound_by_time_is_compute_bound():
    # an addmm of 100 us (compute bound, 20 us ideal) and an mm of 100 us that is memory bound: [1000, 10] x
    # [10, 1000] bf16 is 2e7 FLOPs (0.2 us) and 20,000 + 20,000 + 2,000,000 bytes (2.04 us)
    t = Trace()
    t.op("aten::addmm", 20, 80, ADDMM)
    t.kernel("gemm_kernel", 30, 200, 100)
    t.op("aten::mm", 120, 80, {"Input Dims": [[1000, 10], [10, 1000]], "Input type": [BF16, BF16]})
    t.kernel("thin_gemm", 130, 400, 100)
    e = t.efficiency()
    assert by_op(e)["aten::mm"].bound == "memory"
    assert by_class(e)["GEMM"].bound == "compute"


def test_an_op_whose_work_took_no_time_has_no_rates_and_no_roofline():
    t = Trace()
    t.op("aten::addmm", 20, 80, ADDMM)
    t.kernel("gemm_kernel", 30, 200, 0)
    e = t.efficiency()
    gemm = by_op(e)["aten::addmm"]
    assert gemm.tflops_per_s is None and gemm.tb_per_s is None and gemm.intensity == pytest.approx(2e9 / 6_002_000)
    assert gemm.bound == "compute" and gemm.roofline_pct is None and gemm.headroom_us is None
    assert by_class(e)["GEMM"].roofline_pct is None and by_class(e)["GEMM"].tflops_per_s is None


def test_an_op_without_bytes_has_no_intensity():
    t = Trace()
    t.op("aten::addmm", 20, 80, {"Input Dims": [[1000], [1000, 1000], [1000, 1000], [], []],
                                 "Input type": ["?", "?", "?", "Scalar", "Scalar"]})  # no element size known
    t.kernel("gemm_kernel", 30, 200, 100)
    e = t.efficiency()
    gemm = by_op(e)["aten::addmm"]
    assert gemm.flops == 2e9 and gemm.bytes == 0 and gemm.intensity is None
    assert gemm.tflops_per_s == 20.0 and gemm.tb_per_s == 0.0
    assert by_class(e)["GEMM"].bytes == 0 and by_class(e)["GEMM"].intensity is None


def test_a_cpu_trace_times_each_unit_by_its_own_duration_inside_the_steps():
    t = Trace(step=(0.0, 1000.0))
    t.op("aten::linear", 0, 300, LINEAR)  # not a unit: it holds the addmm
    t.op("aten::addmm", 0, 200, ADDMM)  # starts with the step: inside
    t.op("aten::gelu", 400, 50, GELU)
    t.op("aten::gelu", 1000, 50, GELU)  # starts at the step's end: outside
    e = t.efficiency()
    assert not e.gpu
    assert [(r.op, r.calls, r.time_us, r.kernels) for r in e.ops] == [("aten::addmm", 1, 200.0, []),
                                                                      ("aten::gelu", 1, 50.0, [])]
    assert by_op(e)["aten::addmm"].roofline_pct == pytest.approx(100 * 20 / 200)
    assert e.modeled_us == 250.0 and e.unmodeled_us == 0.0


def test_a_cpu_trace_sums_the_calls_of_one_op_and_shape():
    t = Trace(step=(0.0, 1000.0))
    t.op("aten::gelu", 100, 50, GELU)
    t.op("aten::gelu", 400, 30, GELU)
    gelu = by_op(t.efficiency())["aten::gelu"]
    assert gelu.calls == 2 and gelu.time_us == 80.0 and gelu.flops == 2e6 and gelu.bytes == 8e6


def test_a_trace_with_nothing_timed_has_no_answers():
    t = Trace(step=None)
    assert t.efficiency() is None


def test_a_kernel_outside_the_steps_does_not_stop_the_ones_after_it_being_counted():
    t = Trace(step=(100.0, 1000.0))
    t.op("aten::gelu", 10, 20, GELU)  # before the step: its kernel is the trace's first GPU event
    t.kernel("gelu_kernel", 11, 50, 8)
    t.op("aten::addmm", 200, 80, ADDMM)
    t.kernel("gemm_kernel", 210, 300, 100)
    e = t.efficiency()
    assert [(r.op, r.time_us) for r in e.ops] == [("aten::addmm", 100.0)]


def test_a_vector_op_starting_as_a_matrix_op_ends_is_a_unit_of_its_own():
    t = Trace()
    t.op("aten::addmm", 20, 80, ADDMM)  # ends at 100
    t.kernel("gemm_kernel", 30, 200, 100)
    t.op("aten::gelu", 100, 20, GELU)
    t.kernel("gelu_kernel", 105, 400, 8)
    e = t.efficiency()
    assert sorted((r.op, r.time_us) for r in e.ops) == [("aten::addmm", 100.0), ("aten::gelu", 8.0)]


def test_rows_without_headroom_sort_with_those_at_zero_by_time_most_first():
    t = Trace()
    t.op("aten::gelu", 10, 20, GELU)  # 8 us, at 50% of its roofline: no headroom at a 40% target
    t.kernel("gelu_kernel", 11, 100, 8)
    t.op("aten::mm", 40, 20, {"Input Dims": [[10, 20], [30, 40]], "Input type": [BF16, BF16]})  # no model: 5 us
    t.kernel("mm_kernel", 41, 200, 5)
    t.op("aten::addmm", 70, 20)  # no shapes: 12 us
    t.kernel("gemm_kernel", 71, 300, 12)
    e = t.efficiency(target_pct=40.0)
    assert [(r.op, r.headroom_us) for r in e.ops] == [("aten::addmm", None), ("aten::gelu", 0.0),
                                                      ("aten::mm", None)]
    assert [(r.op_class, r.headroom_us) for r in e.classes] == [("GEMM", None), ("activation", 0.0)]


def test_rows_without_headroom_sort_after_those_with_some_however_little():
    t = Trace()
    t.op("aten::gelu", 10, 20, GELU)  # 5.5 us, 4 us ideal: 0.5 us of headroom at 80%
    t.kernel("gelu_kernel", 11, 100, 5.5)
    t.op("aten::addmm", 70, 20)  # no shapes: 12 us
    t.kernel("gemm_kernel", 71, 300, 12)
    e = t.efficiency()
    assert [(r.op, r.headroom_us) for r in e.ops] == [("aten::gelu", 0.5), ("aten::addmm", None)]
    assert [(r.op_class, r.headroom_us) for r in e.classes] == [("activation", 0.5), ("GEMM", None)]


def test_the_default_top_is_ten_ops():
    t = Trace()
    for i in range(11):
        t.op("aten::gelu", 10 + 50 * i, 20, {"Input Dims": [[1000, 100 + i]], "Input type": [BF16]})
        t.kernel("gelu_kernel", 11 + 50 * i, 100 + 50 * i, 8)
    c = Collected(shapes_of=MODELED)
    c.feed(t.events)
    gpu = gpu_work(c)
    chain, tree = launch_chain(c), op_tree(c)
    e = efficiency(c, chain, step_stats(c, gpu.busy, gpu.is_kernel, chain, tree), [], PEAK)
    assert len(e.ops) == 10 and e.target_pct == 80.0 and sum(r.calls for r in e.classes) == 11


def test_torch_s_flops_of_one_is_used_and_every_disagreement_is_counted():
    t = Trace()
    t.op("aten::addmm", 10, 50, {**ADDMM, "flops": 1})
    t.kernel("gemm_kernel", 11, 100, 100)
    t.op("aten::addmm", 100, 50, {**ADDMM, "flops": 3_000_000_000})
    t.kernel("gemm_kernel", 101, 300, 100)
    e = t.efficiency()
    assert (e.torch_flops_checked, e.torch_flops_disagree, e.matrix_flops) == (2, 2, 3_000_000_001)


def test_an_op_with_torch_s_flops_stays_a_matrix_op_on_the_tensor_core_peak():
    t = Trace()
    t.op("aten::addmm", 10, 50, {**ADDMM, "flops": 2_000_000_000})
    t.kernel("gemm_kernel", 11, 100, 100)
    e = t.efficiency()
    assert by_op(e)["aten::addmm"].roofline_pct == pytest.approx(20.0)  # 2e9 at 100 TFLOP/s, not at 10
    assert e.mfu_pct == 2.0


def test_the_peak_of_a_nameless_a100_is_settled_by_the_devices_memory():
    e = gemm_and_gelu().efficiency(peak=None, devices=[Device(0, "NVIDIA A100", 80 * 2**30, "8.0")])
    assert e.peak.gpu == "A100 80GB SXM"


def test_an_fp32_convolution_is_held_to_the_tf32_peak_in_its_roofline_and_the_mfu():
    # conv2d [1, 256, 32, 32] * [256, 256, 3, 3], padding 1: 2 * 32 * 32 * 9 * 256 * 256 FLOPs = 24.159 us at
    # tf32's 50 TFLOP/s (120.8 at fp32's 10); 4,457,472 bytes = 4.457 us: compute bound
    t = Trace()
    t.op("aten::conv2d", 20, 80, {"Input Dims": [[1, 256, 32, 32], [256, 256, 3, 3], [256], [], [], [], []],
                                  "Input type": ["float"] * 3 + ["ScalarList"] * 3 + ["Int"],
                                  "Concrete Inputs": ["", "", "", "[1, 1]", "[1, 1]", "[1, 1]", "1"]})
    t.kernel("conv_kernel", 30, 200, 100)
    e = t.efficiency()
    conv = by_op(e)["aten::conv2d"]
    flops = 2 * 32 * 32 * 9 * 256 * 256
    assert (conv.op_class, conv.dtype, conv.flops, conv.bytes, conv.bound) == (
        "convolution", "fp32", flops, 4_457_472, "compute")
    assert conv.roofline_pct == pytest.approx(100 * flops / 50e6 / 100)
    assert e.mfu_pct == pytest.approx(100 * flops / 50e6 / 1000)


def test_an_op_as_much_compute_as_memory_bound_is_compute_bound():
    # [300, 300] x [300, 300] bf16: 5.4e7 FLOPs = 0.54 us at 100 TFLOP/s, 540,000 bytes = 0.54 us at 1 TB/s
    t = Trace()
    t.op("aten::mm", 20, 80, {"Input Dims": [[300, 300], [300, 300]], "Input type": [BF16, BF16]})
    t.kernel("gemm_kernel", 30, 200, 10)
    assert by_op(t.efficiency())["aten::mm"].bound == "compute"


def test_a_step_and_an_op_under_a_microsecond_still_have_rates_a_roofline_and_an_mfu():
    t = Trace(step=(0.0, 0.5))
    t.op("aten::addmm", 0.125, 0.25, ADDMM)
    t.kernel("gemm_kernel", 0.1875, 0.25, 0.25, call_dur=0.0625)
    e = t.efficiency()
    gemm = by_op(e)["aten::addmm"]
    assert e.step_wall_us == 0.5 and gemm.time_us == 0.25
    assert gemm.tflops_per_s == 2e9 / 0.25 / 1e6 and gemm.roofline_pct == pytest.approx(100 * 20 / 0.25)
    assert e.step_tflops_per_s == 2e9 / 0.5 / 1e6 and e.mfu_pct == pytest.approx(100 * 20 / 0.5)


def test_a_step_of_no_time_has_no_tflops_and_no_mfu():
    t = Trace(step=None)
    t.add("gpu_user_annotation", "ProfilerStep#1", 200, 0, pid=0, tid=7)  # a GPU-side step only, of 0 us
    t.op("aten::addmm", 20, 80, ADDMM)
    t.kernel("gemm_kernel", 30, 200, 100)  # starting on the step's start
    e = t.efficiency()
    assert e.steps == 1 and e.step_wall_us == 0.0 and by_op(e)["aten::addmm"].time_us == 100.0
    assert e.step_tflops_per_s is None and e.mfu_pct is None


def test_an_op_whose_work_took_no_time_and_has_no_bytes_has_no_rates_at_all():
    t = Trace()
    t.op("aten::addmm", 20, 80, {"Input Dims": [[1000], [1000, 1000], [1000, 1000], [], []],
                                 "Input type": ["?", "?", "?", "Scalar", "Scalar"]})
    t.kernel("gemm_kernel", 30, 200, 0)
    gemm = by_op(t.efficiency())["aten::addmm"]
    assert (gemm.tflops_per_s, gemm.tb_per_s, gemm.intensity) == (None, None, None)


def test_an_empty_gemm_counts_no_flops_no_bytes_and_none_of_its_time_as_ideal():
    t = Trace()
    t.op("aten::mm", 20, 80, {"Input Dims": [[0, 1000], [1000, 0]], "Input type": [BF16, BF16]})
    t.kernel("gemm_kernel", 30, 200, 10)
    e = t.efficiency()
    mm = by_op(e)["aten::mm"]
    assert (mm.flops, mm.bytes, mm.intensity, mm.tflops_per_s, mm.bound) == (0, 0, None, 0.0, "compute")
    assert mm.roofline_pct == 0.0 and mm.headroom_us == 10.0
    gemm = by_class(e)["GEMM"]
    assert (gemm.flops, gemm.bytes, gemm.roofline_pct, gemm.headroom_us) == (0, 0, 0.0, 10.0)
    assert e.matrix_flops == 0 and e.mfu_pct == 0.0 and e.step_tflops_per_s == 0.0


def test_a_class_s_dtype_is_the_one_with_most_summed_time_not_the_largest_name_or_the_last_row():
    fp32 = {"Input Dims": [[1000, 1000], [1000, 1000]], "Input type": ["float", "float"]}
    t = Trace()
    t.op("aten::addmm", 20, 80, ADDMM)  # bf16: 60 us here and 60 in the bf16 mm (two rows)
    t.kernel("gemm_kernel", 30, 200, 60)
    t.op("aten::mm", 120, 80, {"Input Dims": [[1000, 1000], [1000, 1000]], "Input type": [BF16, BF16]})
    t.kernel("gemm_kernel", 130, 300, 60)
    t.op("aten::mm", 220, 80, fp32)  # fp32: 100 us
    t.kernel("fp32_gemm", 230, 400, 100)
    assert by_class(t.efficiency())["GEMM"].dtype == "bf16"


def test_the_headline_gives_milliseconds_per_step():
    t = Trace(step=(0.0, 10000.0))
    t.op("aten::addmm", 20, 80, ADDMM)
    t.kernel("gemm_kernel", 30, 200, 5000)
    assert t.efficiency().headline == "GEMM: 5.000 ms per step at 0% of its roofline; at 80%, -4.975 ms per step"
