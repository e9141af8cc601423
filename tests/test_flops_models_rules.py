"""The FLOP and byte models of attention, convolutions, norms, softmax, _scaled_mm and copies
(``lightx2v.trace_summary.flops``), fast: shapes, dtypes and Concrete Inputs written by hand, FLOPs and bytes worked
out here with the numbers (FlopCounterMode's formulas for the matrix ops: 2 FLOPs a multiply-add; bytes: each
tensor input read once, the output written once). tests/test_trace_summary_flops.py checks the same models
against torch on real captures."""

from __future__ import annotations

import pytest

from lightx2v.trace_summary.flops import ATTENTION, CONV, COPY, ELEMENTWISE, GEMM, NORM, SOFTMAX, OpCost, cost

F32, F64, BF16, HALF, FP8 = "float", "double", "c10::BFloat16", "c10::Half", "c10::Float8_e4m3fn"


# ---- _scaled_mm(a, b, scale_a, scale_b, bias, scale_result, out_dtype) ----------------------------------------

SCALED_DIMS = [[2, 3], [3, 4], [1], [1], [4], [1], []]
SCALED_TYPES = [FP8, FP8, F32, F32, BF16, F32, "ScalarType"]


def test_a_scaled_mm_reads_its_operands_scales_and_bias_and_writes_the_out_dtype():
    # 2 * 2 * 3 * 4 = 48 FLOPs; read 6 + 12 (fp8) + 4 + 4 (scales) + 8 (bf16 bias) + 4 (scale_result) = 38;
    # out_dtype 15 (bf16): 8 elements x 2 bytes = 16
    assert cost("aten::_scaled_mm", SCALED_DIMS, SCALED_TYPES, ["", "", "", "", "", "", "15"]) == \
        OpCost(GEMM, 48, 38 + 16, "fp8", True)
    # out_dtype 6 (float): 8 x 4
    assert cost("aten::_scaled_mm", SCALED_DIMS, SCALED_TYPES, ["", "", "", "", "", "", "6"]) == \
        OpCost(GEMM, 48, 38 + 32, "fp8", True)


@pytest.mark.parametrize("concrete", [[], ["", "", "", "", "", "", ""], ["", "", "", "", "", "", "[]"],
                                      ["", "", "", "", "", "", "99"]])
def test_a_scaled_mm_without_a_known_out_dtype_writes_its_first_operands_dtype(concrete):
    # no out_dtype, an empty one or a ScalarType number not in the table: 8 elements x 1 byte (fp8)
    assert cost("aten::_scaled_mm", SCALED_DIMS, SCALED_TYPES, concrete) == OpCost(GEMM, 48, 38 + 8, "fp8", True)


def test_a_scaled_mm_reads_no_tensor_past_scale_result():
    dims = [[2, 3], [3, 4], [1], [1], [4], [1], [2, 4]]
    assert cost("aten::_scaled_mm", dims, SCALED_TYPES[:6] + [F32], ["", "", "", "", "", "", "15"]) == \
        OpCost(GEMM, 48, 38 + 16, "fp8", True)


def test_a_scaled_mm_row_has_its_first_operands_dtype_and_by_default_its_element_size():
    # a half first operand and an fp8 second: 6 x 2 + 12 + 4 + 4 + 8 + 4 read, 8 x 2 written (no out_dtype)
    assert cost("aten::_scaled_mm", SCALED_DIMS, [HALF] + SCALED_TYPES[1:], []) == \
        OpCost(GEMM, 48, 12 + 12 + 4 + 4 + 8 + 4 + 16, "fp16", True)


@pytest.mark.parametrize("dims", [[[2, 3], [4, 4]], [[2, 3, 1], [3, 4]], [[2, 3], [3]], [[2, 3]], [[], [3, 4]]])
def test_scaled_mm_shapes_that_do_not_multiply_have_no_figure(dims):
    assert cost("aten::_scaled_mm", dims, [FP8, FP8], []) is None


# ---- attention ------------------------------------------------------------------------------------------------

# q [b=2, h=4, s_q=3, d=8], k [2, h_k=1, s_k=5, 8], v [2, 1, 5, d_v=6] (one key/value head: MQA)
# FLOPs: QK^T 2 * 2 * 4 * 3 * 5 * 8 = 1920, PV 2 * 2 * 4 * 3 * 5 * 6 = 1440: 3360
# bytes (bf16): q 192 + k 80 + v 60 elements read, out [2, 4, 3, 6] = 144 written: 476 x 2 = 952
Q, K, V = [2, 4, 3, 8], [2, 1, 5, 8], [2, 1, 5, 6]


