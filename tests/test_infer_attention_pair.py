"""The embedded inference's before/after switch: `--attention sdpa` vs `--attention math`, captured both ways.

Both runs write into one logdir, as a user profiling before and after a change does; they must give the same
latents (within rounding: the same function, other kernels) and traces that differ in the attention's ops.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from conftest import subprocess_env
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


@pytest.mark.slow
def test_both_attentions_run_and_give_the_same_latents_within_rounding(pair):
    sdpa, math = pair["sdpa"].latents, pair["math"].latents
    tol = 3e-2 if CUDA else 1e-4  # bf16 on CUDA, fp32 on CPU
    torch.testing.assert_close(math, sdpa, rtol=tol, atol=tol)
    assert pair["sdpa"].metadata["attention"] == "sdpa" and pair["math"].metadata["attention"] == "math"


@pytest.mark.slow
def test_the_two_traces_differ_in_the_attention_ops(pair):
    sdpa, math = cpu_ops(pair["sdpa"]), cpu_ops(pair["math"])
    assert SDPA_OPS <= sdpa and not MATH_OPS & sdpa
    assert MATH_OPS <= math and not SDPA_OPS & math
    # nothing but the attention changed: SDPA's own lowering on one side, matmul's plumbing on the other
    assert all("attention" in name for name in sdpa - math), sdpa - math
    assert math - sdpa <= MATH_OPS | {"aten::matmul", "aten::_softmax", "aten::clone", "aten::_unsafe_view",
                                      "aten::_reshape_alias", "aten::view", "aten::expand", "aten::reshape"}


def trace_summary(*args: str) -> dict:
    proc = subprocess.run([sys.executable, "-m", "lightx2v.trace_summary", *args, "--json"], capture_output=True,
                          text=True, timeout=300, env=subprocess_env())
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads(proc.stdout)


@pytest.mark.slow
def test_diff_of_the_logdir_compares_the_pair_and_its_step_delta_is_the_summaries_difference(pair):
    logdir = pair["sdpa"].cwd / "save_results" / "torch_profile"
    diff = trace_summary("--diff", str(logdir))  # one argument: its two newest runs, the older one as BASE
    run_dirs = {a: Path(pair[a].metadata["capture"]["run_dir"]).resolve() for a in pair}
    assert Path(diff["base"]["path"]).resolve() == run_dirs["sdpa"]
    assert Path(diff["new"]["path"]).resolve() == run_dirs["math"]
    walls = {}
    for attention, run_dir in run_dirs.items():
        (run,) = trace_summary(str(run_dir))["runs"]
        (rank,) = run["ranks"]
        walls[attention] = sum(s["wall_us"] for s in rank["steps"]) / len(rank["steps"])
    step = diff["step_wall_us"]
    assert step["base"] == pytest.approx(walls["sdpa"], abs=1e-3)
    assert step["new"] == pytest.approx(walls["math"], abs=1e-3)
    assert step["delta"] == pytest.approx(walls["math"] - walls["sdpa"], abs=2e-3)  # both rounded to 1 ns
    (rank,) = diff["ranks"]
    status = {op["name"]: op["status"] for op in rank["cpu_ops"]}
    assert status["aten::scaled_dot_product_attention"] == "removed"
    assert status["aten::softmax"] == "added" and status["aten::bmm"] == "added"
    if not CUDA:  # no GPU work to name: the verdict names the two CPU ops whose self time changed most
        named = [part.rsplit(" ", 2)[0] for part in diff["verdict"].split("; ")[1].split(", ")]
        assert named == [op["name"] for op in rank["cpu_ops"][:2]], (diff["verdict"], rank["cpu_ops"][:3])
    if CUDA:  # kernels too: inside the `attention` region, SDPA's kernels gone, the matmuls' and softmax's new
        groups = [g for g in rank["ops"] if g["label"] == "attention" and g["status"] != "same"]
        assert any(g["kernels_removed"] for g in groups) and any(g["kernels_added"] for g in groups), groups
