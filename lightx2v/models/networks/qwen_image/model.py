"""`QwenImageTransformerModel`: synthetic weights plus the `infer(inputs)` call the runner profiles.

`infer` reads the scheduler's current latents and flow time (set in `step_pre`), runs the conditional and
unconditional branches, combines them with classifier-free guidance and *returns* the velocity. It changes
no state that affects results — the scheduler applies the velocity in `step_post` — so the profiler may call
it wait+warmup+active times with the same inputs and the run's result does not change.

Parallelism as LightX2V's (cfg_p, seq_p) mesh (`lightx2v.utils.distributed.mesh_groups`). With `cfg_parallel`,
the ranks of CFG index 0 run the conditional branch and those of index 1 the unconditional one, and an
`all_gather` over the `cfg_p` pair gives both both halves. With `seq_p_size` N > 1 each rank of a `seq_p` group
runs the transformer on its N-th of the image tokens, Ulysses all-to-alls around every joint attention
(`ulysses.py`), and an `all_gather` over the group puts the velocity back together (LightX2V's
`_seq_parallel_pre_process` / `_seq_parallel_post_process`).
"""

from __future__ import annotations

import torch
import torch.distributed as dist
from torch.profiler import record_function

from lightx2v.models.networks.qwen_image.config import DEFAULT_ATTENTION, IMPLEMENTED_SEQ_P_ATTN_TYPES, QwenImageArch
from lightx2v.models.networks.qwen_image.late_rank import LateRank
from lightx2v.models.networks.qwen_image.layers import joint_positions, rope_angles
from lightx2v.models.networks.qwen_image.transformer import QwenImageTransformer, init_weights
from lightx2v.models.networks.qwen_image.ulysses import UlyssesAttention
from lightx2v.models.schedulers.qwen_image.scheduler import QwenImageScheduler
from lightx2v.utils.distributed import MeshGroups, mesh_groups

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
        seq_p_size: int = 1,
        seq_p_attn_type: str = "ulysses",
        attention: str = DEFAULT_ATTENTION,
        late: LateRank | None = None,
    ):
        if seq_p_size > 1 and seq_p_attn_type not in IMPLEMENTED_SEQ_P_ATTN_TYPES:
            raise ValueError(f"seq_p_attn_type {seq_p_attn_type!r} is not implemented here; use ulysses")
        self.arch = arch
        self.device = device
        self.guidance_scale = guidance_scale
        self.cfg_parallel = cfg_parallel
        self.late = late
        self.net = build_transformer(arch, device, dtype, weight_seed, attention)
        # every rank creates the mesh's groups (a no-op in one process); refused unless it matches the world
        self.mesh: MeshGroups = mesh_groups(seq_p_size, 2 if cfg_parallel else 1)
        if seq_p_size > 1:
            self.net.set_sequence_parallel(
                UlyssesAttention(self.mesh.seq_p, seq_p_size, self.mesh.seq_p_rank, late)
            )
        self.scheduler: QwenImageScheduler | None = None
        self.infer_calls = 0  # how many times the profiler/runner called infer (the late rank's call index)

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
            size = self.mesh.seq_p_size
            if size == 1:
                return self.net(tokens, text, sigma, img_rope, txt_rope)
            share = tokens.shape[1] // size  # the CLI refuses image tokens that do not split evenly
            mine = slice(self.mesh.seq_p_rank * share, (self.mesh.seq_p_rank + 1) * share)
            local = self.net(tokens[:, mine], text, sigma, tuple(a[mine] for a in img_rope), txt_rope)
            if self.late is not None:
                self.late.before_collective()
            with record_function("seq_p_all_gather"):
                parts = [torch.empty_like(local) for _ in range(size)]
                dist.all_gather(parts, local.contiguous(), group=self.mesh.seq_p)
            return torch.cat(parts, dim=1)

    @torch.inference_mode()
    def infer(self, inputs: dict) -> torch.Tensor:
        """Guided velocity for the scheduler's current latents; a pure function of inputs + scheduler state."""
        if self.late is not None:
            self.late.start_call(self.infer_calls, dist.get_rank() if dist.is_initialized() else 0)
        self.infer_calls += 1
        scheduler = self._scheduler()
        tokens, sigma = scheduler.current_latents(), scheduler.current_sigma()
        embeds = inputs["text_encoder_output"]
        text = {"cond": embeds["prompt_embeds"], "uncond": embeds.get("negative_prompt_embeds")}
        if not self.enable_cfg:
            return self._branch("cond", tokens, sigma, text["cond"])
        if self.cfg_parallel:
            name = BRANCHES[self.mesh.cfg_p_rank]
            local = self._branch(name, tokens, sigma, text[name])
            if self.late is not None:
                self.late.before_collective()
            with record_function("cfg_all_gather"):
                parts = [torch.empty_like(local) for _ in BRANCHES]
                dist.all_gather(parts, local, group=self.mesh.cfg_p)
            cond, uncond = parts
        else:
            cond = self._branch("cond", tokens, sigma, text["cond"])
            uncond = self._branch("uncond", tokens, sigma, text["uncond"])
        with record_function("cfg_guide"):
            return guide(cond, uncond, self.guidance_scale)
