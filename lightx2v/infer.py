"""`python -m lightx2v.infer`: the embedded Qwen-Image-style text-to-image run, profiled at `infer_main`.

Arguments are parsed and checked before torch is imported, so `--help` and bad input answer at once and
bad input ends with one `error:` line (exit 2), never a traceback.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import sys
import tempfile
import time
from pathlib import Path

from lightx2v import settings
from lightx2v.models.networks.qwen_image.config import (
    ATTENTION_NAMES,
    DEFAULT_ATTENTION,
    IMPLEMENTED_SEQ_P_ATTN_TYPES,
    PRESETS,
    SEQ_P_ATTN_TYPES,
    QwenImageArch,
)
from lightx2v.models.networks.qwen_image.late_rank import parse_calls
from lightx2v.program import program, whole_lines
from lightx2v.utils.distributed import launched_world_size, say

DESCRIPTION = """\
Embedded Qwen-Image-style text-to-image inference with a torch.profiler trace of the `infer_main` call.

The model has the real structure (MMDiT: image and text token streams, joint attention, adaLN, flow-matching
Euler with classifier-free guidance) but SYNTHETIC weights (seeded random init). There is no text encoder and
no VAE: the prompt becomes a deterministic pseudo-embedding, and the PNG is a preview of the final latents,
not a picture. Outputs: <save_result_path> (PNG preview), the same stem with .pt (latents, 1x16xH/8xW/8)
and .json (run metadata: settings, timings, model.infer call count, trace location).
"""

EPILOG = """\
presets:
{presets}
before/after: profile with --attention sdpa, then --attention math, then
  python -m lightx2v.trace_summary --diff save_results/torch_profile   (the two newest runs)
multi-GPU (or CPU processes with gloo), LightX2V's parallel block; world size = seq_p_size x (2 with --cfg_parallel):
  torchrun --nproc_per_node=2 -m lightx2v.infer ... --cfg_parallel
  torchrun --nproc_per_node=4 -m lightx2v.infer ... --seq_p_size 4 --seq_p_attn_type ulysses
  torchrun --nproc_per_node=4 -m lightx2v.infer ... --seq_p_size 2 --cfg_parallel
  add --late_rank 1 --late_ms 80 --late_steps 1,3 to make rank 1 late in those model.infer calls (demo, tests)
