"""A torchrun job (gloo) whose rank 1 is the straggler: each profiled step it computes more and sleeps 40 ms.

Usage: python -m torch.distributed.run --nproc_per_node=2 summary_straggler.py OUT_DIR
Captures twice through the project's profiler: TensorBoard format into OUT_DIR/tb (one run directory, one file
per rank), then chrome format into OUT_DIR/chrome/trace.rank<R>.json. No collective inside the steps, so each
rank's step time is its own.
"""

import os
import sys
import time

import torch
import torch.distributed as dist

from lightx2v.utils.torch_trace_profiler import TorchTraceProfileContext, TorchTraceProfiler

out = sys.argv[1]
dist.init_process_group("gloo")
rank = dist.get_rank()
x = torch.randn(96, 96)


def denoise_step() -> torch.Tensor:
    y = x
    for _ in range(2 if rank == 0 else 8):
        y = torch.tanh(y @ x)
    if rank == 1:
        time.sleep(0.04)
    return y


for profile_format in ("tensorboard", "chrome"):
    TorchTraceProfiler.reset_session()
    with TorchTraceProfileContext("straggler", profile_format=profile_format, tb_dir=os.path.join(out, "tb"),
                                  chrome_path=os.path.join(out, "chrome", "trace.json")) as profile:
        profile.run(denoise_step)
    capture = TorchTraceProfiler.last_capture()
    sys.stdout.write(f"RESULT rank={rank} format={profile_format} paths={','.join(capture.trace_paths)}\n")
    sys.stdout.flush()
    dist.barrier()
dist.destroy_process_group()
