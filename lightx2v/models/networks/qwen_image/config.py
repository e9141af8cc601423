"""Shape of the Qwen-Image-style transformer and the named presets.

One dataclass holds every number that decides the model's shape, so a preset is just an instance and an
override is `dataclasses.replace`. `qwen-image` matches the real transformer (60 blocks, hidden 3072,
24 heads of 128, text features 3584, MLP ×4, 16 latent channels, 2×2 patches, VAE scale 8).
"""

from __future__ import annotations

import dataclasses

# the joint attention's implementations (attention.py holds them; named here, torch-free, for the CLI's choices)
ATTENTION_NAMES = ("sdpa", "math")
DEFAULT_ATTENTION = "sdpa"

# LightX2V's `parallel.seq_p_attn_type` values the CLI knows; only ulysses is implemented here (ulysses.py)
SEQ_P_ATTN_TYPES = ("ulysses", "ring")
IMPLEMENTED_SEQ_P_ATTN_TYPES = ("ulysses",)


@dataclasses.dataclass(frozen=True)
class QwenImageArch:
    num_layers: int
    hidden_size: int
    num_heads: int
    text_dim: int  # width of the (pseudo) text-encoder features
    max_text_len: int  # prompts longer than this are truncated, like a tokenizer's max_length
    height: int  # default output resolution in pixels
    width: int
    infer_steps: int  # default number of denoising steps
    mlp_ratio: int = 4
    latent_channels: int = 16
    patch_size: int = 2
    vae_scale_factor: int = 8
    time_proj_dim: int = 256

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_heads

    @property
    def in_channels(self) -> int:
        """Channels of one patchified token: 16 latent channels × 2 × 2."""
        return self.latent_channels * self.patch_size**2

    @property
    def pixel_multiple(self) -> int:
        """Height and width must be multiples of this to patchify the latents."""
        return self.vae_scale_factor * self.patch_size

    def problems(self) -> list[str]:
        """Human-readable reasons this shape cannot be built (empty when it can)."""
        out = []
        for field in ("num_layers", "hidden_size", "num_heads", "text_dim", "max_text_len"):
            if getattr(self, field) < 1:
                out.append(f"{field} must be >= 1, got {getattr(self, field)}")
        if not out and self.hidden_size % self.num_heads:
            out.append(f"hidden_size {self.hidden_size} is not divisible by num_heads {self.num_heads}")
        elif not out and self.head_dim % 2:
            out.append(f"head size hidden_size/num_heads = {self.head_dim} must be even (rotary embedding)")
        return out

    def param_count(self) -> int:
        """Parameters of the transformer, computed from the shape (no allocation needed)."""
        d, t, m = self.hidden_size, self.text_dim, self.mlp_ratio * self.hidden_size
        linear = lambda i, o: i * o + o  # noqa: E731
        per_stream = linear(d, 6 * d) + 4 * linear(d, d) + linear(d, m) + linear(m, d) + 2 * self.head_dim
        embed = linear(self.in_channels, d) + t + linear(t, d) + linear(self.time_proj_dim, d) + linear(d, d)
        head = linear(d, 2 * d) + linear(d, self.in_channels)
        return embed + self.num_layers * 2 * per_stream + head


PRESETS: dict[str, QwenImageArch] = {
    # seconds on a 2-core CPU, profiled run included
    "tiny": QwenImageArch(
        num_layers=2, hidden_size=128, num_heads=4, text_dim=128, max_text_len=32, height=256, width=256, infer_steps=8
    ),
    # a CPU workload heavy enough that matmuls, not Python, dominate the trace
    "small": QwenImageArch(
        num_layers=4, hidden_size=512, num_heads=8, text_dim=1024, max_text_len=64, height=512, width=512, infer_steps=8
    ),
    # the real Qwen-Image transformer's shape: ~20B parameters, ~40 GB in bf16; a big GPU only
    "qwen-image": QwenImageArch(
        num_layers=60,
        hidden_size=3072,
        num_heads=24,
        text_dim=3584,
        max_text_len=1024,
        height=1024,
        width=1024,
        infer_steps=50,
    ),
}


def forward_matmul_flops(arch: QwenImageArch, image_tokens: int, text_tokens: int) -> int:
    """Matmul FLOPs (2 per multiply-add) of one transformer forward, batch 1 — for TFLOP/s figures.

    Linear layers cost 2·rows·in·out; attention costs 4·L²·hidden (QKᵀ and AV over the joint sequence L).
    Norms, activations and rotary embedding are elementwise and left out.
    """
    d, m, n, t = arch.hidden_size, arch.mlp_ratio * arch.hidden_size, image_tokens, text_tokens
    seq = n + t
    embed = 2 * (n * arch.in_channels * d + t * arch.text_dim * d + arch.time_proj_dim * d + d * d)
    block = 2 * (2 * d * 6 * d) + 2 * seq * (4 * d * d + 2 * d * m) + 4 * seq * seq * d
    head = 2 * (d * 2 * d + n * d * arch.in_channels)
    return embed + arch.num_layers * block + head
