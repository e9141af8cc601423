"""The innermost interval around a time range on one thread (``Enclosing``) and the grouping of intervals by
thread in nesting order (``by_thread_in_order``), as pure logic on a few hand-made intervals (thread, start,
duration), every answer worked out here."""

from __future__ import annotations

import pytest

from lightx2v.trace_summary.enclosing import NONE, SAME_END_US, Enclosing, _ordered, by_thread_in_order, same_end_us


def enclosing(*intervals: tuple[int, float, float]) -> Enclosing:
    """``Enclosing`` over (thread, start, duration) intervals, indexed in the order given."""
    return Enclosing([t for t, _, _ in intervals], [s for _, s, _ in intervals], [d for _, _, d in intervals])


# a thread's stack: 0 = [0, 100], 1 = [10, 50] inside it, 2 = [20, 30] inside 1, 3 = [60, 90] inside 0
STACK = ((1, 0.0, 100.0), (1, 10.0, 40.0), (1, 20.0, 10.0), (1, 60.0, 30.0))


def test_the_innermost_interval_around_a_range_is_the_deepest_one_holding_all_of_it():
    ops = enclosing(*STACK)
    assert ops.innermost(1, 22.0, 25.0) == 2
    assert ops.innermost(1, 12.0, 25.0) == 1  # starts before 2 does
    assert ops.innermost(1, 22.0, 45.0) == 1  # ends after 2 does
    assert ops.innermost(1, 45.0, 70.0) == 0  # across 1's end and 3's start
    assert ops.innermost(1, 70.0, 80.0) == 3


def test_a_range_on_the_edges_of_an_interval_is_inside_it():
    ops = enclosing(*STACK)
    assert ops.innermost(1, 20.0, 30.0) == 2  # exactly interval 2
    assert ops.innermost(1, 0.0, 100.0) == 0
    assert ops.innermost(1, 30.0, 30.0) == 2  # an instant at 2's end


def test_a_range_no_interval_holds_has_none():
    ops = enclosing(*STACK)
    assert ops.innermost(1, -5.0, 10.0) == NONE  # starts before everything
    assert ops.innermost(1, 90.0, 101.0) == NONE  # ends after 0
    assert ops.innermost(1, 150.0, 160.0) == NONE  # after everything
    assert ops.innermost(2, 22.0, 25.0) == NONE  # a thread without intervals


def test_an_interval_ending_where_the_next_starts_does_not_enclose_it():
    # 0 = [0, 10], 1 = [10, 20]: siblings, so a range inside 1 past 10 is in 1 only, and one over both in none
    ops = enclosing((1, 0.0, 10.0), (1, 10.0, 10.0))
    assert list(ops.walk()) == [(0, NONE), (1, NONE)]
    assert ops.innermost(1, 12.0, 15.0) == 1
    assert ops.innermost(1, 5.0, 15.0) == NONE


def test_each_thread_has_its_own_stack():
    # the same times on two threads: a range on thread 2 is enclosed by thread 2's interval only
    ops = enclosing((1, 0.0, 100.0), (2, 10.0, 20.0), (1, 40.0, 10.0))
    assert ops.innermost(2, 12.0, 15.0) == 1
    assert ops.innermost(1, 12.0, 15.0) == 0
    assert ops.innermost(2, 42.0, 45.0) == NONE
    assert ops.innermost(1, 42.0, 45.0) == 2
    assert dict(ops.walk()) == {0: NONE, 2: 0, 1: NONE}


def test_walk_gives_each_interval_its_parent_parents_first():
    assert list(enclosing(*STACK).walk()) == [(0, NONE), (1, 0), (2, 1), (3, 0)]


def test_intervals_out_of_order_are_nested_as_if_they_were_in_order():
    # STACK given backwards: the indices are the given ones, the nesting the same
    ops = enclosing(*reversed(STACK))  # 3 = [0, 100], 2 = [10, 50], 1 = [20, 30], 0 = [60, 90]
    assert list(ops.walk()) == [(3, NONE), (2, 3), (1, 2), (0, 3)]
    assert ops.innermost(1, 22.0, 25.0) == 1
    assert ops.innermost(1, 45.0, 70.0) == 3
    assert ops.innermost(1, 70.0, 80.0) == 0


def test_of_two_intervals_starting_together_the_longer_one_encloses_the_shorter():
    for given in (((1, 0.0, 10.0), (1, 0.0, 50.0)), ((1, 0.0, 50.0), (1, 0.0, 10.0))):
        short = 0 if given[0][2] == 10.0 else 1
        ops = enclosing(*given)
        assert dict(ops.walk())[short] == 1 - short
        assert ops.innermost(1, 2.0, 5.0) == short
        assert ops.innermost(1, 2.0, 20.0) == 1 - short


def test_by_thread_in_order_groups_the_indices_by_thread_each_in_start_then_longest_first_order():
    thread = [1, 2, 1, 1, 2, 1]
    ts = [30.0, 5.0, 10.0, 10.0, 1.0, 0.0]
    dur = [1.0, 1.0, 5.0, 8.0, 1.0, 40.0]
    got = by_thread_in_order(range(6), thread, ts, dur)
    assert {t: list(idx) for t, idx in got.items()} == {1: [5, 3, 2, 0], 2: [4, 1]}


def test_by_thread_in_order_keeps_only_the_indices_given_and_their_order_when_it_is_right():
    thread = [1, 1, 1, 1]
    ts = [0.0, 5.0, 5.0, 9.0]
    dur = [20.0, 3.0, 3.0, 1.0]  # 1 and 2 alike: already in order, kept as given
    assert {t: list(i) for t, i in by_thread_in_order([0, 1, 2, 3], thread, ts, dur).items()} == {1: [0, 1, 2, 3]}
    assert {t: list(i) for t, i in by_thread_in_order([3, 0], thread, ts, dur).items()} == {1: [0, 3]}
    assert {t: list(i) for t, i in by_thread_in_order([2, 1], thread, ts, dur).items()} == {1: [2, 1]}
    assert by_thread_in_order([], thread, ts, dur) == {}


