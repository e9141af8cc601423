"""A PNG preview of the final latents, standing in for the VAE decoder the embedded workload lacks.

The first three of the 16 latent channels become R, G, B (each stretched to 0–255), upscaled by the VAE's
factor to the requested resolution. With synthetic weights it shows structured noise, not a picture.
"""

from __future__ import annotations

from pathlib import Path

import torch
from PIL import Image


def latents_to_image(latents: torch.Tensor, height: int, width: int) -> Image.Image:
    """(1, C>=3, h, w) latents → RGB image of `width`×`height`."""
    rgb = latents[0, :3].float()
    lo = rgb.amin(dim=(1, 2), keepdim=True)
    hi = rgb.amax(dim=(1, 2), keepdim=True)
    rgb = ((rgb - lo) / (hi - lo).clamp_min(1e-12) * 255).round().to(torch.uint8)
    h, w = rgb.shape[1:]
    img = Image.frombytes("RGB", (w, h), bytes(rgb.permute(1, 2, 0).contiguous().flatten().tolist()))
    return img.resize((width, height), Image.Resampling.NEAREST)


def save_preview(latents: torch.Tensor, path: str | Path, height: int, width: int) -> None:
    latents_to_image(latents, height, width).save(path)
