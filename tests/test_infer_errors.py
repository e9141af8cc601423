"""Bad input to `python -m lightx2v.infer`: one clear message naming the problem, exit != 0, no traceback."""

from __future__ import annotations

import pytest

from helpers.infer import run_infer


def _blocker(tmp_path):
    """A path whose parent is a regular file: unwritable even for root."""
    (tmp_path / "afile").write_text("x")
    return str(tmp_path / "afile" / "out.png")


CASES = [
    (["--preset", "huge"], "--preset: invalid choice: 'huge'"),
    (["--model_cls", "wan2.1"], "--model_cls: invalid choice: 'wan2.1'"),
    (["--task", "i2v"], "--task: invalid choice: 'i2v'"),
    (["--infer_steps", "0"], "--infer_steps must be a positive integer, got 0"),
    (["--infer_steps", "-3"], "--infer_steps must be a positive integer, got -3"),
    (["--infer_steps", "two"], "--infer_steps: invalid int value: 'two'"),
    (["--height", "250"], "--height 250 must be a positive multiple of 16"),
    (["--width", "0"], "--width 0 must be a positive multiple of 16"),
    (["--num_heads", "3"], "hidden_size 128 is not divisible by num_heads 3"),
    (["--num_layers", "0"], "num_layers must be >= 1, got 0"),
    (["--threads", "0"], "--threads must be >= 1, got 0"),
    (["--profile_active", "0"], "--profile_active must be >= 1, got 0"),
    (["--cfg_parallel"], "--cfg_parallel runs the two CFG branches on exactly 2 processes"),
    (["--device", "cuda"], "--device cuda: CUDA is not available"),
    (["--preset", "qwen-image", "--num_layers", "600"], "GiB for its 203.94B weights"),  # no machine fits 0.8 TB
    (["--save_result_path", "out.xyz"], "unknown image extension '.xyz'"),
    (["--save_result_path", "BLOCKED"], "is not writable"),
]


@pytest.mark.parametrize("args, message", CASES, ids=[" ".join(a) for a, _ in CASES])
def test_bad_input_gives_one_clear_error(tmp_path, args, message):
    args = [_blocker(tmp_path) if a == "BLOCKED" else a for a in args]
    run = run_infer(tmp_path / "cwd", *args, timeout=120)
    assert run.proc.returncode == 2, run.output
    assert message in run.proc.stderr, run.proc.stderr
    assert "Traceback" not in run.output
    assert not (run.cwd / "save_results" / "torch_profile").exists()


def test_several_problems_are_reported_together(tmp_path):
    run = run_infer(tmp_path, "--infer_steps", "0", "--height", "100", timeout=120)
    assert run.proc.returncode == 2
    assert "--infer_steps" in run.proc.stderr and "--height 100" in run.proc.stderr


def test_help_says_weights_are_synthetic_and_there_is_no_text_encoder_or_vae(tmp_path):
    run = run_infer(tmp_path, "--help", timeout=120)
    assert run.proc.returncode == 0
    text = " ".join(run.proc.stdout.split())
    assert "SYNTHETIC weights" in text and "no text encoder and no VAE" in text
    assert "pseudo-embedding" in text and "torchrun --nproc_per_node=2" in text
