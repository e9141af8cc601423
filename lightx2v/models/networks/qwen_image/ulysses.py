"""Ulysses sequence parallelism for the joint attention, as LightX2V's `seq_p_attn_type: "ulysses"` does it.

The image tokens are split over the `seq_p` group (rank r holds tokens r·L/N … (r+1)·L/N − 1, all heads); the text
tokens are whole on every rank. Before attention an all-to-all turns each rank's image q, k, v from (L/N tokens,
H heads) into (L tokens, H/N heads); the rank's H/N heads of the text q/k/v are sliced locally. After attention
an all-to-all turns the image output back into (L/N, H), and an all-gather over the heads gives every rank the
whole text output. Per block: three all-to-alls before (q, k, v, as LightX2V does without tensor fusion), one
after, one all-gather.

Trace regions: `seq_p_all_to_all_qkv`, `seq_p_all_to_all_out`, `seq_p_all_gather_txt`; the collectives inside
are torch's `c10d::alltoall_base_` / `c10d::allgather_` (gloo: `gloo:all_to_all`, `gloo:all_gather`; NCCL
kernels on a GPU) on the group described `mesh_seq_p`.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
from torch.profiler import record_function

from lightx2v.models.networks.qwen_image.attention import QKV, Attention, joint_attention
from lightx2v.models.networks.qwen_image.late_rank import LateRank


def seq_to_heads(x: torch.Tensor, group, size: int) -> torch.Tensor:
    """(B, L/N, H, D), this rank's tokens with all heads → (B, L, H/N, D), all tokens with this rank's heads."""
    b, local_len, heads, dim = x.shape
    send = x.reshape(b, local_len, size, heads // size, dim).permute(2, 0, 1, 3, 4).contiguous()  # [j]: to rank j
    recv = torch.empty_like(send)
    dist.all_to_all_single(recv, send, group=group)  # recv[j]: rank j's tokens, this rank's heads
    return recv.permute(1, 0, 2, 3, 4).reshape(b, size * local_len, heads // size, dim)


def heads_to_seq(x: torch.Tensor, group, size: int) -> torch.Tensor:
    """The inverse of `seq_to_heads`: (B, L, H/N, D) → (B, L/N, H, D)."""
    b, length, heads, dim = x.shape
    send = x.reshape(b, size, length // size, heads, dim).permute(1, 0, 2, 3, 4).contiguous()  # [j]: rank j's tokens
    recv = torch.empty_like(send)
    dist.all_to_all_single(recv, send, group=group)  # recv[j]: this rank's tokens, rank j's heads
    return recv.permute(1, 2, 0, 3, 4).reshape(b, length // size, size * heads, dim)


class UlyssesAttention:
    """The joint attention of every block over the `seq_p` group (`group`, this rank's index `rank` of `size`)."""

    def __init__(self, group, size: int, rank: int, late: LateRank | None = None):
        self.group = group
        self.size = size
        self.rank = rank
        self.late = late

    def __call__(self, attend: Attention, txt: QKV, img: QKV) -> tuple[torch.Tensor, torch.Tensor]:
        """txt: (B, Lt, H, D) q/k/v of all text tokens; img: (B, L/N, H, D) of this rank's image tokens.
        Returns the text output (B, Lt, H, D) and this rank's image output (B, L/N, H, D)."""
        heads = img[0].shape[2]
        if heads % self.size:
            raise ValueError(f"Ulysses: {heads} heads do not split evenly over seq_p_size {self.size}")
        share = heads // self.size
        if self.late is not None:
            self.late.before_collective()
        with record_function("seq_p_all_to_all_qkv"):
            q, k, v = (seq_to_heads(x, self.group, self.size) for x in img)
        mine = slice(self.rank * share, (self.rank + 1) * share)
        tq, tk, tv = (x[:, :, mine] for x in txt)
        txt_out, img_out = joint_attention(attend, (tq, tk, tv), (q, k, v))
        with record_function("seq_p_all_to_all_out"):
            img_out = heads_to_seq(img_out, self.group, self.size)
        with record_function("seq_p_all_gather_txt"):
            parts = [torch.empty_like(txt_out) for _ in range(self.size)]
            dist.all_gather(parts, txt_out.contiguous(), group=self.group)
        return torch.cat(parts, dim=2), img_out
