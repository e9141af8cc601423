"""torchrun integration: read the launcher's environment, start and stop the process group.

gloo on CPU, NCCL on CUDA with one GPU per local rank, as LightX2V's multi-GPU runs do.
"""

from __future__ import annotations

import os

import torch
import torch.distributed as dist


def launched_world_size() -> int:
    """World size set by torchrun (1 when started as a plain process)."""
    return int(os.environ.get("WORLD_SIZE", "1"))


def setup(device: torch.device) -> tuple[int, int, torch.device]:
    """Join the torchrun job if there is one. Returns (rank, world_size, this rank's device)."""
    if launched_world_size() <= 1:
        return 0, 1, device
    if device.type == "cuda":
        device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
        torch.cuda.set_device(device)
    dist.init_process_group(backend="nccl" if device.type == "cuda" else "gloo")
    return dist.get_rank(), dist.get_world_size(), device


def teardown() -> None:
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()
