"""What the profiler costs, as ratios against baselines measured in the same run.

1. Steady state: a new ``TorchTraceProfileContext`` + ``run()`` at every call after the session's capture, against
   ``with contextlib.nullcontext(): f()`` (goal <= 2.0x) and against a do-nothing class with the same signature.
2. One capture: wall time through the module against bare ``torch.profiler`` with the same schedule and
   ``tensorboard_trace_handler`` on the same workload, alternating A/B. Goal <= 1.05x. The first capture of the
   process (profiler and, on CUDA, CUPTI start) is timed apart and left out of the ratio.

``--json PATH`` writes every figure; ``--trace_dir DIR`` keeps the traces (default: a temporary directory).

    python benchmarks/bench_profiler.py                         # CPU, small DiT-like stack
    python benchmarks/bench_profiler.py --device cuda --dim 3072 --seq 4096 --layers 12 --dtype bfloat16
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import json
import os
import statistics
import sys
import tempfile
import time
import timeit
from pathlib import Path
from typing import Optional

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch

from lightx2v.utils.torch_trace_profiler import TorchTraceProfileContext, TorchTraceProfiler


class SameSignatureDoingNothing:
    """The floor for any context with the spec's signature: binding 13 keyword parameters, enter, exit, call."""

    __slots__ = ("name",)

    def __init__(self, name=None, *, profile_format="tensorboard", tb_dir=None, chrome_path=None, wait=1, warmup=3,
                 active=1, with_stack=False, tensorboard_port=16006, use_gzip=False, record_shapes=False,
                 profile_memory=False, with_flops=False):
        self.name = name

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        return None

    def run(self, func, /, *args, **kwargs):
        return func(*args, **kwargs)


def steady_state(repeat: int, number: int) -> tuple[float, float, float]:
    """Best-of-``repeat`` ns per call: (nullcontext, same-signature do-nothing floor, profiler after the session)."""

    def f():
        return None

    TorchTraceProfiler.reset_session()
    with tempfile.TemporaryDirectory() as tmp, contextlib.redirect_stderr(open(os.devnull, "w")):
        TorchTraceProfileContext("warm", tb_dir=tmp).run(f)  # the session's capture; from now on: plain calls

    def baseline():
        with contextlib.nullcontext():
            f()

    def wrapped():
        with TorchTraceProfileContext("🚀 infer_main", tb_dir="save_results/torch_profile", with_stack=True) as p:
            p.run(f)

    def floor():
        with SameSignatureDoingNothing("🚀 infer_main", tb_dir="save_results/torch_profile", with_stack=True) as p:
            p.run(f)

    base, lowest, ours = [], [], []
    for _ in range(repeat):  # interleave so drift hits all equally
        base.append(timeit.timeit(baseline, number=number) / number * 1e9)
        lowest.append(timeit.timeit(floor, number=number) / number * 1e9)
        ours.append(timeit.timeit(wrapped, number=number) / number * 1e9)
    return min(base), min(lowest), min(ours)


def steady_state_against(other_file: str, repeat: int, number: int, timer=time.perf_counter, pairs: int = 0,
                         pairs_out: Optional[list] = None) -> tuple[float, float]:
    """Best-of-``repeat`` ns per steady-state call: (this module, the module file ``other_file``), interleaved.

    ``timer=time.thread_time`` (``--timer thread``) counts only the timing thread's CPU time: on a loaded machine
    the wall clock also counts the time other processes (and this process's watcher threads) held the CPU.
    ``pairs``: also time that many adjacent pairs of 5000-call runs (alternating which goes first) and append each
    pair's ours/theirs ratio to ``pairs_out``: their median resolves a few percent where best-of does not.

    For a change to the drop-in: ``git show main:lightx2v/utils/torch_trace_profiler.py > /tmp/old.py``, then
    ``--against /tmp/old.py``. Each module has its own session; both are past their capture when timed.
    """
    import importlib.util

    spec = importlib.util.spec_from_file_location("torch_trace_profiler_other", other_file)
    other = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = other
    spec.loader.exec_module(other)

    def f():
        return None

    modules = (TorchTraceProfileContext, other.TorchTraceProfileContext)
    for profiler, context in ((TorchTraceProfiler, modules[0]), (other.TorchTraceProfiler, modules[1])):
        profiler.reset_session()
        with tempfile.TemporaryDirectory() as tmp, contextlib.redirect_stderr(open(os.devnull, "w")):
            context("warm", tb_dir=tmp).run(f)

    def timed(context):
        def call():
            with context("🚀 infer_main", tb_dir="save_results/torch_profile", with_stack=True) as p:
                p.run(f)
        return call

    ours, theirs = [], []
    for i in range(repeat):  # alternate which goes first, so drift hits both equally
        for fn, out in ((timed(modules[0]), ours), (timed(modules[1]), theirs))[:: 1 if i % 2 else -1]:
            out.append(timeit.timeit(fn, number=number, timer=timer) / number * 1e9)
    if pairs:  # the ratio of each two adjacent short runs: both ran under the same load
        ratios = []
        for i in range(pairs):
            first, second = (timed(modules[0]), timed(modules[1]))[:: 1 if i % 2 else -1]
            a, b = (timeit.timeit(fn, number=5000, timer=timer) for fn in (first, second))
            ratios.append(a / b if i % 2 else b / a)
        pairs_out.extend(ratios)
    return min(ours), min(theirs)