environment: LIGHTX2V_TORCH_PROFILE=0 disables profiling; LIGHTX2V_TORCH_PROFILE_DIR overrides --tb_dir.
"""

DTYPES = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}
SEED_MAX = 2**64 - 1  # torch.Generator.manual_seed's highest seed (negative seeds would alias high ones)
# Qwen-Image runs at about 4; far beyond, `uncond + s*(cond - uncond)` overflows and the latents turn NaN (1e300)
GUIDANCE_MAX = 100
LATE_MS_MAX = 60_000  # a demo delay; far below gloo's and NCCL's collective timeouts (30 and 10 minutes)
PIXEL_MULTIPLE = 16  # VAE scale 8 x patch 2, the same for every preset (check_args checks the arch's own)


@dataclasses.dataclass(frozen=True)
class Number:
    """argparse type of every numeric flag: parse as `kind`, then insist on a finite value in [low, high].

    The range lives on the flag itself, so parsing rejects nan/inf (which `float()` accepts and every later
    comparison lets through) and out-of-range values with one `error:` line, and tests read it from the parser.
    """

    kind: type
    low: float
    high: float | None = None

    def describe(self) -> str:
        what = "an integer" if self.kind is int else "a finite number"
        return f"{what} >= {self.low}" if self.high is None else f"{what} in {self.low}..{self.high}"

    def __call__(self, text: str) -> int | float:
        try:
            value = self.kind(text)
        except ValueError:
            value = None
        finite = value is not None and (self.kind is int or math.isfinite(value))  # ints: 10**400 is exact
        if not finite or value < self.low or (self.high is not None and value > self.high):
            raise argparse.ArgumentTypeError(f"must be {self.describe()}, got {text!r}")
        return value


def _preset_help() -> str:
    lines = []
    for name, a in PRESETS.items():
        n = a.param_count()
        size = f"{n / 1e9:.1f}B" if n >= 1e9 else f"{n / 1e6:.1f}M"
        lines.append(
            f"  {name:<11} {a.num_layers} blocks, hidden {a.hidden_size}, {a.num_heads} heads, "
            f"{a.height}x{a.width}, {a.infer_steps} steps, {size} params"
        )
    return "\n".join(lines)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=program("lightx2v.infer"),
        usage=f"%(prog)s [--preset {{{','.join(PRESETS)}}}] [--infer_steps N] [--prompt TEXT] [options]  (see --help)",
        description=DESCRIPTION,
        epilog=EPILOG.format(presets=_preset_help()),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    g = p.add_argument_group("job (LightX2V's names)")
    g.add_argument("--model_cls", default="qwen_image", choices=["qwen_image"], help="model class (default qwen_image)")
    g.add_argument("--task", default="t2i", choices=["t2i"], help="task (default t2i)")
    g.add_argument("--prompt", default="A cozy coffee shop at dawn, warm light, cinematic composition.")
    g.add_argument("--negative_prompt", default=" ", help="prompt of the unconditional branch (default ' ')")
    g.add_argument("--seed", type=Number(int, 0, SEED_MAX), default=42, help="seed of the initial noise (default 42)")
    g.add_argument("--infer_steps", type=Number(int, 1), default=None, help="denoising steps (default: the preset's)")
    g.add_argument(
        "--guidance_scale",
        type=Number(float, 0, GUIDANCE_MAX),
        default=4.0,
        help=f"true-CFG scale, 0..{GUIDANCE_MAX:g}; <= 1 disables CFG (default 4.0)",
    )
    g.add_argument(
        "--save_result_path",
        default="save_results/qwen_image_t2i.png",
        help="PNG preview path; latents and metadata go next to it (default save_results/qwen_image_t2i.png)",
    )

    g = p.add_argument_group(
        "parallel (LightX2V's \"parallel\" block; under torchrun, world size = seq_p_size x (2 with --cfg_parallel))"
    )
    g.add_argument("--cfg_parallel", action="store_true",
                   help="cfg_p_size 2: the two CFG branches on the two ranks of a pair, then an all-gather")
    g.add_argument("--seq_p_size", type=Number(int, 1), default=1,
                   help="ranks that split the image tokens (sequence parallelism; default 1: none)")
    g.add_argument("--seq_p_attn_type", default="ulysses", choices=SEQ_P_ATTN_TYPES,
                   help="ulysses: heads split, an all-to-all before and after every attention "
                        "(ring is LightX2V's other kind, not implemented here)")

    g = p.add_argument_group("a rank made late on purpose (demos and tests of who waited for whom)")
    g.add_argument("--late_rank", type=Number(int, 0), default=None,
                   help="this rank sleeps --late_ms before its first collective of a model.infer call")
    g.add_argument("--late_ms", type=Number(float, 1, LATE_MS_MAX), default=None, help="how long, in ms")
    g.add_argument("--late_steps", default=None, metavar="CALLS",
                   help="in these model.infer calls only, e.g. 1,3 (counted from 0; with the capture at the first "
                        "denoising step call N is the trace's ProfilerStep#N; default: every call)")

    g = p.add_argument_group("model size")
    g.add_argument("--preset", default="tiny", choices=list(PRESETS), help="model shape and defaults (default tiny)")
    size = Number(int, PIXEL_MULTIPLE)
    g.add_argument("--height", type=size, default=None, help="image height in pixels (multiple of 16)")
    g.add_argument("--width", type=size, default=None, help="image width in pixels (multiple of 16)")
    g.add_argument("--num_layers", type=Number(int, 1), default=None, help="override the preset's number of blocks")
    g.add_argument("--hidden_size", type=Number(int, 1), default=None, help="override the preset's hidden size")
    g.add_argument("--num_heads", type=Number(int, 1), default=None, help="override the preset's attention heads")
    g.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"], help="auto: CUDA when available")
    g.add_argument("--dtype", default="auto", choices=["auto", *DTYPES], help="auto: bf16 on CUDA, fp32 on CPU")
    g.add_argument(
        "--attention",
        default=DEFAULT_ATTENTION,
        choices=ATTENTION_NAMES,
        help="joint attention: sdpa (torch's fused scaled_dot_product_attention) or math (explicit "
        "softmax(QK^T)V: two matmuls and a softmax); profile both and compare them (default sdpa)",
    )
    g.add_argument(
        "--threads",
        type=Number(int, 1, os.cpu_count() or 1),  # more intra-op threads than CPUs only spin (1e5 hangs torch)
        default=None,
        help="CPU threads for torch (default: torch's, one per core); 1 is much faster on a busy small machine",
    )

    g = p.add_argument_group("profiler (TorchTraceProfileContext at infer_main)")
    g.add_argument(
        "--profile", action=argparse.BooleanOptionalAction, default=True, help="capture a trace (default on)"
    )
    g.add_argument("--profile_format", default="tensorboard", choices=["tensorboard", "chrome"])
    g.add_argument("--tb_dir", default=None, help="TensorBoard logdir (default save_results/torch_profile)")
    g.add_argument("--chrome_path", default=None, help="chrome-format trace path (default save_results/trace.json)")
    g.add_argument("--with_stack", action="store_true", help="record Python call stacks")
    g.add_argument("--use_gzip", action="store_true", help="write *.pt.trace.json.gz")
    g.add_argument("--record_shapes", action="store_true",
                   help="record op input shapes and dtypes: the summary's FLOPs, TB/s, MFU and headroom")
    g.add_argument("--profile_memory", action="store_true",
                   help="record every allocation and free: the summary's memory answers, the Memory views")
    g.add_argument("--memory_snapshot", action="store_true",
                   help="CUDA only: what is live at the peak and which line allocated it "
                        "(rank<R>_<host>.memory_snapshot.pickle beside the trace)")
    g.add_argument("--profile_wait", type=Number(int, 0), default=1, help="calls not recorded (default 1)")
    g.add_argument("--profile_warmup", type=Number(int, 0), default=3, help="calls recorded, not exported (default 3)")
    g.add_argument("--profile_active", type=Number(int, 1), default=1, help="calls recorded and exported (default 1)")
    g.add_argument(
        "--tensorboard_port", type=Number(int, 1, 65535), default=None, help="port shown in the TensorBoard hint"
    )
    return p


def resolve_arch(args: argparse.Namespace) -> QwenImageArch:
    """The preset with the command line's overrides applied."""
    overrides = {
        k: getattr(args, k) for k in ("num_layers", "hidden_size", "num_heads", "height", "width", "infer_steps")
    }
    return dataclasses.replace(PRESETS[args.preset], **{k: v for k, v in overrides.items() if v is not None})


