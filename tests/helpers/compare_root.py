"""A results root for the Compare page: two captures of one label (the H200 fixture, then a copy with a known kernel
switch and a slower GEMM), a 2-rank pair, and files the page must refuse."""

from __future__ import annotations

import gzip
import json
import os
import time
from pathlib import Path

from conftest import H200_TRACE

SDPA_KERNEL = "cudnn_generated_fort_native_sdpa_sm90_flash_fprop"  # the fixture's attention kernel (12 calls)
SWITCHED, SWITCHED_FACTOR = "flash_fwd_kernel_sm90", 0.5  # what NEW's attention launches instead, twice as fast
SLOWED, FACTOR = "nvjet_sm90_tst_192x192_64x4_2x1_v_bz_coopB_bias_TNN", 1.5
BASE_RUN, NEW_RUN = "torch_profile/20261202-100000_infer_main", "torch_profile/20261202-110000_infer_main"
RANKS_BASE, RANKS_NEW = "ranks/20261202-100000_dit", "ranks/20261202-110000_dit"
CPU_BASE, CPU_NEW = "cpu/20261202-090000_cpu", "cpu/20261202-091000_cpu"  # the fixture without its GPU events
GPU_CATEGORIES = {"kernel", "gpu_memset", "gpu_memcpy", "gpu_user_annotation", "ac2g"}
GPU_WORK = {"kernel", "gpu_memset", "gpu_memcpy"}


def fixture_doc() -> dict:
    return json.loads(gzip.decompress(H200_TRACE.read_bytes()))


def switched(doc: dict, slow: float = FACTOR) -> dict:
    """The fixture with its attention kernel switched (same op, another kernel, half the time) and the 192x192 GEMM
    `slow`x; the GPU work after each edited kernel moves by its change, and the step (its ProfilerStep
    annotations) lasts as much longer as the kernels do in all."""
    events = [dict(ev) for ev in doc["traceEvents"]]
    longer = 0.0
    for ev in sorted((ev for ev in events if ev.get("cat") in GPU_WORK), key=lambda ev: ev["ts"]):
        ev["ts"] += longer
        if ev.get("cat") == "kernel" and ev["name"].startswith(SDPA_KERNEL):
            longer -= ev["dur"] * (1 - SWITCHED_FACTOR)
            ev["name"], ev["dur"] = SWITCHED, ev["dur"] * SWITCHED_FACTOR
        elif ev.get("cat") == "kernel" and ev["name"] == SLOWED:
            longer += ev["dur"] * (slow - 1)
            ev["dur"] = ev["dur"] * slow
    for ev in events:
        if ev.get("name", "").startswith("ProfilerStep#"):
            ev["dur"] += longer
    return dict(doc, traceEvents=events)


def cpu_only(doc: dict, rename: tuple[str, str] | None = None) -> dict:
    """The fixture as a CPU-only capture (its GPU events dropped), one CPU op renamed when `rename` says so."""
    events = [dict(ev) for ev in doc["traceEvents"] if ev.get("cat") not in GPU_CATEGORIES]
    for ev in events:
        if rename and ev.get("cat") == "cpu_op" and ev.get("name") == rename[0]:
            ev["name"] = rename[1]
    return dict(doc, traceEvents=events)


def write(path: Path, doc: dict, mtime: float) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc))
    os.utime(path, (mtime, mtime))


def make_compare_root(base: Path) -> Path:
    root = base / "save_results"
    doc, now = fixture_doc(), time.time()
    write(root / BASE_RUN / "rank0_h200.pt.trace.json", doc, now - 300)
    write(root / NEW_RUN / "rank0_h200.pt.trace.json", switched(doc), now - 200)
    for run, age in ((RANKS_BASE, 150), (RANKS_NEW, 100)):
        for rank in (0, 1):  # NEW: rank 0 as NEW_RUN, rank 1 with the GEMM 2.5x slower (its straggler)
            edited = doc if run == RANKS_BASE else switched(doc, FACTOR + rank)
            ranked = dict(edited, distributedInfo={"backend": "nccl", "rank": rank, "world_size": 2})
            write(root / run / f"rank{rank}_h200.pt.trace.json", ranked, now - age + rank)
    write(root / CPU_BASE / "rank0_cpu.pt.trace.json", cpu_only(doc), now - 500)
    write(root / CPU_NEW / "rank0_cpu.pt.trace.json", cpu_only(doc, ("aten::gelu", "aten::gelu_tanh")), now - 400)
    (root / "notes.txt").write_text("not a trace")
    (base / "secret.json").write_text(json.dumps({"traceEvents": []}))  # outside the root
    (root / "escape.json").symlink_to(base / "secret.json")
    return root
