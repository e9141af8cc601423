"""torchrun integration: read the launcher's environment, start and stop the process group.

gloo on CPU, NCCL on CUDA with one GPU per local rank, as LightX2V's multi-GPU runs do. torch is imported
inside the functions so the CLI can ask for the world size before paying for `import torch`. `mesh_groups()` makes
the process groups of LightX2V's (cfg_p, seq_p) mesh, described as DeviceMesh describes them (`mesh_seq_p`,
`mesh_cfg_p`), so a trace's `distributedInfo.pg_config` says which ranks each group holds.

Exit: a rank whose process group outlives `destroy_process_group()` keeps gloo threads into interpreter shutdown
and may abort there ("terminate called without an active exception"); docs/torchrun.md has the cause and figures.
`setup()` imports `torch.distributed.nn.functional` before the group exists, so its `group=group.WORLD` defaults
hold None rather than the group (whoever imports dynamo or inductor later, the profiler included), and `teardown()`
leaves together (barrier), destroys the group and checks that no gloo thread survives it. A rank that is failing
skips that barrier, and a healthy one waits for it only so long, so a failed peer never leaves a rank hanging.
"""

from __future__ import annotations

import dataclasses
import inspect
import os
import sys
from typing import Any


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
    import torch.distributed.nn.functional

    dist.init_process_group(backend="nccl" if device.type == "cuda" else "gloo")
    return dist.get_rank(), dist.get_world_size(), device


@dataclasses.dataclass(frozen=True)
class MeshGroups:
    """This rank's place in LightX2V's (cfg_p, seq_p) mesh and the process group of each dimension.

    rank = cfg_p_rank * seq_p_size + seq_p_rank, as LightX2V's `init_device_mesh(..., (cfg_p_size, seq_p_size))`
    lays it out: a sequence-parallel group is seq_p_size consecutive ranks, a CFG pair is two ranks seq_p_size
    apart. A dimension of size 1 has no group (None). Hold it no longer than the work: a group something still
    references outlives `destroy_process_group()` with its gloo threads (`teardown()` warns).
    """

    seq_p_size: int = 1
    cfg_p_size: int = 1
    seq_p_rank: int = 0
    cfg_p_rank: int = 0
    seq_p: Any = None  # torch.distributed.ProcessGroup of this rank's sequence-parallel ranks
    cfg_p: Any = None  # ... of this rank's CFG pair


# what DeviceMesh names its groups (`mesh_<dim>`), so traces of this job read like a LightX2V job's
GROUP_DESC = {"seq_p": "mesh_seq_p", "cfg_p": "mesh_cfg_p"}


def mesh_groups(seq_p_size: int, cfg_p_size: int) -> MeshGroups:
    """Create the mesh's process groups; every rank of the job must call it (each `new_group` is a collective
    call), with the same sizes. A ValueError when seq_p_size x cfg_p_size is not the world size."""
    import torch.distributed as dist

    world = dist.get_world_size() if dist.is_available() and dist.is_initialized() else 1
    if seq_p_size * cfg_p_size != world:
        raise ValueError(f"seq_p_size {seq_p_size} x cfg_p_size {cfg_p_size} != world size {world}")
    if world == 1:
        return MeshGroups()
    rank = dist.get_rank()
    cfg_p_rank, seq_p_rank = divmod(rank, seq_p_size)
    layouts = {
        "seq_p": [[c * seq_p_size + s for s in range(seq_p_size)] for c in range(cfg_p_size)],
        "cfg_p": [[c * seq_p_size + s for c in range(cfg_p_size)] for s in range(seq_p_size)],
    }
    sizes = {"seq_p": seq_p_size, "cfg_p": cfg_p_size}
    described = "group_desc" in inspect.signature(dist.new_group).parameters  # torch >= 2.4
    mine: dict[str, Any] = {}
    for dim, groups in layouts.items():
        if sizes[dim] == 1:
            continue
        for ranks in groups:  # every rank creates every group, in the same order
            group = dist.new_group(ranks, group_desc=GROUP_DESC[dim]) if described else dist.new_group(ranks)
            if rank in ranks:
                mine[dim] = group
    return MeshGroups(seq_p_size, cfg_p_size, seq_p_rank, cfg_p_rank, mine.get("seq_p"), mine.get("cfg_p"))


EXIT_BARRIER_TIMEOUT_S = 120.0  # how long a healthy rank waits at exit for its peers before leaving without them