def check_args(args: argparse.Namespace, arch: QwenImageArch, world_size: int) -> list[str]:
    """Every problem with the request, each naming the flag, before anything heavy happens."""
    problems = list(arch.problems())  # the ranges of single flags were checked by their Number type
    for flag, value in (("--height", arch.height), ("--width", arch.width)):
        if value < 1 or value % arch.pixel_multiple:
            problems.append(
                f"{flag} {value} must be a positive multiple of {arch.pixel_multiple} "
                f"(VAE scale {arch.vae_scale_factor} x patch {arch.patch_size})"
            )
    problems += parallel_problems(args, arch, world_size)
    problem = check_writable(Path(args.save_result_path))
    if problem:
        problems.append(problem)
    problem = check_trace_output(args)
    if problem:
        problems.append(problem)
    return problems


def parallel_problems(args: argparse.Namespace, arch: QwenImageArch, world_size: int) -> list[str]:
    """What stops the parallel layout asked for (LightX2V's parallel block) on this job, one line each."""
    problems = []
    seq_p, cfg_p = args.seq_p_size, 2 if args.cfg_parallel else 1
    if seq_p > 1 and args.seq_p_attn_type not in IMPLEMENTED_SEQ_P_ATTN_TYPES:
        problems.append(f"--seq_p_attn_type {args.seq_p_attn_type} is not implemented in the embedded inference "
                        f"(LightX2V's ring attention); use --seq_p_attn_type ulysses")
    if seq_p * cfg_p != world_size:
        if seq_p == 1 and args.cfg_parallel:
            problems.append(
                f"--cfg_parallel runs the two CFG branches on exactly 2 processes (world size here: {world_size}); "
                "launch with: torchrun --nproc_per_node=2 -m lightx2v.infer ... --cfg_parallel"
            )
        elif seq_p == 1:
            problems.append(f"started by torchrun with {world_size} processes: add --cfg_parallel (2 processes) "
                            "and/or --seq_p_size N (world size = seq_p_size x 2 with --cfg_parallel, else seq_p_size)")
        else:
            layout = f"--seq_p_size {seq_p}" + (" x --cfg_parallel (2)" if args.cfg_parallel else "")
            problems.append(f"{layout} needs {seq_p * cfg_p} processes (world size here: {world_size}); launch with: "
                            f"torchrun --nproc_per_node={seq_p * cfg_p} -m lightx2v.infer ...")
    if args.cfg_parallel and args.guidance_scale <= 1.0:
        problems.append(f"--cfg_parallel needs CFG on, but --guidance_scale {args.guidance_scale} <= 1 disables it")
    if seq_p > 1 and not arch.problems():
        if arch.num_heads % seq_p:
            problems.append(f"--seq_p_size {seq_p}: the {arch.num_heads} attention heads do not split evenly over "
                            f"{seq_p} ranks (Ulysses gives each rank num_heads / seq_p_size heads)")
        m = arch.pixel_multiple  # pixels per image token along each side
        if all(v > 0 and v % m == 0 for v in (arch.height, arch.width)):  # else --height/--width said so
            tokens = (arch.height // m) * (arch.width // m)
            if tokens % seq_p:
                problems.append(f"--seq_p_size {seq_p}: the {tokens} image tokens ({arch.height}/{m} x "
                                f"{arch.width}/{m}) do not split evenly over {seq_p} ranks; choose a resolution "
                                f"whose token count is a multiple of {seq_p}")
    problems += late_rank_problems(args, world_size)
    return problems


def late_rank_problems(args: argparse.Namespace, world_size: int) -> list[str]:
    if args.late_rank is None:
        given = [flag for flag in ("late_ms", "late_steps") if getattr(args, flag) is not None]
        return [f"--{given[0]} needs --late_rank (which rank is late)"] if given else []
    problems = []
    if args.late_ms is None:
        problems.append(f"--late_rank {args.late_rank} needs --late_ms (how late, in ms)")
    if world_size == 1:
        problems.append("--late_rank: one process waits for no one; a rank is late for a collective, run under "
                        "torchrun with --seq_p_size and/or --cfg_parallel")
    elif args.late_rank >= world_size:
        problems.append(f"--late_rank {args.late_rank} is not a rank of this job (world size {world_size})")
    if args.late_steps is not None:
        try:
            parse_calls(args.late_steps)
        except ValueError as exc:
            problems.append(f"--late_steps {exc}")
    return problems


def nearest_existing(path: Path) -> Path:
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def check_trace_output(args: argparse.Namespace) -> str | None:
    """None when the trace asked for can be written where the profiler will put it, else why not.

    Checked before the run, so a trace that cannot land costs no inference; nothing is created here (the
    profiler makes its folders), the nearest existing folder only has to take a file.
    """
    from lightx2v.utils.torch_trace_profiler import DEFAULT_CHROME_PATH, ENV_DIR, resolve_log_dir

    if not args.profile:
        return None
    try:
        if not settings.get(settings.TORCH_PROFILE):
            return None
    except settings.SettingError as exc:  # the profiler would read an unknown word as on: say so instead
        return str(exc)
    if args.profile_format == "chrome":
        flag, target = "--chrome_path", Path(os.path.abspath(args.chrome_path or DEFAULT_CHROME_PATH))
        if target.is_dir():
            return f"{flag} {target} is a directory; give a file name such as {target / 'trace.json'}"
        folder = target.parent
    else:
        flag = ENV_DIR if settings.get(settings.TORCH_PROFILE_DIR) else "--tb_dir"
        target = folder = Path(resolve_log_dir(args.tb_dir))
    existing = nearest_existing(folder)
    if not existing.is_dir():
        return f"{flag} {target}: cannot write the trace there, {existing} is a file, not a folder"
    try:
        with tempfile.TemporaryFile(dir=existing):
            pass
    except OSError as exc:
        return f"{flag} {target}: cannot write the trace there, {existing} is not writable: {exc.strerror or exc}"
    return None


def check_writable(path: Path) -> str | None:
    """None when `path` (and its .pt/.json siblings) can be written, else why not."""
    from PIL import Image

    if path.suffix.lower() not in Image.registered_extensions():
        return f"--save_result_path {path}: unknown image extension {path.suffix!r} (use .png)"
    if path.is_dir():
        return f"--save_result_path {path} is a directory; give a file name such as {path / 'qwen_image_t2i.png'}"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=path.parent):
            pass
    except OSError as exc:
        return f"--save_result_path {path} is not writable: {exc.strerror or exc}"
    return None


