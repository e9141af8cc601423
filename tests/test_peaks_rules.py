"""What the GPU can do (``peaks``) as pure logic: which row of the peak table a device name matches, the --peak
override and its bounds, and which column is an op's compute roof. The figures expected are the vendors'
datasheet numbers, written here by hand."""

from __future__ import annotations

import pytest

from lightx2v.trace_summary.model import PeakSpec
from lightx2v.trace_summary.peaks import parse_peak, peak_for, peak_tflops

GIB = 2**30
HOPPER = "NVIDIA H100/H200 Tensor Core GPU datasheets (dense; the sparse figures halved)"


def test_a_device_name_gets_its_rows_figures_by_dtype_bandwidth_and_source():
    assert peak_for("NVIDIA H200") == PeakSpec(device="NVIDIA H200", gpu="H200 SXM",
                                               tflops={"bf16": 989.4, "tf32": 494.7, "fp32": 66.9, "fp8": 1979},
                                               tbps=4.8, source=HOPPER)


def test_a_device_without_fp8_has_no_fp8_figure():
    peak = peak_for("NVIDIA A100-SXM4-40GB")
    assert peak is not None and peak.gpu == "A100 40GB"
    assert peak.tflops == {"bf16": 312, "tf32": 156, "fp32": 19.5} and peak.tbps == 1.555


def test_the_name_is_matched_whatever_its_case_and_the_more_specific_row_first():
    assert peak_for("nvidia h200 nvl").gpu == "H200 NVL"  # before the plain H200 row
    assert peak_for("NVIDIA H100 NVL").gpu == "H100 NVL"
    assert peak_for("NVIDIA H100 PCIe").gpu == "H100 PCIe"
    assert peak_for("NVIDIA H100 80GB HBM3").gpu == "H100 SXM"
    assert peak_for("NVIDIA H20").gpu == "H20"  # a whole word: not H200's row, and H200 not its
    assert peak_for("NVIDIA H200").gpu == "H200 SXM"
    assert peak_for("NVIDIA L20").gpu == "L20"
    assert peak_for("NVIDIA A100 80GB PCIe").gpu == "A100 80GB PCIe"
    assert peak_for("NVIDIA A100-SXM4-80GB").gpu == "A100 80GB SXM"


def test_a_device_not_in_the_table_has_no_peak():
    assert peak_for("AMD EPYC 9654") is None
    assert peak_for("") is None
    assert peak_for("NVIDIA Z999", 80 * GIB) is None


def test_an_a100_named_without_its_size_is_the_80gb_one_only_with_more_than_60_gib_of_memory():
    sxm80 = peak_for("NVIDIA A100", 85 * GIB)
    assert sxm80.gpu == "A100 80GB SXM" and sxm80.tbps == 2.039 and sxm80.device == "NVIDIA A100"
    assert peak_for("NVIDIA A100", 60 * GIB + 1).gpu == "A100 80GB SXM"
    assert peak_for("NVIDIA A100", 60 * GIB).gpu == "A100 40GB"
    assert peak_for("NVIDIA A100", 40 * GIB).gpu == "A100 40GB"
    assert peak_for("NVIDIA A100").gpu == "A100 40GB"  # memory unknown
    assert peak_for("NVIDIA A100", 0).gpu == "A100 40GB"
    # the memory only settles a nameless A100: a named size or another device keeps its row
    assert peak_for("NVIDIA A100 80GB PCIe", 85 * GIB).gpu == "A100 80GB PCIe"
    assert peak_for("NVIDIA H100 PCIe", 85 * GIB).gpu == "H100 PCIe"


def test_the_peak_override_is_one_tflops_figure_for_every_dtype_and_the_bandwidth():
    assert parse_peak("989,4.8", "NVIDIA Z999") == PeakSpec(
        device="NVIDIA Z999", gpu="--peak", tflops={"fp8": 989.0, "bf16": 989.0, "tf32": 989.0, "fp32": 989.0},
        tbps=4.8, source="given with --peak")
    assert parse_peak(" 2 , 0.1 ").tflops["bf16"] == 2.0 and parse_peak("2,0.1").device == ""


@pytest.mark.parametrize("text", ["989", "989,4.8,1", "a,b", "989,", ",4.8", ""])
def test_a_peak_override_that_is_not_two_numbers_is_refused_saying_what_it_wants(text):
    with pytest.raises(ValueError) as exc:
        parse_peak(text)
    assert str(exc.value) == f"--peak wants TFLOPS,TBps (two numbers, e.g. 989,4.8), got {text!r}"


@pytest.mark.parametrize("text", ["0,4.8", "-1,4.8", "989,0", "989,-2", "1e7,4.8", "989,1e5", "nan,1", "1,inf"])
def test_a_peak_override_out_of_range_is_refused(text):
    with pytest.raises(ValueError) as exc:
        parse_peak(text)
    assert str(exc.value) == f"--peak wants two positive numbers (TFLOP/s, TB/s), got {text!r}"


def test_a_peak_override_just_inside_its_bounds_is_taken():
    assert parse_peak("9999999,99999").tbps == 99999.0
    assert parse_peak("0.001,0.001").tflops["fp32"] == 0.001


H200 = PeakSpec(device="", gpu="H200 SXM", tflops={"bf16": 989.4, "tf32": 494.7, "fp32": 66.9, "fp8": 1979},
                tbps=4.8, source="")
A100 = PeakSpec(device="", gpu="A100 40GB", tflops={"bf16": 312, "tf32": 156, "fp32": 19.5}, tbps=1.555, source="")


def test_a_matrix_op_is_held_to_its_dtypes_tensor_core_peak():
    assert peak_tflops(H200, "bf16", True, "GEMM") == 989.4
    assert peak_tflops(H200, "fp16", True, "GEMM") == 989.4  # fp16 is bf16's column
    assert peak_tflops(H200, "fp8", True, "GEMM") == 1979
    assert peak_tflops(H200, "tf32", True, "GEMM") == 494.7
    assert peak_tflops(H200, "fp32", True, "GEMM") == 66.9  # no TF32 for GEMMs by default


def test_an_fp32_convolution_is_held_to_the_tf32_peak():
    assert peak_tflops(H200, "fp32", True, "convolution") == 494.7
    assert peak_tflops(H200, "bf16", True, "convolution") == 989.4


def test_a_vector_op_is_held_to_the_cuda_cores_fp32_peak_whatever_its_dtype():
    assert peak_tflops(H200, "bf16", False, "activation") == 66.9
    assert peak_tflops(H200, "fp32", False, "convolution") == 66.9
    assert peak_tflops(A100, "fp8", False, "activation") == 19.5


def test_a_dtype_without_a_peak_on_the_device_or_in_the_table_has_none():
    assert peak_tflops(A100, "fp8", True, "GEMM") is None  # no fp8 on an A100
    assert peak_tflops(H200, "int8", True, "GEMM") is None
    assert peak_tflops(H200, "", True, "GEMM") is None
