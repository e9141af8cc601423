"""Stateless building blocks of the MMDiT: latent packing, timestep features, rotary positions, RMSNorm.

Pure functions of their tensor arguments, so the model's `infer` stays a pure function of its inputs.
"""

from __future__ import annotations

import math

import torch


def pack_latents(latents: torch.Tensor, patch: int) -> torch.Tensor:
    """(B, C, H, W) latents → (B, H/p · W/p, C·p·p) tokens, row-major over patches."""
    b, c, h, w = latents.shape
    x = latents.reshape(b, c, h // patch, patch, w // patch, patch)
    return x.permute(0, 2, 4, 1, 3, 5).reshape(b, (h // patch) * (w // patch), c * patch * patch)


def unpack_latents(tokens: torch.Tensor, channels: int, height: int, width: int, patch: int) -> torch.Tensor:
    """Inverse of `pack_latents`; `height`/`width` are in latent pixels."""
    b = tokens.shape[0]
    x = tokens.reshape(b, height // patch, width // patch, channels, patch, patch)
    return x.permute(0, 3, 1, 4, 2, 5).reshape(b, channels, height, width)


def timestep_features(sigma: torch.Tensor, dim: int, max_period: float = 10000.0) -> torch.Tensor:
    """Sinusoidal features of the flow time (sigma × 1000), cos half first, as Qwen-Image's `Timesteps`."""
    half = dim // 2
    freqs = torch.exp(-math.log(max_period) * torch.arange(half, dtype=torch.float32, device=sigma.device) / half)
    angles = (sigma.float() * 1000.0)[:, None] * freqs[None, :]
    return torch.cat([torch.cos(angles), torch.sin(angles)], dim=-1)


def rope_axes(head_dim: int) -> tuple[int, int, int]:
    """Split a head into (frame, height, width) rotary axes; 128 → (16, 56, 56) as in Qwen-Image."""
    frame = 2 * (head_dim // 16)
    rest = head_dim - frame
    h = 2 * (rest // 4)
    return frame, h, rest - h


def _axis_angles(pos: torch.Tensor, dim: int, theta: float) -> torch.Tensor:
    inv = 1.0 / theta ** (torch.arange(0, dim, 2, dtype=torch.float32, device=pos.device) / dim)
    return pos.float()[:, None] * inv[None, :]


def rope_angles(positions: torch.Tensor, head_dim: int, theta: float = 10000.0) -> torch.Tensor:
    """(L, 3) integer (frame, row, col) positions → (L, head_dim/2) rotation angles."""
    dims = rope_axes(head_dim)
    return torch.cat([_axis_angles(positions[:, i], d, theta) for i, d in enumerate(dims)], dim=-1)


def joint_positions(rows: int, cols: int, text_len: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """Positions of the text and image tokens for joint attention.

    Image tokens sit on a grid centred at 0 (frame 0); text tokens continue on the diagonal after the
    image's extent, so text and image never share a position (the layout Qwen-Image's MSRoPE uses).
    """
    r = torch.arange(rows, device=device) - rows // 2
    c = torch.arange(cols, device=device) - cols // 2
    grid_r, grid_c = torch.meshgrid(r, c, indexing="ij")
    img = torch.stack([torch.zeros_like(grid_r), grid_r, grid_c], dim=-1).reshape(-1, 3)
    start = max(rows // 2, cols // 2)
    t = torch.arange(start, start + text_len, device=device)
    txt = torch.stack([t, t, t], dim=-1)
    return txt, img


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate interleaved pairs of the last dim. x: (B, L, H, D); cos/sin: (L, D/2)."""
    pairs = x.unflatten(-1, (-1, 2))
    x0, x1 = pairs[..., 0], pairs[..., 1]
    cos = cos[None, :, None, :].to(x.dtype)
    sin = sin[None, :, None, :].to(x.dtype)
    return torch.stack([x0 * cos - x1 * sin, x0 * sin + x1 * cos], dim=-1).flatten(-2)


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """RMSNorm over the last dim, computed in float32 for bf16 stability."""
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype) * weight