def bshd(shape):
    return [shape[0], shape[2], shape[1], shape[3]]


def test_sdpa_counts_qk_and_pv_by_the_querys_heads():
    assert cost("aten::scaled_dot_product_attention", [Q, K, V], [BF16] * 3) == \
        OpCost(ATTENTION, 3360, 952, "bf16", True)
    # two key/value heads for four query heads (GQA): the same FLOPs, k and v twice as large
    k2, v2 = [2, 2, 5, 8], [2, 2, 5, 6]
    assert cost("aten::scaled_dot_product_attention", [Q, k2, v2], [BF16] * 3) == \
        OpCost(ATTENTION, 3360, (192 + 160 + 120 + 144) * 2, "bf16", True)


def test_attention_output_has_the_querys_dtype_and_element_size():
    # q half, k and v float: out 144 x 2 bytes; q 192 x 2, k 80 x 4, v 60 x 4
    assert cost("aten::scaled_dot_product_attention", [Q, K, V], [HALF, F32, F32]) == \
        OpCost(ATTENTION, 3360, 384 + 320 + 240 + 288, "fp16", True)


def test_causal_attention_counts_half_read_at_its_lowerings_is_causal_position():
    sdpa = ["", "", "", "", "", "True"]  # scaled_dot_product_attention(q, k, v, attn_mask, dropout_p, is_causal)
    c = cost("aten::scaled_dot_product_attention", [Q, K, V], [BF16] * 3, sdpa)
    assert c == OpCost(ATTENTION, 1680, 952, "bf16", True) and type(c.flops) is int  # a whole number in the JSON
    # the flash lowering has is_causal at 4: True at 5 (its return_debug_mask) is not causal
    assert cost("aten::_scaled_dot_product_flash_attention", [Q, K, V], [BF16] * 3, sdpa).flops == 3360
    assert cost("aten::_scaled_dot_product_flash_attention", [Q, K, V], [BF16] * 3, sdpa[:4] + ["True"]).flops \
        == 1680
    assert cost("aten::scaled_dot_product_attention", [Q, K, V], [BF16] * 3, sdpa[:5] + ["False"]).flops == 3360


def test_flash_attention_forward_reads_batch_seq_heads_dim():
    dims = [bshd(Q), bshd(K), bshd(V)]  # [2, 3, 4, 8], [2, 5, 1, 8], [2, 5, 1, 6]
    assert cost("aten::_flash_attention_forward", dims, [BF16] * 3) == OpCost(ATTENTION, 3360, 952, "bf16", True)
    causal = ["", "", "", "", "", "", "", "", "True"]  # is_causal at 8
    assert cost("aten::_flash_attention_forward", dims, [BF16] * 3, causal) == \
        OpCost(ATTENTION, 1680, 952, "bf16", True)


@pytest.mark.parametrize(("mask_type", "flops"), [("0", 3360), ("1", 1680), ("2", 1680), (None, 3360)])
def test_efficient_attention_forward_is_causal_by_its_custom_mask_type(mask_type, flops):
    dims = [bshd(Q), bshd(K), bshd(V)]
    concrete = [""] * 9 + ([mask_type] if mask_type is not None else [])  # custom_mask_type at 9
    assert cost("aten::_efficient_attention_forward", dims, [BF16] * 3, concrete) == \
        OpCost(ATTENTION, flops, 952, "bf16", True)


@pytest.mark.parametrize("dims", [
    [[3, 4, 3, 8], K, V],  # k's batch is not q's
    [Q, K, [3, 1, 5, 6]],  # v's batch is not q's
    [Q, [2, 1, 5, 7], V],  # k's head dim is not q's
    [Q, [2, 2, 5, 8], V],  # v's heads are not k's
    [Q, K, [2, 1, 4, 6]],  # v's sequence is not k's
    [Q, [2, 3, 5, 8], [2, 3, 5, 6]],  # 4 query heads do not share 3 key/value heads
    [Q, [2, 0, 5, 8], [2, 0, 5, 6]],  # no key/value head
    [[2, 4, 8], [2, 5, 8], [2, 5, 6]],  # packed variable-length (3-D): lengths not recorded
    [Q, [2, 5, 8], V], [Q, K, [2, 5, 6]], [[], K, V], [Q, [], V], [Q, K, []], [Q, K]])
