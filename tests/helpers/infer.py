"""Run `python -m lightx2v.infer` (plain or under torchrun) in a real subprocess and read what it wrote."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import torch

from conftest import subprocess_env
from helpers.traces import plugin_traces

# small and fast: the tiny preset at 128x128 for 4 steps
FAST = [
    "--preset",
    "tiny",
    "--height",
    "128",
    "--width",
    "128",
    "--infer_steps",
    "4",
    "--prompt",
    "a red fox",
    "--seed",
    "7",
]


@dataclass
class Run:
    cwd: Path
    proc: subprocess.CompletedProcess
    save_path: Path

    @property
    def output(self) -> str:
        return self.proc.stdout + self.proc.stderr

    @property
    def metadata(self) -> dict:
        return json.loads(self.save_path.with_suffix(".json").read_text())

    @property
    def latents(self) -> torch.Tensor:
        return torch.load(self.save_path.with_suffix(".pt"))

    def traces(self) -> list[Path]:
        """The files TensorBoard's plugin would load (not the summaries written next to them)."""
        return plugin_traces(self.cwd / "save_results" / "torch_profile")


def run_infer(cwd: Path, *args: str, torchrun: int = 0, timeout: float = 300, **env: str) -> Run:
    launcher = (  # --standalone: a free rendezvous port, so jobs running side by side never meet
        [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={torchrun}"]
        if torchrun
        else [sys.executable]
    )
    cwd.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run(
        [*launcher, "-m", "lightx2v.infer", *args],
        cwd=cwd,
        env=subprocess_env(**env),
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    save = next(
        (args[i + 1] for i, a in enumerate(args) if a == "--save_result_path"), "save_results/qwen_image_t2i.png"
    )
    return Run(cwd, proc, cwd / save)

