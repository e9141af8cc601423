"""A torchrun job whose rank 1 raises while rank 0 goes on to the next collective, as a failing CFG branch would.

Usage: python -m torch.distributed.run --nproc_per_node=2 teardown_peer_raises.py
Both ranks wrap their work in ``try: ... finally: distributed.teardown()``, as ``lightx2v.infer`` does. Rank 1's
teardown runs with its exception in flight; it must leave without waiting for rank 0 (which waits in the
all_reduce rank 1 never joins), so rank 1 exits with its traceback and torchrun ends the job, instead of both
ranks waiting on each other until gloo's 30-minute timeout.
"""

import sys

import torch
import torch.distributed as dist

from lightx2v.utils import distributed

rank, world_size, _ = distributed.setup(torch.device("cpu"))
try:
    y = torch.ones(4)
    dist.all_reduce(y)  # both ranks: the job is up
    sys.stdout.write(f"UP rank={rank}\n")
    sys.stdout.flush()
    if rank == 1:
        raise ValueError("rank 1 failed mid-run")
    dist.all_reduce(y)  # rank 0 waits here for a peer that has failed
finally:
    distributed.teardown()
