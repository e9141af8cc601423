"""Change or noise: the rule (noise.judge) on hand-made per-step values, then ``--diff`` on real CPU captures of a
user's two-function script (tests/programs/two_functions.py) through the drop-in, 5 active steps a side."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from lightx2v.trace_summary import compare_runs, summarize_paths
from lightx2v.trace_summary.analyze import analyze_trace
from lightx2v.trace_summary.diff import INCONCLUSIVE_PCT, compare_ranks
from lightx2v.trace_summary.noise import NOISE, RANGES, RANK_TEST, REAL, UNTESTED, judge, mann_whitney_p

from helpers.kineto import Kineto

REPO = Path(__file__).resolve().parent.parent
PROGRAM = REPO / "tests" / "programs" / "two_functions.py"


@pytest.mark.parametrize("x, y, p", [
    ([1, 2, 3, 4, 5], [6, 7, 8, 9, 10], 2 / 252),  # complete separation: 2 of the C(10, 5) splits
    ([6, 7, 8, 9, 10], [1, 2, 3, 4, 5], 2 / 252),
    ([1, 2, 3, 4], [5, 6, 7, 8], 2 / 70),
    ([1, 2, 3, 5], [4, 6, 7, 8], 4 / 70),  # one swap: the rank sum 11 or less in 2 of 70 splits, each tail
    ([1, 2, 3, 4, 5], [1, 2, 3, 4, 5], 1.0),
    ([1, 1, 1, 1], [1, 1, 1, 1], 1.0),  # all tied
    ([1, 2, 2, 3], [2, 3, 3, 4], 2 / 7),  # ties: mid-ranks 1, 3, 3, 6 (sum 13); 10 of 70 splits sum 13 or less
])
def test_mann_whitney_exact_p(x, y, p):
    assert mann_whitney_p(x, y) == pytest.approx(p)


def test_the_rule_needs_both_a_test_and_a_big_enough_effect():
    base = [100.0, 101.0, 99.0, 100.5, 99.5]
    slower = [v * 1.10 for v in base]
    r = judge(base, slower)
    assert (r.verdict, r.test) == (REAL, RANK_TEST) and r.p_value == pytest.approx(2 / 252)
    assert r.effect_us == pytest.approx(10.0) and r.noise_pct == pytest.approx(1.0)
    # separated, but only 1% (and 1 us): not worth a name
    assert judge(base, [v + 1.0 for v in base]).verdict == NOISE
    # 5% apart but overlapping steps (one slow step on each side): the rank test does not reach 0.05
    assert judge([100, 104, 98, 130, 101], [105, 103, 108, 99, 131]).verdict == NOISE
    # two or three steps a side: separated ranges and the effect
    r = judge([100, 102], [110, 111])
    assert (r.verdict, r.test, r.p_value) == (REAL, RANGES, None)
    assert judge([100, 112], [110, 111]).verdict == NOISE
    # one step a side: nothing can be told
    assert judge([100], [200]).verdict == UNTESTED
    # a time of 0 in every BASE step (an op NEW added) against 20 us in every NEW step
    assert judge([0.0] * 5, [20.0] * 5).verdict == REAL


def kineto_side(path: Path, walls: list[float], gemm_us: float, old: bool) -> str:
    """One step per wall (us), back to back; in each, aten::mm launching a ``gemm_us`` kernel and, when ``old``,
    aten::old launching a 200 us one."""
    k = Kineto()
    lo = 0.0
    for n, wall in enumerate(walls):
        k.step(n + 1, lo, wall)
        k.op("aten::mm", lo + 10, [("kernel", "gemm", gemm_us)])
        if old:
            k.op("aten::old", lo + 300, [("kernel", "old_k", 200.0)])
        lo += wall
    return k.write(path)


def test_sides_with_other_step_counts_are_judged_on_their_own_steps(tmp_path):
    """BASE has 4 steps, NEW 2: each figure is per step of its own side, and the noise rule gets each side's own
    per-step values (4 and 2 of them; a kernel NEW lost is 0 in each of NEW's 2 steps), judged by the ranges
    since NEW has fewer than RANK_TEST_STEPS."""
    base = analyze_trace(kineto_side(tmp_path / "b" / "b.pt.trace.json", [1000.0, 1010.0, 990.0, 1005.0], 100.0,
                                     True))
    new = analyze_trace(kineto_side(tmp_path / "n" / "n.pt.trace.json", [1500.0, 1510.0], 300.0, False))
    d = compare_ranks(base, new)
    assert (d.base_steps, d.new_steps) == (4, 2)
    step = d.step_noise
    assert (step.verdict, step.test, step.effect_us) == (REAL, RANGES, 1505.0 - 1002.5)
    assert step.noise_pct == pytest.approx((1010 - 990) / 2 / 1002.5 * 100)  # BASE's steps spread more
    # the delta is of the mean walls (1001.25 -> 1505 us); both groups changed beyond noise, so both are named
    assert d.verdict == ("NEW is 50.3% slower per step (+0.504 ms, beyond noise ±1.0%); aten::old -0.200 ms, "
                         "aten::mm +0.200 ms")
    kernels = {k.name: (k.status, k.noise.verdict, k.noise.test, k.noise.effect_us) for k in d.kernels}
    assert kernels == {"gemm": ("changed", REAL, RANGES, 200.0), "old_k": ("removed", REAL, RANGES, -200.0)}
    gemm = next(k for k in d.kernels if k.name == "gemm")
    assert (gemm.time_per_step_us.base, gemm.time_per_step_us.new) == (100.0, 300.0)


def capture(tmp_path: Path, name: str, *flags: str) -> Path:
    out = tmp_path / name
    tmp_path.mkdir(parents=True, exist_ok=True)
    done = subprocess.run([sys.executable, str(PROGRAM), str(out), *flags], capture_output=True, text=True,
                          timeout=300, cwd=tmp_path, env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr
    (trace,) = out.glob("*/*.pt.trace.json")
    return trace


@pytest.mark.slow
def test_a_doubled_matmul_is_named_as_the_cause_of_a_slower_step(tmp_path):
    """Wall times of two captures taken at different moments: another job's burst can slow one side's steps as
    much as the change does, and then the honest answer is "no change beyond noise" with a large spread, or even
    "NEW is faster" when the burst covered all of BASE's steps (seen in CI with another test running beside this
    one). The summary reports what was measured; so a pair is captured again (at most 5 pairs) until one was taken
    on a quiet enough machine, and that pair must name the doubled matmul."""
    verdicts = []
    for attempt in range(5):
        # 8 steps a side: the rank test tolerates a few steps slowed by whatever else the machine runs
        base = capture(tmp_path / str(attempt), "base", "--active", "8")
        new = capture(tmp_path / str(attempt), "new", "--active", "8", "--double-matmul")
        (b,), (n,) = summarize_paths([str(base)]), summarize_paths([str(new)])
        assert len(b.ranks[0].steps) == len(n.ranks[0].steps) == 8
        d = compare_runs(b, n)
        verdicts.append(d.verdict)
        if d.ranks[0].step_noise.verdict == REAL and "slower per step" in d.verdict:
            break
    assert d.verdict.startswith("NEW is ") and "slower per step" in d.verdict and "beyond noise" in d.verdict, \
        verdicts
    first_named = d.verdict.split("); ", 1)[1]
    assert first_named.startswith("aten::mm +"), d.verdict
    mm = next(c for c in d.ranks[0].cpu_ops if c.name == "aten::mm")
    assert mm.noise.verdict == REAL and mm.calls_per_step.delta == 8.0  # one more torch.mm per block, 8 blocks


def scaled(trace: Path, out: Path, factor: float) -> Path:
    """The capture with every time stretched by ``factor`` from its start: the same code, 1% slower."""
    doc = json.loads(trace.read_text())
    t0 = min(e["ts"] for e in doc["traceEvents"] if e.get("ph") == "X")
    for e in doc["traceEvents"]:
        if isinstance(e.get("ts"), (int, float)) and e.get("ph") == "X":
            e["ts"] = t0 + (e["ts"] - t0) * factor
            e["dur"] = e["dur"] * factor
    out.write_text(json.dumps(doc))
    return out


@pytest.mark.slow
def test_a_change_smaller_than_the_noise_rule_reads_as_no_change(tmp_path):
    base = capture(tmp_path, "base")
    new = scaled(base, tmp_path / "same_code.pt.trace.json", 1.01)
    d = compare_runs(summarize_paths([str(base)])[0], summarize_paths([str(new)])[0])
    noise = d.ranks[0].step_noise
    within = (f"inconclusive (±{noise.noise_pct:.1f}% noise)" if noise.noise_pct >= INCONCLUSIVE_PCT  # a loaded machine
              else f"no change beyond noise (±{noise.noise_pct:.1f}%)")
    assert d.verdict.startswith(f"{within} per step: NEW +1.0%"), d.verdict
    assert "changed beyond noise" not in d.verdict  # every op is 1% slower too: none is named
    assert math.isclose(d.ranks[0].step_wall_us.delta_pct, 1.0, rel_tol=1e-6)
