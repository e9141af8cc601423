"""The FLOP and byte models (lightx2v.trace_summary.flops) against torch on the same shapes.

Each case runs a real op under torch.profiler(record_shapes=True) (on CPU, or on the meta device for the CUDA
lowerings, which torch records the same way), reads the op's ``Input Dims``/``Input type``/``Concrete Inputs``
from the exported trace, and compares the model with ``torch.utils.flop_counter.FlopCounterMode`` on the same
call (FLOPs) and with the real tensors' sizes (bytes: every input and output once).
"""

from __future__ import annotations

import json
import math

import pytest
import torch
import torch.nn.functional as F
from torch.profiler import ProfilerActivity, profile
from torch.utils.flop_counter import FlopCounterMode

from lightx2v.trace_summary import flops

aten = torch.ops.aten
BF16_META = {"device": "meta", "dtype": torch.bfloat16}


def recorded(tmp_path, call, name: str) -> dict:
    """The args torch records for the first ``name`` op of ``call()``."""
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        call()
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    events = json.loads(path.read_text())["traceEvents"]
    return next(e["args"] for e in events if e.get("cat") == "cpu_op" and e["name"] == name)


def counted(call) -> int:
    with FlopCounterMode(display=False) as counter:
        call()
    return counter.get_total_flops()


def nbytes(*tensors) -> int:
    return sum(t.numel() * t.element_size() for t in tensors if isinstance(t, torch.Tensor))


def model(args: dict, name: str) -> flops.OpCost:
    c = flops.cost(name, args["Input Dims"], args["Input type"], args.get("Concrete Inputs", []))
    assert c is not None, name
    return c


x64 = torch.randn(64, 96)
w = torch.randn(96, 48)
bias = torch.randn(48)
b3 = torch.randn(4, 64, 96)
c3 = torch.randn(4, 96, 32)

# (trace op name, the call, the tensors it reads and writes for the byte reference, its class)
MATRIX_CASES = {
    "mm": ("aten::mm", lambda: torch.mm(x64, w), lambda out: nbytes(x64, w, out), flops.GEMM),
    "addmm": ("aten::addmm", lambda: torch.addmm(bias, x64, w), lambda out: nbytes(bias, x64, w, out), flops.GEMM),
    "bmm": ("aten::bmm", lambda: torch.bmm(b3, c3), lambda out: nbytes(b3, c3, out), flops.GEMM),
    "baddbmm": ("aten::baddbmm", lambda: torch.baddbmm(torch.zeros(4, 64, 32), b3, c3),
                lambda out: nbytes(out, b3, c3, out), flops.GEMM),
    "matmul broadcast": ("aten::matmul", lambda: torch.matmul(b3, w), lambda out: nbytes(b3, w, out), flops.GEMM),
    "linear": ("aten::linear", lambda: F.linear(x64, w.T.contiguous(), bias),
               lambda out: nbytes(x64, w, bias, out), flops.GEMM),
    "conv2d": ("aten::convolution",
               lambda: F.conv2d(torch.randn(2, 8, 17, 17), torch.randn(16, 8, 3, 3), stride=2, padding=1),
               lambda out: nbytes(torch.empty(2, 8, 17, 17), torch.empty(16, 8, 3, 3), out), flops.CONV),
    "conv2d groups dilation": ("aten::convolution",
                               lambda: F.conv2d(torch.randn(1, 8, 20, 20), torch.randn(8, 2, 3, 3), groups=4,
                                                dilation=2),
                               lambda out: nbytes(torch.empty(1, 8, 20, 20), torch.empty(8, 2, 3, 3), out),
                               flops.CONV),
    "conv3d": ("aten::convolution", lambda: F.conv3d(torch.randn(1, 4, 5, 9, 9), torch.randn(6, 4, 1, 3, 3)),
               lambda out: nbytes(torch.empty(1, 4, 5, 9, 9), torch.empty(6, 4, 1, 3, 3), out), flops.CONV),
    "conv_transpose2d": ("aten::convolution",
                         lambda: F.conv_transpose2d(torch.randn(1, 4, 8, 8), torch.randn(4, 3, 3, 3), stride=2),
                         lambda out: nbytes(torch.empty(1, 4, 8, 8), torch.empty(4, 3, 3, 3), out), flops.CONV),
}


@pytest.mark.parametrize("case", list(MATRIX_CASES))
def test_matrix_op_flops_match_flop_counter_mode_and_bytes_the_tensors(case, tmp_path):
    name, call, reads_writes, op_class = MATRIX_CASES[case]
    got = model(recorded(tmp_path, call, name), name)
    assert got.flops == counted(call)
    assert got.bytes == reads_writes(call())
    assert got.op_class == op_class and got.matrix and got.dtype == "fp32"


q = torch.empty(2, 8, 128, 64, **BF16_META)
kv_gqa = torch.empty(2, 2, 96, 64, **BF16_META)
v_dv = torch.empty(2, 8, 128, 32, **BF16_META)


def _t(t):
    return t.transpose(1, 2)


