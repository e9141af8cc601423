"""What the summary says about real and synthetic traces: steps, busy time, idle gaps, top kernels and CPU ops."""

from __future__ import annotations

import dataclasses
import gzip
import subprocess
import sys

import pytest

from lightx2v.trace_browser.overview import render_overview
from lightx2v.trace_summary import intervals, summarize_paths
from lightx2v.trace_summary.analyze import IDLE_FLAG_RATIO, analyze_trace
from lightx2v.trace_summary.names import short_name
from lightx2v.trace_summary.render import render_rank

from conftest import H200_TRACE, subprocess_env
from helpers.summary import (
    back_to_back,
    capture_cpu_trace,
    cpu_op,
    kernel,
    step_events,
    trace_doc,
    write_json,
)


@pytest.fixture(scope="module")
def h200():
    return analyze_trace(str(H200_TRACE), top=10)


def test_h200_trace_step_busy_time_and_known_kernels(h200):
    assert [s.name for s in h200.steps] == ["ProfilerStep#4"]
    step = h200.steps[0]
    assert step.number == 4 and step.kernel_count == 120
    assert 20_000 < step.wall_us < 25_000  # the DiT stack's 22.2 ms step
    assert 0 < step.gpu_busy_us <= step.wall_us and 0 < step.gpu_busy_pct <= 100
    assert abs(step.gpu_busy_pct - 100 * step.gpu_busy_us / step.wall_us) < 1e-9
    assert [d.name for d in h200.devices] == ["NVIDIA H200"] and h200.devices[0].compute_capability == "9.0"
    assert h200.versions["cuda_runtime"] == "13.0"

    names = [k.name for k in h200.top_kernels]
    assert any(n.startswith("nvjet_sm90") for n in names), names  # cuBLAS GEMMs
    assert any("sdpa" in n and "flash" in n for n in names), names  # cuDNN flash attention
    assert all(0 < k.pct_of_gpu_time <= 100 for k in h200.top_kernels)
    assert sum(k.pct_of_gpu_time for k in h200.top_kernels) <= 100 + 1e-6
    assert sum(k.total_us for k in h200.top_kernels) <= h200.gpu.busy_us + 1e-3
    assert h200.gpu.kernel_count == 120 and h200.gpu.streams == 1
    assert all(abs(k.mean_us * k.calls - k.total_us) < 1e-6 for k in h200.top_kernels)
    assert [k.total_us for k in h200.top_kernels] == sorted((k.total_us for k in h200.top_kernels), reverse=True)

    memset = [m for m in h200.memory_ops if m.kind == "memset"]
    assert memset and memset[0].calls == 60 and memset[0].bytes == 240

    # Idle = step window - busy, small on this well-fed GPU, so not flagged.
    assert abs(step.idle.idle_us + step.gpu_busy_us - step.wall_us) < 1e-3
    assert step.idle.ratio < IDLE_FLAG_RATIO and not step.idle.flagged and not h200.idle.flagged

    ops = {op.name: op for op in h200.top_cpu_ops}
    assert "aten::addmm" in ops and all(0 <= op.self_us <= op.total_us + 1e-9 for op in ops.values())
    assert all(0 < op.pct_of_cpu_self <= 100 for op in ops.values())
    # aten::linear's time is mostly its child addmm: its self time is a small part of its total.
    assert ops["aten::linear"].self_us < 0.2 * ops["aten::linear"].total_us


def test_h200_text_report_is_consistent(h200):
    text = render_rank(h200)
    assert "ProfilerStep#4" in text and "NVIDIA H200" in text and "nvjet_sm90" in text
    assert "Top 10 GPU kernels" not in text  # only 6 distinct kernels exist
    assert f"Top {len(h200.top_kernels)} GPU kernels" in text
    assert "aten::addmm" in text and "Memset (Device)" in text
    assert "HIGH GPU IDLE" not in text


