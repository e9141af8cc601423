"""FLOPs and bytes of one op from the shapes ``record_shapes=True`` writes (``Input Dims``, ``Input type``,
``Concrete Inputs``): pure functions, no torch.

    cost("aten::addmm", [[9216], [4096, 3072], [3072, 9216], [], []], ["c10::BFloat16"] * 3 + ["Scalar"] * 2, [])
    # OpCost(op_class="GEMM", flops=2*4096*3072*9216, bytes=..., dtype="bf16", matrix=True)

FLOPs of the matrix ops (GEMMs, convolutions, attention) are the ones ``torch.utils.flop_counter.FlopCounterMode``
counts for the same shapes (a multiply-add is 2 FLOPs; bias adds are not counted), except causal attention,
which counts half (the masked half is skipped by every fused kernel; FlopCounterMode counts the full square).
They run on the matrix units and make the step's MFU. The other ops (norms, softmax, activations, elementwise,
copies) are bound by memory; their FLOPs (FlopCounterMode counts none) are counted per element only to place
them on the roofline: 1 per output element for elementwise ops and activations (torch's own ``with_flops``
count for ``aten::add``/``aten::mul``), 5 for layer/group norm, 4 for RMS norm, 5 for softmax, 0 for copies.

Bytes are the ideal traffic: every tensor input read once, every output written once (in place: the first
input is also the output). An op this module has no model for, or whose shapes are missing or do not fit the
model, gets ``None``: it is counted as time without a model, never guessed.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

# Kineto's ``Input type`` strings -> (bytes per element, the peak table's dtype key)
DTYPES: dict[str, tuple[int, str]] = {
    "float": (4, "fp32"), "double": (8, "fp64"), "c10::BFloat16": (2, "bf16"), "c10::Half": (2, "fp16"),
    "c10::Float8_e4m3fn": (1, "fp8"), "c10::Float8_e5m2": (1, "fp8"), "c10::Float8_e4m3fnuz": (1, "fp8"),
    "c10::Float8_e5m2fnuz": (1, "fp8"), "c10::Float8_e8m0fnu": (1, "fp8"), "c10::Float4_e2m1fn_x2": (1, "fp4"),
    "long int": (8, "int"), "int": (4, "int"), "short int": (2, "int"), "signed char": (1, "int"),
    "unsigned char": (1, "int"), "bool": (1, "int"), "c10::complex<float>": (8, "fp32"),
    "c10::complex<double>": (16, "fp64"), "c10::complex<c10::Half>": (4, "fp16"),
}
# torch ScalarType numbers (``out_dtype`` of _scaled_mm, ``dtype`` of _to_copy in Concrete Inputs) -> bytes
SCALAR_TYPE_BYTES = {0: 1, 1: 1, 2: 2, 3: 4, 4: 8, 5: 2, 6: 4, 7: 8, 11: 1, 15: 2, 23: 1, 24: 1, 25: 1, 26: 1}

GEMM, ATTENTION, CONV = "GEMM", "attention", "convolution"
NORM, SOFTMAX, ACTIVATION, ELEMENTWISE, COPY = "normalization", "softmax", "activation", "elementwise", "copy"
MATRIX_CLASSES = frozenset({GEMM, ATTENTION, CONV})


@dataclass(frozen=True)
class OpCost:
    op_class: str  # GEMM, attention, convolution, normalization, softmax, activation, elementwise, copy
    flops: int
    bytes: int
    dtype: str  # the peak table's key of the op's inputs: "bf16", "fp16", "fp8", "fp32", ...
    matrix: bool  # FLOPs on the matrix units (GEMM, convolution, attention): counted in the step's MFU


class _Args:
    """One op's recorded arguments, by position."""

    def __init__(self, dims: Sequence[Any], types: Sequence[Any], concrete: Sequence[Any]) -> None:
        self.dims, self.types, self.concrete = dims, types, concrete

    def shape(self, i: int) -> list[int] | None:
        """The i-th argument's shape when it is a tensor (a 0-dim tensor and a scalar both read as None)."""
        if i >= len(self.dims):
            return None
        d = self.dims[i]
        if not isinstance(d, list) or not d or not all(isinstance(x, int) and x >= 0 for x in d):
            return None
        return d

    def itemsize(self, i: int) -> int:
        return DTYPES.get(self.types[i] if i < len(self.types) else "", (0, ""))[0]

    def dtype(self, i: int) -> str:
        return DTYPES.get(self.types[i] if i < len(self.types) else "", (0, "?"))[1]

    def nbytes(self, i: int) -> int:
        s = self.shape(i)
        return 0 if s is None else math.prod(s) * self.itemsize(i)

    def flag(self, i: int) -> bool:
        return i < len(self.concrete) and self.concrete[i] in ("True", "1")

    def ints(self, i: int) -> list[int] | None:
        """An int[] or int argument written as text in Concrete Inputs ("[2, 2]", "1")."""
        if i >= len(self.concrete) or not isinstance(self.concrete[i], str) or not self.concrete[i]:
            return None
        try:
            return [int(x) for x in self.concrete[i].strip().strip("[]").split(",") if x.strip()]
        except ValueError:
            return None

    def tensors(self) -> list[int]:
        return [i for i in range(len(self.dims)) if self.shape(i) is not None and self.itemsize(i)]


