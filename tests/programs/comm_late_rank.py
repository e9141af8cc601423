"""A torchrun job (gloo, CPU) shaped like LightX2V's parallel denoising, with one rank made late on purpose.

Usage: python -m torch.distributed.run --nproc_per_node=N comm_late_rank.py OUT_DIR LATE_RANK LATE_STEPS DELAY_MS WHERE

Each denoising step does what LightX2V's parallel attention and CFG do, over all the ranks: sequence parallel as
``seq_p_attn_type: ulysses`` (each rank holds a slice of the sequence; an all-to-all before attention gives each
rank the whole sequence for its heads, another after it gives the slices back), then CFG parallel (each rank one
branch; an all-gather brings the branches together). Some compute before each collective makes a step last
about as long as a short real one.

Rank LATE_RANK, in the recorded steps LATE_STEPS (``ProfilerStep#N`` numbers, comma-separated), runs extra matmuls
in ``straggle()`` for DELAY_MS of wall time just before the step's first all-to-all (WHERE ``a2a``) or its
all-gather (``gather``): the others wait that long there. Each rank prints a LATE line with the extra time it
actually spent per step (the delay; 0 where it was not late) and, per step, the wall-clock times (``time.time()``,
one clock for all the ranks of one machine) at which it entered each of the step's three collectives: the waits the
trace should show, measured outside it (under load a rank may arrive late at any collective, not only the planned
one).

Captures once through the project's profiler (TensorBoard format into OUT_DIR/tb; ``with_stack`` on, so the late
work's line in the code is in the trace; ``record_shapes`` on, so the messages' sizes are): 1 warm-up call, then
4 recorded steps, ProfilerStep#1..#4.
"""

import json
import os
import sys
import time

import torch
import torch.distributed as dist

from lightx2v.utils.torch_trace_profiler import TorchTraceProfileContext, TorchTraceProfiler

out, late_rank, late_steps, delay_ms, where = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
late = {int(s) for s in late_steps.split(",") if s}
delay_s = float(delay_ms) / 1000
dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
torch.manual_seed(rank)
SEQ, HEADS, DIM = 64 * world, 2 * world, 16
x = torch.randn(SEQ // world, HEADS, DIM)  # this rank's slice of the sequence, all heads
w = torch.randn(HEADS * DIM, HEADS * DIM) / 16
spent: dict[int, float] = {}
arrived: dict[int, list[float]] = {}  # step: when this rank entered each of its collectives, in order
call = 0


def straggle() -> float:
    """Extra work until DELAY_MS have passed (matmuls, so the trace shows what the late rank did)."""
    started = time.perf_counter()
    a = torch.randn(64, 64)
    while time.perf_counter() - started < delay_s:
        a = torch.tanh(a @ a)
    return time.perf_counter() - started


def project(h: torch.Tensor) -> torch.Tensor:
    """The step's own compute (a few ms on a CPU): the projections around attention."""
    flat = h.reshape(h.shape[0], -1)
    for _ in range(4):
        flat = torch.tanh(flat @ w)
    return flat.reshape(h.shape)


def ulysses_attention(h: torch.Tensor, step: int) -> torch.Tensor:
    """All-to-all: sequence slices of all heads -> all of the sequence for this rank's heads; back after."""
    s, n, d = h.shape
    send = h.reshape(s, world, n // world, d).transpose(0, 1).contiguous()  # [world, s, heads/world, d]
    recv = torch.empty_like(send)
    if where == "a2a" and rank == late_rank and step in late:
        spent[step] = straggle()
    arrived[step].append(time.time())
    dist.all_to_all_single(recv, send)
    q = recv.reshape(world * s, n // world, d).transpose(0, 1)  # [heads/world, seq, d]
    o = torch.softmax(q @ q.transpose(1, 2) / d ** 0.5, dim=-1) @ q
    back = o.transpose(0, 1).reshape(world, s, n // world, d).contiguous()
    recv_back = torch.empty_like(back)
    arrived[step].append(time.time())
    dist.all_to_all_single(recv_back, back)
    return recv_back.transpose(0, 1).reshape(s, n, d)


def cfg_parallel(h: torch.Tensor, step: int) -> torch.Tensor:
    """Each rank one CFG branch; an all-gather brings them together for the guidance mix."""
    branch = project(h)
    gathered = [torch.empty_like(branch) for _ in range(world)]
    if where == "gather" and rank == late_rank and step in late:
        spent[step] = straggle()
    arrived[step].append(time.time())
    dist.all_gather(gathered, branch)
    return gathered[0] + 5.0 * (gathered[-1] - gathered[0])


def denoise_step() -> torch.Tensor:
    global call
    step, call = call, call + 1
    spent.setdefault(step, 0.0)
    arrived[step] = []
    h = ulysses_attention(project(x), step)
    return cfg_parallel(h, step)


TorchTraceProfiler.reset_session()
with TorchTraceProfileContext("comm", tb_dir=os.path.join(out, "tb"), wait=0, warmup=1, active=4, with_stack=True,
                              record_shapes=True) as profile:
    profile.run(denoise_step)
capture = TorchTraceProfiler.last_capture()
ms = json.dumps({k: round(v * 1000, 3) for k, v in spent.items()}, separators=(",", ":"))
at = json.dumps(arrived, separators=(",", ":"))
sys.stdout.write(f"LATE rank={rank} world={world} spent_ms={ms} arrived_s={at} "
                 f"paths={','.join(capture.trace_paths)}\n")
sys.stdout.flush()
dist.barrier()
dist.destroy_process_group()
