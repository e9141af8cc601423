"""Bad input to `python -m lightx2v.infer`: one clear message naming the problem, exit != 0, no traceback."""

from __future__ import annotations

import resource
import subprocess
import sys

import pytest
import torch

from lightx2v.infer import SEED_MAX, Number, build_parser

from conftest import subprocess_env
from helpers.infer import FAST, run_infer


def _blocker(tmp_path):
    """A path whose parent is a regular file: unwritable even for root."""
    (tmp_path / "afile").write_text("x")
    return str(tmp_path / "afile" / "out.png")


CASES = [
    (["--preset", "huge"], "--preset: invalid choice: 'huge'"),
    (["--model_cls", "wan2.1"], "--model_cls: invalid choice: 'wan2.1'"),
    (["--task", "i2v"], "--task: invalid choice: 'i2v'"),
    (["--attention", "flash"], "--attention: invalid choice: 'flash'"),
    (["--infer_steps", "0"], "argument --infer_steps: must be an integer >= 1, got '0'"),
    (["--infer_steps", "-3"], "argument --infer_steps: must be an integer >= 1, got '-3'"),
    (["--infer_steps", "two"], "argument --infer_steps: must be an integer >= 1, got 'two'"),
    (["--guidance_scale", "nan"], "argument --guidance_scale: must be a finite number in 0..100, got 'nan'"),
    (["--guidance_scale", "inf"], "argument --guidance_scale: must be a finite number in 0..100, got 'inf'"),
    (["--seed", "-1"], f"argument --seed: must be an integer in 0..{SEED_MAX}, got '-1'"),
    (["--height", "250"], "--height 250 must be a positive multiple of 16"),
    (["--width", "0"], "argument --width: must be an integer >= 16, got '0'"),
    (["--num_heads", "3"], "hidden_size 128 is not divisible by num_heads 3"),
    (["--num_layers", "0"], "argument --num_layers: must be an integer >= 1, got '0'"),
    (["--threads", "0"], "argument --threads: must be an integer in 1.."),
    (["--profile_active", "0"], "argument --profile_active: must be an integer >= 1, got '0'"),
    (["--cfg_parallel"], "--cfg_parallel runs the two CFG branches on exactly 2 processes"),
    # LightX2V's parallel block (docs/inference.md "Sequence parallelism"); impossible layouts, one line each
    (["--seq_p_size", "2"], "--seq_p_size 2 needs 2 processes (world size here: 1); launch with: torchrun "
                            "--nproc_per_node=2"),
    (["--seq_p_size", "2", "--cfg_parallel"], "--seq_p_size 2 x --cfg_parallel (2) needs 4 processes"),
    (["--seq_p_size", "2", "--seq_p_attn_type", "ring"], "--seq_p_attn_type ring is not implemented in the "
                                                         "embedded inference (LightX2V's ring attention); use"),
    (["--seq_p_attn_type", "ulysses-4090"], "--seq_p_attn_type: invalid choice: 'ulysses-4090'"),
    (["--seq_p_size", "3"], "--seq_p_size 3: the 4 attention heads do not split evenly over 3 ranks"),
    (["--seq_p_size", "4", "--height", "48", "--width", "48"],
     "--seq_p_size 4: the 9 image tokens (48/16 x 48/16) do not split evenly over 4 ranks"),
    (["--late_ms", "80"], "--late_ms needs --late_rank (which rank is late)"),
    (["--late_rank", "0"], "--late_rank 0 needs --late_ms (how late, in ms)"),
    (["--late_rank", "0", "--late_ms", "80"], "--late_rank: one process waits for no one"),
    (["--late_ms", "0"], "argument --late_ms: must be a finite number in 1..60000, got '0'"),
    (["--preset", "qwen-image", "--num_layers", "600"], "GiB for its 203.94B weights"),  # no machine fits 0.8 TB
    (["--save_result_path", "out.xyz"], "unknown image extension '.xyz'"),
    (["--save_result_path", "BLOCKED"], "is not writable"),
    # an unwritable trace output is refused before the run (docs/inference.md)
    (["--tb_dir", "BLOCKED"], "cannot write the trace there,"),
    (["--profile_format", "chrome", "--chrome_path", "/proc/t.json"], "--chrome_path /proc/t.json: cannot write"),
    (["--profile_format", "chrome", "--chrome_path", "."], "is a directory; give a file name such as"),
]