def _gemm(m: int, k: int, n: int, batch: int, a: _Args, ia: int, read: int, out_itemsize: int | None = None
          ) -> OpCost:
    out = batch * m * n * (out_itemsize if out_itemsize is not None else a.itemsize(ia))
    return OpCost(GEMM, 2 * batch * m * k * n, read + out, a.dtype(ia), True)


def _mm(a: _Args) -> OpCost | None:
    x, y = a.shape(0), a.shape(1)
    if x is None or y is None or len(x) != 2 or len(y) != 2 or x[1] != y[0]:
        return None
    return _gemm(x[0], x[1], y[1], 1, a, 0, a.nbytes(0) + a.nbytes(1))


def _addmm(a: _Args) -> OpCost | None:  # addmm(bias, a, b), _addmm_activation too
    x, y = a.shape(1), a.shape(2)
    if x is None or y is None or len(x) != 2 or len(y) != 2 or x[1] != y[0]:
        return None
    return _gemm(x[0], x[1], y[1], 1, a, 1, a.nbytes(0) + a.nbytes(1) + a.nbytes(2))


def _bmm(a: _Args, first: int = 0) -> OpCost | None:  # bmm(a, b); baddbmm(self, a, b) with first=1
    x, y = a.shape(first), a.shape(first + 1)
    if x is None or y is None or len(x) != 3 or len(y) != 3 or x[0] != y[0] or x[2] != y[1]:
        return None
    return _gemm(x[1], x[2], y[2], x[0], a, first, sum(a.nbytes(i) for i in range(first + 2)))


def _matmul(a: _Args) -> OpCost | None:
    """torch.matmul's broadcasting: 1-D operands are a row or a column, leading dimensions are batches."""
    x, y = a.shape(0), a.shape(1)
    if x is None or y is None:
        return None
    m, k = (1, x[0]) if len(x) == 1 else (x[-2], x[-1])
    k2, n = (y[0], 1) if len(y) == 1 else (y[-2], y[-1])
    if k != k2:
        return None
    bx, by = x[:-2], y[:-2]
    width = max(len(bx), len(by))
    bx, by = [1] * (width - len(bx)) + bx, [1] * (width - len(by)) + by
    if any(p != q and 1 not in (p, q) for p, q in zip(bx, by, strict=True)):
        return None
    batch = math.prod(max(p, q) for p, q in zip(bx, by, strict=True))
    return _gemm(m, k, n, batch, a, 0, a.nbytes(0) + a.nbytes(1))


def _linear(a: _Args) -> OpCost | None:  # linear(input [..., K], weight [N, K], bias [N]?)
    x, w = a.shape(0), a.shape(1)
    if x is None or w is None or len(w) != 2 or x[-1] != w[1]:
        return None
    return _gemm(math.prod(x[:-1]), x[-1], w[0], 1, a, 0, a.nbytes(0) + a.nbytes(1) + a.nbytes(2))


def _scaled_mm(a: _Args) -> OpCost | None:  # _scaled_mm(a, b, scale_a, scale_b, bias, scale_result, out_dtype)
    x, y = a.shape(0), a.shape(1)
    if x is None or y is None or len(x) != 2 or len(y) != 2 or x[1] != y[0]:
        return None
    out_type = a.ints(6)
    out_size = SCALAR_TYPE_BYTES.get(out_type[0]) if out_type else None
    return _gemm(x[0], x[1], y[1], 1, a, 0, sum(a.nbytes(i) for i in range(6)), out_size)


