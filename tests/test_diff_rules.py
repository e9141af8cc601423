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
from lightx2v.trace_summary.noise import NO_TEST, NOISE, RANGES, RANK_TEST, REAL, UNTESTED, Noise
from lightx2v.trace_summary.render_diff import noise_line, noise_word, render_diff, render_rank_diff

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
        # 2 (3 in NEW) ops of 50 us self, less each one's launch call (0.5 us): 99 -> 148.5 us
        "  CPU op self ms            0.099        0.148       +0.050   +50.0",
        "  memcpy ms                 0.000        0.020       +0.020       -",
        "  memcpy calls                  0            1         +1.0       -",
        "  memcpy bytes                0 B       4.1 KB",
        "  step wall: within noise (2 vs 2 steps, ranges overlap, steps vary ±0.0%)",
        # GEMM time a step: gemm_a 100 us -> gemm_b 150 us
        "  efficiency: no op shapes on either side (record_shapes=True) for rates and MFU; GEMM 1.50x slower "
        "(0.100 -> 0.150 ms per step)",
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


def several_changes(tmp_path: Path) -> tuple[str, str]:
    """Two 1000 us steps a side. BASE: attn / aten::linear over aten::addmm (gemm 100 us), aten::mm (old_k 30 us),
    aten::relu (3 relu kernels of 10 us in step 1 only), aten::copy_ (a 20 us memcpy, size not recorded), aten::gone
    (no GPU work). NEW: attn / aten::linear over aten::mm (gemm 90 us), aten::mm (k1 40, k2 30, k3 20, k4 10 us),
    aten::relu (one 10 us relu), aten::bmm (k1 5 us), aten::copy_ (the memcpy, 512 bytes)."""
    b, n = Kineto(), Kineto()
    for i in range(2):
        lo = i * 1000.0
        for t in (b, n):
            t.step(i + 1, lo)
            t.op("aten::linear", lo + 10, [], dur=80, label="attn")
        b.op("aten::addmm", lo + 20, [("kernel", "gemm", 100.0)], dur=20)
        b.op("aten::mm", lo + 200, [("kernel", "old_k", 30.0)], dur=40)
        b.op("aten::relu", lo + 300, [("kernel", "relu", 10.0)] * 3 if i == 0 else [], dur=30)
        b.op("aten::copy_", lo + 500, [("memcpy", "Memcpy HtoD", 20.0)])
        b.op("aten::gone", lo + 600, [], dur=5)
        n.op("aten::mm", lo + 20, [("kernel", "gemm", 90.0)], dur=20)
        n.op("aten::mm", lo + 200, [("kernel", "k1", 40.0), ("kernel", "k2", 30.0), ("kernel", "k3", 20.0),
                                    ("kernel", "k4", 10.0)], dur=60)
        n.op("aten::relu", lo + 300, [("kernel", "relu", 10.0)], dur=30)
        n.op("aten::bmm", lo + 400, [("kernel", "k1", 5.0)], dur=10)
        n.op("aten::copy_", lo + 500, [("memcpy", "Memcpy HtoD", 20.0)], bytes=512)
    return b.write(tmp_path / "b" / "w.pt.trace.json"), n.write(tmp_path / "n" / "w.pt.trace.json")