def pick_device(args: argparse.Namespace, parser: argparse.ArgumentParser):
    import torch

    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda: CUDA is not available on this machine (use --device cpu or auto)")
    use_cuda = args.device == "cuda" or (args.device == "auto" and torch.cuda.is_available())
    # under torchrun each rank owns the GPU of its local rank
    device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0"))) if use_cuda else torch.device("cpu")
    name = args.dtype if args.dtype != "auto" else ("bf16" if use_cuda else "fp32")
    return device, getattr(torch, DTYPES[name])


def available_memory(device) -> int | None:
    """Bytes free for weights on `device` (None when unknown)."""
    import torch

    if device.type == "cuda":
        return torch.cuda.mem_get_info(device)[0]
    try:
        with open("/proc/meminfo") as f:
            fields = dict(line.split(":", 1) for line in f)
        return int(fields["MemAvailable"].split()[0]) * 1024
    except (OSError, KeyError, ValueError):
        return None


def check_memory(arch: QwenImageArch, device, dtype) -> str | None:
    """Refuse a model whose weights alone cannot fit, instead of thrashing or being OOM-killed."""
    need = arch.param_count() * dtype.itemsize
    free = available_memory(device)
    if free is not None and need > free:
        return (
            f"the model needs {need / 2**30:.1f} GiB for its {arch.param_count() / 1e9:.2f}B weights in "
            f"{str(dtype).removeprefix('torch.')} but {device} has {free / 2**30:.1f} GiB free "
            "(the qwen-image preset is for a big GPU; use --preset tiny or small, "
            "or smaller --num_layers/--hidden_size)"
        )
    return None


