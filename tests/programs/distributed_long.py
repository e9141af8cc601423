"""A 2-rank torchrun job that runs long: a new profiler context per call, an all_reduce inside the target.

Usage: torchrun --nproc_per_node=2 distributed_long.py CONTROL_DIR
Every rank: 20 calls (the first captured, on every rank), "READY rank=R", waits for CONTROL_DIR/go, 200 more calls,
"DONE rank=R runs=... targets=... sum=...". The logdir comes from $LIGHTX2V_TORCH_PROFILE_DIR.
"""

import os
import sys
import time

import torch
import torch.distributed as dist

from lightx2v.utils.torch_trace_profiler import TorchTraceProfileContext

control = sys.argv[1]
dist.init_process_group("gloo")
rank = dist.get_rank()
targets = 0


def denoise_step(x: torch.Tensor) -> torch.Tensor:
    global targets
    targets += 1
    y = torch.relu(x @ x)
    dist.all_reduce(y)  # a rank that captured (5 calls) while the other made 1 would hang here
    return y


x = torch.ones(16, 16) * (rank + 1)
runs = 0
for phase_calls in (20, 200):
    for _ in range(phase_calls):
        with TorchTraceProfileContext("🚀 infer_main") as profile:
            y = profile.run(denoise_step, x)
        runs += 1
    if phase_calls == 20:
        sys.stdout.write(f"READY rank={rank}\n")
        sys.stdout.flush()
        while not os.path.exists(os.path.join(control, "go")):
            time.sleep(0.05)
sys.stdout.write(f"DONE rank={rank} runs={runs} targets={targets} sum={float(y.sum())}\n")
sys.stdout.flush()
dist.barrier()
dist.destroy_process_group()
