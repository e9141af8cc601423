"""The joint attention's implementations, chosen by `--attention`: the switch a LightX2V user flips and profiles.

`sdpa` hands the whole computation to `F.scaled_dot_product_attention`, which picks a fused kernel (flash or
memory-efficient on CUDA, a fused CPU kernel). `math` writes it out as softmax(QKᵀ/√d)·V: two batched matmuls
and a softmax, each its own op and kernels, with the scores materialized. Both compute the same function, so a
before/after pair of traces differs in the attention's ops and kernels and (within rounding) not in the result.

`joint_attention` runs one of them over the joint [text; image] sequence of an MMDiT block; with sequence
parallelism, `ulysses.py` wraps it in the all-to-alls that give each rank the whole sequence for its heads.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F

from lightx2v.models.networks.qwen_image.config import ATTENTION_NAMES

Attention = Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]


def sdpa_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """(B, H, L, D) q/k/v → (B, H, L, D), by torch's fused scaled-dot-product attention."""
    return F.scaled_dot_product_attention(q, k, v)


def math_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """The same as `sdpa_attention`, spelled out; the softmax runs in float32 (as SDPA's own math path does)."""
    scores = torch.matmul(q, k.transpose(-2, -1)) * q.shape[-1] ** -0.5
    return torch.matmul(scores.softmax(dim=-1, dtype=torch.float32).to(v.dtype), v)


QKV = tuple[torch.Tensor, torch.Tensor, torch.Tensor]


def joint_attention(attend: Attention, txt: QKV, img: QKV) -> tuple[torch.Tensor, torch.Tensor]:
    """One attention over the joint sequence [text; image]: (B, L, H, D) q/k/v per stream in, the (B, L, H, D)
    output of each stream out (text first, as the joint sequence)."""
    q, k, v = (torch.cat(pair, dim=1).transpose(1, 2) for pair in zip(txt, img, strict=True))  # (B, H, L, D)
    out = attend(q, k, v).transpose(1, 2)
    txt_out, img_out = out.split([txt[0].shape[1], img[0].shape[1]], dim=1)
    return txt_out, img_out


ATTENTION: dict[str, Attention] = dict(zip(ATTENTION_NAMES, (sdpa_attention, math_attention), strict=True))


def attention_by_name(name: str) -> Attention:
    """The implementation called `name`; a ValueError naming the choices otherwise."""
    try:
        return ATTENTION[name]
    except KeyError:
        raise ValueError(f"unknown attention {name!r}; choose one of {', '.join(ATTENTION)}") from None
