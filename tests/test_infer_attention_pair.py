"""The embedded inference's before/after switch: `--attention sdpa` vs `--attention math`, captured both ways.

Both runs write into one logdir, as a user profiling before and after a change does; they must give the same
latents (within rounding: the same function, other kernels) and traces that differ in the attention's ops.
"""

from __future__ import annotations

import pytest
import torch

from helpers.infer import FAST, run_infer
from helpers.traces import event_names, load_trace

CUDA = torch.cuda.is_available()
SDPA_OPS = {"aten::scaled_dot_product_attention"}
MATH_OPS = {"aten::softmax", "aten::bmm"}  # two matmuls and a softmax, spelled out


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    """{attention: Run}, both runs in one working directory, so one logdir holds the two run directories."""
    cwd = tmp_path_factory.mktemp("pair")
    runs = {}
    for attention in ("sdpa", "math"):
        save = f"save_results/{attention}/qwen_image_t2i.png"
        runs[attention] = run_infer(cwd, *FAST, "--attention", attention, "--save_result_path", save)
        assert runs[attention].proc.returncode == 0, runs[attention].output
    return runs


def cpu_ops(run) -> set[str]:
    """The CPU op names in the one trace this run captured (its metadata says which)."""
    (trace,) = run.metadata["capture"]["trace_paths"]
    return set(event_names(load_trace(trace), "cpu_op"))


def test_both_attentions_run_and_give_the_same_latents_within_rounding(pair):
    sdpa, math = pair["sdpa"].latents, pair["math"].latents
    tol = 3e-2 if CUDA else 1e-4  # bf16 on CUDA, fp32 on CPU
    torch.testing.assert_close(math, sdpa, rtol=tol, atol=tol)
    assert pair["sdpa"].metadata["attention"] == "sdpa" and pair["math"].metadata["attention"] == "math"


def test_the_two_traces_differ_in_the_attention_ops(pair):
    sdpa, math = cpu_ops(pair["sdpa"]), cpu_ops(pair["math"])
    assert SDPA_OPS <= sdpa and not MATH_OPS & sdpa
    assert MATH_OPS <= math and not SDPA_OPS & math
    # nothing but the attention changed: SDPA's own lowering on one side, matmul's plumbing on the other
    assert all("attention" in name for name in sdpa - math), sdpa - math
    assert math - sdpa <= MATH_OPS | {"aten::matmul", "aten::_softmax", "aten::clone", "aten::_unsafe_view",
                                      "aten::_reshape_alias", "aten::view", "aten::expand", "aten::reshape"}