def test_attention_shapes_that_do_not_fit_have_no_figure(dims):
    assert cost("aten::scaled_dot_product_attention", dims, [BF16] * 3) is None


# ---- convolution ----------------------------------------------------------------------------------------------

# x [N=2, C=4, H=8, W=9], w [C_out=6, C/groups=2, 3, 3], bias [6], stride [2, 1], padding [1, 0], dilation [1, 2],
# groups 2: out H = (8 + 2*1 - 1*(3-1) - 1) // 2 + 1 = 7 // 2 + 1 = 4 (the last row does not fit a stride),
# W = (9 + 2*0 - 2*(3-1) - 1) // 1 + 1 = 5; FLOPs: 2 * (4*5) * (3*3) * 2 * 6 * 2 = 8640;
# bytes (fp32): x 576 + w 108 + bias 6 read, out 2*6*4*5 = 240 written
X2, W2 = [2, 4, 8, 9], [6, 2, 3, 3]


def test_a_convolution_counts_every_output_position_from_stride_padding_and_dilation():
    # convolution(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups)
    concrete = ["", "", "", "[2, 1]", "[1, 0]", "[1, 2]", "False", "[0, 0]", "2"]
    c = cost("aten::convolution", [X2, W2, [6], [], [], [], [], [], []], [F32] * 3, concrete)
    assert c == OpCost(CONV, 8640, (576 + 108 + 6 + 240) * 4, "fp32", True)
    assert type(c.flops) is int and type(c.bytes) is int  # whole numbers in the JSON


def test_cudnn_convolution_has_no_bias_and_its_own_argument_order():
    # cudnn_convolution(self, weight, padding, stride, dilation, groups, ...)
    concrete = ["", "", "[1, 0]", "[2, 1]", "[1, 2]", "2"]
    assert cost("aten::cudnn_convolution", [X2, W2, [6]], [F32] * 3, concrete) == \
        OpCost(CONV, 8640, (576 + 108 + 240) * 4, "fp32", True)


def test_a_convolution_without_its_arguments_has_stride_one_no_padding_and_no_dilation():
    # x [1, 2, 5, 5], w [3, 2, 3, 3]: out 3 x 3; FLOPs 2 * 9 * 9 * 1 * 3 * 2 = 972; bytes 50 + 54 + 27 (out), bf16
    assert cost("aten::conv2d", [[1, 2, 5, 5], [3, 2, 3, 3]], [BF16] * 2) == \
        OpCost(CONV, 972, (50 + 54 + 27) * 2, "bf16", True)
    # _slow_conv2d_forward(self, weight, kernel_size, bias, stride, padding): no dilation argument at all
    assert cost("aten::_slow_conv2d_forward", [[1, 2, 5, 5], [3, 2, 3, 3]], [BF16] * 2, ["", "", "[3, 3]"]) == \
        OpCost(CONV, 972, (50 + 54 + 27) * 2, "bf16", True)


def test_a_single_stride_padding_or_dilation_holds_for_every_spatial_dimension():
    # conv2d(input, weight, bias, stride, padding, dilation, groups) on x [1, 2, 5, 5], w [3, 2, 3, 3]
    # FLOPs 2 * (out H * out W) * 9 * 1 * 3 * 2 = 108 per output position
    x, w = [1, 2, 5, 5], [3, 2, 3, 3]
    # stride 2: out (5 - 2 - 1) // 2 + 1 = 2 each
    assert cost("aten::conv2d", [x, w], [F32] * 2, ["", "", "", "2", "0", "1", "1"]).flops == 108 * 2 * 2
    # padding 1: out 5 + 2 - 2 = 5 each
    assert cost("aten::conv2d", [x, w], [F32] * 2, ["", "", "", "1", "1", "1", "1"]).flops == 108 * 5 * 5
    # dilation 2: out 5 - 2*2 = 1 each
    assert cost("aten::conv2d", [x, w], [F32] * 2, ["", "", "", "1", "0", "2", "1"]).flops == 108 * 1 * 1
    # padding [1, 0]: out H 5, W 3
    assert cost("aten::conv2d", [x, w], [F32] * 2, ["", "", "", "1", "[1, 0]", "1", "1"]).flops == 108 * 5 * 3


def test_a_stride_padding_or_dilation_list_of_the_wrong_length_is_left_for_the_default():
    # three strides, no padding list, three dilations for two spatial dimensions: stride 1, padding 0,
    # dilation 1: out 3 x 3
    x, w = [1, 2, 5, 5], [3, 2, 3, 3]
    assert cost("aten::conv2d", [x, w], [F32] * 2, ["", "", "", "[2, 2, 2]", "[]", "[2, 2, 2]", "1"]).flops == \
        108 * 3 * 3


