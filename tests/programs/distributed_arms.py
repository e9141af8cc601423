"""A torchrun job that runs until told to stop, for arming it from outside again and again (gloo, CPU).

Usage: torchrun --nproc_per_node=N distributed_arms.py CONTROL_DIR MODE

Every call goes through a new ``TorchTraceProfileContext("step")``; the target is labelled ``call#<i>`` (i counts
the program's own calls, from 1), so a trace says which call it captured. MODE:

- ``skew``: the target holds an ``all_reduce``; the ranks are deliberately out of phase (rank r sleeps 2 ms
  before every call whose number is r mod 3, rank 0 sleeps 20 ms every 50 calls); every 25 calls all ranks
  agree through one ``all_reduce`` whether CONTROL_DIR/stop exists, so they all stop after the same call.
- ``gate``: as ``skew``, but after the first call every rank waits for CONTROL_DIR/go (then runs on as ``skew``)
  or CONTROL_DIR/stop (then leaves at once).
- ``absent``: the last rank never calls the site (it waits for CONTROL_DIR/stop); the others call a target without
  collectives until CONTROL_DIR/stop exists.

Prints "READY rank=R" after the first capture (for ``absent``'s last rank: at once) and "DONE rank=R calls=..
captures=.." at the end; leaves with barrier + destroy_process_group.
"""

import os
import sys
import time

import torch
import torch.distributed as dist

from lightx2v.utils.torch_trace_profiler import TorchTraceProfileContext, TorchTraceProfiler

control, mode = sys.argv[1], sys.argv[2]
dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
stop_path = os.path.join(control, "stop")
x = torch.ones(8, 8) * (rank + 1)
calls = 0


def target(i: int) -> torch.Tensor:
    with torch.profiler.record_function(f"call#{i}"):
        y = torch.relu(x @ x)
        if mode != "absent":
            dist.all_reduce(y)
    return y


def say(line: str) -> None:
    sys.stdout.write(line + "\n")  # one write per line: ranks share the pipe
    sys.stdout.flush()


if mode == "absent" and rank == world - 1:
    say(f"READY rank={rank}")
    while not os.path.exists(stop_path):
        time.sleep(0.05)
else:
    while True:
        calls += 1
        if mode != "absent" and calls % 3 == rank % 3:
            time.sleep(0.002)
        if mode != "absent" and rank == 0 and calls % 50 == 0:
            time.sleep(0.02)
        with TorchTraceProfileContext("step", tb_dir="tb") as profile:
            profile.run(target, calls)
        if calls == 1:
            say(f"READY rank={rank}")
        if mode == "gate" and calls == 1:
            while not os.path.exists(os.path.join(control, "go")) and not os.path.exists(stop_path):
                time.sleep(0.05)
            if os.path.exists(stop_path):
                break
        if mode != "absent" and calls % 25 == 0:
            flag = torch.tensor([float(rank == 0 and os.path.exists(stop_path))])
            dist.all_reduce(flag)
            if flag.item():
                break
        elif mode == "absent" and os.path.exists(stop_path):
            break
say(f"DONE rank={rank} calls={calls} captures={TorchTraceProfiler.capture_status()['captures']}")
dist.barrier()
dist.destroy_process_group()
