"""The embedded model's pieces, in process: shapes, the flow schedule, determinism, and an idempotent infer."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from lightx2v.models.input_encoders.pseudo_text_encoder import embed_prompt, tokenize
from lightx2v.models.networks.qwen_image.attention import ATTENTION, attention_by_name
from lightx2v.models.networks.qwen_image.config import ATTENTION_NAMES, DEFAULT_ATTENTION, PRESETS
from lightx2v.models.networks.qwen_image.layers import pack_latents, rope_axes, unpack_latents
from lightx2v.models.networks.qwen_image.model import build_transformer, guide
from lightx2v.models.networks.qwen_image.transformer import QwenImageTransformer
from lightx2v.models.runners.qwen_image.qwen_image_runner import QwenImageRunConfig, QwenImageRunner
from lightx2v.models.schedulers.qwen_image.scheduler import flow_sigmas

TINY = PRESETS["tiny"]


def test_pack_unpack_round_trip_and_token_layout():
    lat = torch.randn(1, 16, 8, 12)
    tokens = pack_latents(lat, 2)
    assert tokens.shape == (1, 4 * 6, 64)
    # token 1 is the patch at row 0, column 1: latent pixels [0:2, 2:4] of every channel
    assert torch.equal(tokens[0, 1].reshape(16, 2, 2), lat[0, :, 0:2, 2:4])
    assert torch.equal(unpack_latents(tokens, 16, 8, 12, 2), lat)


def test_qwen_image_preset_has_the_real_transformer_shape():
    arch = PRESETS["qwen-image"]
    assert (arch.num_layers, arch.hidden_size, arch.num_heads, arch.head_dim) == (60, 3072, 24, 128)
    assert rope_axes(128) == (16, 56, 56)
    assert 20.0e9 < arch.param_count() < 20.9e9  # ~40 GB in bf16
    with torch.device("meta"):  # the analytic count is the module's count, without allocating 80 GB
        net = QwenImageTransformer(arch)
    assert sum(p.numel() for p in net.parameters()) == arch.param_count()


def test_flow_sigmas_run_from_one_to_zero_and_shift_with_resolution():
    small, big = flow_sigmas(8, 256), flow_sigmas(8, 4096)
    for s in (small, big):
        assert s.shape == (9,) and s[0] == pytest.approx(1.0) and s[-1] == 0.0
        assert bool((s[1:] < s[:-1]).all())
        assert s[-2] == pytest.approx(0.02, abs=1e-6)  # Qwen-Image's shift_terminal
    assert bool((big[1:-2] > small[1:-2]).all())  # more tokens → more time at high noise


def test_one_step_is_the_single_jump_from_noise_to_data():
    """The terminal stretch divides by the last non-zero time's distance from 1, which is 0 for one step."""
    for seq_len in (256, 4096):
        assert flow_sigmas(1, seq_len).tolist() == [1.0, 0.0]


def test_pseudo_text_embedding_is_deterministic_and_follows_the_prompt():
    a = embed_prompt("a red fox, at dusk", 32, 16, torch.device("cpu"), torch.float32)
    b = embed_prompt("a red fox, at dusk", 32, 16, torch.device("cpu"), torch.float32)
    c = embed_prompt("a red fox", 32, 16, torch.device("cpu"), torch.float32)
    assert a.shape == (1, 6, 32) and torch.equal(a, b)
    assert torch.equal(a[:, :3], c)  # same words, same vectors
    assert tokenize("", 4) == ["<pad>"] and len(tokenize("w " * 50, 7)) == 7


def test_weights_are_seeded_and_built_in_the_requested_dtype():
    small = dataclasses.replace(TINY, num_layers=1)
    a = build_transformer(small, torch.device("cpu"), torch.bfloat16, seed=3)
    b = build_transformer(small, torch.device("cpu"), torch.bfloat16, seed=3)
    c = build_transformer(small, torch.device("cpu"), torch.bfloat16, seed=4)
    assert {p.dtype for p in a.parameters()} == {torch.bfloat16}
    assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters(), strict=True))
    assert not torch.equal(a.img_in.weight, c.img_in.weight)
    assert torch.equal(a.blocks[0].img.norm_q, torch.ones(small.head_dim, dtype=torch.bfloat16))


def test_guidance_keeps_the_conditional_norm_per_token():
    cond, uncond = torch.randn(1, 5, 64), torch.randn(1, 5, 64)
    out = guide(cond, uncond, 4.0)
    torch.testing.assert_close(out.norm(dim=-1), cond.norm(dim=-1))
    torch.testing.assert_close(guide(cond, uncond, 1.0), cond)


def _runner(**kw) -> QwenImageRunner:
    config = QwenImageRunConfig(arch=TINY, prompt="a lighthouse", height=64, width=96, infer_steps=3, **kw)
    runner = QwenImageRunner(config)
    runner.init_modules()
    runner.inputs = runner.run_input_encoder()
    runner.scheduler.prepare()
    return runner