def test_the_tables_cut_at_top_and_say_how_many_more_with_labels_lowerings_and_kernel_lists(tmp_path):
    """Worked out from several_changes: GPU busy 165 (step 1: 100+30+30+20, step 2: 100+30+20) against 225 us a
    step; kernels 7 over 2 steps (3.5) against 7; CPU self 205 (linear 60 of its 80, 20, 40, 30, 50, 5) less 2.25
    launch calls of 0.5 us (9 over 2 steps) against 230 less 4 (8 a step); op groups: aten::mm +70 us (four new
    kernels, the three longest named), attn / aten::linear -10 us (addmm lowered to mm), aten::relu -5, aten::bmm
    added +5, aten::copy_ the same; kernels by |delta|: k1 +45, old_k -30, k2 +30, k3 +20, gemm -10, k4 +10, relu
    -5; CPU ops (self less 0.5 us a launch): aten::mm +38, aten::addmm -19.5, aten::bmm +9.5, aten::gone -5."""
    d = diff(*several_changes(tmp_path))
    assert d.verdict == ("no change beyond noise (±0.0%) per step: NEW +0.0% (+0.000 ms); changed beyond noise: "
                         "aten::mm +0.070 ms, attn -0.010 ms")
    assert render_diff(d, top=2).splitlines()[2:] == [
        f"  BASE  w.pt.trace.json ({tmp_path / 'b'}): 1 rank",
        f"  NEW   w.pt.trace.json ({tmp_path / 'n'}): 1 rank",
        "",
        f"  BASE  2 steps  {tmp_path / 'b' / 'w.pt.trace.json'}",
        f"  NEW   2 steps  {tmp_path / 'n' / 'w.pt.trace.json'}",
        "",
        "  per step                   BASE          NEW        delta       %",
        "  step wall ms              1.000        1.000       +0.000    +0.0",
        "  GPU busy ms               0.165        0.225       +0.060   +36.4",
        "  GPU idle ms               0.835        0.775       -0.060    -7.2",
        "  kernels                     3.5            7         +3.5  +100.0",
        "  kernel time ms            0.145        0.205       +0.060   +41.4",
        "  CPU op self ms            0.203        0.226       +0.023   +11.5",
        "  memcpy ms                 0.020        0.020       +0.000    +0.0",
        "  memcpy calls                  1            1         +0.0    +0.0",
        "  memcpy bytes                  -        512 B",
        "  step wall: within noise (2 vs 2 steps, ranges overlap, steps vary ±0.0%)",
        # GEMM time a step: 100 (addmm) + 30 (mm) us -> 90 (mm) + 40+30+20+10 (mm) + 5 (bmm) us
        "  efficiency: no op shapes on either side (record_shapes=True) for rates and MFU; GEMM 1.50x slower "
        "(0.130 -> 0.195 ms per step)",
        "",
        "Op groups (label / top-level op) whose GPU work changed: 4 of 5",
        "  status              calls B>N   BASE ms    NEW ms  delta ms       %  noise  group",
        "  kernels changed           1>4     0.030     0.100    +0.070  +233.3   real  aten::mm",
        "      - old_k",
        "      + k1",
        "      + k2",
        "      + k3",
        "      + ... 1 more",
        "  changed                   1>1     0.100     0.090    -0.010   -10.0   real  attn / aten::linear",
        "      launched by: aten::addmm -> aten::mm",
        "  ... 2 more",
        "",
        "Kernels: 4 added, 1 removed, 2 changed, 0 the same (per step, by |delta time|)",
        "  status       calls B>N   BASE ms    NEW ms  delta ms       %  noise  kernel",
        "  added              0>2     0.000     0.045    +0.045       -   real  k1",
        "      launched by aten::mm (and 1 more)",
        "  removed            1>0     0.030     0.000    -0.030  -100.0   real  old_k",
        "      launched by aten::mm",
        "  ... 5 more",
        "",
        "CPU ops: 1 added, 2 removed, 1 changed (per step, by |delta self time|)",
        "  status       calls B>N BASE self  NEW self  delta ms       %  noise  op",
        # self less the launch calls (0.5 us each): aten::mm 40 - 0.5 -> 20 - 0.5 + 60 - 4 x 0.5, aten::addmm 20 - 0.5
        "  changed            1>2     0.040     0.077    +0.038   +96.2   real  aten::mm",
        "  removed            1>0     0.019     0.000    -0.019  -100.0   real  aten::addmm",
        "  ... 2 more",
    ]
    assert render_diff(d, top=2).endswith("  ... 2 more\n")


def test_tables_that_fit_say_no_more_and_changed_kernels_name_no_launcher(tmp_path):
    d = diff(*several_changes(tmp_path))
    text = render_diff(d, top=7).splitlines()
    assert not any(line.strip().startswith("...") and "more" in line and "+" not in line for line in text)
    assert "  changed            1>1     0.100     0.090    -0.010   -10.0   real  gemm" in text
    after = text[text.index("  changed            1>1     0.100     0.090    -0.010   -10.0   real  gemm") + 1]
    assert not after.startswith("      launched by")
    assert "      launched by aten::mm (and 1 more)" in text  # k1, from two groups
    assert render_diff(d).splitlines() == render_diff(d, top=10).splitlines()
    assert "  ... 1 more" in render_diff(d, top=3)  # op groups: 4 changed, 3 shown


def test_a_memcpy_whose_size_neither_side_records_has_no_bytes_row_and_one_side_shows_a_dash(tmp_path):
    def side(name: str, nbytes: int | None) -> str:
        t = Kineto()
        t.step(1, 0.0)
        t.op("aten::copy_", 10, [("memcpy", "Memcpy HtoD", 20.0)], **({} if nbytes is None else {"bytes": nbytes}))
        return t.write(tmp_path / name / "w.pt.trace.json")

    def bytes_rows(b: int | None, n: int | None) -> list[str]:
        text = render_rank_diff(diff(side(f"b{b}", b), side(f"n{n}", n)).ranks[0]).splitlines()
        return [line for line in text if "memcpy bytes" in line]

    assert bytes_rows(None, None) == []
    assert bytes_rows(None, 512) == ["  memcpy bytes                  -        512 B"]
    assert bytes_rows(512, None) == ["  memcpy bytes              512 B            -"]


