"""One rank of gpu_check's step 5: every rank profiles the same call site, whose target holds a collective.

    python -m torch.distributed.run --standalone --nproc_per_node=2 benchmarks/gpu_check_ranks.py \
        BACKEND DEVICE TB_DIR DIM

BACKEND nccl or gloo; DEVICE cuda (every rank on cuda:0, the one GPU) or cpu. Prints one RESULT line per rank.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch
import torch.distributed as dist

# Imported before the process group exists: the profiler's lazy import of this module would otherwise pin the
# group past destroy_process_group() and gloo can abort at exit (measured, see docs/inference.md "GPU check").
import torch.distributed.nn.functional

from lightx2v.utils.torch_trace_profiler import TorchTraceProfileContext, TorchTraceProfiler


def main() -> None:
    backend, device_kind, tb_dir, dim = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    device = torch.device("cuda", 0) if device_kind == "cuda" else torch.device("cpu")
    if device.type == "cuda":
        torch.cuda.set_device(device)
    dist.init_process_group(backend)
    rank = dist.get_rank()
    torch.manual_seed(rank)
    x = torch.randn(dim, dim, device=device)  # float32: every backend reduces it, on CPU and CUDA tensors
    probe = torch.ones(1, device=device)
    dist.all_reduce(probe)  # a backend that refuses two ranks on one device fails here, before any capture

    def denoise_step(t: torch.Tensor) -> torch.Tensor:
        with torch.profiler.record_function("rank_work"):
            y = torch.relu(t @ t) / dim
        dist.all_reduce(y)
        return y

    for _ in range(3):
        with TorchTraceProfileContext("gpu_check_ranks", tb_dir=tb_dir) as profile:
            y = profile.run(denoise_step, x)
    capture = TorchTraceProfiler.last_capture()
    sys.stdout.write(  # one write per line: two ranks share the pipe
        f"RESULT rank={rank} world={dist.get_world_size()} backend={backend} device={device} calls={capture.calls} "
        f"finite={bool(torch.isfinite(y).all())} paths={','.join(capture.trace_paths)}\n"
    )
    sys.stdout.flush()
    dist.barrier()  # leave together
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