class DiTStack(torch.nn.Module):
    """Attention + MLP blocks, the shape of work a DiT denoising step does."""

    def __init__(self, dim: int, layers: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.blocks = torch.nn.ModuleList(
            torch.nn.ModuleDict(
                {
                    "qkv": torch.nn.Linear(dim, 3 * dim),
                    "out": torch.nn.Linear(dim, dim),
                    "up": torch.nn.Linear(dim, 4 * dim),
                    "down": torch.nn.Linear(4 * dim, dim),
                }
            )
            for _ in range(layers)
        )

    @torch.no_grad()
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, d = x.shape
        for block in self.blocks:
            with torch.profiler.record_function("attn"):
                q, k, v = block["qkv"](x).view(b, s, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
                a = torch.nn.functional.scaled_dot_product_attention(q, k, v)
                x = x + block["out"](a.transpose(1, 2).reshape(b, s, d))
            with torch.profiler.record_function("mlp"):
                x = x + block["down"](torch.nn.functional.gelu(block["up"](x)))
        return x


def capture_module(model, x, log_dir: str) -> None:
    TorchTraceProfiler.reset_session()
    with TorchTraceProfileContext("bench", tb_dir=log_dir) as p:
        p.run(model, x)


def capture_bare(model, x, log_dir: str) -> None:
    import torch.profiler as tp

    activities = [tp.ProfilerActivity.CPU] + ([tp.ProfilerActivity.CUDA] if torch.cuda.is_available() else [])
    with tp.profile(
        activities=activities,
        schedule=tp.schedule(wait=1, warmup=3, active=1, repeat=1),
        on_trace_ready=tp.tensorboard_trace_handler(log_dir),
    ) as prof:
        for _ in range(5):
            model(x)
            if x.is_cuda:
                torch.cuda.synchronize()
            prof.step()


def count_kernels(log_dir: str) -> int:
    for path in sorted(Path(log_dir).rglob("*.pt.trace.json*")):
        if not path.name.endswith((".pt.trace.json", ".pt.trace.json.gz")):
            continue  # the profiler's .summary.txt beside the trace
        opener = gzip.open if path.suffix == ".gz" else open
        with opener(path, "rt") as f:
            return sum(1 for e in json.load(f)["traceEvents"] if e.get("cat") == "kernel")
    return 0


def capture_ratio(args) -> tuple[list[float], list[float], int, float]:
    """(bare seconds, module seconds, kernels in a module trace, seconds of the process's first capture)."""
    device = torch.device(args.device)
    dtype = getattr(torch, args.dtype)
    torch.manual_seed(0)
    model = DiTStack(args.dim, args.layers, args.heads).to(device, dtype)
    x = torch.randn(1, args.seq, args.dim, device=device, dtype=dtype)
    kernels = 0
    keep = contextlib.nullcontext(args.trace_dir) if args.trace_dir else tempfile.TemporaryDirectory()
    with keep as tmp, contextlib.redirect_stderr(open(os.devnull, "w")):
        start = time.perf_counter()
        capture_bare(model, x, os.path.join(tmp, "warm"))  # first profiler start in a process pays init (CUPTI)
        first = time.perf_counter() - start
        bare, ours = [], []
        for i in range(args.rounds):
            for name, fn, out in (("bare", capture_bare, bare), ("module", capture_module, ours))[
                :: 1 if i % 2 else -1
            ]:
                log_dir = os.path.join(tmp, f"{name}{i}")
                start = time.perf_counter()
                fn(model, x, log_dir)
                out.append(time.perf_counter() - start)
                if name == "module" and not kernels:
                    kernels = count_kernels(log_dir)
    return bare, ours, kernels, first


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--dim", type=int, default=256)
    parser.add_argument("--seq", type=int, default=256)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=6, help="A/B capture pairs")
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--number", type=int, default=200_000)
    parser.add_argument("--json", metavar="PATH", help="also write the figures as JSON")
    parser.add_argument("--trace_dir", metavar="DIR", help="keep the captures' traces here")
    parser.add_argument("--against", metavar="FILE",
                        help="only time the steady state of this module against another copy of it (e.g. main's)")
    parser.add_argument("--pairs", type=int, default=0, metavar="N",
                        help="--against: also the median ratio of N adjacent pairs of short runs (a loaded machine)")
    parser.add_argument("--timer", choices=("wall", "thread"), default="wall",
                        help="--against: time wall clock, or the timing thread's CPU time (a loaded machine)")
    args = parser.parse_args()
    if args.against:
        timer = time.thread_time if args.timer == "thread" else time.perf_counter
        ratios: list[float] = []
        ours_ns, theirs_ns = steady_state_against(args.against, args.repeat, args.number, timer, args.pairs, ratios)
        print(f"| steady-state call after the capture (new context each call) | {args.against} {theirs_ns:.0f} ns "
              f"| this module {ours_ns:.0f} ns | {ours_ns / theirs_ns:.3f}x |")
        if ratios:
            q1, _, q3 = statistics.quantiles(ratios, n=4)
            print(f"| ... median of {len(ratios)} adjacent-pair ratios (5000 calls each) | | | "
                  f"{statistics.median(ratios):.3f}x (quartiles {q1:.3f}-{q3:.3f}) |")
        return

    base_ns, floor_ns, ours_ns = steady_state(args.repeat, args.number)
    bare, ours, kernels, first = capture_ratio(args)
    print(
        f"torch {torch.__version__}, device {args.device} "
        f"({torch.cuda.get_device_name() if args.device == 'cuda' else 'cpu'}), python {sys.version.split()[0]}"
    )
    print("| measurement | baseline | module | ratio | goal |")
    print("|---|---|---|---|---|")
    print(
        f"| steady-state call after the capture (new context each call) | nullcontext {base_ns:.0f} ns | "
        f"{ours_ns:.0f} ns | {ours_ns / base_ns:.2f}x | <= 2.0x |"
    )
    print(
        f"| floor: a class with the same signature doing nothing (no checks, no state) | nullcontext | "
        f"{floor_ns:.0f} ns | {floor_ns / base_ns:.2f}x | - |"
    )
    print(
        "| steady-state call against the floor (the remote-arming watcher thread is running) | "
        f"floor {floor_ns:.0f} ns | "
        f"{ours_ns:.0f} ns | {ours_ns / floor_ns:.2f}x | - |"
    )
    print(
        f"| one capture, wait 1 / warmup 3 / active 1, {args.layers}x{args.dim} seq {args.seq} {args.dtype}, "
        f"median of {args.rounds} | bare torch.profiler {statistics.median(bare) * 1e3:.0f} ms | "
        f"{statistics.median(ours) * 1e3:.0f} ms | {statistics.median(ours) / statistics.median(bare):.3f}x "
        f"| <= 1.05x |"
    )
    print(
        f"first capture of the process (profiler{' + CUPTI' if args.device == 'cuda' else ''} start), bare: "
        f"{first * 1e3:.0f} ms, {(first - statistics.median(bare)) * 1e3:+.0f} ms over a later one"
    )
    if kernels:
        print(f"GPU kernels in the module's trace: {kernels}")
    if args.json:
        figures = {
            "torch": torch.__version__,
            "cuda": torch.version.cuda,
            "device": args.device,
            "device_name": torch.cuda.get_device_name() if args.device == "cuda" else "cpu",
            "workload": {k: getattr(args, k) for k in ("dtype", "dim", "seq", "layers", "heads")},
            "steady_ns": {"nullcontext": base_ns, "same_signature_floor": floor_ns, "module": ours_ns},
            "capture_s": {"bare": bare, "module": ours},
            "capture_ratio": statistics.median(ours) / statistics.median(bare),
            "first_capture_s": first,
            "first_capture_extra_s": first - statistics.median(bare),
            "kernels": kernels,
        }
        Path(args.json).write_text(json.dumps(figures, indent=2) + "\n")


if __name__ == "__main__":
    main()