def test_gzip_and_plain_give_the_same_report(tmp_path, h200):
    plain = tmp_path / "h200.pt.trace.json"
    plain.write_bytes(gzip.decompress(H200_TRACE.read_bytes()))
    other = analyze_trace(str(plain), top=10)
    same = dict(file=h200.file, size_bytes=h200.size_bytes, compressed=h200.compressed, worker=h200.worker)
    assert dataclasses.replace(other, **same) == h200
    assert render_rank(dataclasses.replace(other, **same)) == render_rank(h200)


@pytest.fixture(scope="module")
def cpu_capture(tmp_path_factory):
    out = tmp_path_factory.mktemp("cpu_capture")
    return capture_cpu_trace(out, "rank0_cpu", steps=2)


def test_real_cpu_trace_reports_cpu_ops_and_no_gpu_section(cpu_capture):
    r = analyze_trace(str(cpu_capture), top=5)
    assert r.gpu is None and r.top_kernels == [] and r.idle is None and r.gpu_comm_us is None
    assert [s.name for s in r.steps] == ["ProfilerStep#2", "ProfilerStep#3"]
    assert all(s.gpu_busy_us is None and s.kernel_count is None and s.wall_us > 0 for s in r.steps)
    names = [op.name for op in r.top_cpu_ops]
    assert "aten::mm" in names and len(names) == 5
    assert r.rank == 0  # from the worker name rank0_cpu
    text = render_rank(r)
    assert "GPU: no kernels, copies or sets in this trace" in text and "aten::mm" in text
    assert "Top 5 CPU ops by self time" in text


def test_cpu_trace_gzip_and_plain_agree(cpu_capture, tmp_path):
    gz = tmp_path / "rank0_cpu.pt.trace.json.gz"
    gz.write_bytes(gzip.compress(cpu_capture.read_bytes()))
    a, b = analyze_trace(str(cpu_capture)), analyze_trace(str(gz))
    assert b.compressed and not a.compressed
    assert dataclasses.replace(b, file=a.file, size_bytes=a.size_bytes, compressed=False) == a


def planted(tmp_path, name, events, **meta):
    return analyze_trace(str(write_json(tmp_path / f"{name}.pt.trace.json", trace_doc(events, **meta))))


def test_planted_idle_gap_is_flagged_and_located(tmp_path):
    # 10 ms step; kernels cover 0-3 ms and 7-10 ms: a 4 ms stall at +3 ms.
    events = step_events("ProfilerStep#7", 0, 10_000, 0, 10_000)
    events += back_to_back("gemm", 0, 3_000, 100) + back_to_back("gemm", 7_000, 10_000, 100)
    r = planted(tmp_path, "gap", events)
    (step,) = r.steps
    assert step.kernel_count == 60 and abs(step.gpu_busy_us - 6_000) < 1e-3
    assert abs(step.idle.ratio - 0.4) < 1e-6 and step.idle.flagged and r.idle.flagged
    assert abs(step.idle.largest_gap_us - 4_000) < 1e-3 and abs(step.idle.largest_gap_at_us - 3_000) < 1e-3
    text = render_rank(r)
    # these kernels carry no launch record: the summary says it cannot tell the cause instead of guessing
    assert "HIGH GPU IDLE" in text and "the cause cannot be told" in text and "unknown 4.000 ms (100%)" in text


def test_no_idle_gap_is_not_flagged(tmp_path):
    events = step_events("ProfilerStep#7", 0, 10_000, 0, 10_000) + back_to_back("gemm", 0, 10_000, 99, gap=1)
    r = planted(tmp_path, "busy", events)
    (step,) = r.steps
    assert step.idle.ratio < 0.02 and not step.idle.flagged and not r.idle.flagged
    assert step.idle.gaps_over_10us == 0
    assert "HIGH GPU IDLE" not in render_rank(r)