def test_a_one_dimensional_convolution():
    # conv1d(input, weight, bias, stride, padding, dilation, groups): x [2, 3, 10], w [4, 3, 3], bias [4], stride 2,
    # padding 1: out (10 + 2 - 2 - 1) // 2 + 1 = 5; FLOPs 2 * 5 * 3 * 2 * 4 * 3 = 720; bytes 60 + 36 + 4 + 40, bf16
    assert cost("aten::conv1d", [[2, 3, 10], [4, 3, 3], [4]], [BF16] * 3, ["", "", "", "[2]", "[1]", "[1]", "1"]) \
        == OpCost(CONV, 720, (60 + 36 + 4 + 40) * 2, "bf16", True)


def test_a_kernel_that_just_fits_gives_one_output_position_and_a_larger_one_none():
    # [1, 2, 3, 3] * [3, 2, 3, 3]: out 1 x 1, FLOPs 2 * 1 * 9 * 1 * 3 * 2 = 108; bytes 18 + 54 + 3
    assert cost("aten::conv2d", [[1, 2, 3, 3], [3, 2, 3, 3]], [F32] * 2) == \
        OpCost(CONV, 108, (18 + 54 + 3) * 4, "fp32", True)
    assert cost("aten::conv2d", [[1, 2, 2, 2], [3, 2, 3, 3]], [F32] * 2) is None  # out 0 x 0


# transposed: x [N=1, C_in=4, 3, 5], w [C_in=4, C_out/groups=3, 2, 2], groups 2 (C_out 6), stride [2, 1],
# padding [1, 0], dilation [1, 2], output_padding [1, 0]: out H = (3-1)*2 - 2*1 + 1*(2-1) + 1 + 1 = 5,
# W = (5-1)*1 - 0 + 2*(2-1) + 0 + 1 = 7; FLOPs over the input positions: 2 * (3*5) * (2*2) * 1 * 4 * 3 = 1440;
# bytes (fp32): x 60 + w 48 read, out 1*6*5*7 = 210 written
XT, WT = [1, 4, 3, 5], [4, 3, 2, 2]


def test_a_transposed_convolution_counts_the_input_positions_and_writes_groups_times_the_weights_outputs():
    concrete = ["", "", "", "[2, 1]", "[1, 0]", "[1, 2]", "True", "[1, 0]", "2"]
    assert cost("aten::convolution", [XT, WT, []], [F32, F32, "Scalar"], concrete) == \
        OpCost(CONV, 1440, (60 + 48 + 210) * 4, "fp32", True)
    # cudnn_convolution_transpose(self, weight, padding, output_padding, stride, dilation, groups, ...)
    assert cost("aten::cudnn_convolution_transpose", [XT, WT], [F32] * 2,
                ["", "", "[1, 0]", "[1, 0]", "[2, 1]", "[1, 2]", "2"]) == \
        OpCost(CONV, 1440, (60 + 48 + 210) * 4, "fp32", True)


def test_a_transposed_convolution_without_its_arguments_has_one_group_and_no_output_padding():
    # out H = (3-1) + (2-1) + 1 = 4, W = (5-1) + 1 + 1 = 6, C_out 3: 72 elements
    assert cost("aten::cudnn_convolution_transpose", [XT, WT], [F32] * 2) == \
        OpCost(CONV, 1440, (60 + 48 + 72) * 4, "fp32", True)


def test_a_transposed_convolution_s_output_grows_by_the_dilated_kernel():
    # convolution, transposed, 1-D: x [1, 2, 4], w [2, 3, 3], stride 1, padding 0, dilation 2:
    # out (4-1)*1 - 0 + 2*(3-1) + 0 + 1 = 8, C_out 3; FLOPs 2 * 4 * 3 * 1 * 2 * 3 = 144; bytes 8 + 18 + 24 (fp32)
    concrete = ["", "", "", "[1]", "[0]", "[2]", "True", "[0]", "1"]
    assert cost("aten::convolution", [[1, 2, 4], [2, 3, 3], []], [F32, F32, "Scalar"], concrete) == \
        OpCost(CONV, 144, (8 + 18 + 24) * 4, "fp32", True)


