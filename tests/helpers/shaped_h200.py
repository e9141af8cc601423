"""The real H200 fixture with the shapes ``record_shapes=True`` writes for its model, added to its CPU ops.

The fixture (tests/fixtures/README.md) was captured without shapes. Its model is 12 blocks of LayerNorm ->
Linear(3072, 9216) -> SDPA over [1, 24, 4096, 128] -> Linear(3072, 3072) -> residual add -> LayerNorm ->
Linear(3072, 12288) -> GELU (tanh) -> Linear(12288, 3072) -> residual add, on 4,096 tokens in bf16; the ops'
arguments below are laid out as torch records them (tests/test_trace_summary_flops.py reads the same fields
from real captures). Everything else in the trace (times, kernels, launches) is left as captured.
"""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "h200_dit_stack.pt.trace.json.gz"
D, TOKENS, HEADS, HEAD_DIM, FFN = 3072, 4096, 24, 128, 12288
BF16 = "c10::BFloat16"
# The block's four linears, in the order they run: (in features, out features)
LINEARS = ((D, 3 * D), (D, D), (D, FFN), (FFN, D))


def _args(dims: list, types: list, concrete: list) -> dict:
    return {"Input Dims": dims, "Input type": types, "Concrete Inputs": concrete}


def _norm() -> dict:
    return _args([[1, TOKENS, D], [], [D], [D], []], [BF16, "ScalarList", BF16, BF16, "Scalar"],
                 ["", f"[{D}]", "", "", "1e-06"])


def shapes_for(name: str, nth: dict[str, int]) -> dict | None:
    """The recorded arguments of the ``nth[name]``-th call of ``name`` (counted over the whole trace)."""
    i = nth[name] = nth.get(name, -1) + 1
    qkv = [1, HEADS, TOKENS, HEAD_DIM]
    if name in ("aten::layer_norm", "aten::native_layer_norm"):
        return _norm()
    if name == "aten::linear":
        k, n = LINEARS[i % 4]
        return _args([[1, TOKENS, k], [n, k], [n]], [BF16] * 3, ["", "", ""])
    if name == "aten::addmm":
        k, n = LINEARS[i % 4]
        return _args([[n], [TOKENS, k], [k, n], [], []], [BF16] * 3 + ["Scalar"] * 2, ["", "", "", "1", "1"])
    if name == "aten::scaled_dot_product_attention":
        return _args([qkv] * 3 + [[]] * 5, [BF16] * 3 + ["", "Scalar", "Scalar", "", "Scalar"],
                     ["", "", "", "", "0.", "False", "", "False"])
    if name == "aten::_scaled_dot_product_cudnn_attention":
        return _args([qkv] * 3 + [[]] * 6, [BF16] * 3 + ["", "Scalar", "Scalar", "Scalar", "Scalar", ""],
                     ["", "", "", "", "False", "0.", "False", "False", ""])
    if name == "aten::_cudnn_attention_forward":
        return _args([qkv] * 3 + [[]] * 10, [BF16] * 3 + ["", "", "", "Scalar", "Scalar", "Scalar", "Scalar",
                                                          "Scalar", "Scalar", ""],
                     ["", "", "", "", "", "", f"{TOKENS}", f"{TOKENS}", "False", "0.", "False", "False", ""])
    if name == "aten::gelu":
        return _args([[1, TOKENS, FFN]], [BF16], ["", "tanh"])
    if name == "aten::add":
        return _args([[1, TOKENS, D], [1, TOKENS, D], []], [BF16, BF16, "Scalar"], ["", "", "1"])
    return None


def shaped_h200(out_dir: os.PathLike | str, with_torch_flops: bool = False) -> Path:
    """Write the shaped copy under ``out_dir``; ``with_torch_flops`` also adds the ``flops`` argument that
    ``with_flops=True`` writes (torch counts 2*M*K*N for addmm)."""
    with gzip.open(FIXTURE, "rt", encoding="utf-8") as f:
        doc = json.load(f)
    nth: dict[str, int] = {}
    ops = sorted((e for e in doc["traceEvents"] if e.get("cat") == "cpu_op"), key=lambda e: (e["ts"], -e["dur"]))
    for ev in ops:
        extra = shapes_for(ev["name"], nth)
        if extra is not None:
            ev["args"].update(extra)
            if with_torch_flops and ev["name"] == "aten::addmm":
                k, n = extra["Input Dims"][1][1], extra["Input Dims"][2][1]
                ev["args"]["flops"] = 2 * TOKENS * k * n
    path = Path(out_dir) / "h200_dit_shapes.pt.trace.json.gz"
    with gzip.open(path, "wt", encoding="utf-8") as f:
        json.dump(doc, f)
    return path


def fp8_variant(out_dir: os.PathLike | str, speedup: float = 1.6) -> Path:
    """The shaped copy as if its GEMMs ran in fp8: each ``aten::addmm`` an ``aten::_scaled_mm`` (fp8 inputs,
    per-tensor scales, bf16 bias and output) and each GEMM kernel ``speedup`` times shorter."""
    src = shaped_h200(out_dir)
    with gzip.open(src, "rt", encoding="utf-8") as f:
        doc = json.load(f)
    fp8 = "c10::Float8_e4m3fn"
    for ev in doc["traceEvents"]:
        if ev.get("cat") == "cpu_op" and ev["name"] == "aten::addmm":
            bias, a, b = ev["args"]["Input Dims"][:3]
            ev["name"] = "aten::_scaled_mm"
            ev["args"].update(_args([a, b, [], [], bias, [], [], []],
                                    [fp8, fp8, "float", "float", BF16, "", "Scalar", "Scalar"],
                                    ["", "", "", "", "", "", "15", "False"]))
        elif ev.get("cat") == "kernel" and ev["name"].startswith("nvjet"):
            ev["dur"] = ev["dur"] / speedup
    path = Path(out_dir) / "h200_dit_fp8.pt.trace.json.gz"
    with gzip.open(path, "wt", encoding="utf-8") as f:
        json.dump(doc, f)
    return path
