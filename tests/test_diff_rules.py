"""`--diff`'s arithmetic and text on hand-made traces whose figures are worked out by hand, fast: memory ops on one
side only, run-level group deltas over several ranks, the signs of every delta and of the kernel lines.
tests/test_trace_summary_diff.py checks the same comparison on the real H200 trace."""

from __future__ import annotations

from pathlib import Path

import pytest

from lightx2v.trace_summary import summarize_paths
from lightx2v.trace_summary.diff import (
    ADDED,
    CHANGED,
    KERNELS_CHANGED,
    REMOVED,
    Delta,
    MemoryChange,
    compare_runs,
    signed_ms,
)
from lightx2v.trace_summary.render_diff import render_diff, render_rank_diff

from helpers.kineto import Kineto

MEMCPY = "Memcpy HtoD (Pageable -> Device)"


def one_rank(tmp_path: Path, side: str, gemm: str, gemm_us: float, copy: bool = False, fill: bool = False,
             steps: int = 2) -> str:
    """``steps`` 1000 us steps; each: aten::mm launching ``gemm`` (``gemm_us``), aten::gelu launching gelu (40 us),
    with ``copy`` aten::copy_ launching a 20 us memcpy of 4096 bytes, with ``fill`` aten::zero_ a 5 us memset."""
    t = Kineto()
    for i in range(steps):
        lo = i * 1000.0
        t.step(i + 1, lo)
        t.op("aten::mm", lo + 10, [("kernel", gemm, gemm_us)])
        t.op("aten::gelu", lo + 300, [("kernel", "gelu", 40.0)])
        if copy:
            t.op("aten::copy_", lo + 500, [("memcpy", MEMCPY, 20.0)], bytes=4096)
        if fill:
            t.op("aten::zero_", lo + 700, [("memset", "Memset (Device)", 5.0)], bytes=256)
    return t.write(tmp_path / side / "w.pt.trace.json")


def diff(base: str, new: str):
    return compare_runs(summarize_paths([base])[0], summarize_paths([new])[0])


def test_memcpy_and_memset_present_only_in_new_are_compared_against_zero(tmp_path):
    d = diff(one_rank(tmp_path, "b", "gemm", 100.0), one_rank(tmp_path, "n", "gemm", 100.0, copy=True, fill=True))
    assert d.ranks[0].memory == [
        MemoryChange("memcpy", calls_per_step=Delta(0.0, 1.0, 1.0, None), time_per_step_us=Delta(0.0, 20.0, 20.0, None),
                     bytes_per_step=Delta(0.0, 4096.0, 4096.0, None)),
        MemoryChange("memset", calls_per_step=Delta(0.0, 1.0, 1.0, None), time_per_step_us=Delta(0.0, 5.0, 5.0, None),
                     bytes_per_step=Delta(0.0, 256.0, 256.0, None)),
    ]


def test_memcpy_present_only_in_base_is_compared_against_zero(tmp_path):
    d = diff(one_rank(tmp_path, "b", "gemm", 100.0, copy=True), one_rank(tmp_path, "n", "gemm", 100.0))
    assert d.ranks[0].memory == [
        MemoryChange("memcpy", calls_per_step=Delta(1.0, 0.0, -1.0, -100.0),
                     time_per_step_us=Delta(20.0, 0.0, -20.0, -100.0),
                     bytes_per_step=Delta(4096.0, 0.0, -4096.0, -100.0))]


def test_memory_ops_on_neither_side_add_no_row(tmp_path):
    assert diff(one_rank(tmp_path, "b", "gemm", 100.0), one_rank(tmp_path, "n", "gemm", 90.0)).ranks[0].memory == []