def test_many_small_gaps_without_launch_records_are_flagged_but_not_called_launch_bound(tmp_path):
    events = step_events("ProfilerStep#1", 0, 7_000, 0, 7_000) + back_to_back("tiny", 0, 7_000, 50, gap=20)
    r = planted(tmp_path, "launch", events)
    assert r.idle.flagged and r.idle.largest_gap_us < 25
    assert "launch-bound" not in render_rank(r)  # queued or not cannot be told without the launches


def test_busy_time_is_a_union_over_streams(tmp_path):
    # Two streams, fully overlapping for 2 ms: busy 4 ms, activity 6 ms.
    events = step_events("ProfilerStep#1", 0, 5_000, 0, 5_000)
    events += [kernel("a", 0, 3_000, stream=7), kernel("b", 1_000, 3_000, stream=8), kernel("c", 3_500, 4_500)]
    r = planted(tmp_path, "streams", events)
    assert abs(r.gpu.busy_us - 4_000) < 1e-3 and abs(r.gpu.activity_us - 6_000) < 1e-3 and r.gpu.streams == 2
    (step,) = r.steps
    assert abs(step.gpu_busy_us - 4_000) < 1e-3 and abs(step.gpu_busy_pct - 80) < 1e-6
    assert all(k.pct_of_gpu_time <= 100 for k in r.top_kernels)


def test_step_window_extends_to_the_gpu_work_it_launched(tmp_path):
    # The CPU finishes launching at 2 ms; the GPU-side step runs to 5 ms.
    events = step_events("ProfilerStep#3", 0, 2_000, 100, 5_000) + back_to_back("k", 100, 5_000, 70)
    r = planted(tmp_path, "async", events)
    (step,) = r.steps
    assert abs(step.wall_us - 5_000) < 1e-3 and abs(step.cpu_us - 2_000) < 1e-3
    assert step.kernel_count == 70 and step.gpu_busy_pct <= 100


def test_trace_without_steps_is_one_whole_trace_step(tmp_path):
    events = back_to_back("k", 0, 1_000, 100) + [cpu_op("aten::mm", 0, 500)]
    r = planted(tmp_path, "nosched", events)
    assert [s.name for s in r.steps] == ["(whole trace)"] and r.steps[0].number is None
    assert any("no ProfilerStep" in note for note in r.notes)


def test_cpu_self_time_subtracts_direct_children_even_out_of_file_order(tmp_path):
    ops = [cpu_op("aten::linear", 0, 100), cpu_op("aten::addmm", 10, 90), cpu_op("aten::empty", 20, 30),
           cpu_op("aten::view", 95, 99), cpu_op("aten::mm", 0, 50, tid=9), cpu_op("aten::t", 0, 10, tid=9)]
    for order in (ops, list(reversed(ops))):
        r = planted(tmp_path, "ops", step_events("ProfilerStep#1", 0, 100) + order)
        self_us = {op.name: op.self_us for op in r.top_cpu_ops}
        assert self_us == pytest.approx({"aten::linear": 100 - 80 - 4, "aten::addmm": 80 - 10, "aten::empty": 10,
                                         "aten::view": 4, "aten::mm": 40, "aten::t": 10})
        assert r.cpu_self_total_us == pytest.approx(100 + 50)


def test_intervals_union_clip_and_gaps():
    merged = intervals.merge([(5, 20), (0, 10), (30, 40), (40, 45), (50, 50)])
    assert merged == [(0, 20), (30, 45), (50, 50)]
    assert intervals.covered(merged, 10, 35) == 15
    assert intervals.gaps(merged, -5, 60) == [(-5, 0), (20, 30), (45, 60)]
    assert intervals.gaps([], 0, 10) == [(0, 10)] and intervals.covered([], 0, 10) == 0


