"""The `qwen-image` preset (60 blocks, hidden 3072, ~20.4B params, ~41 GB bf16) on one big GPU, in ~1–2 minutes.

Reports, from one process:
- build time and memory of the synthetic model (built on `meta`, materialized on the GPU in bf16);
- seconds per denoising step unprofiled (CFG on: 2 forwards per step) and TFLOP/s from an analytic
  matmul FLOP count (`forward_matmul_flops`, checked against torch's FlopCounterMode in the tests);
- the same run profiled at `infer_main` (capture at step 0: wait+warmup+active calls): extra seconds and
  the whole-run ratio profiled/unprofiled;
- the trace's kernels: count, distinct names, busy time inside the exported ProfilerStep, top kernels.

    python benchmarks/gpu_qwen_image.py                     # qwen-image, 1024x1024, 2 steps, bf16, with_stack
    python benchmarks/gpu_qwen_image.py --preset tiny --device cpu --steps 2   # dry run anywhere

Writes the report as JSON and the trace under --out_dir (default: $OUT if set, else save_results/gpu_bench).
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import gzip
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch

from lightx2v.models.networks.qwen_image.config import PRESETS, forward_matmul_flops
from lightx2v.models.runners.qwen_image.qwen_image_runner import QwenImageRunConfig, QwenImageRunner
from lightx2v.utils.torch_trace_profiler import TorchTraceProfiler


def timed_run(runner: QwenImageRunner, sync) -> list[float]:
    """Run the whole denoising loop from fresh noise; seconds of each step (device-synchronized)."""
    marks = []
    runner.progress_callback = lambda done, total: (sync(), marks.append(time.perf_counter()))
    runner.scheduler.prepare()
    sync()
    start = time.perf_counter()
    runner.run()
    return [b - a for a, b in zip([start, *marks[:-1]], marks, strict=True)]


def kernel_stats(trace_path: str) -> dict:
    opener = gzip.open if trace_path.endswith(".gz") else open
    with opener(trace_path, "rt") as f:
        events = json.load(f)["traceEvents"]
    kernels = [e for e in events if e.get("cat") == "kernel"]
    steps = [e for e in events if str(e.get("name", "")).startswith("ProfilerStep#") and e.get("ph") == "X"]
    by_name = collections.Counter()
    for k in kernels:
        by_name[k["name"]] += k.get("dur", 0)
    busy_us = sum(k.get("dur", 0) for k in kernels)
    step_us = max((s["dur"] for s in steps), default=0)
    return {
        "events": len(events),
        "kernels": len(kernels),
        "distinct_kernels": len(by_name),
        "kernel_busy_ms": busy_us / 1e3,
        "profiler_step_ms": step_us / 1e3,
        "gpu_busy_fraction": busy_us / step_us if step_us else None,
        "top_kernels_ms": [(name[:100], round(us / 1e3, 3)) for name, us in by_name.most_common(10)],
        "cpu_ops": sum(1 for e in events if e.get("cat") == "cpu_op"),
        "python_functions": sum(1 for e in events if e.get("cat") == "python_function"),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--preset", default="qwen-image", choices=list(PRESETS))
    p.add_argument("--steps", type=int, default=2)
    p.add_argument("--resolution", type=int, default=1024)
    p.add_argument("--num_layers", type=int, default=None, help="override the preset's number of blocks")
    p.add_argument("--device", default="cuda")
    p.add_argument("--no_stack", action="store_true", help="profile without with_stack")
    p.add_argument("--out_dir", default=os.environ.get("OUT") or "save_results/gpu_bench")
    args = p.parse_args()

    device = torch.device(args.device)
    on_cuda = device.type == "cuda"
    dtype = torch.bfloat16 if on_cuda else torch.float32
    sync = torch.cuda.synchronize if on_cuda else (lambda: None)
    out_dir = Path(args.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    arch = dataclasses.replace(
        PRESETS[args.preset], height=args.resolution, width=args.resolution, infer_steps=args.steps
    )
    if args.num_layers:
        arch = dataclasses.replace(arch, num_layers=args.num_layers)
    report = {
        "preset": args.preset,
        "num_layers": arch.num_layers,
        "resolution": args.resolution,
        "steps": args.steps,
        "dtype": str(dtype),
        "torch": torch.__version__,
    }
    if on_cuda:
        report["gpu"] = torch.cuda.get_device_name(device)
    print(json.dumps(report))

    config = QwenImageRunConfig(
        arch=arch,
        prompt="A coffee shop entrance with a chalkboard sign reading Qwen Coffee, neon light, cinematic composition.",
        height=arch.height,
        width=arch.width,
        infer_steps=arch.infer_steps,
        device=device,
        dtype=dtype,
        profile={"tb_dir": str(out_dir / "torch_profile"), "with_stack": not args.no_stack, "use_gzip": True},
    )
    runner = QwenImageRunner(config)
    t0 = time.perf_counter()
    runner.init_modules()
    sync()
    report["build_s"] = time.perf_counter() - t0
    report["params"] = sum(p.numel() for p in runner.model.net.parameters())
    if on_cuda:
        report["weights_gib"] = torch.cuda.memory_allocated(device) / 2**30
    runner.inputs = runner.run_input_encoder()
    text_tokens = [v.shape[1] for v in runner.inputs["text_encoder_output"].values()]
    flops_per_step = sum(forward_matmul_flops(arch, runner.scheduler.image_seq_len, t) for t in text_tokens)
    report.update(
        image_tokens=runner.scheduler.image_seq_len, text_tokens=text_tokens, tflop_per_step=flops_per_step / 1e12
    )
    print(f"built {report['params'] / 1e9:.2f}B params in {report['build_s']:.1f} s; ", end="")
    print(f"{report['tflop_per_step']:.1f} TFLOP per step")

    # warm-up (cuBLAS/flash-attention setup), then an unprofiled run through the profiler's off switch
    runner.scheduler.prepare()
    runner.scheduler.step_pre(0)
    runner.model.infer(runner.inputs)
    sync()
    os.environ["LIGHTX2V_TORCH_PROFILE"] = "0"
    calls = runner.model.infer_calls
    plain = timed_run(runner, sync)
    assert runner.model.infer_calls - calls == args.steps, "profiling was not off for the unprofiled run"
    plain_latents = runner.scheduler.latents.clone()
    del os.environ["LIGHTX2V_TORCH_PROFILE"]

    TorchTraceProfiler.reset_session()
    calls = runner.model.infer_calls
    profiled = timed_run(runner, sync)
    report["profiled_infer_calls"] = runner.model.infer_calls - calls
    report["profiled_equals_unprofiled"] = bool(torch.equal(plain_latents, runner.scheduler.latents))
    capture = TorchTraceProfiler.last_capture()

    steady = plain[1:] or plain
    s_per_step = sum(steady) / len(steady)
    report.update(
        unprofiled_step_s=plain,
        profiled_step_s=profiled,
        s_per_step=s_per_step,
        tflops=flops_per_step / s_per_step / 1e12,
        capture_extra_s=sum(profiled) - sum(plain),
        # what profiling costs beyond the repeated calls themselves (CUPTI start, recording, export)
        profiler_overhead_s=sum(profiled) - sum(plain) - (report["profiled_infer_calls"] - args.steps) * s_per_step,
        profiled_over_unprofiled=sum(profiled) / sum(plain),
    )
    if on_cuda:
        report["max_memory_gib"] = torch.cuda.max_memory_allocated(device) / 2**30
    if capture:
        report["trace_paths"] = [str(t) for t in capture.trace_paths]
        report["trace"] = kernel_stats(str(capture.trace_paths[0]))
        report["trace_bytes"] = os.path.getsize(capture.trace_paths[0])
    (out_dir / "gpu_qwen_image.json").write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))
    print(
        f"\n{args.preset} {args.resolution}x{args.resolution}: "
        f"{s_per_step:.3f} s/step, {report['tflops']:.0f} TFLOP/s; "
        f"profiled run {report['profiled_over_unprofiled']:.2f}x ({report['capture_extra_s']:+.2f} s); "
        f"kernels in trace: {report.get('trace', {}).get('kernels')}"
    )


if __name__ == "__main__":
    main()