def test_indices_count_as_in_order_when_starts_never_go_back_and_equal_starts_never_grow_longer():
    # (the check that spares sorting a thread kineto already wrote in order)
    ts = [0.0, 5.0, 5.0, 5.0, 9.0]
    dur = [20.0, 3.0, 3.0, 2.0, 1.0]
    assert _ordered([], ts, dur)
    assert _ordered([4], ts, dur)
    assert _ordered([0, 1, 2, 3, 4], ts, dur)  # 1 and 2 alike, 3 shorter at the same start
    assert _ordered([0, 4], ts, dur)
    assert not _ordered([4, 0], ts, dur)  # a start going back
    assert not _ordered([0, 3, 1], ts, dur)  # the same start, longer after shorter


# --- intervals that overlap without nesting (close_overlapped: the Python frames' rule) ---------------------------

def closing(*intervals: tuple[int, float, float]) -> Enclosing:
    return Enclosing([t for t, _, _ in intervals], [s for _, s, _ in intervals], [d for _, _, d in intervals],
                     close_overlapped=True)


# 0 = [0, 150], 1 = [100, 250]: 1 starts inside 0 and ends after it
OVERLAPPING = ((1, 0.0, 150.0), (1, 100.0, 150.0))


def test_by_default_an_interval_starting_inside_another_is_its_child_even_when_it_ends_after_it():
    ops = enclosing(*OVERLAPPING)
    assert list(ops.walk()) == [(0, NONE), (1, 0)]
    assert ops.innermost(1, 90.0, 120.0) == 0


def test_an_interval_starting_inside_another_and_ending_after_it_closes_it_at_its_start():
    ops = closing(*OVERLAPPING)
    assert list(ops.walk()) == [(0, NONE), (1, NONE)]
    assert ops.innermost(1, 50.0, 60.0) == 0
    assert ops.innermost(1, 50.0, 100.0) == 0  # up to the later one's start
    assert ops.innermost(1, 120.0, 140.0) == 1  # the later one's, though inside the earlier one as recorded
    assert ops.innermost(1, 90.0, 120.0) == NONE  # across the start: the earlier one is closed there
    assert ops.innermost(1, 160.0, 200.0) == 1


def test_overlapping_intervals_stay_siblings_however_many_there_are():
    # each step's <module> frame [1000 k, 1000 k + 1500] runs into the next step's: no chain of parents
    ops = closing(*((1, 1000.0 * k, 1500.0) for k in range(50)))
    assert all(p == NONE for _, p in ops.walk())
    assert [ops.innermost(1, 1000.0 * k + 700, 1000.0 * k + 800) for k in range(50)] == list(range(50))


def test_the_closing_interval_closes_every_open_one_ending_before_it_and_nests_in_the_first_that_does_not():
    # 0 = main [0, 1000]; 1 = a [10, 300] with 2 = b [20, 200] in it; 3 = c [150, 400] starts inside b
    ops = closing((1, 0.0, 1000.0), (1, 10.0, 290.0), (1, 20.0, 180.0), (1, 150.0, 250.0))
    assert list(ops.walk()) == [(0, NONE), (1, 0), (2, 1), (3, 0)]
    assert ops.closed == {2: 150.0, 1: 150.0}
    assert ops.innermost(1, 30.0, 40.0) == 2
    assert ops.innermost(1, 160.0, 170.0) == 3
    assert ops.innermost(1, 450.0, 460.0) == 0


def test_properly_nested_intervals_nest_as_they_do_by_default():
    for given in (STACK, ((1, 0.0, 10.0), (1, 10.0, 10.0)), ((1, 0.0, 50.0), (1, 0.0, 10.0)),
                  ((1, 0.0, 10.0), (1, 10.0, 0.0)), ((1, 0.0, 100.0), (1, 40.0, 60.0))):
        assert list(closing(*given).walk()) == list(enclosing(*given).walk()), given
        assert closing(*given).closed == {}


def test_ends_a_float_sum_apart_are_one_end():
    # 0.1 + 0.2 is 0.30000000000000004 > 0.0 + 0.3: the same end as written, so nested, not overlapping
    ops = closing((1, 0.0, 0.3), (1, 0.1, 0.2))
    assert list(ops.walk()) == [(0, NONE), (1, 0)]
    assert ops.closed == {}
    assert list(closing((1, 0.0, 0.3), (1, 0.1, 0.201)).walk()) == [(0, NONE), (1, NONE)]  # a nanosecond later


def test_at_epoch_microseconds_one_end_is_one_step_of_a_double_wide():
    """1712195495505583.047 is read as a multiple of 0.25 us: ends that far apart may be the same nanosecond."""
    assert same_end_us(1712195495505583.047) == SAME_END_US + 0.25
    assert same_end_us(100.0) == pytest.approx(SAME_END_US)  # relative times: as before
    given = ((1, 0.0, 48875.125), (1, 0.25, 48875.046))  # main starts 0.25 later, its end 0.171 later
    assert list(closing(*given).walk()) == [(0, NONE), (1, NONE)]  # at small times: an overlap
    assert list(Enclosing([1, 1], [0.0, 0.25], [48875.125, 48875.046], close_overlapped=True,
                          same_end=same_end_us(1712195495505583.0)).walk()) == [(0, NONE), (1, 0)]
