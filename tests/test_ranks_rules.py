"""Ranks side by side and the straggler (`lightx2v.trace_summary.ranks`), fast: hand-made rank summaries and rows,
each mean, share and lead worked out by hand. tests/test_trace_summary_ranks.py checks the same on two real
torchrun ranks."""

from __future__ import annotations

import pytest

from lightx2v.trace_summary.model import GpuTotals, RankRow, RankSummary, StepStats, Straggler
from lightx2v.trace_summary.ranks import are_spans, rank_rows, straggler

GPU = GpuTotals(busy_us=1.0, activity_us=1.0, kernel_count=1, kernel_us=1.0, memcpy_us=0.0, memset_us=0.0,
                streams=1, devices=1)


def step(wall_us: float, busy_us: float | None = None) -> StepStats:
    return StepStats(name="ProfilerStep#1", number=1, start_us=0.0, wall_us=wall_us, cpu_us=wall_us,
                     gpu_busy_us=busy_us, gpu_busy_pct=None, kernel_count=None, idle=None)


def rank(n: int | None, steps: list[StepStats], gpu: GpuTotals | None = GPU, comm: float | None = None,
         worker: str = "", start: float | None = None, span: float = 1.0) -> RankSummary:
    return RankSummary(file=f"r{n}.json", size_bytes=1, compressed=False, worker=worker or f"w{n}", rank=n,
                       world_size=2, devices=[], versions={}, event_count=1, trace_span_us=span, steps=steps, gpu=gpu,
                       idle=None, top_kernels=[], top_cpu_ops=[], cpu_self_total_us=0.0, memory_ops=[],
                       gpu_comm_us=comm, trace_start_us=start)


def row(n: int, wall: float, busy: float | None = None, comm: float | None = None) -> RankRow:
    return RankRow(rank=n, worker=f"w{n}", steps=2, step_wall_us=wall, gpu_busy_us=busy, gpu_busy_pct=None,
                   gpu_comm_us=comm)


# --- rank_rows ------------------------------------------------------------------------------------------------

def test_a_rank_row_holds_per_step_means_of_wall_busy_and_communication():
    (r,) = rank_rows([rank(1, [step(100.0, 50.0), step(300.0, None)], comm=40.0, worker="node7")])
    # wall (100 + 300) / 2; busy (50 + 0) / 2 (a step without busy time counts 0); comm 40 / 2
    assert r == RankRow(rank=1, worker="node7", steps=2, step_wall_us=200.0, gpu_busy_us=25.0, gpu_busy_pct=12.5,
                        gpu_comm_us=20.0)


def test_a_cpu_only_rank_has_no_gpu_figures():
    (r,) = rank_rows([rank(0, [step(80.0, 10.0)], gpu=None, comm=5.0)])
    assert (r.step_wall_us, r.gpu_busy_us, r.gpu_busy_pct, r.gpu_comm_us) == (80.0, None, None, None)


def test_a_gpu_rank_without_communication_kernels_has_zero_communication():
    (r,) = rank_rows([rank(0, [step(80.0, 20.0)], comm=None)])
    assert (r.gpu_busy_us, r.gpu_busy_pct, r.gpu_comm_us) == (20.0, 25.0, 0.0)


def test_a_rank_without_steps_has_zero_wall_and_no_busy_share():
    (r,) = rank_rows([rank(0, [], comm=6.0)])
    assert (r.steps, r.step_wall_us, r.gpu_busy_us, r.gpu_busy_pct, r.gpu_comm_us) == (0, 0.0, 0.0, None, 6.0)


def test_rank_rows_keep_the_ranks_order():
    assert [r.rank for r in rank_rows([rank(2, [step(1.0)]), rank(0, [step(1.0)]), rank(None, [step(1.0)])])] == \
        [2, 0, None]


# --- straggler ------------------------------------------------------------------------------------------------

def test_one_rank_or_none_has_no_straggler():
    assert straggler([]) is None and straggler([row(0, 100.0)]) is None


def test_the_straggler_is_the_rank_with_the_longest_mean_step():
    rows = [row(0, 100.0, 10.0, 0.0), row(1, 150.0, 10.0, 0.0), row(2, 120.0, 10.0, 0.0)]
    assert straggler(rows) == Straggler(rank=1, worker="w1", criterion="step_wall", step_wall_us=150.0,
                                        slower_than_fastest_pct=50.0, spread_pct=50.0)


