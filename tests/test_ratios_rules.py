"""The one rule for shares and relative changes (``percent``, ``relative``), on numbers worked out by hand."""

from __future__ import annotations

from lightx2v.trace_summary.ratios import percent, relative


def test_a_share_is_the_part_as_a_percentage_of_the_whole():
    assert percent(1.0, 4.0) == 25.0
    assert percent(3.0, 2.0) == 150.0
    assert percent(0.0, 5.0) == 0.0
    assert percent(-1.0, 4.0) == -25.0


def test_a_share_of_a_whole_that_is_not_positive_is_none():
    assert percent(1.0, 0.0) is None
    assert percent(0.0, 0.0) is None
    assert percent(1.0, -4.0) is None
    assert percent(1.0, 1e-9) == 1e11  # just above zero is a whole


def test_a_relative_change_is_the_difference_over_the_base():
    assert relative(15.0, 10.0) == 0.5
    assert relative(5.0, 10.0) == -0.5
    assert relative(10.0, 10.0) == 0.0
    assert relative(3.0, 2.0) == 0.5


def test_a_relative_change_from_a_base_that_is_not_positive_is_zero():
    assert relative(5.0, 0.0) == 0.0
    assert relative(5.0, -2.0) == 0.0
    assert relative(4.0, 1e-9) == (4.0 - 1e-9) / 1e-9
