"""Synthetic kineto traces of a run's ranks with collectives, in the two schemas the summary reads:

- ``nccl``: ``c10d::<op>`` > ``record_param_comms`` (with the collective's args) > ``nccl:<kind>``, and the
  ``ncclDevKernel_*`` it launched (``cudaLaunchKernel`` with the kernel's correlation id), on device 0;
- ``gloo``: ``c10d::<op>`` on the calling thread (it enqueues) and ``gloo:<kind>`` on the backend's thread, whose
  duration is the work.

Times are µs from the rank's T0 (helpers.summary.T0 plus ``clock``: a rank whose clock runs ahead).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from lightx2v.trace_summary import summarize_paths
from lightx2v.trace_summary.model import RunSummary

from helpers.summary import CPU_PID, GPU_PID, STREAM, T0, write_json

C10D = {"all_reduce": "c10d::allreduce_", "all_to_all": "c10d::alltoall_base_", "all_gather": "c10d::allgather_",
        "barrier": "c10d::barrier"}
NCCL_KERNEL = {"all_reduce": "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
               "all_to_all": "ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)",
               "all_gather": "ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)"}
GLOO_THREAD = CPU_PID + 7


@dataclass
class Coll:
    kind: str
    call: float  # when the host called it
    arrival: float  # when its work began (kernel start / gloo's work start)
    end: float
    seq: int | None = None
    group: str = "0"
    nelems: int = 1 << 20
    dtype: str = "Float"
    thread: int = GLOO_THREAD  # gloo: the backend thread that runs the work (each group has its own)


@dataclass
class Rank:
    rank: int
    world: int
    steps: list[tuple[float, float]]  # ProfilerStep#1.. spans
    colls: list[Coll]
    clock: float = 0.0
    compute: list[tuple[float, float]] = field(default_factory=list)  # compute kernels (nccl) / ops (gloo)
    ranks: list[int] | None = None  # the group's ranks written in the args (nccl)
    groups: dict[str, list[int]] = field(default_factory=dict)  # distributedInfo.pg_config: description -> ranks
    labels: list[tuple[str, float, float]] = field(default_factory=list)  # record_function labels on the caller


def rank_trace(r: Rank, schema: str) -> dict:
    t = T0 + r.clock
    ev: list[dict] = []
    for i, (lo, hi) in enumerate(r.steps, 1):
        ev.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{i}", "pid": CPU_PID, "tid": CPU_PID,
                   "ts": t + lo, "dur": hi - lo, "args": {}})
    for name, lo, hi in r.labels:
        ev.append({"ph": "X", "cat": "user_annotation", "name": name, "pid": CPU_PID, "tid": CPU_PID, "ts": t + lo,
                   "dur": hi - lo, "args": {}})
    corr = 1000
    for lo, hi in r.compute:
        corr += 1
        if schema == "nccl":
            ev.append({"ph": "X", "cat": "kernel", "name": "sm90_xmma_gemm_bf16", "pid": GPU_PID, "tid": STREAM,
                       "ts": t + lo, "dur": hi - lo, "args": {"device": 0, "stream": STREAM, "correlation": corr}})
        else:
            ev.append({"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": CPU_PID, "tid": CPU_PID,
                       "ts": t + lo, "dur": hi - lo, "args": {}})
    for c in r.colls:
        corr += 1
        host_end = c.call + 20 if schema == "nccl" else c.call + 10
        ev.append({"ph": "X", "cat": "cpu_op", "name": C10D[c.kind], "pid": CPU_PID, "tid": CPU_PID,
                   "ts": t + c.call, "dur": host_end - c.call, "args": {}})
        if schema == "nccl":
            args = {"Collective name": c.kind.replace("_", "") if c.kind != "all_to_all" else "all_to_all",
                    "dtype": c.dtype, "In msg nelems": c.nelems,
                    "Out msg nelems": c.nelems * (r.world if c.kind == "all_gather" else 1),
                    "Group size": len(r.ranks or range(r.world)), "Process Group Name": c.group,
                    "Process Group Ranks": str(r.ranks if r.ranks is not None else list(range(r.world)))}
            if c.seq is not None:
                args["Seq"] = c.seq
            ev.append({"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "pid": CPU_PID, "tid": CPU_PID,
                       "ts": t + c.call + 2, "dur": 16, "args": args})
            ev.append({"ph": "X", "cat": "user_annotation", "name": f"nccl:{c.kind}", "pid": CPU_PID,
                       "tid": CPU_PID, "ts": t + c.call + 4, "dur": 12, "args": {}})
            ev.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": CPU_PID, "tid": CPU_PID,
                       "ts": t + c.call + 6, "dur": 5, "args": {"correlation": corr}})
            ev.append({"ph": "X", "cat": "kernel", "name": NCCL_KERNEL[c.kind], "pid": GPU_PID, "tid": STREAM + 1,
                       "ts": t + c.arrival, "dur": c.end - c.arrival,
                       "args": {"device": 0, "stream": STREAM + 1, "correlation": corr}})
        else:
            ev.append({"ph": "X", "cat": "user_annotation", "name": f"gloo:{c.kind}", "pid": CPU_PID,
                       "tid": c.thread, "ts": t + c.arrival, "dur": c.end - c.arrival,
                       "args": {"Input Dims": [[c.nelems]], "Input type": ["float"]}})
    info = {"backend": schema, "rank": r.rank, "world_size": r.world}
    if r.groups:
        info["pg_config"] = [{"pg_name": str(i), "pg_desc": desc, "pg_size": len(ranks), "ranks": ranks}
                             for i, (desc, ranks) in enumerate(r.groups.items())]
    doc = {"schemaVersion": 1, "distributedInfo": info, "traceEvents": ev}
    if schema == "nccl":
        doc["deviceProperties"] = [{"id": 0, "name": "NVIDIA H100 80GB HBM3", "totalGlobalMem": 85520809984,
                                    "computeMajor": 9, "computeMinor": 0}]
    return doc


STEPS = [(0, 10_000), (10_000, 20_000), (20_000, 30_000)]


def late_in_step_2(seq: bool = True, delay: float = 5_000.0) -> list[Rank]:
    """Two ranks, one all-reduce per step at +4 ms; rank 1 arrives ``delay`` late in step 2; all leave together
    (a 1 ms transfer after the last arrival). Compute kernels cover the first half of each all-reduce on rank 0."""
    ranks = []
    for r in (0, 1):
        colls = []
        for k, (lo, _) in enumerate(STEPS):
            arrive = lo + 4_000 + (delay if r == 1 and k == 1 else 0.0)
            last = lo + 4_000 + (delay if k == 1 else 0.0)
            colls.append(Coll("all_reduce", call=arrive - 100, arrival=arrive, end=last + 1_000,
                              seq=k if seq else None))
        compute = [(lo + 3_000, lo + 4_500) for lo, _ in STEPS] if r == 0 else []
        ranks.append(Rank(rank=r, world=2, steps=STEPS, colls=colls, compute=compute))
    return ranks


def write_run(tmp_path: Path, ranks: list[Rank], schema: str = "nccl", name: str = "run") -> Path:
    """The ranks' traces in ``tmp_path/name``, one file per rank."""
    folder = tmp_path / name
    folder.mkdir()
    for r in ranks:
        write_json(folder / f"rank{r.rank}_host.pt.trace.json", rank_trace(r, schema))
    return folder


def summarize(folder: Path) -> RunSummary:
    (run,) = summarize_paths([str(folder)])
    return run