# Attention lowerings: name -> (layout, position of is_causal in Concrete Inputs or None, position of the
# efficient kernel's custom_mask_type or None). "bhsd": [batch, heads, seq, dim]; "bshd": [batch, seq, heads, dim].
_ATTENTION = {
    "aten::scaled_dot_product_attention": ("bhsd", 5, None),
    "aten::_scaled_dot_product_flash_attention": ("bhsd", 4, None),
    "aten::_scaled_dot_product_flash_attention_for_cpu": ("bhsd", 4, None),
    "aten::_scaled_dot_product_efficient_attention": ("bhsd", 6, None),
    "aten::_scaled_dot_product_cudnn_attention": ("bhsd", 6, None),
    "aten::_scaled_dot_product_fused_attention_overrideable": ("bhsd", 5, None),
    "aten::_cudnn_attention_forward": ("bhsd", 10, None),
    "aten::_flash_attention_forward": ("bshd", 8, None),
    "aten::_efficient_attention_forward": ("bshd", None, 9),
}


def _attention(name: str, a: _Args) -> OpCost | None:
    """QK^T and PV: 4 * batch * heads_q * s_q * s_k * d (d_v for PV), GQA by the query's heads; causal: half.
    Variable-length (3-D, packed) inputs have their lengths in tensors the trace does not record: no model."""
    layout, causal_at, mask_at = _ATTENTION[name]
    q, k, v = a.shape(0), a.shape(1), a.shape(2)
    if q is None or k is None or v is None or not len(q) == len(k) == len(v) == 4:
        return None
    if layout == "bshd":
        q, k, v = ([s[0], s[2], s[1], s[3]] for s in (q, k, v))
    b, h, sq, d = q
    hk, sk, dv = k[1], k[2], v[3]
    if k[0] != b or v[0] != b or k[3] != d or v[1] != hk or v[2] != sk or hk == 0 or h % hk:
        return None
    flops = 2 * b * h * sq * sk * d + 2 * b * h * sq * sk * dv
    causal = a.flag(causal_at) if causal_at is not None else (mask_at is not None and a.ints(mask_at) not in
                                                                (None, [0]))
    if causal:
        flops //= 2
    out = b * h * sq * dv * a.itemsize(0)
    return OpCost(ATTENTION, flops, a.nbytes(0) + a.nbytes(1) + a.nbytes(2) + out, a.dtype(0), True)


# Convolutions: name -> positions of (input, weight, bias, stride, padding, dilation, transposed, output_padding,
# groups); None where the op has no such argument (then: no bias, stride/dilation 1, padding 0, not transposed).
_CONV = {
    "aten::convolution": (0, 1, 2, 3, 4, 5, 6, 7, 8),
    "aten::_convolution": (0, 1, 2, 3, 4, 5, 6, 7, 8),
    "aten::conv1d": (0, 1, 2, 3, 4, 5, None, None, 6),
    "aten::conv2d": (0, 1, 2, 3, 4, 5, None, None, 6),
    "aten::conv3d": (0, 1, 2, 3, 4, 5, None, None, 6),
    "aten::cudnn_convolution": (0, 1, None, 3, 2, 4, None, None, 5),
    "aten::cudnn_convolution_transpose": (0, 1, None, 4, 2, 5, "T", 3, 6),
    "aten::mkldnn_convolution": (0, 1, 2, 4, 3, 5, None, None, 6),
    "aten::_slow_conv2d_forward": (0, 1, 3, 4, 5, None, None, None, None),
}