def test_the_diff_text_signs_every_delta_and_marks_removed_kernels_minus_added_plus(tmp_path):
    """BASE: gemm_a 100 us + gelu 40 us a step; NEW: gemm_b 150 us + gelu + a 20 us memcpy of 4096 bytes."""
    d = diff(one_rank(tmp_path, "b", "gemm_a", 100.0), one_rank(tmp_path, "n", "gemm_b", 150.0, copy=True))
    text = render_rank_diff(d.ranks[0]).splitlines()
    assert text[3:] == [
        "  per step                   BASE          NEW        delta       %",
        "  step wall ms              1.000        1.000       +0.000    +0.0",
        "  GPU busy ms               0.140        0.210       +0.070   +50.0",
        "  GPU idle ms               0.860        0.790       -0.070    -8.1",
        "  kernels                       2            2         +0.0    +0.0",
        "  kernel time ms            0.140        0.190       +0.050   +35.7",
        "  CPU op self ms            0.100        0.150       +0.050   +50.0",
        "  memcpy ms                 0.000        0.020       +0.020       -",
        "  memcpy calls                  0            1         +1.0       -",
        "  memcpy bytes                0 B       4.1 KB",
        "  step wall: within noise (2 vs 2 steps, ranges overlap, steps vary ±0.0%)",
        "",
        "Op groups (label / top-level op) whose GPU work changed: 2 of 3",
        "  status              calls B>N   BASE ms    NEW ms  delta ms       %  noise  group",
        "  kernels changed           1>1     0.100     0.150    +0.050   +50.0   real  aten::mm",
        "      - gemm_a",
        "      + gemm_b",
        "  added                     0>0     0.000     0.020    +0.020       -   real  aten::copy_",
        "",
        "Kernels: 1 added, 1 removed, 0 changed, 1 the same (per step, by |delta time|)",
        "  status       calls B>N   BASE ms    NEW ms  delta ms       %  noise  kernel",
        "  added              0>1     0.000     0.150    +0.150       -   real  gemm_b",
        "      launched by aten::mm",
        "  removed            1>0     0.100     0.000    -0.100  -100.0   real  gemm_a",
        "      launched by aten::mm",
        "",
        "CPU ops: 1 added, 0 removed, 0 changed (per step, by |delta self time|)",
        "  status       calls B>N BASE self  NEW self  delta ms       %  noise  op",
        "  added              0>1     0.000     0.050    +0.050       -   real  aten::copy_",
    ]
    assert text[:3] == [f"  BASE  2 steps  {tmp_path / 'b' / 'w.pt.trace.json'}",
                        f"  NEW   2 steps  {tmp_path / 'n' / 'w.pt.trace.json'}", ""]
    r = d.ranks[0]
    assert [(o.op, o.status) for o in r.ops] == [("aten::mm", KERNELS_CHANGED), ("aten::copy_", ADDED),
                                                ("aten::gelu", "same")]
    assert [(k.name, k.status) for k in r.kernels] == [("gemm_b", ADDED), ("gemm_a", REMOVED), ("gelu", "same")]


def test_a_faster_new_side_prints_minus_signs(tmp_path):
    d = diff(one_rank(tmp_path, "b", "gemm", 150.0), one_rank(tmp_path, "n", "gemm", 100.0))
    text = render_rank_diff(d.ranks[0])
    assert "  kernel time ms            0.190        0.140       -0.050   -26.3" in text
    assert "  changed            1>1     0.150     0.100    -0.050   -33.3   real  gemm" in text
    assert [(k.name, k.status) for k in d.ranks[0].kernels][0] == ("gemm", CHANGED)


def ranks(tmp_path: Path, side: str, gemm_us: list[float]) -> str:
    """One 1000 us step per rank; rank r's aten::mm launches a ``gemm_us[r]`` us gemm."""
    for r, us in enumerate(gemm_us):
        t = Kineto(rank=r)
        t.step(1, 0.0)
        t.op("aten::mm", 10.0, [("kernel", "gemm", us)])
        t.write(tmp_path / side / f"rank{r}_w.pt.trace.json")
    return str(tmp_path / side)


def test_run_level_group_deltas_are_the_mean_over_rank_pairs(tmp_path):
    # rank 0's gemm +10 us, rank 1's +30 us: the run's verdict names aten::mm's mean, +20 us, not the sum
    d = diff(ranks(tmp_path, "b", [100.0, 100.0]), ranks(tmp_path, "n", [110.0, 130.0]))
    assert [r.verdict.split("; ")[1] for r in d.ranks] == ["aten::mm +0.010 ms", "aten::mm +0.030 ms"]
    assert d.verdict.startswith("NEW is about as fast per step of the slowest rank (+0.000 ms, +0.0%); "
                                "aten::mm +0.020 ms; one step a side")


def test_the_run_text_has_the_rank_table_and_each_pairs_verdict(tmp_path):
    d = diff(ranks(tmp_path, "b", [100.0, 100.0]), ranks(tmp_path, "n", [110.0, 130.0]))
    lines = render_diff(d).splitlines()
    assert lines[2:15] == [
        f"  BASE  b ({tmp_path / 'b'}): 2 ranks, straggler rank 0 (rank0_w)",
        f"  NEW   n ({tmp_path / 'n'}): 2 ranks, straggler rank 0 (rank0_w)",
        "",
        "Run step time: each side's slowest rank's mean step wall",
        "  per step                   BASE          NEW        delta       %",
        "  step wall ms              1.000        1.000       +0.000    +0.0",
        "",
        "Ranks, paired by rank",
        "  rank  BASE step ms  NEW step ms   delta ms       %  workers",
        "     0         1.000        1.000     +0.000    +0.0  rank0_w > rank0_w",
        "     1         1.000        1.000     +0.000    +0.0  rank1_w > rank1_w",
        "",
        "=" * 100,
    ]
    assert lines[15].startswith("Rank 0: NEW is about as fast per step (+0.000 ms, +0.0%); aten::mm +0.010 ms")
    assert "  changed                   1>1     0.100     0.130    +0.030   +30.0      ?  aten::mm" in lines
    assert "  step wall: cannot tell (1 vs 1 steps, one step a side: not tested)" in lines


@pytest.mark.parametrize("us,text", [(-4100.0, "-4.10"), (46.0, "+0.046"), (0.0, "+0.000"), (12345.0, "+12.3"),
                                     (-250000.0, "-250"), (1000.0, "+1.00"), (10000.0, "+10.0"),
                                     (100000.0, "+100")])
def test_signed_ms_keeps_the_sign_and_the_digits_that_matter(us, text):
    assert signed_ms(us) == text