def test_in_lockstep_with_communication_the_straggler_is_the_rank_with_most_gpu_compute():
    # 4% apart: rank 0 computes 90 - 30 = 60 per step, rank 1 80 - 40 = 40; 60 is 50% more than 40
    rows = [row(0, 100.0, 90.0, 30.0), row(1, 104.0, 80.0, 40.0)]
    got = straggler(rows)
    assert got == Straggler(rank=0, worker="w0", criterion="gpu_compute", step_wall_us=100.0,
                            slower_than_fastest_pct=50.0, spread_pct=pytest.approx(4.0))


def test_the_lockstep_lead_is_over_the_least_compute_of_all_ranks():
    rows = [row(0, 100.0, 50.0, 10.0), row(1, 101.0, 30.0, 10.0), row(2, 102.0, 70.0, 10.0)]
    got = straggler(rows)  # computes 40, 20, 60: rank 2 leads the least (20) by 200%
    assert (got.rank, got.criterion, got.slower_than_fastest_pct) == (2, "gpu_compute", 200.0)


def test_step_times_exactly_five_percent_apart_are_not_in_lockstep():
    rows = [row(0, 100.0, 90.0, 30.0), row(1, 105.0, 80.0, 40.0)]
    assert (straggler(rows).rank, straggler(rows).criterion) == (1, "step_wall")


def test_lockstep_without_communication_keeps_the_step_wall_criterion():
    no_comm = [row(0, 100.0, 90.0, 0.0), row(1, 104.0, 80.0, 0.0)]
    assert (straggler(no_comm).rank, straggler(no_comm).criterion) == (1, "step_wall")
    one_unknown = [row(0, 100.0, 90.0, None), row(1, 104.0, 80.0, 40.0)]
    assert (straggler(one_unknown).rank, straggler(one_unknown).criterion) == (1, "step_wall")
    one_with = [row(0, 100.0, 90.0, 0.0), row(1, 104.0, 20.0, 5.0)]  # computes 90 and 15: 500% more
    assert (straggler(one_with).rank, straggler(one_with).criterion) == (0, "gpu_compute")
    assert straggler(one_with).slower_than_fastest_pct == 500.0


def test_a_rank_without_busy_time_counts_as_no_compute():
    # computes 0, 5, 10 per step: the least is 0, so no lead can be given (0)
    rows = [row(0, 100.0, None, 0.0), row(1, 100.5, 10.0, 5.0), row(2, 101.0, 20.0, 10.0)]
    got = straggler(rows)
    assert (got.rank, got.criterion, got.slower_than_fastest_pct) == (2, "gpu_compute", 0.0)


# --- are_spans ------------------------------------------------------------------------------------------------

def span(start: float, length: float, n: int | None = None, worker: str = "worker0") -> RankSummary:
    return rank(n, [step(100.0)], worker=worker, start=start, span=length)


def test_captures_without_a_rank_that_never_overlap_in_time_are_spans_in_any_order():
    assert are_spans([span(1000.0, 500.0), span(470e6, 900.0)])  # 8 minutes apart
    assert are_spans([span(470e6, 900.0), span(1000.0, 500.0), span(2000.0, 10.0, worker="w1")])
    assert are_spans([span(0.0, 10.0), span(10.0, 10.0)])  # one ends where the next starts


def test_captures_that_overlap_in_time_are_no_spans_even_by_a_microsecond():
    assert not are_spans([span(0.0, 10.0), span(9.0, 10.0)])
    assert not are_spans([span(0.0, 10.0), span(100.0, 10.0), span(5.0, 1.0)])  # the third inside the first


def test_captures_of_distinct_recorded_ranks_are_ranks_however_far_apart():
    assert not are_spans([span(0.0, 10.0, n=0), span(100.0, 10.0, n=1)])
    assert are_spans([span(0.0, 10.0, n=0), span(100.0, 10.0, n=0)])  # rank 0 twice: two captures of it
    assert are_spans([span(0.0, 10.0, n=0), span(100.0, 10.0)])


def test_one_file_or_a_file_without_timed_events_makes_no_spans():
    assert not are_spans([span(0.0, 10.0)]) and not are_spans([])
    assert not are_spans([span(0.0, 10.0), rank(None, [], start=None)])