@pytest.mark.parametrize("dims", [[[2, 4, 8, 9], [6, 2, 3]], [[2, 4, 9], [6, 4, 3, 3]], [[2, 4], [6, 4]],
                                  [[2, 4, 8, 9]], [[], W2], [X2, []]])
def test_convolution_shapes_that_do_not_fit_have_no_figure(dims):
    assert cost("aten::conv2d", dims, [F32] * 2) is None


# ---- norms and softmax ----------------------------------------------------------------------------------------

def test_layer_norm_reads_input_weight_bias_writes_the_output_and_a_float_mean_and_rstd_per_row():
    # x [4, 6] bf16 over [6]: 24 elements, 5 FLOPs each; rows 4: mean and rstd 2 * 4 * 4 bytes
    # bytes 48 (read) + 48 (written) + 12 (weight) + 12 (bias) + 32
    dims, types = [[4, 6], [], [6], [6], []], [BF16, "ScalarList", BF16, BF16, "Double"]
    c = cost("aten::native_layer_norm", dims, types, ["", "[6]", "", "", "1e-05"])
    assert c == OpCost(NORM, 120, 48 + 48 + 12 + 12 + 32, "bf16", False) and type(c.bytes) is int
    assert cost("aten::layer_norm", dims, types, ["", "[6]", "", "", "1e-05"]) == \
        OpCost(NORM, 120, 152, "bf16", False)
    # over [2, 3] of x [4, 2, 3]: the same 4 rows
    assert cost("aten::native_layer_norm", [[4, 2, 3], [], [2, 3], [2, 3]], types, ["", "[2, 3]"]) == \
        OpCost(NORM, 120, 152, "bf16", False)


def test_a_layer_norm_without_a_bias_reads_its_weight_only():
    # x [4, 6] bf16 over [6], weight [6], no bias: 48 + 48 + 12 + mean and rstd 2 * 4 * 4
    assert cost("aten::native_layer_norm", [[4, 6], [], [6], []], [BF16, "ScalarList", BF16, ""], ["", "[6]"]) == \
        OpCost(NORM, 120, 48 + 48 + 12 + 32, "bf16", False)


def test_a_double_layer_norm_keeps_its_mean_and_rstd_in_double():
    # x [4, 6] double: 192 read + 192 written, weight and bias 48 each, mean and rstd 2 * 4 * 8
    assert cost("aten::native_layer_norm", [[4, 6], [], [6], [6]], [F64, "ScalarList", F64, F64], ["", "[6]"]) \
        == OpCost(NORM, 120, 192 + 192 + 48 + 48 + 64, "fp64", False)


@pytest.mark.parametrize("concrete", [[], ["", ""], ["", "[0]"]])
def test_a_layer_norm_without_a_normalized_shape_counts_every_element_as_a_row(concrete):
    # x [4, 6] fp32 without weight or bias: 96 + 96, mean and rstd 2 * 24 * 4
    assert cost("aten::native_layer_norm", [[4, 6], []], [F32, "ScalarList"], concrete) == \
        OpCost(NORM, 120, 96 + 96 + 192, "fp32", False)


def test_rms_norm_reads_input_and_weight_and_writes_the_output_and_a_float_rstd_per_row():
    # _fused_rms_norm(input, normalized_shape, weight, eps): x [4, 6] bf16, 4 FLOPs an element; rows 4
    dims, types = [[4, 6], [], [6], []], [BF16, "ScalarList", BF16, "Double"]
    c = cost("aten::_fused_rms_norm", dims, types, ["", "[6]", "", "1e-06"])
    assert c == OpCost(NORM, 96, 48 + 48 + 12 + 4 * 4, "bf16", False) and type(c.bytes) is int
    assert cost("aten::_fused_rms_norm", dims, types) == OpCost(NORM, 96, 48 + 48 + 12 + 24 * 4, "bf16", False)
    assert cost("aten::_fused_rms_norm", dims, types, ["", "[0]"]) == \
        OpCost(NORM, 96, 48 + 48 + 12 + 24 * 4, "bf16", False)


