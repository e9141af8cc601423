"""What the GPU can do: dense peak TFLOP/s per dtype and memory bandwidth, matched from the trace's device name.

    peak_for("NVIDIA H200", 150109880320)   # PeakSpec(gpu="H200 SXM", tflops={"bf16": 989.4, ...}, tbps=4.8, ...)
    parse_peak("989,4.8")                   # the --peak override: one TFLOP/s figure for every dtype, and TB/s

Figures are dense (no 2:4 sparsity: vendors' headline numbers are often sparse, i.e. twice these), from the
vendor's datasheet or whitepaper named in each row; the GeForce rows are the FP32-accumulate figures (what
PyTorch's GEMMs use), half of the FP16-accumulate ones. ``fp32`` is the CUDA cores' peak (no tensor cores):
the roof of the vector ops, and of fp32 GEMMs under PyTorch's default ``torch.backends.cuda.matmul.allow_tf32
= False``; fp32 convolutions use ``tf32`` (cuDNN's default ``allow_tf32 = True``). A device not in the table,
or a CPU trace, has no peak: ``--peak TFLOPS,TBps`` gives one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .model import PeakSpec


@dataclass(frozen=True)
class GpuPeak:
    gpu: str
    pattern: str  # matched against the device name (case-insensitive), first row first
    fp8: float | None
    bf16: float  # = fp16
    tf32: float
    fp32: float
    tbps: float
    source: str


_HOPPER = "NVIDIA H100/H200 Tensor Core GPU datasheets (dense; the sparse figures halved)"
PEAKS: tuple[GpuPeak, ...] = (
    GpuPeak("H200 NVL", r"H200 NVL", 1670, 835, 417.5, 60, 4.8, _HOPPER),
    GpuPeak("H200 SXM", r"H200", 1979, 989.4, 494.7, 66.9, 4.8, _HOPPER),
    GpuPeak("H100 NVL", r"H100 NVL", 1670, 835, 417.5, 60, 3.9, _HOPPER),
    GpuPeak("H100 PCIe", r"H100.*PCIe", 1513, 756.5, 378, 51.2, 2.0, _HOPPER),
    GpuPeak("H100 SXM", r"H100", 1979, 989.4, 494.7, 66.9, 3.35, _HOPPER),
    GpuPeak("H20", r"\bH20\b", 296, 148, 74, 44, 4.0,
            "NVIDIA HGX H20 product brief, as published by NVIDIA's partners (dense)"),
    GpuPeak("A100 80GB PCIe", r"A100.*80GB.*PCIe|A100.*PCIe.*80GB", None, 312, 156, 19.5, 1.935,
            "NVIDIA A100 Tensor Core GPU datasheet (dense)"),
    GpuPeak("A100 80GB SXM", r"A100.*80GB", None, 312, 156, 19.5, 2.039,
            "NVIDIA A100 Tensor Core GPU datasheet (dense)"),
    GpuPeak("A100 40GB", r"A100", None, 312, 156, 19.5, 1.555, "NVIDIA A100 Tensor Core GPU datasheet (dense)"),
    GpuPeak("L40S", r"L40S", 733, 362.05, 183, 91.6, 0.864, "NVIDIA L40S datasheet (dense; sparse halved)"),
    GpuPeak("L20", r"\bL20\b", 239, 119.5, 59.8, 59.8, 0.864, "NVIDIA L20 product brief (dense; sparse halved)"),
    GpuPeak("RTX 4090", r"RTX 4090", 330.3, 165.2, 82.6, 82.6, 1.008,
            "NVIDIA Ada Lovelace GPU architecture whitepaper, appendix (dense, FP32 accumulate)"),
    GpuPeak("RTX 5090", r"RTX 5090", 419, 209.5, 104.8, 104.8, 1.792,
            "NVIDIA RTX Blackwell GPU architecture whitepaper (dense, FP32 accumulate)"),
    GpuPeak("B200", r"B200", 4500, 2250, 1100, 75, 7.7, "NVIDIA HGX B200 datasheet, per GPU (dense; sparse halved)"),
)
A100_80GB_BYTES = 60 * 2**30  # an "A100" name without its size: the 80 GB model above this much memory

DTYPE_COLUMN = {"fp8": "fp8", "bf16": "bf16", "fp16": "bf16", "tf32": "tf32", "fp32": "fp32"}


def peak_for(device: str, memory_bytes: int | None = None) -> PeakSpec | None:
    """The table's row for a device name (``deviceProperties[].name``), None when it is not in the table."""
    for row in PEAKS:
        if re.search(row.pattern, device, re.IGNORECASE):
            if row.gpu == "A100 40GB" and memory_bytes and memory_bytes > A100_80GB_BYTES:
                row = next(r for r in PEAKS if r.gpu == "A100 80GB SXM")
            tflops = {"bf16": row.bf16, "tf32": row.tf32, "fp32": row.fp32}
            if row.fp8 is not None:
                tflops["fp8"] = row.fp8
            return PeakSpec(device=device, gpu=row.gpu, tflops=tflops, tbps=row.tbps, source=row.source)
    return None


def parse_peak(text: str, device: str = "") -> PeakSpec:
    """``--peak TFLOPS,TBps``: one compute peak for every dtype and the memory bandwidth; ValueError when bad."""
    parts = text.split(",")
    try:
        if len(parts) != 2:
            raise ValueError
        tflops, tbps = float(parts[0]), float(parts[1])
    except ValueError:
        raise ValueError(f"--peak wants TFLOPS,TBps (two numbers, e.g. 989,4.8), got {text!r}") from None
    if not (0 < tflops < 1e7 and 0 < tbps < 1e5):
        raise ValueError(f"--peak wants two positive numbers (TFLOP/s, TB/s), got {text!r}")
    return PeakSpec(device=device, gpu="--peak", tflops={k: tflops for k in ("fp8", "bf16", "tf32", "fp32")},
                    tbps=tbps, source="given with --peak")


def peak_tflops(peak: PeakSpec, dtype: str, matrix: bool, op_class: str) -> float | None:
    """The compute roof of one op: its dtype's tensor-core peak for matrix ops (fp32 convolutions: tf32), the
    CUDA cores' fp32 peak for vector ops; None where the device has none for that dtype (fp8 on an A100)."""
    if not matrix:
        return peak.tflops.get("fp32")
    column = "tf32" if dtype == "fp32" and op_class == "convolution" else DTYPE_COLUMN.get(dtype)
    return peak.tflops.get(column) if column else None
