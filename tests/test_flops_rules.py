"""The FLOP and byte models of the GEMM family and of elementwise ops (``flops``), with the helpers that read an
op's recorded arguments, as pure logic: shapes written by hand, FLOPs (2 per multiply-add) and bytes (each
tensor input read once, the output written once) worked out here. tests/test_trace_summary_flops.py checks the
same models against torch's FlopCounterMode on real captures."""

from __future__ import annotations

import pytest

from lightx2v.trace_summary.flops import ACTIVATION, ELEMENTWISE, GEMM, SOFTMAX, OpCost, _Args, cost, signature

F32, BF16, HALF = "float", "c10::BFloat16", "c10::Half"


def test_mm_is_2mkn_flops_and_reads_both_inputs_and_writes_the_output():
    # [2, 3] x [3, 4] fp32: 48 FLOPs; (6 + 12) * 4 bytes read, 8 * 4 written
    assert cost("aten::mm", [[2, 3], [3, 4]], [F32, F32]) == OpCost(GEMM, 48, 72 + 32, "fp32", True)


@pytest.mark.parametrize("dims", [[[2, 3], [4, 4]], [[2, 3, 1], [3, 4]], [[2, 3], [3]], [[2, 3]], [[], [3, 4]],
                                  [[2, 3], [3, -4]]])
def test_mm_shapes_that_do_not_multiply_have_no_figure(dims):
    assert cost("aten::mm", dims, [F32, F32]) is None


def test_addmm_counts_the_bias_read_but_not_its_add_and_takes_the_dtype_of_the_first_matrix():
    # bias [4] bf16 (8 bytes), [2, 3] x [3, 4] bf16 (12 + 24), out [2, 4] bf16 (16)
    assert cost("aten::addmm", [[4], [2, 3], [3, 4], [], []], [F32, BF16, BF16, "Scalar", "Scalar"]) == \
        OpCost(GEMM, 48, 16 + 12 + 24 + 16, "bf16", True)
    assert cost("aten::_addmm_activation", [[4], [2, 3], [3, 4]], [BF16] * 3) == OpCost(GEMM, 48, 60, "bf16", True)
    assert cost("aten::addmm", [[4], [2, 3], [4, 4]], [BF16] * 3) is None
    assert cost("aten::addmm", [[4], [2, 3, 1], [3, 4]], [BF16] * 3) is None
    assert cost("aten::addmm", [[4], [2, 3], [3]], [BF16] * 3) is None
    assert cost("aten::addmm", [[4], [2, 3]], [BF16] * 3) is None


def test_bmm_multiplies_each_batch_and_baddbmm_reads_its_added_tensor_too():
    # [5, 2, 3] x [5, 3, 4] half: 2 * 5 * 2 * 3 * 4 = 240 FLOPs; (30 + 60) * 2 read, 40 * 2 written
    assert cost("aten::bmm", [[5, 2, 3], [5, 3, 4]], [HALF, HALF]) == OpCost(GEMM, 240, 180 + 80, "fp16", True)
    assert cost("aten::baddbmm", [[5, 2, 4], [5, 2, 3], [5, 3, 4], [], []], [HALF] * 3 + ["Scalar"] * 2) == \
        OpCost(GEMM, 240, 80 + 180 + 80, "fp16", True)


@pytest.mark.parametrize("dims", [[[5, 2, 3], [4, 3, 4]], [[5, 2, 3], [5, 2, 4]], [[2, 3], [3, 4]],
                                  [[5, 2, 3], [5, 3, 4, 1]], [[5, 2, 3]]])
def test_bmm_shapes_that_do_not_multiply_have_no_figure(dims):
    assert cost("aten::bmm", dims, [HALF, HALF]) is None
    assert cost("aten::baddbmm", [[5, 2, 4], *dims], [HALF] * 3) is None


def test_matmul_reads_one_dimensional_operands_as_a_row_or_a_column():
    assert cost("aten::matmul", [[3], [3]], [F32, F32]) == OpCost(GEMM, 6, 12 + 12 + 4, "fp32", True)
    assert cost("aten::matmul", [[2, 3], [3]], [F32, F32]) == OpCost(GEMM, 12, 24 + 12 + 8, "fp32", True)
    assert cost("aten::matmul", [[3], [3, 4]], [F32, F32]) == OpCost(GEMM, 24, 12 + 48 + 16, "fp32", True)