def cpu_only(tmp_path: Path, side: str, rank: int, add_us: float, name: str) -> str:
    t = Kineto(rank=rank)
    t.step(1, 0.0)
    t.op("aten::add", 10.0, [], dur=add_us)
    return t.write(tmp_path / side / name)


def test_a_cpu_run_of_one_step_per_side_paired_across_ranks_reads_with_dashes_and_singulars(tmp_path):
    d = diff(cpu_only(tmp_path, "b", 0, 50.0, "rank0_w.pt.trace.json"),
             cpu_only(tmp_path, "n", 1, 80.0, "rank1_w.pt.trace.json"))
    assert render_diff(d).splitlines()[2:] == [
        f"  BASE  rank0_w.pt.trace.json ({tmp_path / 'b'}): 1 rank",
        f"  NEW   rank1_w.pt.trace.json ({tmp_path / 'n'}): 1 rank",
        "  note  paired by file order (the traces do not record the same ranks): rank 0 (BASE) vs rank 1 (NEW)",
        "",
        "Rank 0 (BASE) vs rank 1 (NEW), paired by file order",
        "",
        f"  BASE  1 step  {tmp_path / 'b' / 'rank0_w.pt.trace.json'}",
        f"  NEW   1 step  {tmp_path / 'n' / 'rank1_w.pt.trace.json'}",
        "",
        "  per step                   BASE          NEW        delta       %",
        "  step wall ms              1.000        1.000       +0.000    +0.0",
        "  GPU busy ms                   -            -            -       -",
        "  GPU idle ms                   -            -            -       -",
        "  kernels                       -            -            -       -",
        "  kernel time ms                -            -            -       -",
        "  CPU op self ms            0.050        0.080       +0.030   +60.0",
        "  step wall: cannot tell (1 vs 1 steps, one step a side: not tested)",
        # no GPU: the elementwise class's time is aten::add's, 50 -> 80 us
        "  efficiency: no op shapes on either side (record_shapes=True) for rates and MFU; elementwise 1.60x slower "
        "(0.050 -> 0.080 ms per step)",
        "",
        "Op groups (label / top-level op) whose GPU work changed: 0 of 0",
        "",
        "Kernels: 0 added, 0 removed, 0 changed, 0 the same (per step, by |delta time|)",
        "",
        "CPU ops: 0 added, 0 removed, 1 changed (per step, by |delta self time|)",
        "  status       calls B>N BASE self  NEW self  delta ms       %  noise  op",
        "  changed            1>1     0.050     0.080    +0.030   +60.0      ?  aten::add",
    ]


def test_a_rank_only_new_has_is_listed_and_makes_the_report_per_rank(tmp_path):
    base = tmp_path / "b"
    cpu_only(tmp_path, "b", 0, 50.0, "rank0_w.pt.trace.json")
    cpu_only(tmp_path, "n", 0, 50.0, "rank0_w.pt.trace.json")
    cpu_only(tmp_path, "n", 1, 60.0, "rank1_w.pt.trace.json")
    lines = render_diff(diff(str(base), str(tmp_path / "n"))).splitlines()
    assert lines[3:16] == [
        f"  NEW   n ({tmp_path / 'n'}): 2 ranks, straggler rank 0 (rank0_w)",
        "  note  rank counts differ: BASE has 1, NEW has 2; compared 1 pair rank to rank",
        "  only in NEW: rank 1 (rank1_w)",
        "",
        "Run step time: each side's slowest rank's mean step wall",
        "  per step                   BASE          NEW        delta       %",
        "  step wall ms              1.000        1.000       +0.000    +0.0",
        "",
        "Ranks, paired by rank",
        "  rank  BASE step ms  NEW step ms   delta ms       %  workers",
        "     0         1.000        1.000     +0.000    +0.0  rank0_w > rank0_w",
        "",
        "=" * 100,
    ]
    assert lines[2] == f"  BASE  b ({base}): 1 rank"


def test_the_rank_table_of_traces_without_ranks_shows_a_dash(tmp_path):
    for side in ("b", "n"):
        for name in ("a.pt.trace.json", "c.pt.trace.json"):
            t = Kineto()
            t.step(1, 0.0)
            t.write(tmp_path / side / name)
    lines = render_diff(diff(str(tmp_path / "b"), str(tmp_path / "n"))).splitlines()
    assert "Ranks, paired by file order" in lines
    assert [line for line in lines if line.startswith("     -")] == [
        "     -         1.000        1.000     +0.000    +0.0  a > a",
        "     -         1.000        1.000     +0.000    +0.0  c > c"]


@pytest.mark.parametrize("n,word", [(None, ""), (Noise(REAL, RANK_TEST, 0.01, 1.0, 1.0), "real"),
                                    (Noise(NOISE, RANGES, None, 1.0, 1.0), "noise"),
                                    (Noise(UNTESTED, NO_TEST, None, 1.0, None), "?")])
