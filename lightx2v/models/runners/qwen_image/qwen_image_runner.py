"""`QwenImageRunner`: the denoising loop with the profiled `infer_main` call site of LightX2V's guide.

Every step creates a *new* `TorchTraceProfileContext` around the model call, exactly as users write it; the
profiler's process-wide session makes only the first one capture (calling `model.infer` wait+warmup+active
times with the same inputs), and every later step is a plain call.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import torch

from lightx2v.models.input_encoders.pseudo_text_encoder import embed_prompt
from lightx2v.models.networks.qwen_image.config import DEFAULT_ATTENTION, QwenImageArch
from lightx2v.models.networks.qwen_image.late_rank import LateRank
from lightx2v.models.networks.qwen_image.model import QwenImageTransformerModel
from lightx2v.models.schedulers.qwen_image.scheduler import QwenImageScheduler
from lightx2v.utils.torch_trace_profiler import TorchTraceProfileContext


@dataclasses.dataclass
class QwenImageRunConfig:
    arch: QwenImageArch
    prompt: str
    height: int
    width: int
    infer_steps: int
    seed: int = 42
    negative_prompt: str = " "
    guidance_scale: float = 4.0
    cfg_parallel: bool = False  # LightX2V's cfg_p_size 2: one CFG branch per rank of a pair
    seq_p_size: int = 1  # LightX2V's parallel.seq_p_size: ranks that split the image tokens
    seq_p_attn_type: str = "ulysses"  # LightX2V's parallel.seq_p_attn_type (only ulysses here)
    late: LateRank | None = None  # a rank made late on purpose (late_rank.py), for demos and tests
    device: torch.device = dataclasses.field(default_factory=lambda: torch.device("cpu"))
    dtype: torch.dtype = torch.float32
    weight_seed: int = 0
    attention: str = DEFAULT_ATTENTION  # the joint attention's implementation (models/networks/qwen_image/attention.py)
    # keyword arguments for TorchTraceProfileContext (tb_dir, profile_format, with_stack, schedule, ...)
    profile: dict = dataclasses.field(default_factory=dict)


class QwenImageRunner:
    def __init__(self, config: QwenImageRunConfig, progress_callback: Callable[[int, int], None] | None = None):
        self.config = config
        self.progress_callback = progress_callback
        self.model: QwenImageTransformerModel | None = None
        self.scheduler: QwenImageScheduler | None = None
        self.inputs: dict | None = None

    def init_modules(self) -> None:
        c = self.config
        self.model = QwenImageTransformerModel(
            c.arch,
            device=c.device,
            dtype=c.dtype,
            weight_seed=c.weight_seed,
            guidance_scale=c.guidance_scale,
            cfg_parallel=c.cfg_parallel,
            seq_p_size=c.seq_p_size,
            seq_p_attn_type=c.seq_p_attn_type,
            attention=c.attention,
            late=c.late,
        )
        self.scheduler = QwenImageScheduler(
            c.arch, height=c.height, width=c.width, infer_steps=c.infer_steps, seed=c.seed, device=c.device
        )
        self.model.set_scheduler(self.scheduler)

    def modules(self) -> tuple[QwenImageTransformerModel, QwenImageScheduler]:
        """The model and scheduler that ``init_modules()`` built (a RuntimeError before it ran)."""
        if self.model is None or self.scheduler is None:
            raise RuntimeError("QwenImageRunner: call init_modules() first")
        return self.model, self.scheduler

    def run_input_encoder(self) -> dict:
        """Pseudo text features for the prompt (and the negative prompt when CFG is on)."""
        c = self.config
        embed = lambda text: embed_prompt(text, c.arch.text_dim, c.arch.max_text_len, c.device, c.dtype)  # noqa: E731
        out = {"prompt_embeds": embed(c.prompt)}
        if self.modules()[0].enable_cfg:
            out["negative_prompt_embeds"] = embed(c.negative_prompt)
        return {"text_encoder_output": out}

    def run(self, total_steps: int | None = None) -> torch.Tensor:
        model, scheduler = self.modules()
        total_steps = total_steps or scheduler.infer_steps
        for step_index in range(total_steps):
            scheduler.step_pre(step_index=step_index)

            with TorchTraceProfileContext("🚀 infer_main", **self.config.profile) as profile:
                noise_pred = profile.run(model.infer, self.inputs)

            scheduler.step_post(noise_pred)

            if self.progress_callback:
                self.progress_callback(step_index + 1, total_steps)
        return scheduler.current_latents()

    def run_pipeline(self) -> torch.Tensor:
        """Encode, denoise, and return the final latents as (1, 16, H/8, W/8) float32 on the CPU."""
        if self.model is None:
            self.init_modules()
        self.inputs = self.run_input_encoder()
        scheduler = self.modules()[1]
        scheduler.prepare()
        self.run()
        return scheduler.unpacked_latents()
