"""A torchrun job: every rank profiles the same call site, whose target holds a collective.

Usage: python -m torch.distributed.run --nproc_per_node=2 distributed_capture.py FORMAT [--no-init]

After destroy_process_group() each rank prints what still holds or runs for a process group (EXIT line): the
collectives of torch.distributed.nn.functional whose default still is a ProcessGroup (the profiler's inductor probe
imports that module mid-capture), and the live gloo threads, read from /proc. Both must be 0, or the rank may abort
at interpreter exit (docs/torchrun.md).
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
    from lightx2v.utils.distributed import gloo_threads_settled, pinned_group_defaults

    functional = sys.modules.get("torch.distributed.nn.functional")
    pinned, gloo = pinned_group_defaults(), gloo_threads_settled()
    sys.stdout.write(f"EXIT rank={capture.rank} functional_imported={functional is not None} "
                     f"pinned={','.join(pinned) or '-'} gloo_threads={','.join(gloo) or '-'}\n")
    sys.stdout.flush()