def test_short_kernel_names():
    assert short_name("void at::native::vectorized_elementwise_kernel<8, at::native::CUDAFunctor_add<c10::BFloat16>, "
                      "std::array<char*, 3ul> >(int, at::native::CUDAFunctor_add<c10::BFloat16>, "
                      "std::array<char*, 3ul>)") == "vectorized_elementwise_kernel<CUDAFunctor_add>"
    assert short_name("void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<c10::BFloat16, float, "
                      "false>(int, float, c10::BFloat16 const*)") == "vectorized_layer_norm_kernel<BFloat16>"
    assert short_name("nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_bias_TNT") == \
        "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_bias_TNT"
    assert short_name("ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)") == \
        "ncclDevKernel_AllReduce_Sum_f32_RING_LL"
    assert short_name("x" * 100, width=20) == "x" * 17 + "..."


# Real kernel names (HTA's test traces, tests/fixtures/h200_dit_stack) and their short names, written by hand.
GELU = ("void at::native::vectorized_elementwise_kernel<8, at::native::GeluCUDAKernelImpl(at::TensorIteratorBase&, "
        "at::native::GeluType)::{lambda()#1}::operator()() const::{lambda()#4}::operator()() const::{lambda(c10::"
        "BFloat16)#1}, std::array<char*, 2ul> >(int, at::native::GeluCUDAKernelImpl(at::TensorIteratorBase&, "
        "at::native::GeluType)::{lambda()#1}::operator()() const::{lambda()#4}::operator()() const::{lambda(c10::"
        "BFloat16)#1}, std::array<char*, 2ul>)")
SDPA = "cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_7_64x128x128_4x1x1_cga1x1x1_kernel0_0"
REAL_NAMES = [
    (GELU, "vectorized_elementwise_kernel<GeluCUDAKernelImpl>"),
    (SDPA, SDPA),  # not C++: kept whole
    ("void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_64x64_32x6_tn_align4>(cutlass_80_tensorop_s1688gemm_64x64_"
     "32x6_tn_align4::Params)", "cutlass::Kernel<cutlass_80_tensorop_s1688gemm_64x64_32x6_tn_align4>"),
    ("void at::native::(anonymous namespace)::CatArrayBatchedCopy<float, unsigned int, 1, 128, 1>(float*, at::native"
     "::(anonymous namespace)::CatArrInputTensorMetadata<float, unsigned int, 128, 1>, at::native::(anonymous "
     "namespace)::TensorSizeStride<unsigned int, 4u>, int, unsigned int)", "CatArrayBatchedCopy"),
    # was "CatArrayBatchedCopy_aligned16_contig<>": "(anonymous namespace)" cut the argument to nothing
    ("void at::native::(anonymous namespace)::CatArrayBatchedCopy_aligned16_contig<at::native::(anonymous namespace)"
     "::OpaqueType<4u>, unsigned int, 1, 128, 1>(at::native::(anonymous namespace)::OpaqueType<4u>*, at::native::"
     "(anonymous namespace)::CatArrInputTensorMetadata<at::native::(anonymous namespace)::OpaqueType<4u>, unsigned "
     "int, 128, 1>, at::native::(anonymous namespace)::TensorSizeStride<unsigned int, 4u>, int, unsigned int)",
     "CatArrayBatchedCopy_aligned16_contig<OpaqueType>"),
    ("void at::native::vectorized_elementwise_kernel<4, at::native::(anonymous namespace)::CompareFunctor<long>, "
     "at::detail::Array<char*, 3> >(int, at::native::(anonymous namespace)::CompareFunctor<long>, at::detail::"
     "Array<char*, 3>)", "vectorized_elementwise_kernel<CompareFunctor>"),
    # was "enable_if<!>": the return type is not always "void"
    ("std::enable_if<!(false), void>::type internal::gemvx::kernel<int, int, float, float, float, float, false, "
     "true, false, false, 7, cublasGemvParams<cublasGemvTensorStridedBatched<float const>, cublasGemvTensorStrided"
     "Batched<float const>, cublasGemvTensorStridedBatched<float>, float> >(cublasGemvParams<cublasGemvTensor"
     "StridedBatched<float const>, cublasGemvTensorStridedBatched<float const>, cublasGemvTensorStridedBatched"
     "<float>, float>)", "gemvx::kernel<cublasGemvParams>"),
    # was "...<2ul>": a number is no named argument
    ("void split_embedding_codegen_forward_unweighted_kernel<float, float, float, long, 2ul>(at::GenericPacked"
     "TensorAccessor<float, 1ul, at::RestrictPtrTraits, long>, long)", "split_embedding_codegen_forward_unweighted_"
     "kernel"),
    # the head of a 1,644-character mangled name (HTA's nccl_parser_config trace): demangled as far as it names
    ("_ZN19cutlass_cudnn_train6KernelINS_4conv6kernel23ImplicitGemmConvolutionINS1_11threadblock22ImplicitGemm"
     "MultistageINS_4gemm9GemmShapeILi128ELi128ELi32EEENS4_52Conv2dWgradOutputGradientTileAccessIterator",
     "cutlass_cudnn_train::Kernel<ImplicitGemmConvolution>"),
    ("ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)",
     "ncclKernel_AllReduce_RING_LL_Sum_float"),
]


