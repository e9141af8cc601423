"""`python -m lightx2v.infer` end to end in real subprocesses: trace, call count, outputs, determinism."""

from __future__ import annotations

import pytest
import torch
from PIL import Image

from helpers.infer import FAST, run_infer
from helpers.traces import event_names, load_trace

STEPS = 4  # FAST's --infer_steps
CUDA = torch.cuda.is_available()  # --device auto picks it, in bf16; the tests assert what each machine must give


def assert_same_latents(a: torch.Tensor, b: torch.Tensor) -> None:
    """Bit-identical on CPU; on CUDA the same kernels on the same inputs, bf16 leaving room for reduction order."""
    if CUDA:
        torch.testing.assert_close(a, b, rtol=1e-2, atol=1e-2)
    else:
        assert torch.equal(a, b)


@pytest.fixture(scope="module")
def profiled(tmp_path_factory):
    run = run_infer(tmp_path_factory.mktemp("profiled"), *FAST)
    assert run.proc.returncode == 0, run.output
    return run


@pytest.fixture(scope="module")
def unprofiled(tmp_path_factory):
    run = run_infer(tmp_path_factory.mktemp("unprofiled"), *FAST, "--no-profile")
    assert run.proc.returncode == 0, run.output
    return run


@pytest.mark.slow
def test_profiled_run_writes_exactly_one_trace_in_its_own_run_directory(profiled):
    traces = profiled.traces()
    assert len(traces) == 1, traces
    run_dir = traces[0].parent
    assert run_dir.parent == profiled.cwd / "save_results" / "torch_profile"
    assert traces[0].name.startswith("rank0_")
    capture = profiled.metadata["capture"]
    assert capture["run_dir"].endswith(run_dir.name) and capture["trace_paths"][0].endswith(traces[0].name)
    assert str(traces[0].relative_to(profiled.cwd)) in profiled.proc.stdout  # the CLI says where it went


def test_trace_holds_the_profiler_step_and_the_model_regions(profiled):
    names = event_names(load_trace(profiled.traces()[0]))
    assert any(n.startswith("ProfilerStep#") for n in names)
    for region in (
        "pre_infer",
        "transformer_infer",
        "block_00",
        "block_01",
        "modulation",
        "attention",
        "mlp",
        "post_infer",
        "cfg_guide",
    ):
        assert region in names, region
    # one active call exported: one forward per CFG branch, one attention per block per branch
    assert names.count("infer_cond") == 1 and names.count("infer_uncond") == 1
    assert names.count("attention") == 2 * 2
    assert any("scaled_dot_product" in n for n in names)


@pytest.mark.slow
def test_model_infer_called_steps_plus_four_times_with_the_default_schedule(profiled):
    meta = profiled.metadata
    schedule = meta["profile_kwargs"]
    assert (schedule["wait"], schedule["warmup"], schedule["active"]) == (1, 3, 1)
    assert meta["infer_calls"] == STEPS + 4  # step 0 called 1 + 3 + 1 times, every other step once
    assert f"model.infer called {STEPS + 4} times" in profiled.proc.stdout


def test_outputs_are_written(profiled):
    latents = profiled.latents
    assert latents.shape == (1, 16, 128 // 8, 128 // 8) and latents.dtype == torch.float32
    assert torch.isfinite(latents).all()
    with Image.open(profiled.save_path) as img:
        assert img.size == (128, 128) and img.mode == "RGB"
    meta = profiled.metadata
    assert meta["device"] == ("cuda:0" if CUDA else "cpu") and meta["world_size"] == 1
    assert meta["dtype"] == ("bfloat16" if CUDA else "float32")
    assert meta["arch"]["height"] == 128 and meta["seed"] == 7


@pytest.mark.slow
def test_profiled_and_unprofiled_runs_give_identical_latents(profiled, unprofiled):
    assert unprofiled.traces() == []
    assert unprofiled.metadata["infer_calls"] == STEPS and unprofiled.metadata["capture"] is None
    assert_same_latents(profiled.latents, unprofiled.latents)


@pytest.mark.slow
def test_same_seed_same_latents_other_seed_other_latents(unprofiled, tmp_path):
    again = run_infer(tmp_path / "again", *FAST, "--no-profile")
    other = run_infer(tmp_path / "other", *FAST, "--no-profile", "--seed", "8")
    assert again.proc.returncode == 0 and other.proc.returncode == 0, again.output + other.output
    assert_same_latents(again.latents, unprofiled.latents)
    assert not torch.allclose(other.latents, unprofiled.latents)


@pytest.mark.slow
def test_env_switch_and_chrome_format(tmp_path):
    """LIGHTX2V_TORCH_PROFILE=0 turns the default-on capture off; --profile_format chrome writes trace.json."""
    off = run_infer(tmp_path / "off", *FAST, LIGHTX2V_TORCH_PROFILE="0")
    assert off.proc.returncode == 0, off.output
    assert off.traces() == [] and off.metadata["infer_calls"] == STEPS
    chrome = run_infer(tmp_path / "chrome", *FAST, "--profile_format", "chrome", "--profile_warmup", "1")
    assert chrome.proc.returncode == 0, chrome.output
    trace = chrome.cwd / "save_results" / "trace.json"
    assert "attention" in event_names(load_trace(trace))
    assert chrome.metadata["infer_calls"] == STEPS + 2


@pytest.mark.slow
def test_profile_memory_records_allocations_and_memory_snapshot_says_cuda_only_on_a_cpu(tmp_path):
    """--profile_memory puts the allocator's [memory] events in the trace; --memory_snapshot reaches the profiler
    (on a CPU: its one "CUDA only" line, no snapshot file; on CUDA: the snapshot beside the trace)."""
    run = run_infer(tmp_path, *FAST, "--profile_memory", "--memory_snapshot", "--profile_warmup", "1")
    assert run.proc.returncode == 0, run.output
    (trace,) = run.traces()
    assert "[memory]" in event_names(load_trace(trace))
    snapshots = list(trace.parent.glob("*.memory_snapshot.pickle"))
    if CUDA:
        assert len(snapshots) == 1
    else:
        assert snapshots == [] and run.output.count("memory_snapshot: CUDA only") == 1