def test_matmul_broadcasts_its_leading_dimensions_as_batches():
    # [7, 1, 2, 3] x [5, 3, 4]: batches [7, 1] and [5] broadcast to [7, 5] = 35; out [7, 5, 2, 4]
    assert cost("aten::matmul", [[7, 1, 2, 3], [5, 3, 4]], [F32, F32]) == \
        OpCost(GEMM, 2 * 35 * 2 * 3 * 4, 7 * 6 * 4 + 5 * 12 * 4 + 35 * 8 * 4, "fp32", True)
    assert cost("aten::matmul", [[2, 3], [6, 3, 4]], [BF16, BF16]) == \
        OpCost(GEMM, 2 * 6 * 2 * 3 * 4, 12 + 144 + 6 * 8 * 2, "bf16", True)


@pytest.mark.parametrize("dims", [[[2, 2, 3], [3, 3, 4]], [[2, 3], [4, 4]], [[3], [4]], [[2, 3], []], [[2, 3]]])
def test_matmul_shapes_that_do_not_multiply_or_broadcast_have_no_figure(dims):
    assert cost("aten::matmul", dims, [F32, F32]) is None


def test_linear_multiplies_every_leading_row_by_the_transposed_weight():
    # input [8, 2, 3] bf16 (96 bytes), weight [4, 3] (24), bias [4] (8): 16 rows x 3 x 4, out [8, 2, 4] (128)
    assert cost("aten::linear", [[8, 2, 3], [4, 3], [4]], [BF16] * 3) == \
        OpCost(GEMM, 2 * 16 * 3 * 4, 96 + 24 + 8 + 128, "bf16", True)
    assert cost("aten::linear", [[8, 2, 3], [4, 3], []], [BF16, BF16, "Scalar"]) == \
        OpCost(GEMM, 384, 96 + 24 + 128, "bf16", True)
    assert cost("aten::linear", [[8, 2, 3], [4, 3]], [BF16] * 2) == OpCost(GEMM, 384, 248, "bf16", True)


@pytest.mark.parametrize("dims", [[[8, 3], [4, 2]], [[8, 3], [4, 3, 1]], [[8, 3], [3]], [[8, 3]], [[], [4, 3]]])
def test_linear_shapes_that_do_not_fit_have_no_figure(dims):
    assert cost("aten::linear", dims, [BF16] * 3) is None


def test_elementwise_ops_count_a_flop_per_output_element_and_broadcast_their_inputs():
    # [2, 3] + [3] fp32: out [2, 3]: 6 FLOPs; 24 + 12 read, 24 written
    assert cost("aten::add", [[2, 3], [3], []], [F32, F32, "Scalar"]) == OpCost(ELEMENTWISE, 6, 60, "fp32", False)
    assert cost("aten::mul", [[1, 3], [2, 1]], [F32, F32]) == OpCost(ELEMENTWISE, 6, 12 + 8 + 24, "fp32", False)
    assert cost("aten::gelu", [[2, 3]], [BF16]) == OpCost(ACTIVATION, 6, 12 + 12, "bf16", False)
    assert cost("aten::gelu_", [[2, 3]], [BF16]) == OpCost(ACTIVATION, 6, 12 + 12, "bf16", False)


def test_an_elementwise_output_has_the_widest_inputs_element_size_but_in_place_the_first_inputs():
    assert cost("aten::add", [[4], [4]], [HALF, F32]) == OpCost(ELEMENTWISE, 4, 8 + 16 + 16, "fp16", False)
    assert cost("aten::add_", [[4], [4]], [HALF, F32]) == OpCost(ELEMENTWISE, 4, 8 + 16 + 8, "fp16", False)
    # a scalar first argument: in place into no tensor, so the widest size again, and the first tensor's dtype
    assert cost("aten::mul_", [[], [4]], ["Scalar", F32]) == OpCost(ELEMENTWISE, 4, 16 + 16, "fp32", False)


def test_elementwise_inputs_that_do_not_broadcast_or_hold_no_tensor_have_no_figure():
    assert cost("aten::add", [[2, 3], [4]], [F32, F32]) is None
    assert cost("aten::add", [[2, 3], [3, 3]], [F32, F32]) is None
    assert cost("aten::add", [[], []], ["Scalar", "Scalar"]) is None
    assert cost("aten::add", [[2, 3], [3]], ["Scalar", "Scalar"]) is None  # no element size: no tensor


def test_broadcasting_takes_each_dimensions_size_other_than_one():
    assert cost("aten::where", [[2, 1, 4], [3, 1], [1]], [F32] * 3).flops == 2 * 3 * 4
    assert cost("aten::add", [[1, 1], [1]], [F32, F32]).flops == 1


