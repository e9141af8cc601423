"""Flow-matching Euler sampler with Qwen-Image's resolution-dependent time shift.

State lives here, not in the model: `prepare` draws the initial noise, `step_pre` selects the step's flow
time, `step_post(velocity)` moves the latents one Euler step. The model only reads `latents` and
`sigma_tensor`, so calling it several times within one step is harmless.
"""

from __future__ import annotations

import math

import torch

from lightx2v.models.networks.qwen_image.config import QwenImageArch
from lightx2v.models.networks.qwen_image.layers import pack_latents, unpack_latents


def flow_sigmas(
    steps: int,
    image_seq_len: int,
    *,
    base_seq_len: int = 256,
    max_seq_len: int = 8192,
    base_shift: float = 0.5,
    max_shift: float = 0.9,
    shift_terminal: float = 0.02,
) -> torch.Tensor:
    """`steps + 1` decreasing flow times from 1 to 0.

    Uniform times are shifted towards the noisy end by mu, which grows linearly with the number of image
    tokens (bigger images need more steps at high noise), then stretched so the last non-zero time is
    `shift_terminal` — the defaults of Qwen-Image's scheduler config. One step has no last non-zero time to
    stretch (the stretch would divide 0 by 0): it is the single jump from 1 to 0.
    """
    slope = (max_shift - base_shift) / (max_seq_len - base_seq_len)
    mu = base_shift + slope * (image_seq_len - base_seq_len)
    t = torch.linspace(1.0, 1.0 / steps, steps, dtype=torch.float64)
    t = math.exp(mu) / (math.exp(mu) + (1.0 / t - 1.0))
    if shift_terminal and steps > 1:
        one_minus = 1.0 - t
        t = 1.0 - one_minus / (one_minus[-1] / (1.0 - shift_terminal))
    return torch.cat([t, torch.zeros(1, dtype=torch.float64)]).float()


class QwenImageScheduler:
    def __init__(
        self, arch: QwenImageArch, *, height: int, width: int, infer_steps: int, seed: int, device: torch.device
    ):
        self.arch = arch
        self.infer_steps = infer_steps
        self.seed = seed
        self.device = device
        self.latent_hw = (height // arch.vae_scale_factor, width // arch.vae_scale_factor)
        self.token_grid = (self.latent_hw[0] // arch.patch_size, self.latent_hw[1] // arch.patch_size)
        self.latents: torch.Tensor | None = None
        self.sigma_tensor: torch.Tensor | None = None
        self.step_index = -1

    @property
    def image_seq_len(self) -> int:
        return self.token_grid[0] * self.token_grid[1]

    def prepare(self) -> None:
        """Seeded initial noise, drawn on the CPU so every device and rank starts from the same latents."""
        self.sigmas = flow_sigmas(self.infer_steps, self.image_seq_len)
        gen = torch.Generator(device="cpu").manual_seed(self.seed)
        noise = torch.randn((1, self.arch.latent_channels, *self.latent_hw), generator=gen, dtype=torch.float32)
        self.latents = pack_latents(noise, self.arch.patch_size).to(self.device)
        self.step_index = -1

    def step_pre(self, step_index: int) -> None:
        self.step_index = step_index
        self.sigma_tensor = self.sigmas[step_index : step_index + 1].to(self.device)

    def step_post(self, velocity: torch.Tensor) -> None:
        """Euler step from sigma_i to sigma_{i+1} along the predicted velocity (noise − data)."""
        dt = float(self.sigmas[self.step_index + 1] - self.sigmas[self.step_index])
        self.latents = self.current_latents() + dt * velocity.float()

    def current_sigma(self) -> torch.Tensor:
        """This step's sigma as a 1-element tensor on the device (a RuntimeError before ``step_pre()``)."""
        if self.sigma_tensor is None:
            raise RuntimeError("QwenImageScheduler: call step_pre() first")
        return self.sigma_tensor

    def current_latents(self) -> torch.Tensor:
        """The latents being denoised (a RuntimeError before ``prepare()``)."""
        if self.latents is None:
            raise RuntimeError("QwenImageScheduler: call prepare() first")
        return self.latents

    def unpacked_latents(self) -> torch.Tensor:
        """Final latents as (1, 16, H/8, W/8) float32 on the CPU, the shape a VAE decoder takes."""
        latents = self.current_latents().cpu()
        return unpack_latents(latents, self.arch.latent_channels, *self.latent_hw, self.arch.patch_size)