def _conv(name: str, a: _Args) -> OpCost | None:
    """FlopCounterMode's count: 2 * batch * w[0] * w[1] * prod(kernel) * prod(output spatial) (input spatial
    when transposed); the output's shape from stride, padding and dilation."""
    ix, iw, ib, istride, ipad, idil, itr, iopad, igroups = _CONV[name]
    x, w = a.shape(ix), a.shape(iw)
    if x is None or w is None or len(x) != len(w) or len(x) < 3:
        return None
    dims = len(x) - 2
    transposed = itr == "T" or (isinstance(itr, int) and a.flag(itr))

    def arg(i: int | str | None, default: int) -> list[int]:
        v = a.ints(i) if isinstance(i, int) else None
        return v * dims if v is not None and len(v) == 1 else v if v is not None and len(v) == dims else (
            [default] * dims)

    stride, pad, dil, opad = arg(istride, 1), arg(ipad, 0), arg(idil, 1), arg(iopad, 0)
    groups = (a.ints(igroups) or [1])[0] if isinstance(igroups, int) else 1
    kernel = w[2:]
    if transposed:
        spatial = [(x[2 + i] - 1) * stride[i] - 2 * pad[i] + dil[i] * (kernel[i] - 1) + opad[i] + 1
                   for i in range(dims)]
        c_out = w[1] * groups
    else:
        spatial = [(x[2 + i] + 2 * pad[i] - dil[i] * (kernel[i] - 1) - 1) // stride[i] + 1 for i in range(dims)]
        c_out = w[0]
    if min(spatial) <= 0:
        return None
    counted = x[2:] if transposed else spatial
    flops = 2 * math.prod(counted) * math.prod(kernel) * x[0] * w[0] * w[1]
    out = x[0] * c_out * math.prod(spatial) * a.itemsize(ix)
    bias = a.nbytes(ib) if isinstance(ib, int) else 0
    return OpCost(CONV, flops, a.nbytes(ix) + a.nbytes(iw) + bias + out, a.dtype(ix), True)


def _layer_norm(a: _Args) -> OpCost | None:  # native_layer_norm(input, normalized_shape, weight, bias, eps)
    x, norm = a.shape(0), a.ints(1)
    if x is None:
        return None
    n = math.prod(x)
    rows = n // math.prod(norm) if norm and math.prod(norm) else n
    stats = 2 * rows * 4 if a.itemsize(0) < 8 else 2 * rows * 8  # mean and rstd, in float (double for double)
    return OpCost(NORM, 5 * n, 2 * a.nbytes(0) + a.nbytes(2) + a.nbytes(3) + stats, a.dtype(0), False)


def _rms_norm(a: _Args) -> OpCost | None:  # _fused_rms_norm(input, normalized_shape, weight, eps) -> (out, rstd)
    x, norm = a.shape(0), a.ints(1)
    if x is None:
        return None
    n = math.prod(x)
    rows = n // math.prod(norm) if norm and math.prod(norm) else n
    return OpCost(NORM, 4 * n, 2 * a.nbytes(0) + a.nbytes(2) + rows * 4, a.dtype(0), False)


def _group_norm(a: _Args) -> OpCost | None:  # native_group_norm(input, weight, bias, N, C, HxW, group, eps)
    x, groups = a.shape(0), a.ints(6)
    if x is None:
        return None
    stats = 2 * x[0] * (groups[0] if groups else 1) * (4 if a.itemsize(0) < 8 else 8)
    return OpCost(NORM, 5 * math.prod(x), 2 * a.nbytes(0) + a.nbytes(1) + a.nbytes(2) + stats, a.dtype(0), False)


def _softmax(a: _Args) -> OpCost | None:  # _softmax(self, dim, half_to_float)
    x = a.shape(0)
    if x is None:
        return None
    n = math.prod(x)
    out = n * (4 if a.flag(2) else a.itemsize(0))
    return OpCost(SOFTMAX, 5 * n, a.nbytes(0) + out, a.dtype(0), False)


def _broadcast(shapes: list[list[int]]) -> list[int] | None:
    width = max(len(s) for s in shapes)
    out = []
    for i in range(width):
        sizes = {s[i - width + len(s)] for s in shapes if i - width + len(s) >= 0} - {1}
        if len(sizes) > 1:
            return None
        out.append(sizes.pop() if sizes else 1)
    return out


def _elementwise(op_class: str, in_place: bool, a: _Args) -> OpCost | None:
    """Unary and binary elementwise ops: inputs read once, the broadcast output written once (in place: into the
    first input); 1 FLOP per output element. The output has the widest input's element size. MODELS binds the
    class and in_place with functools.partial: a closure built at import would be out of mutation testing's
    reach (benchmarks/mutation.py)."""
    tensors = a.tensors()
    if not tensors:
        return None
    shapes = [a.shape(i) for i in tensors]
    out = _broadcast([s for s in shapes if s is not None])
    if out is None:
        return None
    n = math.prod(out)
    size = a.itemsize(0) if in_place and 0 in tensors else max(a.itemsize(i) for i in tensors)
    return OpCost(op_class, n, sum(a.nbytes(i) for i in tensors) + n * size, a.dtype(tensors[0]), False)


def _copy_(a: _Args) -> OpCost | None:  # copy_(self, src): src read, self written (a cast when types differ)
    if a.shape(0) is None or a.shape(1) is None:
        return None
    return OpCost(COPY, 0, a.nbytes(0) + a.nbytes(1), a.dtype(0), False)


def _fill(a: _Args) -> OpCost | None:  # fill_(self, value), zero_(self): written only
    x = a.shape(0)
    return None if x is None else OpCost(ELEMENTWISE, math.prod(x), a.nbytes(0), a.dtype(0), False)


def _to_copy(a: _Args) -> OpCost | None:  # _to_copy(self, dtype=...): a cast or a device copy
    x = a.shape(0)
    if x is None:
        return None
    want = a.ints(1)
    out = SCALAR_TYPE_BYTES.get(want[0], a.itemsize(0)) if want else a.itemsize(0)
    return OpCost(COPY, 0, a.nbytes(0) + math.prod(x) * out, a.dtype(0), False)


def _clone(a: _Args) -> OpCost | None:
    return None if a.shape(0) is None else OpCost(COPY, 0, 2 * a.nbytes(0), a.dtype(0), False)


_ACTIVATIONS = ("gelu", "silu", "relu", "sigmoid", "tanh", "hardswish", "leaky_relu", "elu", "mish", "softplus")
_BINARY = ("add", "sub", "mul", "div", "maximum", "minimum", "pow", "where", "lerp", "addcmul", "addcdiv")
_UNARY = ("exp", "neg", "rsqrt", "sqrt", "abs", "reciprocal", "sin", "cos", "log", "clamp", "erf")

MODELS: dict[str, Any] = {
    "aten::mm": _mm, "aten::addmm": _addmm, "aten::_addmm_activation": _addmm, "aten::bmm": _bmm,
    "aten::baddbmm": lambda a: _bmm(a, 1), "aten::matmul": _matmul, "aten::linear": _linear,
    "aten::_scaled_mm": _scaled_mm,
    "aten::native_layer_norm": _layer_norm, "aten::layer_norm": _layer_norm, "aten::_fused_rms_norm": _rms_norm,
    "aten::native_group_norm": _group_norm, "aten::_softmax": _softmax, "aten::softmax": _softmax,
    "aten::copy_": _copy_, "aten::fill_": _fill, "aten::zero_": _fill, "aten::_to_copy": _to_copy,
    "aten::clone": _clone,
}
for _name in _ATTENTION:
    MODELS[_name] = (lambda n: lambda a: _attention(n, a))(_name)
for _name in _CONV:
    MODELS[_name] = (lambda n: lambda a: _conv(n, a))(_name)
for _op in _ACTIVATIONS:
    MODELS[f"aten::{_op}"] = functools.partial(_elementwise, ACTIVATION, False)
    MODELS[f"aten::{_op}_"] = functools.partial(_elementwise, ACTIVATION, True)
for _op in _BINARY + _UNARY:
    MODELS[f"aten::{_op}"] = functools.partial(_elementwise, ELEMENTWISE, False)
    MODELS[f"aten::{_op}_"] = functools.partial(_elementwise, ELEMENTWISE, True)

MODELED = frozenset(MODELS)  # the op names whose shapes the pass keeps

# Each modeled op's class by name alone: what a trace without shapes can still be told.
CLASS_OF: dict[str, str] = {
    **dict.fromkeys(("aten::mm", "aten::addmm", "aten::_addmm_activation", "aten::bmm", "aten::baddbmm",
                     "aten::matmul", "aten::linear", "aten::_scaled_mm"), GEMM),
    **dict.fromkeys(_ATTENTION, ATTENTION), **dict.fromkeys(_CONV, CONV),
    **dict.fromkeys(("aten::native_layer_norm", "aten::layer_norm", "aten::_fused_rms_norm",
                     "aten::native_group_norm"), NORM),
    "aten::_softmax": SOFTMAX, "aten::softmax": SOFTMAX,
    **dict.fromkeys(("aten::copy_", "aten::_to_copy", "aten::clone"), COPY),
    **{f"aten::{op}{tail}": ACTIVATION for op in _ACTIVATIONS for tail in ("", "_")},
    **{f"aten::{op}{tail}": ELEMENTWISE for op in _BINARY + _UNARY for tail in ("", "_")},
    "aten::fill_": ELEMENTWISE, "aten::zero_": ELEMENTWISE,
}
assert set(CLASS_OF) == MODELED


def cost(name: str, dims: Any, types: Any, concrete: Any = ()) -> OpCost | None:
    """The op's FLOPs and bytes from its recorded arguments; None without a model or with shapes that do not fit."""
    model = MODELS.get(name)
    if model is None or not isinstance(dims, list) or not isinstance(types, list):
        return None
    try:
        return model(_Args(dims, types, concrete if isinstance(concrete, list) else []))
    except (TypeError, ValueError, IndexError, ZeroDivisionError):  # a malformed field: no figure, not a crash
        return None


def signature(dims: Any, types: Any) -> str:
    """``[4096, 3072] x [3072, 9216] bf16``: the tensor shapes and the first tensor's dtype, for a row's name."""
    if not isinstance(dims, list) or not isinstance(types, list):
        return ""
    a = _Args(dims, types, [])
    tensors = a.tensors()
    shapes = " x ".join(str(a.shape(i)) for i in tensors)
    return f"{shapes} {a.dtype(tensors[0])}" if tensors else ""