def test_the_noise_column_word(n, word):
    assert noise_word(n) == word


@pytest.mark.parametrize("n,line", [
    (None, ""),
    (Noise(REAL, RANK_TEST, 0.028571, 100.0, 1.48), "  step wall: beyond noise (4 vs 5 steps, Mann-Whitney p=0.0286, "
                                                   "steps vary ±1.5%)"),
    (Noise(NOISE, RANK_TEST, None, 1.0, None), "  step wall: within noise (4 vs 5 steps, )"),
    (Noise(REAL, RANGES, None, 9.0, 0.25), "  step wall: beyond noise (4 vs 5 steps, ranges apart, steps vary ±0.2%)"),
    (Noise(NOISE, RANGES, None, 9.0, 3.0),
     "  step wall: within noise (4 vs 5 steps, ranges overlap, steps vary ±3.0%)"),
    (Noise(UNTESTED, NO_TEST, None, 9.0, None), "  step wall: cannot tell (4 vs 5 steps, one step a side: not tested)"),
])
def test_the_step_wall_line_says_the_test_its_p_and_the_spread(n, line):
    assert noise_line(n, 4, 5) == line


def spans(tmp_path: Path, side: str, gemm_us: tuple[float, float]) -> str:
    """A folder of two spans of worker0, 8 minutes apart, whose gemm takes ``gemm_us`` (older, newer) a step."""
    for n, (start, us) in enumerate(zip((0.0, 480e6), gemm_us, strict=True), 1):
        t = Kineto()
        for i in range(2):
            t.step(i + 1, start + i * 1000.0)
            t.op("aten::mm", start + i * 1000.0 + 10, [("kernel", "gemm", us)])
        t.write(tmp_path / side / f"worker0.{n}.pt.trace.json")
    return str(tmp_path / side)


def test_a_side_of_spans_is_compared_by_its_newest_span_never_as_ranks(tmp_path):
    base, new = spans(tmp_path, "b", (100.0, 200.0)), spans(tmp_path, "n", (900.0, 150.0))
    d = diff(base, new)
    assert (d.base.spans, d.new.spans, d.base.ranks, d.base.straggler) == (True, True, 2, None)
    (pair,) = d.ranks
    assert (pair.base_file, pair.new_file) == (f"{base}/worker0.2.pt.trace.json", f"{new}/worker0.2.pt.trace.json")
    assert pair.kernels[0].time_per_step_us == Delta(200.0, 150.0, -50.0, -25.0)  # the newest spans' gemm
    assert d.notes == [f"{side} holds 2 spans of worker0 (captures at different times, not ranks): compared its "
                       "newest, worker0.2.pt.trace.json; name a file to compare another" for side in ("BASE", "NEW")]
    text = render_diff(d).splitlines()
    assert text[2:4] == [f"  BASE  b ({base}): 2 spans, the newest compared",
                         f"  NEW   n ({new}): 2 spans, the newest compared"]
    assert not any(line.startswith(("Ranks, paired", "Run step time")) for line in text)


def test_spans_against_one_trace_compare_the_newest_span_with_it(tmp_path):
    base = spans(tmp_path, "b", (100.0, 200.0))
    d = diff(base, one_rank(tmp_path, "n", "gemm", 150.0))
    assert [(r.base_file, r.new_file) for r in d.ranks] == [(f"{base}/worker0.2.pt.trace.json",
                                                             str(tmp_path / "n" / "w.pt.trace.json"))]
    assert len(d.notes) == 1 and d.notes[0].startswith("BASE holds 2 spans of worker0")
    mm = next(op for op in d.ranks[0].cpu_ops if op.name == "aten::mm")
    assert mm.self_with_runtime_per_step_us == Delta(50.0, 50.0, 0.0, 0.0)
    assert mm.self_per_step_us == Delta(49.5, 49.5, 0.0, 0.0)  # less its launch call


@pytest.mark.parametrize("noise_pct,head", [
    (53.0, "inconclusive (±53.0% noise) per step: NEW +33.4% (+3.34 ms)"),
    (5.0, "inconclusive (±5.0% noise) per step: NEW +33.4% (+3.34 ms)"),
    (4.9, "no change beyond noise (±4.9%) per step: NEW +33.4% (+3.34 ms)"),
])
def test_a_change_within_wide_noise_is_inconclusive_not_no_change(noise_pct, head):
    """Steps that spread ±5% or more can hide a change that matters: within them the answer is "inconclusive"."""
    from lightx2v.trace_summary.diff import _verdict

    step = Delta(10_000.0, 13_340.0, 3_340.0, 33.4)
    noise = Noise(verdict=NOISE, test=RANGES, p_value=None, effect_us=3_340.0, noise_pct=noise_pct)
    assert _verdict(step, noise, [], "per step") == head
