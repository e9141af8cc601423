"""GPU busy time as interval arithmetic (`lightx2v.trace_summary.intervals`), fast: the union of overlapping
kernels, the part of a window they cover and the gaps they leave, each figure worked out by hand on a number line.
tests/test_trace_summary_analysis.py checks the same through a whole trace."""

from __future__ import annotations

import pytest

from lightx2v.trace_summary.intervals import Spans, clip, covered, gaps, merge


def test_merge_sorts_and_joins_overlapping_intervals():
    assert merge([(30, 40), (5, 20), (0, 10)]) == [(0, 20), (30, 40)]


def test_merge_joins_intervals_that_only_touch():
    assert merge([(0, 10), (10, 15)]) == [(0, 15)]


def test_merge_keeps_the_outer_end_when_one_interval_lies_inside_another():
    assert merge([(0, 100), (10, 20), (30, 40)]) == [(0, 100)]


def test_merge_of_nothing_is_nothing_and_of_one_is_itself():
    assert merge([]) == []
    assert merge([(3.5, 7.25)]) == [(3.5, 7.25)]


def test_merge_keeps_intervals_at_negative_times_and_a_gap_of_any_size():
    # kineto's times are offsets: a trace may start before 0, and two kernels may sit 1 us apart
    assert merge([(-20, -10), (-9, -5)]) == [(-20, -10), (-9, -5)]
    assert merge(iter([(1, 2), (3, 4)])) == [(1, 2), (3, 4)]


BUSY = [(0, 20), (30, 40), (50, 60)]


@pytest.mark.parametrize("lo,hi,parts", [
    (0, 60, [(0, 20), (30, 40), (50, 60)]),    # the whole line
    (10, 35, [(10, 20), (30, 35)]),            # a window that starts and ends inside intervals
    (20, 30, []),                              # exactly one gap: the intervals only touch its ends
    (35, 55, [(35, 40), (50, 55)]),            # starting inside the second interval
    (40, 50, []),
    (-10, 5, [(0, 5)]),                        # starting before the first
    (55, 100, [(55, 60)]),                     # ending after the last
    (30, 40, [(30, 40)]),                      # exactly one interval
    (61, 70, []),
])
def test_clip_keeps_the_parts_of_the_intervals_inside_the_window(lo, hi, parts):
    assert clip(BUSY, lo, hi) == parts


def test_clip_starts_at_the_interval_that_holds_the_window_start():
    # a window that starts inside an interval, or exactly where one starts, keeps that interval's part
    assert clip(BUSY, 39, 41) == [(39, 40)]
    assert clip([(0, 10)], 0, 10) == [(0, 10)]
    assert clip([(0, 10), (10, 20)], 10, 20) == [(10, 20)]


@pytest.mark.parametrize("lo,hi,length", [(0, 60, 40), (10, 35, 15), (20, 30, 0), (-10, 5, 5), (55, 100, 5)])
def test_covered_is_the_busy_length_inside_the_window(lo, hi, length):
    assert covered(BUSY, lo, hi) == length


@pytest.mark.parametrize("lo,hi,idle", [
    (0, 60, [(20, 30), (40, 50)]),
    (-10, 70, [(-10, 0), (20, 30), (40, 50), (60, 70)]),  # before the first and after the last too
    (10, 35, [(20, 30)]),
    (22, 28, [(22, 28)]),                                 # a window inside one gap is all idle
    (30, 40, []),                                         # inside one interval: none
    (0, 20, []),
])
def test_gaps_are_the_uncovered_parts_of_the_window(lo, hi, idle):
    assert gaps(BUSY, lo, hi) == idle


def test_an_empty_busy_line_leaves_the_whole_window_idle():
    assert gaps([], 0, 10) == [(0, 10)]
    assert covered([], 0, 10) == 0
    assert gaps([], 5, 5) == []


def test_a_union_is_held_as_two_arrays_of_starts_and_ends():
    merged = merge([(30, 40), (0, 10), (5, 20)])
    assert isinstance(merged, Spans)
    assert (list(merged.lo), list(merged.hi)) == ([0, 30], [20, 40])
    assert len(merged) == 2 and list(merged) == [(0, 20), (30, 40)]
    assert merged == Spans([(0, 20), (30, 40)]) and merged != [(0, 20)]


def test_clip_reads_a_union_and_a_plain_list_alike():
    pairs = [(0, 20), (30, 40)]
    for lo, hi in ((0, 50), (5, 35), (20, 30), (39, 41), (-5, 1)):
        assert clip(Spans(pairs), lo, hi) == clip(pairs, lo, hi)
