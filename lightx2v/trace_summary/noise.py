"""Change or noise: is a per-step figure of NEW different from BASE's beyond what the steps themselves vary by?

One capture's active steps are repeated measurements of the same code, so their spread is the noise that a
second capture of unchanged code would show. The rule (docs/trace_summary.md, "Change or noise"):

- The effect is the difference of the per-step medians. It must be at least MIN_EFFECT_PCT of BASE's median and
  MIN_EFFECT_US: smaller differences are not worth a name, whatever a test says.
- With at least RANK_TEST_STEPS steps a side: the two-sided Mann-Whitney U test (exact: the rank-sum's
  distribution counted over every split of the pooled steps, ties by mid-ranks) must give p < P_VALUE. Rank
  based, so one slow outlier step (a page fault, another job's burst) does not make a change.
- With 2 or 3 steps a side no rank test can reach p < 0.05 (the smallest two-sided p with 3 and 3 is 0.1): the
  per-step ranges must not overlap instead, weaker evidence, said as such.
- With one step on a side nothing can be told: the verdict says so and how to capture more steps.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import median
from typing import Optional

MIN_EFFECT_PCT = 2.0
MIN_EFFECT_US = 5.0
P_VALUE = 0.05
RANK_TEST_STEPS = 4
EXACT_MAX_STEPS = 40  # pooled steps up to which the exact distribution is counted; a normal approximation above

REAL, NOISE, UNTESTED = "beyond noise", "within noise", "cannot tell"
RANK_TEST, RANGES, NO_TEST = "mann-whitney", "ranges", "none"


@dataclass
class Noise:
    """The verdict on one figure's per-step values: REAL, NOISE, or UNTESTED (a side with one step)."""

    verdict: str
    test: str  # RANK_TEST, RANGES or NO_TEST
    p_value: Optional[float]  # the rank test's, None otherwise
    effect_us: float  # median(NEW) - median(BASE)
    noise_pct: Optional[float]  # the steps' own spread: the larger side's half-range, % of its median


def judge(base: Sequence[float], new: Sequence[float]) -> Noise:
    nb, nn = len(base), len(new)
    if nb == 0 or nn == 0:
        return Noise(verdict=UNTESTED, test=NO_TEST, p_value=None, effect_us=0.0, noise_pct=None)
    mb, mn = median(base), median(new)
    effect = mn - mb
    spread = noise_pct(base, new)
    big_enough = abs(effect) >= MIN_EFFECT_US and abs(effect) >= MIN_EFFECT_PCT / 100 * abs(mb)
    if min(nb, nn) < 2:
        return Noise(verdict=UNTESTED, test=NO_TEST, p_value=None, effect_us=effect, noise_pct=spread)
    if min(nb, nn) >= RANK_TEST_STEPS:
        p = mann_whitney_p(base, new)
        real = big_enough and p < P_VALUE
        return Noise(verdict=REAL if real else NOISE, test=RANK_TEST, p_value=p, effect_us=effect, noise_pct=spread)
    apart = max(base) < min(new) or max(new) < min(base)
    return Noise(verdict=REAL if big_enough and apart else NOISE, test=RANGES, p_value=None, effect_us=effect,
                 noise_pct=spread)


def noise_pct(base: Sequence[float], new: Sequence[float]) -> Optional[float]:
    """The larger of the two sides' half-range relative to its median, in % (None when no side has 2 steps)."""
    out = None
    for side in (base, new):
        m = median(side) if side else 0.0
        if len(side) >= 2 and m > 0:
            pct = (max(side) - min(side)) / 2 / m * 100
            out = pct if out is None else max(out, pct)
    return out


def mann_whitney_p(x: Sequence[float], y: Sequence[float]) -> float:
    """Two-sided p of the Mann-Whitney U test (ties by mid-ranks); exact up to EXACT_MAX_STEPS pooled values."""
    pooled = sorted([(v, 0) for v in x] + [(v, 1) for v in y])
    ranks2 = [0] * len(pooled)  # twice the mid-rank: integers
    i = 0
    while i < len(pooled):
        j = i
        while j + 1 < len(pooled) and pooled[j + 1][0] == pooled[i][0]:
            j += 1
        for k in range(i, j + 1):
            ranks2[k] = i + j + 2  # (i+1 + j+1) / 2 * 2
        i = j + 1
    n, total = len(x), len(pooled)
    observed = sum(r for r, (_, side) in zip(ranks2, pooled, strict=True) if side == 0)
    mean2 = n * (total + 1)  # twice the expected rank sum of x
    if total > EXACT_MAX_STEPS:
        return _normal_p(ranks2, n, observed, mean2)
    # counts[k][s]: how many k-subsets of the pooled values have doubled rank sum s
    top = sum(ranks2)
    counts = [[0] * (top + 1) for _ in range(n + 1)]
    counts[0][0] = 1
    for r in ranks2:
        for k in range(n, 0, -1):
            row, prev = counts[k], counts[k - 1]
            for s in range(top, r - 1, -1):
                if prev[s - r]:
                    row[s] += prev[s - r]
    dist = counts[n]
    upper = sum(dist[observed:])
    lower = sum(dist[:observed + 1])
    return min(1.0, 2 * min(upper, lower) / math.comb(total, n))  # two-sided: twice the smaller tail


def _normal_p(ranks2: list[int], n: int, observed: int, mean2: int) -> float:
    total = len(ranks2)
    m = total - n
    ties: dict[int, int] = {}
    for r in ranks2:
        ties[r] = ties.get(r, 0) + 1
    correction = sum(t ** 3 - t for t in ties.values()) / (total * (total - 1))
    var = n * m / 12 * ((total + 1) - correction)
    if var <= 0:
        return 1.0
    z = (abs(observed - mean2) / 2) / math.sqrt(var)
    return math.erfc(z / math.sqrt(2))