# The CUDA lowerings run on the meta device; (name, call, FlopCounterMode's reference call, q k v out, causal).
# ATen passes _flash_attention_forward and _efficient_attention_forward [batch, seq, heads, dim] (the public
# lowering's q.transpose(1, 2)); FlopCounterMode reads those two as [batch, heads, seq, dim], so their reference
# is its count of the public lowering on the same q, k, v.
ATTENTION_CASES = {
    "flash": ("aten::_scaled_dot_product_flash_attention", lambda: aten._scaled_dot_product_flash_attention(q, q, q),
              None, (q, q, q), False),
    "flash causal": ("aten::_scaled_dot_product_flash_attention",
                     lambda: aten._scaled_dot_product_flash_attention(q, q, q, 0.0, True), None, (q, q, q), True),
    "efficient": ("aten::_scaled_dot_product_efficient_attention",
                  lambda: aten._scaled_dot_product_efficient_attention(q, q, q, None, False), None, (q, q, q), False),
    "cudnn d_v": ("aten::_scaled_dot_product_cudnn_attention",
                  lambda: aten._scaled_dot_product_cudnn_attention(q, q, v_dv, None, False), None, (q, q, v_dv),
                  False),
    "flash_forward bshd causal": (
        "aten::_flash_attention_forward",
        lambda: aten._flash_attention_forward(_t(q), _t(q), _t(q), None, None, 128, 128, 0.0, True, False),
        lambda: aten._scaled_dot_product_flash_attention(q, q, q), (q, q, q), True),
    "efficient_forward bshd causal mask": (
        "aten::_efficient_attention_forward",
        lambda: aten._efficient_attention_forward(_t(q), _t(q), _t(q), None, None, None, 128, 128, 0.0, 1),
        lambda: aten._scaled_dot_product_efficient_attention(q, q, q, None, False), (q, q, q), True),
    "sdpa gqa": ("aten::scaled_dot_product_attention",
                 lambda: F.scaled_dot_product_attention(q, kv_gqa, kv_gqa, enable_gqa=True), None,
                 (q, kv_gqa, kv_gqa), False),
    "sdpa math cpu": ("aten::_scaled_dot_product_flash_attention_for_cpu",
                      lambda: F.scaled_dot_product_attention(*(torch.randn(1, 4, 33, 16),) * 3),
                      lambda: aten._scaled_dot_product_flash_attention(  # FlopCounterMode skips the CPU kernel
                          *(torch.empty(1, 4, 33, 16, device="meta"),) * 3),
                      (torch.empty(1, 4, 33, 16),) * 3, False),
}