@pytest.mark.parametrize("name, short", REAL_NAMES, ids=[short for _, short in REAL_NAMES])
def test_short_names_of_real_kernels(name, short):
    assert short_name(name) == short


def test_the_last_column_shows_whole_names_in_the_summary(tmp_path):
    long_op = "aten::_scaled_dot_product_flash_attention_for_cpu_" + "x" * 40  # 90 characters
    events = step_events("ProfilerStep#1", 0, 5_000, 0, 5_000)
    events += [kernel(SDPA, 0, 2_000), kernel(GELU, 2_000, 3_000), cpu_op(long_op, 0, 100)]
    text = render_rank(planted(tmp_path, "names", events)).splitlines()
    rows = [line for line in text if line.endswith(("kernel0_0", "GeluCUDAKernelImpl>", "x" * 40))]
    assert rows == [f"    66.7      2.000       1    2000.0  {SDPA}",
                    "    33.3      1.000       1    1000.0  vectorized_elementwise_kernel<GeluCUDAKernelImpl>",
                    f"   100.0      0.100      0.100       1  {long_op}"]


def test_importing_the_package_does_not_import_torch_and_the_profiler_does_not_import_it():
    code = ("import sys, lightx2v.trace_summary, lightx2v.trace_summary.__main__; "
            "assert 'torch' not in sys.modules, 'torch imported'; print('ok')")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=subprocess_env(),
                         timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr
    code = ("import sys, lightx2v.utils.torch_trace_profiler; "
            "assert 'lightx2v.trace_summary' not in sys.modules; print('ok')")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=subprocess_env(),
                         timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


def device_line(r) -> str:
    return next(line for line in render_rank(r).splitlines() if line.startswith("  devices "))


