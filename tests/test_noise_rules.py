"""The change-or-noise rule's edges as pure logic (`lightx2v.trace_summary.noise`), fast: each threshold at and
just past its value, the steps each test needs, the rank test's p beside SciPy's (`scipy.stats.mannwhitneyu`, exact
and asymptotic without continuity correction: the figures below are SciPy 1.17's, an independent implementation).
tests/test_trace_summary_noise.py checks the rule on real captures."""

from __future__ import annotations

import statistics

import pytest

from lightx2v.trace_summary.noise import (
    NO_TEST,
    NOISE,
    RANGES,
    RANK_TEST,
    REAL,
    UNTESTED,
    Noise,
    judge,
    mann_whitney_p,
    noise_pct,
)


@pytest.mark.parametrize("base,new", [([], []), ([], [1.0, 2.0]), ([1.0, 2.0], [])])
def test_a_side_without_steps_cannot_tell_and_has_no_effect(base, new):
    assert judge(base, new) == Noise(verdict=UNTESTED, test=NO_TEST, p_value=None, effect_us=0.0, noise_pct=None)


def test_one_step_a_side_cannot_tell_but_keeps_the_effect_and_the_spread():
    assert judge([100.0], [200.0, 210.0]) == Noise(verdict=UNTESTED, test=NO_TEST, p_value=None, effect_us=105.0,
                                                   noise_pct=pytest.approx(10 / 2 / 205 * 100))


@pytest.mark.parametrize("base,new,verdict", [
    ([199.0, 201.0], [204.0, 206.0], REAL),  # effect 5 us exactly (2.5%): big enough
    ([199.0, 201.0], [203.9, 205.9], NOISE),  # 4.9 us
    ([499.0, 501.0], [509.0, 511.0], REAL),  # effect 2% of BASE's median exactly (10 us)
    ([999.0, 1001.0], [1018.9, 1020.9], NOISE),  # 1.99%: under 2%, however far apart
    ([999.0, 1001.0], [1005.0, 1007.0], NOISE),  # 6 us but 0.6%: both are needed
    ([100.0, 200.0], [150.0, 260.0], NOISE),  # big effect, overlapping ranges
    ([100.0, 110.0], [110.0, 120.0], NOISE),  # touching ranges overlap
    ([110.0, 120.0], [100.0, 110.0], NOISE),
    ([110.0, 120.0], [90.0, 100.0], REAL),  # faster, apart
])
def test_two_or_three_steps_a_side_need_apart_ranges_and_a_big_enough_effect(base, new, verdict):
    r = judge(base, new)
    assert (r.verdict, r.test, r.p_value) == (verdict, RANGES, None)
    assert r.effect_us == pytest.approx(sum(new) / 2 - sum(base) / 2)
    assert r.noise_pct == pytest.approx(max((max(s) - min(s)) / 2 / (sum(s) / 2) * 100 for s in (base, new)))


def test_four_steps_a_side_take_the_rank_test():
    r = judge([100.0, 101.0, 102.0, 103.0], [200.0, 201.0, 202.0, 203.0])
    assert (r.verdict, r.test, r.p_value) == (REAL, RANK_TEST, pytest.approx(2 / 70))
    assert (r.effect_us, r.noise_pct) == (100.0, pytest.approx(1.5 / 101.5 * 100))  # BASE spreads more


@pytest.mark.parametrize("base,new,verdict,test", [
    ([100.0, 101.0, 102.0, 103.0], [150.0, 151.0], REAL, RANGES),  # 4 against 2: the ranges, apart
    ([150.0, 151.0], [100.0, 101.0, 102.0, 103.0], REAL, RANGES),
    ([100.0, 101.0, 102.0, 160.0], [150.0, 151.0], NOISE, RANGES),  # one BASE step among NEW's
    ([100.0, 101.0, 102.0, 103.0, 104.0, 105.0, 106.0, 107.0, 108.0], [150.0, 151.0, 152.0], REAL, RANGES),
    ([100.0, 101.0, 102.0, 103.0], [150.0], UNTESTED, NO_TEST),  # one step on a side, however many on the other
    ([100.0, 101.0, 102.0, 103.0, 104.0], [150.0, 151.0, 152.0, 153.0], REAL, RANK_TEST),
])
def test_the_side_with_fewer_steps_decides_which_test_judges(base, new, verdict, test):
    """The rank test needs RANK_TEST_STEPS on both sides: with 4 against 2 its smallest two-sided p is 2 / C(6, 2)
    = 0.13, so it could never call a change; the ranges judge instead. The effect is the medians' difference,
    each side's own."""
    r = judge(base, new)
    assert (r.verdict, r.test) == (verdict, test)
    assert r.effect_us == pytest.approx(statistics.median(new) - statistics.median(base))
    if test == RANK_TEST:
        assert r.p_value == pytest.approx(2 / 126)  # complete separation of 5 and 4: 2 of C(9, 4) splits