def profile_kwargs(args: argparse.Namespace) -> dict:
    kw = {
        "profile_format": args.profile_format,
        "with_stack": args.with_stack,
        "use_gzip": args.use_gzip,
        "record_shapes": args.record_shapes,
        "profile_memory": args.profile_memory,
        "memory_snapshot": args.memory_snapshot,
        "wait": args.profile_wait,
        "warmup": args.profile_warmup,
        "active": args.profile_active,
    }
    for key in ("tb_dir", "chrome_path", "tensorboard_port"):  # only when given: keep the profiler's defaults
        if getattr(args, key) is not None:
            kw[key] = getattr(args, key)
    return kw


def write_outputs(latents, config, path: Path, meta: dict) -> dict[str, str]:
    import torch

    from lightx2v.models.video_encoders.latent_preview import save_preview

    paths = {"preview": path, "latents": path.with_suffix(".pt"), "metadata": path.with_suffix(".json")}
    torch.save(latents, paths["latents"])
    save_preview(latents, paths["preview"], config.height, config.width)
    meta["outputs"] = {k: str(v) for k, v in paths.items()}
    # allow_nan=False: NaN is not JSON; every number in `meta` is finite by the flags' checks
    paths["metadata"].write_text(json.dumps(meta, indent=2, ensure_ascii=False, allow_nan=False) + "\n")
    return meta["outputs"]


def capture_info() -> dict | None:
    """This rank's capture as the profiler reports it (None when nothing was captured)."""
    from lightx2v.utils.torch_trace_profiler import TorchTraceProfiler

    cap = TorchTraceProfiler.last_capture()
    if cap is None:
        return None
    return {
        "label": cap.label,
        "profile_format": cap.profile_format,
        "run_dir": cap.run_dir,
        "trace_paths": list(cap.trace_paths),
        "calls": cap.calls,
        "seconds": cap.seconds,
        "error": cap.error,
    }


def late_rank(args: argparse.Namespace):
    """The `LateRank` the flags ask for (None without --late_rank); the flags were checked by check_args."""
    from lightx2v.models.networks.qwen_image.late_rank import LateRank

    if args.late_rank is None:
        return None
    calls = parse_calls(args.late_steps) if args.late_steps is not None else None
    return LateRank(rank=args.late_rank, ms=args.late_ms, calls=calls)


def run(args: argparse.Namespace, arch: QwenImageArch, device, dtype) -> int:
    """Build, denoise, (rank 0) write the outputs and say where everything went; 1 when something asked for failed.

    The outputs are written even then: a trace that could not be written costs the trace, not the result.
    """
    import torch

    from lightx2v.utils import distributed

    if args.threads:
        torch.set_num_threads(args.threads)
    rank, world_size, device = distributed.setup(device)
    try:
        return _run_job(args, arch, device, dtype, rank, world_size)
    finally:
        # after _run_job returned: its model, and the process groups the model holds, are gone, so
        # destroy_process_group() frees every group and no gloo thread outlives it
        distributed.teardown()