def test_group_norm_writes_a_mean_and_rstd_per_sample_and_group():
    # native_group_norm(input, weight, bias, N, C, HxW, group, eps): x [2, 6, 5] bf16, 3 groups
    # 60 elements, 5 FLOPs each; bytes 120 + 120 + 12 + 12 + mean and rstd 2 * 2 * 3 * 4
    dims, types = [[2, 6, 5], [6], [6], [], [], [], [], []], [BF16, BF16, BF16] + ["Int"] * 4 + ["Double"]
    concrete = ["", "", "", "2", "6", "5", "3", "1e-05"]
    assert cost("aten::native_group_norm", dims, types, concrete) == \
        OpCost(NORM, 300, 120 + 120 + 12 + 12 + 48, "bf16", False)
    assert cost("aten::native_group_norm", dims, types) == OpCost(NORM, 300, 264 + 2 * 2 * 1 * 4, "bf16", False)
    # double: 480 + 480 + 48 + 48 + 2 * 2 * 3 * 8
    assert cost("aten::native_group_norm", dims, [F64] * 3 + types[3:], concrete) == \
        OpCost(NORM, 300, 480 + 480 + 48 + 48 + 96, "fp64", False)


def test_a_group_norm_without_weight_or_bias_is_read_by_its_inputs_dtype():
    # x [2, 6, 5] double, no weight, a bf16 weight without a bias: mean and rstd in double for a double input
    types = ["", "", "", "Int", "Int", "Int", "Int", "Double"]
    concrete = ["", "", "", "2", "6", "5", "3", "1e-05"]
    dims = [[2, 6, 5], [], [], [], [], [], [], []]
    assert cost("aten::native_group_norm", dims, [F64] + types[1:], concrete) == \
        OpCost(NORM, 300, 480 + 480 + 2 * 2 * 3 * 8, "fp64", False)
    assert cost("aten::native_group_norm", [[2, 6, 5], [6], *dims[2:]], [BF16, BF16] + types[2:], concrete) == \
        OpCost(NORM, 300, 120 + 120 + 12 + 2 * 2 * 3 * 4, "bf16", False)


def test_softmax_reads_and_writes_its_input_five_flops_an_element():
    assert cost("aten::softmax", [[2, 3], [], []], [BF16, "Int", "ScalarType"], ["", "-1", ""]) == \
        OpCost(SOFTMAX, 30, 12 + 12, "bf16", False)


@pytest.mark.parametrize("name", ["aten::native_layer_norm", "aten::_fused_rms_norm", "aten::native_group_norm",
                                  "aten::_softmax"])
def test_a_norm_or_softmax_without_an_input_tensor_has_no_figure(name):
    assert cost(name, [[], [6], [6]], ["Scalar", BF16, BF16], ["1", "[6]", "", "", "", "", "3"]) is None


# ---- copies and fills -----------------------------------------------------------------------------------------

def test_copy_reads_its_source_and_writes_its_destination_with_no_flops():
    # copy_(self bf16 [2, 3], src float [2, 3]): 12 written, 24 read; the row's dtype is the destination's
    assert cost("aten::copy_", [[2, 3], [2, 3], []], [BF16, F32, "Scalar"]) == OpCost(COPY, 0, 12 + 24, "bf16",
                                                                                        False)
    assert cost("aten::copy_", [[2, 3], []], [BF16, "Scalar"]) is None
    assert cost("aten::copy_", [[], [2, 3]], ["Scalar", F32]) is None


def test_fill_and_zero_write_each_element_once():
    assert cost("aten::fill_", [[2, 3], []], [F32, "Scalar"]) == OpCost(ELEMENTWISE, 6, 24, "fp32", False)
    assert cost("aten::zero_", [[2, 3]], [HALF]) == OpCost(ELEMENTWISE, 6, 12, "fp16", False)
    assert cost("aten::fill_", [[], []], ["Scalar", "Scalar"]) is None


def test_to_copy_writes_the_dtype_it_is_given_or_its_own():
    dims, types = [[2, 3], []], [F32, "ScalarType"]
    assert cost("aten::_to_copy", dims, types, ["", "15"]) == OpCost(COPY, 0, 24 + 6 * 2, "fp32", False)  # to bf16
    assert cost("aten::_to_copy", dims, types, ["", "7"]) == OpCost(COPY, 0, 24 + 6 * 8, "fp32", False)  # to double
    for same in ([], ["", ""], ["", "[]"], ["", "99"]):  # no dtype or an unknown one: a device copy
        assert cost("aten::_to_copy", dims, types, same) == OpCost(COPY, 0, 24 + 24, "fp32", False)
    assert cost("aten::_to_copy", [[], []], ["Scalar", "ScalarType"], ["", "15"]) is None


def test_clone_reads_and_writes_its_input():
    assert cost("aten::clone", [[2, 3], []], [BF16, "Scalar"]) == OpCost(COPY, 0, 12 + 12, "bf16", False)
    assert cost("aten::clone", [[]], ["Scalar"]) is None