@pytest.mark.parametrize("args, message", CASES, ids=[" ".join(a) for a, _ in CASES])
@pytest.mark.slow
def test_bad_input_gives_one_clear_error(tmp_path, args, message):
    args = [_blocker(tmp_path) if a == "BLOCKED" else a for a in args]
    run = run_infer(tmp_path / "cwd", *args, timeout=120)
    assert run.proc.returncode == 2, run.output
    assert message in run.proc.stderr, run.proc.stderr
    assert [line for line in run.proc.stderr.splitlines() if "error:" in line] == [run.proc.stderr.splitlines()[-1]]
    assert "Traceback" not in run.output
    assert not (run.cwd / "save_results" / "torch_profile").exists()


LAUNCHED = [  # what the CLI reads from torchrun's environment before joining: WORLD_SIZE against the layout asked
    ("3", ["--seq_p_size", "2"], "--seq_p_size 2 needs 2 processes (world size here: 3)"),
    ("4", [], "started by torchrun with 4 processes: add --cfg_parallel (2 processes) and/or --seq_p_size N"),
    ("2", ["--seq_p_size", "2", "--late_rank", "2", "--late_ms", "80"], "--late_rank 2 is not a rank of this job "
                                                                         "(world size 2)"),
    ("2", ["--seq_p_size", "2", "--late_rank", "1", "--late_ms", "80", "--late_steps", "1,x"],
     "--late_steps '1,x': give model.infer call indices (>= 0) separated by commas, e.g. 1,3"),
]


@pytest.mark.parametrize("world, args, message", LAUNCHED, ids=[" ".join(a) or "none" for _, a, _ in LAUNCHED])
@pytest.mark.slow
def test_a_layout_that_does_not_fit_the_launched_job_gives_one_clear_error(tmp_path, world, args, message):
    run = run_infer(tmp_path / "cwd", *args, timeout=120, WORLD_SIZE=world)
    assert run.proc.returncode == 2, run.output
    assert message in run.proc.stderr, run.proc.stderr
    assert [line for line in run.proc.stderr.splitlines() if "error:" in line] == [run.proc.stderr.splitlines()[-1]]
    assert "Traceback" not in run.output


def test_unwritable_logdir_from_the_environment_is_named(tmp_path):
    run = run_infer(tmp_path / "cwd", LIGHTX2V_TORCH_PROFILE_DIR=_blocker(tmp_path), timeout=120)
    assert run.proc.returncode == 2, run.output
    assert "error: LIGHTX2V_TORCH_PROFILE_DIR " in run.proc.stderr and "is a file, not a folder" in run.proc.stderr


@pytest.mark.slow
def test_device_cuda_runs_where_cuda_is_and_is_refused_elsewhere(tmp_path):
    run = run_infer(tmp_path, *FAST, "--device", "cuda", "--no-profile", timeout=300)
    if torch.cuda.is_available():
        assert run.proc.returncode == 0, run.output
        assert run.metadata["device"].startswith("cuda") and run.metadata["dtype"] == "bfloat16"
    else:
        assert run.proc.returncode == 2, run.output
        assert "--device cuda: CUDA is not available" in run.proc.stderr
        assert "Traceback" not in run.output


def test_several_problems_are_reported_together(tmp_path):
    run = run_infer(tmp_path, "--height", "100", "--width", "200", "--tb_dir", _blocker(tmp_path), timeout=120)
    assert run.proc.returncode == 2
    stderr = run.proc.stderr
    assert "--height 100" in stderr and "--width 200" in stderr and "--tb_dir" in stderr, stderr


# --- every numeric flag, found by walking the parser, so a new flag is covered without editing this file ----------
NUMERIC = [a for a in build_parser()._actions if a.type is not None]
ZERO_ALLOWED = {"--seed", "--guidance_scale", "--profile_wait", "--profile_warmup", "--late_rank"}  # others >= 1


def test_every_typed_flag_declares_its_range():
    """A flag added with a bare `type=int` or `type=float` would let nan, inf or negatives through: fail here."""
    assert len(NUMERIC) >= 13
    untyped = [a.option_strings[0] for a in NUMERIC if not isinstance(a.type, Number)]
    assert untyped == []
    assert {a.option_strings[0] for a in NUMERIC if a.type.low == 0} == ZERO_ALLOWED


def _parse(capsys, flag: str, value: str):
    """The CLI's own parser on one flag: (parsed value, None) or (None, the stderr of its exit 2)."""
    try:
        args = build_parser().parse_args([f"{flag}={value}"])  # '=': a value like -inf is not taken for a flag
    except SystemExit as exc:
        assert exc.code == 2
        return None, capsys.readouterr().err
    return getattr(args, flag.lstrip("-")), None