def _run_job(args: argparse.Namespace, arch: QwenImageArch, device, dtype, rank: int, world_size: int) -> int:
    """The job itself, its objects (model, process groups) local to it, so they are gone when run() tears down."""
    import torch
    from tqdm import tqdm

    from lightx2v.models.runners.qwen_image.qwen_image_runner import QwenImageRunConfig, QwenImageRunner

    config = QwenImageRunConfig(
        arch=arch,
        prompt=args.prompt,
        negative_prompt=args.negative_prompt,
        height=arch.height,
        width=arch.width,
        infer_steps=arch.infer_steps,
        seed=args.seed,
        guidance_scale=args.guidance_scale,
        cfg_parallel=args.cfg_parallel,
        seq_p_size=args.seq_p_size,
        seq_p_attn_type=args.seq_p_attn_type,
        late=late_rank(args),
        device=device,
        dtype=dtype,
        attention=args.attention,
        profile=profile_kwargs(args),
    )
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    bar = tqdm(total=config.infer_steps, desc="denoise", unit="step", disable=rank != 0, file=sys.stderr)
    runner = QwenImageRunner(config, progress_callback=lambda done, total: bar.update(1))
    t0 = time.perf_counter()
    runner.init_modules()
    sync()
    t1 = time.perf_counter()
    latents = runner.run_pipeline()
    sync()
    t2 = time.perf_counter()
    bar.close()
    capture = capture_info() if args.profile else None
    failures = []
    if capture and not capture["trace_paths"]:
        failures.append(f"the trace was not written: {capture['error']}")
    elif capture and capture["error"]:  # e.g. the memory snapshot could not be written; the trace was
        failures.append(f"the capture reported an error (its trace was written): {capture['error']}")
    if rank != 0:
        for failure in failures:
            say(f"error: [rank {rank}] {failure}")
        return 1 if failures else 0
    meta = {
        "model_cls": args.model_cls,
        "task": args.task,
        "preset": args.preset,
        "arch": dataclasses.asdict(arch),
        "param_count": arch.param_count(),
        "prompt": args.prompt,
        "negative_prompt": args.negative_prompt,
        "seed": args.seed,
        "guidance_scale": args.guidance_scale,
        "device": str(device),
        "threads": torch.get_num_threads(),
        "dtype": str(dtype).removeprefix("torch."),
        "attention": args.attention,
        "world_size": world_size,
        "cfg_parallel": args.cfg_parallel,
        "parallel": {  # LightX2V's config block
            "seq_p_size": args.seq_p_size,
            "seq_p_attn_type": args.seq_p_attn_type,
            "cfg_p_size": 2 if args.cfg_parallel else 1,
        },
        "late_rank": None if config.late is None else {
            "rank": config.late.rank,
            "ms": config.late.ms,
            "calls": None if config.late.calls is None else sorted(config.late.calls),
        },
        "profile": args.profile,
        "profile_kwargs": config.profile,
        "infer_calls": runner.modules()[0].infer_calls,
        "seconds": {"init": t1 - t0, "denoise": t2 - t1},
        "capture": capture,
    }
    outputs = write_outputs(latents, config, Path(args.save_result_path), meta)
    print(f"preview: {outputs['preview']}\nlatents: {outputs['latents']}\nmetadata: {outputs['metadata']}")
    calls = runner.modules()[0].infer_calls
    print(f"denoise: {t2 - t1:.2f} s for {config.infer_steps} steps, model.infer called {calls} times")
    if capture and capture["run_dir"]:
        print(f"trace run directory: {capture['run_dir']}")
    for trace in capture["trace_paths"] if capture else []:
        print(f"trace: {trace}")
    if capture and capture["error"]:
        print(f"trace: capture incomplete: {capture['error']}")
    elif args.profile and not capture:
        print("trace: none captured (profiling switched off by LIGHTX2V_TORCH_PROFILE)")
    if not torch.isfinite(latents).all():
        failures.append(f"the final latents hold NaN or Inf (dtype {meta['dtype']}); they were written anyway")
    for failure in failures:
        print(f"error: {failure}", file=sys.stderr)
    return 1 if failures else 0


def main(argv: list[str] | None = None) -> int:
    whole_lines()
    parser = build_parser()
    args = parser.parse_args(argv)
    arch = resolve_arch(args)
    problems = check_args(args, arch, launched_world_size())
    if problems:
        parser.error("; ".join(problems))
    device, dtype = pick_device(args, parser)
    problem = check_memory(arch, device, dtype)
    if problem:
        parser.error(problem)
    if not args.profile:
        os.environ["LIGHTX2V_TORCH_PROFILE"] = "0"  # the profiler's own off switch: contexts become plain calls
    return run(args, arch, device, dtype)


if __name__ == "__main__":
    sys.exit(main())
