"""A torchrun job that starts and stops its process group through lightx2v.utils.distributed, as the CLI does.

Usage: python -m torch.distributed.run --nproc_per_node=2 teardown_check.py MODE
MODE ``dynamo``: import torch._dynamo after setup() (what the profiler's inductor probe, or torch.compile, does):
setup()'s early import of torch.distributed.nn.functional must keep the group unpinned. MODE ``hold``: keep a
reference to the group across teardown(): it must report the surviving gloo threads. The reference is dropped
afterwards, so the group is freed here and not during interpreter shutdown.
"""

import sys

import torch
import torch.distributed as dist

from lightx2v.utils import distributed

mode = sys.argv[1]
rank, world_size, _ = distributed.setup(torch.device("cpu"))
if mode == "dynamo":
    import torch._dynamo
held = dist.group.WORLD if mode == "hold" else None
y = torch.ones(4) * (rank + 1)
dist.all_reduce(y)
survivors = distributed.teardown()
sys.stdout.write(f"TEARDOWN rank={rank} world={world_size} sum={float(y.sum())} "
                 f"survivors={','.join(survivors) or '-'}\n")
sys.stdout.flush()
del held
