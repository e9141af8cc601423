"""A torchrun job: every rank profiles the same call site, whose target holds a collective.

Usage: python -m torch.distributed.run --nproc_per_node=2 distributed_capture.py FORMAT [--no-init]
"""

import os
import sys

import torch
import torch.distributed as dist

from lightx2v.utils.torch_trace_profiler import TorchTraceProfileContext, TorchTraceProfiler

profile_format = sys.argv[1]
init = "--no-init" not in sys.argv
if init:
    dist.init_process_group("gloo")


def denoise_step(x: torch.Tensor) -> torch.Tensor:
    with torch.profiler.record_function("rank_work"):
        y = torch.relu(x @ x)
    if init:
        dist.all_reduce(y)  # a capture that skipped this on one rank would hang the job
    return y


x = torch.ones(16, 16) * (int(os.environ["RANK"]) + 1)
for _ in range(3):
    with TorchTraceProfileContext("🚀 infer_main", profile_format=profile_format, tb_dir="tb",
                                  chrome_path="chrome/trace.json") as profile:
        y = profile.run(denoise_step, x)
capture = TorchTraceProfiler.last_capture()
# One write per line: print() writes the text and the newline separately (unbuffered under PYTHONUNBUFFERED),
# so two ranks sharing the pipe could glue their RESULT lines together.
sys.stdout.write(f"RESULT rank={capture.rank} world={capture.world_size} calls={capture.calls} "
                 f"sum={float(y.sum())} paths={','.join(capture.trace_paths)}\n")
sys.stdout.flush()
if init:
    dist.barrier()  # leave together (gloo aborts when a peer tears down mid-close)
    dist.destroy_process_group()