def test_a_significant_rank_test_on_a_small_effect_is_noise():
    r = judge([1000.0, 1001.0, 1002.0, 1003.0, 1004.0], [1006.0, 1007.0, 1008.0, 1009.0, 1010.0])
    assert (r.verdict, r.test, r.p_value, r.effect_us) == (NOISE, RANK_TEST, pytest.approx(2 / 252), 6.0)


def test_a_big_effect_that_the_rank_test_does_not_confirm_is_noise():
    # the medians are 101 us apart, but two of five NEW steps are among BASE's: p = 0.3095 (SciPy, exact)
    r = judge([100.0, 101.0, 102.0, 103.0, 104.0], [100.5, 101.5, 203.0, 204.0, 205.0])
    assert (r.verdict, r.p_value, r.effect_us) == (NOISE, pytest.approx(0.30952380952380953), 101.0)


def test_p_exactly_at_the_threshold_is_not_below_it(monkeypatch):
    from lightx2v.trace_summary import noise

    monkeypatch.setattr(noise, "P_VALUE", 2 / 70)  # what 4 against 4 apart gives
    assert judge([1.0, 2.0, 3.0, 4.0], [50.0, 60.0, 70.0, 80.0]).verdict == NOISE


@pytest.mark.parametrize("base,new,pct", [
    ([100.0, 110.0], [50.0], 5 / 105 * 100),  # one step on a side: the other side's spread
    ([50.0], [100.0, 110.0, 120.0], 10 / 110 * 100),
    ([100.0, 110.0], [200.0, 300.0], 50 / 250 * 100),  # the larger of the two
    ([200.0, 300.0], [100.0, 110.0], 50 / 250 * 100),
    ([0.0, 0.0], [0.0, 0.0], None),  # a median of 0: no relative spread
    ([0.5, 0.5, 0.6], [0.5], pytest.approx(0.05 / 0.5 * 100)),  # a median under 1 us still has one
    ([], [], None), ([3.0], [4.0], None),
])
def test_the_spread_is_the_larger_sides_half_range_over_its_median(base, new, pct):
    assert noise_pct(base, new) == (pytest.approx(pct) if isinstance(pct, float) else pct)


@pytest.mark.parametrize("x,y,p", [
    ([1, 2, 3, 5, 7], [4, 6, 8, 9, 10, 11, 12], 14 / 792),  # unequal sizes: SciPy exact 0.017676...
    ([4, 6, 8, 9, 10, 11, 12], [1, 2, 3, 5, 7], 14 / 792),
    ([1, 2, 3], [4, 5, 6, 7, 8], 2 / 56),
    # 40 pooled steps: still exact (SciPy exact 0.0026426; its normal approximation says 0.0031936)
    ([float(v) for v in range(20)], [v + 6.5 for v in range(20)], 0.0026426305915593523),
    # above 40 pooled steps: the normal approximation, as SciPy's asymptotic one without continuity correction
    (list(range(1, 22)), list(range(22, 43)), 2.9087751417976993e-08),
    ([float(v) for v in range(20)], [v + 0.5 for v in range(21)], 0.6019206376711884),
    ([1, 2, 3, 4, 5, 6, 7, 8, 9, 10] * 2 + [30], [5, 6, 7, 8, 9, 10, 11, 12, 13, 14] * 2 + [3, 40],
     0.002730897926632251),  # with ties: the tie correction
])
def test_the_rank_tests_p_agrees_with_scipy(x, y, p):
    assert mann_whitney_p(x, y) == pytest.approx(p, rel=1e-9)


def test_all_tied_above_40_steps_is_p_1():
    assert mann_whitney_p([1.0] * 41, [1.0] * 2) == 1.0
