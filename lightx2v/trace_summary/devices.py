"""What the trace says about where it ran: devices, versions, rank and world size (from its metadata)."""

from __future__ import annotations

from typing import Any

from .model import Device, GpuTotals
from .names import rank_from_name

UNNAMED = "unnamed device"  # deviceProperties without a name, or an empty one (some drivers, MIG slices)


def devices(props: Any) -> list[Device]:
    out = []
    for p in props if isinstance(props, list) else []:
        if not isinstance(p, dict):
            continue
        major, minor = p.get("computeMajor"), p.get("computeMinor")
        out.append(Device(
            id=p.get("id") if isinstance(p.get("id"), int) else None,
            name=str(p.get("name") or "").strip() or UNNAMED,
            memory_bytes=p.get("totalGlobalMem") if isinstance(p.get("totalGlobalMem"), int) else None,
            compute_capability=f"{major}.{minor}" if isinstance(major, int) and isinstance(minor, int) else None,
        ))
    return out


def unlisted(gpu: GpuTotals | None) -> str:
    """What the report says for a trace without ``deviceProperties``: CPU-only only when it has no GPU activity
    (older kineto versions and some exporters leave the properties out of a GPU trace)."""
    if gpu is None:
        return "none recorded (CPU-only trace)"
    return (f"not recorded in the trace (GPU activity seen on {_count(gpu.devices, 'device')}, "
            f"{_count(gpu.streams, 'stream')})")


def _count(n: int, what: str) -> str:
    return f"{n} {what}" if n == 1 else f"{n} {what}s"


def rank_and_world(meta: dict[str, Any], path: str) -> tuple[int | None, int | None]:
    """The rank from ``distributedInfo`` (else from the file name) and the world size, if recorded."""
    dist_info = meta.get("distributedInfo")
    dist: dict[str, Any] = dist_info if isinstance(dist_info, dict) else {}
    rank = dist.get("rank") if isinstance(dist.get("rank"), int) else rank_from_name(path)
    return rank, dist.get("world_size") if isinstance(dist.get("world_size"), int) else None


def versions(meta: dict[str, Any]) -> dict[str, str]:
    """Versions the trace records: CUDA runtime/driver (kineto), CUPTI, NCCL (distributedInfo), torch if set."""
    out: dict[str, str] = {}
    for key in ("torch_version", "pytorch_version"):
        if meta.get(key) is not None:
            out["torch"] = str(meta[key])
    for key, label in (("cuda_runtime_version", "cuda_runtime"), ("cuda_driver_version", "cuda_driver")):
        v = meta.get(key)
        if isinstance(v, int) and v > 0:
            out[label] = f"{v // 1000}.{v % 1000 // 10}"  # CUDA encodes 12.4 as 12040
        elif v is not None:
            out[label] = str(v)
    if meta.get("cupti_version") is not None:
        out["cupti"] = str(meta["cupti_version"])
    for key in ("hip_runtime_version", "rocm_version", "roctracer_version"):
        if meta.get(key) is not None:
            out[key.replace("_version", "")] = str(meta[key])
    dist = meta.get("distributedInfo")
    if isinstance(dist, dict):
        if dist.get("nccl_version"):
            out["nccl"] = str(dist["nccl_version"])
        if dist.get("backend"):
            out["distributed_backend"] = str(dist["backend"])
    return out


def process_groups(meta: dict[str, Any]) -> dict[str, list[int]]:
    """The process groups the rank is in, as ``distributedInfo.pg_config`` lists them: their description
    ("default_pg", "mesh_seq_p"; the name when the description is "undefined") -> their global ranks."""
    dist = meta.get("distributedInfo")
    config = dist.get("pg_config") if isinstance(dist, dict) else None
    out: dict[str, list[int]] = {}
    for pg in config if isinstance(config, list) else []:
        if not isinstance(pg, dict):
            continue
        ranks, desc, name = pg.get("ranks"), pg.get("pg_desc"), pg.get("pg_name")
        key = desc if isinstance(desc, str) and desc and desc != "undefined" else str(name)
        if isinstance(ranks, list) and ranks and all(r.__class__ is int for r in ranks):
            out[key] = ranks
    return out