def test_an_ops_arguments_are_read_by_position():
    a = _Args([[2, 3], [], [1, 2.0], [1, -1], "x", [4]], [F32, "Scalar", F32, F32, F32, "nonsense"],
              ["True", "1", "False", "[2, 2]", "3", "", "[a]", 5, "[]", "[ 1 , 2 ]", "X3"])
    assert [a.shape(i) for i in range(7)] == [[2, 3], None, None, None, None, [4], None]
    assert [a.itemsize(i) for i in range(7)] == [4, 0, 4, 4, 4, 0, 0]
    assert [a.dtype(i) for i in range(7)] == ["fp32", "?", "fp32", "fp32", "fp32", "?", "?"]
    assert [a.nbytes(i) for i in range(7)] == [24, 0, 0, 0, 0, 0, 0]
    assert [a.flag(i) for i in range(4)] + [a.flag(10), a.flag(11)] == [True, True, False, False, False, False]
    assert [a.ints(i) for i in range(12)] == [None, [1], None, [2, 2], [3], None, None, None, [], [1, 2], None,
                                              None]
    assert a.tensors() == [0]  # [4] has no known element size
    assert _Args([], [], [" [2] ", " 3 "]).ints(0) == [2] and _Args([], [], [" [2] ", " 3 "]).ints(1) == [3]


def test_an_op_without_a_model_or_with_fields_that_are_no_lists_has_no_figure():
    assert cost("aten::unknown", [[2, 3], [3, 4]], [F32, F32]) is None
    assert cost("aten::mm", "[[2, 3], [3, 4]]", [F32, F32]) is None
    assert cost("aten::mm", [[2, 3], [3, 4]], "float") is None
    assert cost("aten::mm", [[2, 3], [3, 4]], [[F32], F32]) is None  # an unhashable type name: no crash
    assert cost("aten::mm", [[2, 3], [3, 4]], [F32, F32], "not a list") == OpCost(GEMM, 48, 104, "fp32", True)


def test_a_signature_names_the_tensor_shapes_and_the_first_tensors_dtype():
    assert signature([[4], [2, 3], [3, 4], [], []], [F32, BF16, BF16, "Scalar", "Scalar"]) == \
        "[4] x [2, 3] x [3, 4] fp32"
    assert signature([[], [3]], ["Scalar", HALF]) == "[3] fp16"
    assert signature([[], []], ["Scalar", "Scalar"]) == ""
    assert signature("x", [F32]) == "" and signature([[2]], None) == ""


def test_a_zero_sized_dimension_is_a_shape_with_no_flops():
    assert cost("aten::mm", [[0, 3], [3, 4]], [F32, F32]) == OpCost(GEMM, 0, 48, "fp32", True)


def test_a_gemm_s_output_and_dtype_are_those_of_its_first_matrix_operand():
    # mixed operands: the output has the first matrix's element size, the row its dtype
    assert cost("aten::mm", [[2, 3], [3, 4]], [HALF, F32]) == OpCost(GEMM, 48, 12 + 48 + 16, "fp16", True)
    assert cost("aten::addmm", [[4], [2, 3], [3, 4]], [F32, HALF, F32]) == \
        OpCost(GEMM, 48, 16 + 12 + 48 + 16, "fp16", True)
    assert cost("aten::matmul", [[2, 3], [3, 4]], [HALF, F32]) == OpCost(GEMM, 48, 12 + 48 + 16, "fp16", True)
    assert cost("aten::linear", [[2, 3], [4, 3]], [HALF, F32]) == OpCost(GEMM, 48, 12 + 48 + 16, "fp16", True)


def test_bmm_reads_its_two_operands_only_an_out_tensor_is_its_output():
    assert cost("aten::bmm", [[5, 2, 3], [5, 3, 4], [5, 2, 4]], [HALF] * 3) == OpCost(GEMM, 240, 260, "fp16", True)


def test_a_scaled_mm_writes_its_output_in_the_dtype_it_names():
    # fp8 [2, 3] x [3, 4] (6 + 12 bytes), out_dtype 15 (bf16): 8 elements of 2 bytes
    fp8 = "c10::Float8_e4m3fn"
    assert cost("aten::_scaled_mm", [[2, 3], [3, 4], [], [], [], []], [fp8, fp8] + ["Scalar"] * 4,
                ["", "", "", "", "", "", "15"]) == OpCost(GEMM, 48, 18 + 16, "fp8", True)


def test_concrete_inputs_reach_the_model_only_when_they_are_a_list():
    # _softmax(self, dim, half_to_float): half_to_float True writes a float output
    dims, types = [[2, 3], [], []], [HALF, "Int", "Bool"]
    assert cost("aten::_softmax", dims, types, ["", "-1", "True"]) == OpCost(SOFTMAX, 30, 12 + 24, "fp16", False)
    assert cost("aten::_softmax", dims, types, "True") == OpCost(SOFTMAX, 30, 12 + 12, "fp16", False)
    assert cost("aten::_softmax", dims, types, "xx1") == OpCost(SOFTMAX, 30, 12 + 12, "fp16", False)  # not "1"
    assert cost("aten::_softmax", dims, types) == OpCost(SOFTMAX, 30, 24, "fp16", False)