def test_devices_line_follows_what_the_trace_holds(tmp_path):
    # Kernels on two streams of GPU 0 and one of GPU 1, but no deviceProperties (older kineto, HTA's
    # timeline_analysis trace): not a CPU-only trace.
    events = step_events("ProfilerStep#1", 0, 5_000, 0, 5_000)
    events += [kernel("a", 0, 1_000, stream=7), kernel("b", 1_000, 2_000, stream=8),
               {**kernel("c", 2_000, 3_000, stream=7), "pid": 1}]
    doc = trace_doc(events)
    del doc["deviceProperties"]
    r = analyze_trace(str(write_json(tmp_path / "nodevprops.pt.trace.json", doc)))
    assert r.devices == [] and r.gpu.devices == 2 and r.gpu.streams == 3
    assert device_line(r) == "  devices   not recorded in the trace (GPU activity seen on 2 devices, 3 streams)"
    page = render_overview(summarize_paths([str(tmp_path / "nodevprops.pt.trace.json")])[0])
    assert "devices: not recorded in the trace (GPU activity seen on 2 devices, 3 streams)" in page

    one = trace_doc([kernel("a", 0, 1_000)])
    del one["deviceProperties"]
    r = analyze_trace(str(write_json(tmp_path / "one.pt.trace.json", one)))
    assert device_line(r) == "  devices   not recorded in the trace (GPU activity seen on 1 device, 1 stream)"

    cpu = trace_doc([cpu_op("aten::mm", 0, 500)])
    del cpu["deviceProperties"]
    r = analyze_trace(str(write_json(tmp_path / "cpu.pt.trace.json", cpu)))
    assert r.gpu is None and device_line(r) == "  devices   none recorded (CPU-only trace)"

    # deviceProperties present and no GPU activity (activities=[CPU] on a GPU machine): the devices are listed.
    r = analyze_trace(str(write_json(tmp_path / "cpu_on_gpu.pt.trace.json", trace_doc([cpu_op("aten::mm", 0, 500)]))))
    assert device_line(r) == "  devices   0: NVIDIA H200 (sm 9.0, 139.8 GiB)"


def _figures(value, path=""):
    """Every leaf of a summary as (path, value), floats apart so they can be compared to rounding."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        value = dataclasses.asdict(value)
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _figures(v, f"{path}.{k}")
    elif isinstance(value, list | tuple):
        yield (f"{path}#len", len(value))
        for i, v in enumerate(value):
            yield from _figures(v, f"{path}[{i}]")
    else:
        yield (path, value)


def test_the_summary_does_not_depend_on_the_order_of_events_in_the_file(tmp_path):
    """Kineto writes ids and a thread's ops in increasing order, and the summary's indexes use that order when it
    holds (no copy, no sort); a file whose events come in any other order must give the same answers."""
    import json
    import random

    from helpers.shaped_h200 import shaped_h200

    shaped = shaped_h200(tmp_path)  # with shapes: the efficiency units are found too
    with gzip.open(shaped, "rt") if str(shaped).endswith(".gz") else open(shaped) as f:
        doc = json.load(f)
    random.Random(7).shuffle(doc["traceEvents"])
    shuffled = tmp_path / "shuffled.pt.trace.json"
    shuffled.write_text(json.dumps(doc))
    leaves = [dict(_figures(analyze_trace(str(p)))) for p in (shaped, shuffled)]
    for key in ("file", "size_bytes", "compressed", "worker"):
        for one in leaves:
            one.pop("." + key)
    in_order, any_order = leaves
    assert in_order.keys() == any_order.keys()
    assert in_order[".efficiency.ops#len"] > 0 and in_order[".gpu.kernel_count"] == 120
    differ = {k: (v, any_order[k]) for k, v in in_order.items()
              if not (v == any_order[k] or (isinstance(v, float) and v == pytest.approx(any_order[k], rel=1e-9)))}
    assert differ == {}


@pytest.mark.parametrize("name", ["", "   ", None], ids=["empty", "blank", "null"])
def test_a_device_without_a_name_says_so(tmp_path, name):
    """``devices   0:  (sm 9.4, 192.0 GiB)`` read as if a word were missing: an unnamed device says it is one."""
    doc = trace_doc([kernel("a", 0, 1_000)])
    doc["deviceProperties"] = [{"id": 0, "name": name, "computeMajor": 9, "computeMinor": 4,
                                "totalGlobalMem": 192 * 2**30}]
    r = analyze_trace(str(write_json(tmp_path / "unnamed.pt.trace.json", doc)))
    assert device_line(r) == "  devices   0: unnamed device (sm 9.4, 192.0 GiB)"
    page = render_overview(summarize_paths([str(tmp_path / "unnamed.pt.trace.json")])[0])
    assert "0: unnamed device" in page
