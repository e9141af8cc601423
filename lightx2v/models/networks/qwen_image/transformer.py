"""The MMDiT network: two token streams (image, text) that meet only in joint attention.

Each block modulates both streams with adaLN (shift/scale/gate from the timestep embedding), projects each
stream to q/k/v with its own weights, runs one attention (`attention.py`: fused SDPA or explicit math) over
the concatenated [text; image] sequence, splits the result back, and gives each stream its own MLP. With sequence
parallelism each rank holds a share of the image tokens and all text tokens, and the joint attention goes through
Ulysses' all-to-alls (`ulysses.py`); everything else is per token and runs on the share as it is. `record_function`
regions name the parts so a trace reads like the model.
"""

from __future__ import annotations

import typing

import torch
import torch.nn.functional as F
from torch import nn
from torch.profiler import record_function

from lightx2v.models.networks.qwen_image.attention import attention_by_name, joint_attention
from lightx2v.models.networks.qwen_image.config import DEFAULT_ATTENTION, QwenImageArch
from lightx2v.models.networks.qwen_image.layers import apply_rope, rms_norm, timestep_features
from lightx2v.models.networks.qwen_image.ulysses import UlyssesAttention


def _modulate(x: torch.Tensor, shift: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    normed = F.layer_norm(x, (x.shape[-1],), eps=1e-6)
    return normed * (1 + scale[:, None, :]) + shift[:, None, :]


class StreamWeights(nn.Module):
    """One stream's half of a block: adaLN modulation, q/k/v/out projections, q/k norms, MLP."""

    def __init__(self, arch: QwenImageArch):
        super().__init__()
        d = arch.hidden_size
        self.mod = nn.Linear(d, 6 * d)
        self.to_q = nn.Linear(d, d)
        self.to_k = nn.Linear(d, d)
        self.to_v = nn.Linear(d, d)
        self.to_out = nn.Linear(d, d)
        self.norm_q = nn.Parameter(torch.ones(arch.head_dim))
        self.norm_k = nn.Parameter(torch.ones(arch.head_dim))
        self.mlp_in = nn.Linear(d, arch.mlp_ratio * d)
        self.mlp_out = nn.Linear(arch.mlp_ratio * d, d)

    def qkv(self, x: torch.Tensor, heads: int, cos: torch.Tensor, sin: torch.Tensor):
        q = self.to_q(x).unflatten(-1, (heads, -1))
        k = self.to_k(x).unflatten(-1, (heads, -1))
        v = self.to_v(x).unflatten(-1, (heads, -1))
        q = apply_rope(rms_norm(q, self.norm_q), cos, sin)
        k = apply_rope(rms_norm(k, self.norm_k), cos, sin)
        return q, k, v

    def mlp(self, x: torch.Tensor) -> torch.Tensor:
        return self.mlp_out(F.gelu(self.mlp_in(x), approximate="tanh"))


class JointBlock(nn.Module):
    def __init__(self, arch: QwenImageArch, index: int, attention: str = DEFAULT_ATTENTION):
        super().__init__()
        self.index = index
        self.heads = arch.num_heads
        self.attend = attention_by_name(attention)
        self.ulysses: UlyssesAttention | None = None  # set by QwenImageTransformer.set_sequence_parallel
        self.img = StreamWeights(arch)
        self.txt = StreamWeights(arch)

    def forward(self, img, txt, temb, img_rope, txt_rope):
        with record_function(f"block_{self.index:02d}"):
            with record_function("modulation"):
                act = F.silu(temb)
                img_mod = self.img.mod(act).chunk(6, dim=-1)
                txt_mod = self.txt.mod(act).chunk(6, dim=-1)
            with record_function("attention"):
                iq, ik, iv = self.img.qkv(_modulate(img, img_mod[0], img_mod[1]), self.heads, *img_rope)
                tq, tk, tv = self.txt.qkv(_modulate(txt, txt_mod[0], txt_mod[1]), self.heads, *txt_rope)
                if self.ulysses is None:
                    txt_out, img_out = joint_attention(self.attend, (tq, tk, tv), (iq, ik, iv))
                else:  # img holds this rank's share of the image tokens, txt all text tokens
                    txt_out, img_out = self.ulysses(self.attend, (tq, tk, tv), (iq, ik, iv))
                img = img + img_mod[2][:, None, :] * self.img.to_out(img_out.flatten(2))
                txt = txt + txt_mod[2][:, None, :] * self.txt.to_out(txt_out.flatten(2))
            with record_function("mlp"):
                img = img + img_mod[5][:, None, :] * self.img.mlp(_modulate(img, img_mod[3], img_mod[4]))
                txt = txt + txt_mod[5][:, None, :] * self.txt.mlp(_modulate(txt, txt_mod[3], txt_mod[4]))
        return img, txt


class QwenImageTransformer(nn.Module):
    """Packed latent tokens + text features + flow time → predicted velocity for the image tokens."""

    def __init__(self, arch: QwenImageArch, attention: str = DEFAULT_ATTENTION):
        super().__init__()
        d = arch.hidden_size
        self.arch = arch
        self.attention = attention
        self.img_in = nn.Linear(arch.in_channels, d)
        self.txt_norm = nn.Parameter(torch.ones(arch.text_dim))
        self.txt_in = nn.Linear(arch.text_dim, d)
        self.time_in = nn.Linear(arch.time_proj_dim, d)
        self.time_out = nn.Linear(d, d)
        self.blocks = nn.ModuleList(JointBlock(arch, i, attention) for i in range(arch.num_layers))
        self.norm_out_mod = nn.Linear(d, 2 * d)
        self.proj_out = nn.Linear(d, arch.in_channels)

    def set_sequence_parallel(self, ulysses: UlyssesAttention | None) -> None:
        """Every block's joint attention through `ulysses` (sequence parallelism), or local again with None.
        The forward then takes this rank's share of the image tokens (and their rotary angles)."""
        for block in self.blocks:
            typing.cast(JointBlock, block).ulysses = ulysses

    def forward(self, tokens, text, sigma, img_rope, txt_rope):
        dtype = self.img_in.weight.dtype
        with record_function("pre_infer"):
            img = self.img_in(tokens.to(dtype))
            txt = self.txt_in(rms_norm(text.to(dtype), self.txt_norm))
            t = timestep_features(sigma, self.arch.time_proj_dim).to(dtype)
            temb = self.time_out(F.silu(self.time_in(t)))
        with record_function("transformer_infer"):
            for block in self.blocks:
                img, txt = block(img, txt, temb, img_rope, txt_rope)
        with record_function("post_infer"):
            scale, shift = self.norm_out_mod(F.silu(temb)).chunk(2, dim=-1)
            return self.proj_out(_modulate(img, shift, scale)).float()


def init_weights(net: QwenImageTransformer, seed: int) -> None:
    """Seeded synthetic weights, drawn on the parameters' own device (no host copy of a 40 GB model).

    Inputs get std 1/sqrt(fan_in); residual outputs are scaled down by sqrt(2 · layers) so 60 blocks stay
    numerically tame in bf16; norm weights are 1 and biases 0.
    """
    device = next(net.parameters()).device
    gen = torch.Generator(device=device).manual_seed(seed)
    residual_scale = (2 * max(net.arch.num_layers, 1)) ** -0.5
    with torch.no_grad():
        for name, p in net.named_parameters():
            if p.ndim == 1:
                p.fill_(1.0 if "norm" in name.rsplit(".", 1)[-1] else 0.0)
                continue
            std = p.shape[1] ** -0.5
            if name.endswith(("to_out.weight", "mlp_out.weight")):
                std *= residual_scale
            p.normal_(0.0, std, generator=gen)
