"""`QwenImageTransformerModel`: synthetic weights plus the `infer(inputs)` call the runner profiles.

`infer` reads the scheduler's current latents and flow time (set in `step_pre`), runs the conditional and
unconditional branches, combines them with classifier-free guidance and *returns* the velocity. It changes
no state that affects results — the scheduler applies the velocity in `step_post` — so the profiler may call
it wait+warmup+active times with the same inputs and the run's result does not change.

With `cfg_parallel`, rank 0 runs the conditional branch and rank 1 the unconditional one, and an
`all_gather` gives both ranks both halves (LightX2V's CFG parallelism).
"""

from __future__ import annotations

import torch
import torch.distributed as dist
from torch.profiler import record_function

from lightx2v.models.networks.qwen_image.config import DEFAULT_ATTENTION, QwenImageArch
from lightx2v.models.networks.qwen_image.layers import joint_positions, rope_angles
from lightx2v.models.networks.qwen_image.transformer import QwenImageTransformer, init_weights
from lightx2v.models.schedulers.qwen_image.scheduler import QwenImageScheduler

BRANCHES = ("cond", "uncond")  # rank i of a cfg-parallel pair runs BRANCHES[i]


def build_transformer(
    arch: QwenImageArch, device: torch.device, dtype: torch.dtype, seed: int, attention: str = DEFAULT_ATTENTION
) -> QwenImageTransformer:
    """Allocate the network directly on `device` in `dtype` (built on `meta` first), then fill it."""
    with torch.device("meta"):
        net = QwenImageTransformer(arch, attention)
    net = net.to(dtype=dtype).to_empty(device=device)
    init_weights(net, seed)
    return net.eval().requires_grad_(False)


def guide(cond: torch.Tensor, uncond: torch.Tensor, scale: float) -> torch.Tensor:
    """Qwen-Image's true CFG: extrapolate from uncond to cond, then restore the conditional norm per token."""
    combined = uncond + scale * (cond - uncond)
    return combined * (cond.norm(dim=-1, keepdim=True) / combined.norm(dim=-1, keepdim=True))


class QwenImageTransformerModel:
    def __init__(
        self,
        arch: QwenImageArch,
        *,
        device: torch.device,
        dtype: torch.dtype,
        weight_seed: int = 0,
        guidance_scale: float = 4.0,
        cfg_parallel: bool = False,
        attention: str = DEFAULT_ATTENTION,
    ):
        self.arch = arch
        self.device = device
        self.guidance_scale = guidance_scale
        self.cfg_parallel = cfg_parallel
        self.net = build_transformer(arch, device, dtype, weight_seed, attention)
        self.scheduler: QwenImageScheduler | None = None
        self.infer_calls = 0  # diagnostic only: how many times the profiler/runner called infer

    @property
    def enable_cfg(self) -> bool:
        return self.guidance_scale > 1.0

    def set_scheduler(self, scheduler: QwenImageScheduler) -> None:
        self.scheduler = scheduler

    def _scheduler(self) -> QwenImageScheduler:
        if self.scheduler is None:
            raise RuntimeError("QwenImageTransformerModel: call set_scheduler() first")
        return self.scheduler

    def _rope(self, text_len: int):
        rows, cols = self._scheduler().token_grid
        txt_pos, img_pos = joint_positions(rows, cols, text_len, self.device)
        return [
            (a.cos(), a.sin())
            for a in (rope_angles(txt_pos, self.arch.head_dim), rope_angles(img_pos, self.arch.head_dim))
        ]

    def _branch(self, name: str, tokens: torch.Tensor, sigma: torch.Tensor, text: torch.Tensor) -> torch.Tensor:
        with record_function(f"infer_{name}"):
            txt_rope, img_rope = self._rope(text.shape[1])
            return self.net(tokens, text, sigma, img_rope, txt_rope)

    @torch.inference_mode()
    def infer(self, inputs: dict) -> torch.Tensor:
        """Guided velocity for the scheduler's current latents; a pure function of inputs + scheduler state."""
        self.infer_calls += 1
        scheduler = self._scheduler()
        tokens, sigma = scheduler.current_latents(), scheduler.current_sigma()
        embeds = inputs["text_encoder_output"]
        text = {"cond": embeds["prompt_embeds"], "uncond": embeds.get("negative_prompt_embeds")}
        if not self.enable_cfg:
            return self._branch("cond", tokens, sigma, text["cond"])
        if self.cfg_parallel:
            name = BRANCHES[dist.get_rank()]
            local = self._branch(name, tokens, sigma, text[name])
            with record_function("cfg_all_gather"):
                parts = [torch.empty_like(local) for _ in BRANCHES]
                dist.all_gather(parts, local)
            cond, uncond = parts
        else:
            cond = self._branch("cond", tokens, sigma, text["cond"])
            uncond = self._branch("uncond", tokens, sigma, text["uncond"])
        with record_function("cfg_guide"):
            return guide(cond, uncond, self.guidance_scale)