@pytest.mark.parametrize("case", list(ATTENTION_CASES))
def test_attention_flops_match_flop_counter_mode_causal_half(case, tmp_path):
    name, call, reference, (tq, tk, tv), causal = ATTENTION_CASES[case]
    got = model(recorded(tmp_path, call, name), name)
    full = counted(reference or call)
    # FlopCounterMode counts the whole score matrix ("We aren't accounting for causal attention here"); fused
    # kernels skip the masked half, so a causal op counts half.
    assert got.flops == (full // 2 if causal else full)
    out = tq.numel() // tq.shape[-1] * tv.shape[-1] * tq.element_size()
    assert got.bytes == nbytes(tq, tk, tv) + out
    assert got.op_class == flops.ATTENTION and got.matrix


def test_cudnn_attention_forward_reads_bhsd_like_its_public_lowering(tmp_path):
    """aten::_cudnn_attention_forward (the launcher under cuDNN SDPA) has no meta kernel: its arguments are the
    public lowering's recorded ones laid out by its schema (q, k, v, attn_bias, cum_seq_q, cum_seq_k, max_q,
    max_k, compute_log_sumexp, dropout_p, is_causal)."""
    call = lambda: aten._scaled_dot_product_cudnn_attention(q, q, q, None, False, 0.0, True)  # noqa: E731
    args = recorded(tmp_path, call, "aten::_scaled_dot_product_cudnn_attention")
    dims = args["Input Dims"][:3] + [[], [], [], [], [], [], [], []]
    types = args["Input type"][:3] + ["", "", "", "Scalar", "Scalar", "Scalar", "Scalar", "Scalar"]
    concrete = ["", "", "", "", "", "", "128", "128", "False", "0.", "True"]
    got = flops.cost("aten::_cudnn_attention_forward", dims, types, concrete)
    assert got is not None and got.flops == counted(call) // 2


def test_scaled_mm_fp8_flops_and_bytes(tmp_path):
    a8 = torch.empty(64, 128, device="meta", dtype=torch.float8_e4m3fn)
    b8 = torch.empty(256, 128, device="meta", dtype=torch.float8_e4m3fn).t()
    one = torch.ones((), device="meta")

    def call():
        return aten._scaled_mm(a8, b8, one, one, out_dtype=torch.bfloat16)

    got = model(recorded(tmp_path, call, "aten::_scaled_mm"), "aten::_scaled_mm")
    assert got.flops == counted(call)
    assert got.bytes == nbytes(a8, b8, call())  # the 0-dim scales count as nothing
    assert got.dtype == "fp8" and got.op_class == flops.GEMM


def test_cudnn_convolution_reads_its_own_argument_order():
    """cudnn_convolution(self, weight, padding, stride, dilation, groups, ...) has no meta kernel; the reference is
    FlopCounterMode on aten::convolution with the same values."""
    x, wt = torch.randn(2, 8, 17, 17), torch.randn(16, 8, 3, 3)
    got = flops.cost("aten::cudnn_convolution", [list(x.shape), list(wt.shape), [], [], [], [], [], [], []],
                     ["float", "float"] + ["ScalarList"] * 3 + ["Scalar"] * 4,
                     ["", "", "[1, 1]", "[2, 2]", "[1, 1]", "1", "False", "False", "True"])
    assert got is not None
    assert got.flops == counted(lambda: F.conv2d(x, wt, stride=2, padding=1))


def _rms():
    return aten._fused_rms_norm(torch.randn(4, 6, 5, 5), [5, 5], torch.randn(5, 5), 1e-6)


xs = torch.randn(4, 6, 5, 5)
half = torch.randn(64, 96).to(torch.bfloat16)

# (name, call, the tensors read, class, FLOPs per element of the input). FlopCounterMode counts none of these.
VECTOR_CASES = {
    "layer_norm": ("aten::native_layer_norm", lambda: aten.native_layer_norm(xs, [5, 5], torch.randn(5, 5),
                                                                            torch.randn(5, 5), 1e-5),
                   lambda: [xs, torch.empty(5, 5), torch.empty(5, 5)], flops.NORM, 5),
    "rms_norm": ("aten::_fused_rms_norm", _rms, lambda: [xs, torch.empty(5, 5)], flops.NORM, 4),
    "group_norm": ("aten::native_group_norm", lambda: aten.native_group_norm(xs, torch.randn(6), torch.randn(6), 4,
                                                                            6, 25, 3, 1e-5),
                   lambda: [xs, torch.empty(6), torch.empty(6)], flops.NORM, 5),
    "softmax": ("aten::_softmax", lambda: torch.softmax(xs, -1), lambda: [xs], flops.SOFTMAX, 5),
    "gelu tanh": ("aten::gelu", lambda: F.gelu(half, approximate="tanh"), lambda: [half], flops.ACTIVATION, 1),
    "silu": ("aten::silu", lambda: F.silu(xs), lambda: [xs], flops.ACTIVATION, 1),
    "add broadcast": ("aten::add", lambda: xs + torch.randn(5, 5), lambda: [xs, torch.empty(5, 5)],
                      flops.ELEMENTWISE, 1),
    "mul scalar": ("aten::mul", lambda: xs * 2.0, lambda: [xs], flops.ELEMENTWISE, 1),
    "cast": ("aten::_to_copy", lambda: half.to(torch.float32), lambda: [half], flops.COPY, 0),
    "copy_": ("aten::copy_", lambda: torch.empty(64, 96, dtype=torch.bfloat16).copy_(x64), lambda: [x64],
              flops.COPY, 0),
}


@pytest.mark.parametrize("case", list(VECTOR_CASES))
def test_vector_op_bytes_are_its_tensors_and_flop_counter_mode_counts_none(case, tmp_path):
    name, call, reads, op_class, per_element = VECTOR_CASES[case]
    got = model(recorded(tmp_path, call, name), name)
    out = call()
    outs = out if isinstance(out, tuple) else (out,)
    assert got.bytes == nbytes(*reads(), *outs)
    assert got.flops == per_element * outs[0].numel()
    assert counted(call) == 0 and not got.matrix and got.op_class == op_class


def test_in_place_op_writes_its_first_input(tmp_path):
    a, b = torch.randn(64, 96), torch.randn(96)
    got = model(recorded(tmp_path, lambda: a.add_(b), "aten::add_"), "aten::add_")
    assert got.bytes == nbytes(a, b, a)


def test_shapes_that_do_not_fit_give_no_figure():
    assert flops.cost("aten::mm", [[64, 96], [95, 48]], ["float", "float"]) is None
    assert flops.cost("aten::mm", [], []) is None
    assert flops.cost("aten::mm", "[[64, 96]]", ["float"]) is None
    assert flops.cost("aten::_flash_attention_forward", [[300, 8, 64]] * 3, ["c10::BFloat16"] * 3) is None  # varlen
    assert flops.cost("aten::not_an_op", [[1]], ["float"]) is None
    assert flops.cost("aten::mm", [[64, 96], [96, 48]], ["float", "float"]) is not None


def test_signature_names_shapes_and_dtype():
    assert flops.signature([[9216], [4096, 3072], [3072, 9216], [], []],
                           ["c10::BFloat16"] * 3 + ["Scalar"] * 2) == "[9216] x [4096, 3072] x [3072, 9216] bf16"
    assert math.prod([4096, 3072]) == 4096 * 3072