@pytest.mark.parametrize("value", ["nan", "-nan", "inf", "-inf", "1e400", "-1", "0", "1.5", "", "x"])
@pytest.mark.parametrize("flag", [a.option_strings[0] for a in NUMERIC])
def test_numeric_flags_refuse_non_finite_negative_zero_and_junk(capsys, flag, value):
    number = next(a.type for a in NUMERIC if a.option_strings[0] == flag)
    fine = (value == "0" and flag in ZERO_ALLOWED) or (value == "1.5" and number.kind is float)
    parsed, err = _parse(capsys, flag, value)
    if fine:
        assert err is None and parsed == float(value)
    else:
        assert parsed is None and err is not None
        assert err.splitlines()[-1] == (
            f"python -m lightx2v.infer: error: argument {flag}: must be {number.describe()}, got {value!r}"
        )


@pytest.mark.parametrize("flag", [a.option_strings[0] for a in NUMERIC])
def test_numeric_flags_accept_their_bounds_and_refuse_just_beyond(capsys, flag):
    number = next(a.type for a in NUMERIC if a.option_strings[0] == flag)
    step = 1 if number.kind is int else 1e-6
    assert _parse(capsys, flag, str(number.kind(number.low)))[0] == number.low
    assert _parse(capsys, flag, str(number.kind(number.low - step)))[0] is None
    if number.high is not None:
        assert _parse(capsys, flag, str(number.kind(number.high)))[0] == number.high
        assert _parse(capsys, flag, str(number.kind(number.high + step)))[0] is None


def test_seed_range_is_torchs():
    torch.Generator().manual_seed(0)
    torch.Generator().manual_seed(SEED_MAX)
    with pytest.raises((RuntimeError, ValueError)):  # one past the top: torch refuses it too
        torch.Generator().manual_seed(SEED_MAX + 1)


@pytest.mark.parametrize(
    "bounds",
    [
        # every numeric flag at its lowest accepted value, the model as small as it gets
        ["--infer_steps", "1", "--guidance_scale", "0", "--seed", "0", "--height", "16", "--width", "16",
         "--num_layers", "1", "--hidden_size", "2", "--num_heads", "1", "--threads", "1", "--profile_wait", "0",
         "--profile_warmup", "0", "--profile_active", "1", "--tensorboard_port", "1"],
        # the highest, where there is one; one CFG step at the top scale
        [*FAST, "--infer_steps", "1", "--guidance_scale", "100", "--seed", str(SEED_MAX), "--threads", "1",
         "--tensorboard_port", "65535"],
    ],
    ids=["lowest", "highest"],
)
@pytest.mark.slow
def test_accepted_bounds_run_and_give_finite_latents(tmp_path, bounds):
    """What the flags accept, the model can run: a bound the parser lets through must not end in NaN."""
    run = run_infer(tmp_path, *bounds, timeout=300)
    assert run.proc.returncode == 0, run.output
    assert torch.isfinite(run.latents).all()
    assert len(run.traces()) == 1


@pytest.mark.slow
def test_a_trace_that_fails_to_land_keeps_the_result_and_exits_1(tmp_path):
    """The up-front check cannot see a disk filling during the run: here the kernel's file size limit (200 kB,
    above every output but under the ~750 kB trace) makes the trace's write fail for real."""
    limit = 200_000

    def limit_file_size() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    proc = subprocess.run(
        [sys.executable, "-m", "lightx2v.infer", *FAST, "--threads", "1"],
        cwd=tmp_path,
        env=subprocess_env(),
        capture_output=True,
        text=True,
        timeout=300,
        preexec_fn=limit_file_size,
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert proc.stderr.splitlines()[-1].startswith("error: the trace was not written: could not write ")
    assert "Traceback" not in proc.stdout + proc.stderr
    results = tmp_path / "save_results"
    latents = torch.load(results / "qwen_image_t2i.pt")
    assert latents.shape == (1, 16, 16, 16) and torch.isfinite(latents).all()
    assert (results / "qwen_image_t2i.png").stat().st_size > 0
    assert "could not write" in (results / "qwen_image_t2i.json").read_text()


def test_help_says_weights_are_synthetic_and_there_is_no_text_encoder_or_vae(tmp_path):
    run = run_infer(tmp_path, "--help", timeout=120)
    assert run.proc.returncode == 0
    text = " ".join(run.proc.stdout.split())
    assert "SYNTHETIC weights" in text and "no text encoder and no VAE" in text
    assert "pseudo-embedding" in text and "torchrun --nproc_per_node=2" in text
