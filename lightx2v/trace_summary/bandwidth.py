"""Bandwidth of a collective, as nccl-tests reports it, against the link's peak.

    message_bytes("all_gather", in_nelems=1024, out_nelems=None, dtype="Float", ranks=4)   # S: 16384
    bus_factor("all_reduce", 8)                                                           # 2*(8-1)/8 = 1.75
    link_for("NVIDIA H100 80GB HBM3")                                                     # Link("NVLink 4", 450, ...)

nccl-tests (doc/PERFORMANCE.md): algbw = S / t, where S is the size in bytes of the operation: the buffer for
all-reduce, broadcast, reduce and all-to-all (each rank's whole send buffer), the total array (count per rank x
ranks) for all-gather and reduce-scatter; busbw = algbw x a factor that makes it comparable with the hardware's
bandwidth whatever the number of ranks n: all-reduce 2(n-1)/n, reduce-scatter, all-gather and all-to-all
(n-1)/n, broadcast, reduce and send/recv 1. Here t is the transfer: the time after the last rank arrived
(``comm_waits``), so a late peer does not count as a slow link. busbw is compared with one direction of the GPU's
fastest link (LINKS; a device not in it, or a CPU, has no peak), and the time each collective could win is its
transfer time less the time it would take at the target share of that peak (``efficiency.TARGET_PCT``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .comm import dtype_bytes


@dataclass(frozen=True)
class Link:
    name: str
    pattern: str  # matched against the trace's device name (case-insensitive), first row first
    gbps: float  # one direction, per GPU, GB/s
    source: str


_NVLINK4 = "NVIDIA H100 / H200 Tensor Core GPU datasheets: NVLink 900 GB/s per GPU, both directions"
_PCIE4 = "PCI-SIG: PCIe 4.0 x16, 16 GT/s x 16 lanes = 32 GB/s per direction (datasheets: 64 GB/s both ways)"
_PCIE5 = "PCI-SIG: PCIe 5.0 x16, 32 GT/s x 16 lanes = 64 GB/s per direction (datasheets: 128 GB/s both ways)"
# PCIe cards that can take an NVLink bridge (A100 PCIe, H100 PCIe) get the PCIe row: a trace does not say
# whether a bridge is fitted.
LINKS: tuple[Link, ...] = (
    Link("NVLink 5", r"B200|B100|GB200", 900, "NVIDIA HGX B200 datasheet: NVLink 1.8 TB/s per GPU, both directions"),
    Link("NVLink 4 (NVL bridge)", r"H200 NVL", 450, "NVIDIA H200 NVL datasheet: NVLink bridge 900 GB/s"),
    Link("NVLink 4 (NVL bridge)", r"H100 NVL", 300, "NVIDIA H100 NVL datasheet: NVLink bridge 600 GB/s"),
    Link("PCIe 5.0 x16", r"H100.*PCIe", 64, _PCIE5),
    Link("NVLink 4", r"H100|H200|\bH20\b", 450, _NVLINK4),
    Link("NVLink 4 (H800)", r"H800", 200, "NVIDIA H800 datasheet: NVLink 400 GB/s per GPU, both directions"),
    Link("PCIe 4.0 x16", r"A100.*PCIe", 32, _PCIE4),
    Link("NVLink 3", r"A100", 300, "NVIDIA A100 Tensor Core GPU datasheet: NVLink 600 GB/s per GPU, both "
                                   "directions"),
    Link("NVLink 3 (A800)", r"A800", 200, "NVIDIA A800 datasheet: NVLink 400 GB/s per GPU, both directions"),
    Link("PCIe 4.0 x16", r"L40S|\bL40\b|\bL20\b|RTX 4090|RTX 6000 Ada", 32, _PCIE4),
    Link("PCIe 5.0 x16", r"RTX 5090|RTX PRO 6000", 64, _PCIE5),
)


def link_for(device: str) -> Link | None:
    """The fastest link of a GPU by its name (``deviceProperties[].name``); None when not in LINKS."""
    for row in LINKS:
        if device and re.search(row.pattern, device, re.IGNORECASE):
            return row
    return None


def bus_factor(kind: str, ranks: int) -> float | None:
    """nccl-tests' busbw / algbw for a collective of ``ranks`` ranks; None for what moves no data (barrier)."""
    if ranks < 1:
        return None
    if kind == "all_reduce":
        return 2 * (ranks - 1) / ranks
    if kind in ("reduce_scatter", "all_gather", "all_to_all"):
        return (ranks - 1) / ranks
    if kind in ("broadcast", "reduce", "send", "recv", "send_recv", "gather", "scatter"):
        return 1.0
    return None


def message_bytes(kind: str, in_nelems: int | None, out_nelems: int | None, dtype: str, ranks: int) -> int | None:
    """S: the operation's size in bytes as nccl-tests counts it (None when the trace records no size or dtype).
    kineto's ``In msg nelems`` is this rank's input (for all-gather: its share), ``Out msg nelems`` its output."""
    size = dtype_bytes(dtype)
    if size is None:
        return None
    if kind == "all_gather":
        n = out_nelems if out_nelems is not None else (in_nelems * ranks if in_nelems is not None else None)
    else:
        n = in_nelems
    return n * size if n is not None else None


def could_win(transfer_us: float, busbw_gbps: float, link_gbps: float, target_pct: float) -> float:
    """Transfer time saved at ``target_pct`` of the link's peak (0 when it already does as well)."""
    target = link_gbps * target_pct / 100
    return transfer_us * (1 - busbw_gbps / target) if 0 < busbw_gbps < target else 0.0