def teardown(barrier_timeout_s: float = EXIT_BARRIER_TIMEOUT_S) -> list[str]:
    """Leave the job: barrier, destroy the process group. Returns the gloo threads still alive (expected: none);
    a warning names them, since they mean something still holds the group and the exit may abort.

    Never hangs on a failed peer. Called while an exception propagates (a ``finally``), this rank skips the
    barrier: its peers may be waiting in a collective it will never join, so waiting for them would hold both
    sides until the backend's timeout (30 min for gloo); leaving lets the exception end this rank and torchrun end
    the job. A healthy rank waits at most ``barrier_timeout_s`` for peers that may have died, then leaves
    without destroying the group (destroying it under an unfinished barrier can block too).
    """
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()):
        return []
    failing = sys.exc_info()[1]
    if failing is not None:
        say(f"warning: rank {dist.get_rank()} is failing ({type(failing).__name__}); leaving without the exit "
            "barrier, so it does not wait on peers that may be waiting on it")
    elif not _barrier_within(barrier_timeout_s):
        say(f"warning: rank {dist.get_rank()}: a peer did not reach the exit barrier within "
            f"{barrier_timeout_s:.0f} s (did it fail?); leaving without it")
        return []
    # Leave together: a gloo rank that tears down while its peer is still closing aborts
    # ("terminate called without an active exception", seen here on 2-rank CPU runs).
    dist.destroy_process_group()
    survivors = gloo_threads_settled()
    if survivors:
        say(f"warning: gloo threads alive after destroy_process_group(): {', '.join(survivors)}; something "
            "still holds the process group and this rank may abort at exit (see docs/torchrun.md)")
    return survivors


def say(line: str) -> None:
    """One line to stderr in one write: the ranks of a job share the terminal (or torchrun's pipe), and
    ``print`` writes the text and its newline separately, so another rank's line could land between them."""
    sys.stderr.write(line + "\n")
    sys.stderr.flush()


def _barrier_within(timeout_s: float) -> bool:
    """An asynchronous barrier, waited on for at most ``timeout_s``; False when it did not complete (or failed:
    a peer that exited closes its connections)."""
    import time

    import torch.distributed as dist

    try:
        work = dist.barrier(async_op=True)
        deadline = time.monotonic() + timeout_s
        while not work.is_completed():
            if time.monotonic() > deadline:
                return False
            time.sleep(0.01)
        work.wait()
    except RuntimeError:
        return False
    return True


def gloo_threads() -> list[str]:
    """Names of this process's live gloo threads (`pt_gloo_runloop`, `gloo_tcp_loop`), read from /proc (Linux;
    empty elsewhere). ProcessGroupGloo joins them when the group is freed, so after a destroy that freed it: none."""
    names = []
    try:
        tids = os.listdir("/proc/self/task")
    except OSError:
        return []
    for tid in tids:
        try:
            with open(f"/proc/self/task/{tid}/comm") as f:
                names.append(f.read().strip())
        except OSError:  # the thread ended while we looked
            continue
    return [name for name in names if "gloo" in name]


GLOO_SETTLE_S = 2.0  # how long a freed group's threads may take to end; a pinned group's never do


def gloo_threads_settled(settle_s: float = GLOO_SETTLE_S) -> list[str]:
    """The gloo threads still alive once they had ``settle_s`` to end. A freed group's transport loop
    (`gloo_tcp_loop`) is joined by whoever drops the last reference to its device, which can be a moment after
    ``destroy_process_group()`` returns (seen once in CI on a loaded 2-core machine); reading at once would warn
    about a group that was in fact freed. Returns as soon as none are left."""
    import time

    deadline = time.monotonic() + settle_s
    survivors = gloo_threads()
    while survivors and time.monotonic() < deadline:
        time.sleep(0.01)
        survivors = gloo_threads()
    return survivors


def pinned_group_defaults() -> list[str]:
    """Functions of `torch.distributed.nn.functional` (if imported) whose defaults still hold a ProcessGroup: after
    `destroy_process_group()` each one keeps the group, and its gloo threads, alive (docs/torchrun.md)."""
    functional = sys.modules.get("torch.distributed.nn.functional")
    if functional is None:
        return []
    import torch.distributed as dist

    return [f.__name__ for f in vars(functional).values()
            if any(isinstance(v, dist.ProcessGroup) for v in getattr(f, "__defaults__", None) or ())]
