"""torchrun integration: read the launcher's environment, start and stop the process group.

gloo on CPU, NCCL on CUDA with one GPU per local rank, as LightX2V's multi-GPU runs do. torch is imported
inside the functions so the CLI can ask for the world size before paying for `import torch`.
"""

from __future__ import annotations

import os


def launched_world_size() -> int:
    """World size set by torchrun (1 when started as a plain process)."""
    return int(os.environ.get("WORLD_SIZE", "1"))


def setup(device):
    """Join the torchrun job if there is one. Returns (rank, world_size, this rank's torch.device)."""
    import torch
    import torch.distributed as dist

    if launched_world_size() <= 1:
        return 0, 1, device
    if device.type == "cuda":
        torch.cuda.set_device(device)  # the CLI picked cuda:LOCAL_RANK
    dist.init_process_group(backend="nccl" if device.type == "cuda" else "gloo")
    return dist.get_rank(), dist.get_world_size(), device


def teardown() -> None:
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        # Leave together: a gloo rank that tears down while its peer is still closing aborts
        # ("terminate called without an active exception", seen here on 2-rank CPU runs).
        dist.barrier()
        dist.destroy_process_group()