@pytest.mark.slow
def test_infer_is_a_pure_function_of_inputs_and_scheduler_state():
    runner = _runner()
    runner.scheduler.step_pre(0)
    before = runner.scheduler.latents.clone()
    first = runner.model.infer(runner.inputs)
    for _ in range(4):  # what the profiler does: wait + warmup + active calls with the same inputs
        assert torch.equal(runner.model.infer(runner.inputs), first)
    assert torch.equal(runner.scheduler.latents, before)
    assert first.shape == (1, (64 // 16) * (96 // 16), 64) and torch.isfinite(first).all()
    assert runner.model.infer_calls == 5
    runner.scheduler.step_post(first)
    assert not torch.equal(runner.scheduler.latents, before)


@pytest.mark.slow
def test_cfg_off_runs_only_the_conditional_branch():
    runner = _runner(guidance_scale=1.0)
    assert "negative_prompt_embeds" not in runner.inputs["text_encoder_output"]
    runner.scheduler.step_pre(0)
    with torch.profiler.profile() as prof:
        runner.model.infer(runner.inputs)
    names = {e.name for e in prof.events()}
    assert "infer_cond" in names and "infer_uncond" not in names


@pytest.mark.slow
def test_progress_callback_reports_every_step(monkeypatch):
    monkeypatch.setenv("LIGHTX2V_TORCH_PROFILE", "0")  # the profiler's off switch: plain calls
    seen = []
    config = QwenImageRunConfig(arch=TINY, prompt="x", height=32, width=32, infer_steps=3)
    runner = QwenImageRunner(config, progress_callback=lambda done, total: seen.append((done, total)))
    latents = runner.run_pipeline()
    assert seen == [(1, 3), (2, 3), (3, 3)]
    assert latents.shape == (1, 16, 4, 4) and runner.model.infer_calls == 3


def test_analytic_matmul_flops_match_torch_flop_counter():
    """The GPU benchmark's TFLOP/s rests on this formula; torch counts the same forward independently."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.utils.flop_counter import FlopCounterMode

    from lightx2v.models.networks.qwen_image.config import forward_matmul_flops

    runner = _runner(guidance_scale=1.0)  # one branch = one forward
    runner.scheduler.step_pre(0)
    # the math SDPA backend runs attention as bmm, which the counter sees (CPU flash attention it does not)
    with FlopCounterMode(display=False) as counter, sdpa_kernel(SDPBackend.MATH):
        runner.model.infer(runner.inputs)
    text_tokens = runner.inputs["text_encoder_output"]["prompt_embeds"].shape[1]
    assert counter.get_total_flops() == forward_matmul_flops(TINY, runner.scheduler.image_seq_len, text_tokens)


def test_the_attention_switch_names_every_implementation_and_both_compute_the_same():
    assert tuple(ATTENTION) == ATTENTION_NAMES and DEFAULT_ATTENTION in ATTENTION  # the CLI's choices are these
    gen = torch.Generator().manual_seed(3)
    q, k, v = (torch.randn(1, 4, 40, 32, generator=gen) for _ in range(3))
    torch.testing.assert_close(ATTENTION["math"](q, k, v), ATTENTION["sdpa"](q, k, v), rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="unknown attention 'flash'; choose one of sdpa, math"):
        attention_by_name("flash")


@pytest.mark.parametrize(
    "attention, ops", [("sdpa", {"aten::scaled_dot_product_attention"}), ("math", {"aten::softmax", "aten::bmm"})]
)
@pytest.mark.slow
def test_the_model_runs_the_attention_it_was_built_with(attention, ops):
    runner = _runner(attention=attention)
    runner.scheduler.step_pre(0)
    with torch.profiler.profile() as prof:
        runner.model.infer(runner.inputs)
    names = {e.name for e in prof.events()}
    assert ops <= names
    other = {"aten::scaled_dot_product_attention", "aten::softmax"} - ops
    assert not other & names, other & names


def test_late_rank_sleeps_once_per_chosen_call_before_its_first_collective_and_only_on_its_rank():
    from lightx2v.models.networks.qwen_image.late_rank import LateRank, parse_calls

    assert parse_calls("1,3") == parse_calls(" 3, 1,1") == frozenset({1, 3})
    for bad in ("", "1,", "-1", "1.5", "x", "٣"):  # empty, negative, fractional, junk, a non-ASCII digit
        with pytest.raises(ValueError, match="give model.infer call indices"):
            parse_calls(bad)

    def delays(late: LateRank, plan: list[tuple[int, int]]) -> list[int]:
        """`late_rank_delay` regions per (call, rank this process is) of `plan`, three collectives per call."""
        counts = []
        for call, rank in plan:
            with torch.profiler.profile() as prof:
                late.start_call(call, rank)
                for _ in range(3):  # every collective of the call asks; only the first one waits
                    late.before_collective()
            counts.append(sum(e.name == "late_rank_delay" for e in prof.events()))
        return counts

    chosen = LateRank(rank=1, ms=1.0, calls=frozenset({1, 3}))
    assert delays(chosen, [(0, 1), (1, 1), (1, 0), (2, 1), (3, 1)]) == [0, 1, 0, 0, 1]
    assert delays(LateRank(rank=0, ms=1.0), [(0, 0), (7, 0), (7, 1)]) == [1, 1, 0]  # no --late_steps: every call
