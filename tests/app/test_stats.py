"""The comparison's statistics against values worked out independently: textbook examples
and closed forms computed here, and a slow bootstrap written in this file."""

from __future__ import annotations

import math
import random
import statistics

import pytest

from qita_board import stats


def wilson_by_hand(k: int, n: int, z: float = 1.959963984540054) -> tuple[float, float]:
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return centre - half, centre + half


def test_wilson_matches_newcombes_worked_example():
    # Newcombe (1998), Statistics in Medicine 17:857, example 81/263: 0.2553 to 0.3662
    ci = stats.wilson(81, 263)
    assert ci["rate"] == pytest.approx(81 / 263)
    assert (round(ci["low"], 4), round(ci["high"], 4)) == (0.2553, 0.3662)


@pytest.mark.parametrize("k,n", [(0, 10), (10, 10), (27, 29), (3, 4), (1, 1), (500, 1000)])
def test_wilson_equals_the_closed_form(k, n):
    low, high = wilson_by_hand(k, n)
    ci = stats.wilson(k, n)
    assert ci["low"] == pytest.approx(max(0.0, low), abs=1e-9) and ci["high"] == pytest.approx(min(1.0, high), abs=1e-9)


def test_wilson_of_nothing_is_none():
    assert stats.wilson(0, 0) is None


def mcnemar_by_hand(b: int, c: int) -> float:
    n = b + c
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, i) for i in range(min(b, c) + 1)) / 2 ** n
    return min(1.0, 2 * tail)


@pytest.mark.parametrize("b,c,expected", [(7, 1, 0.0703125), (10, 2, 2 * (1 + 12 + 66) / 4096), (5, 5, 1.0),
                                          (0, 0, 1.0), (2, 0, 0.5), (0, 6, 0.03125)])
def test_exact_mcnemar(b, c, expected):
    assert mcnemar_by_hand(b, c) == pytest.approx(expected)
    test = stats.mcnemar_exact(b, c)
    assert test["p_value"] == pytest.approx(expected)
    assert (test["a_only"], test["b_only"], test["discordant"]) == (b, c, b + c)


def test_mcnemar_in_plain_words():
    assert stats.mcnemar_reading(stats.mcnemar_exact(0, 6), "smoke", "e2e") == (
        "smoke passed where e2e missed 0×, missed where e2e passed 6×: exact McNemar p = 0.0312 — "
        "e2e passes more often than chance explains.")
    assert stats.mcnemar_reading(stats.mcnemar_exact(2, 0), "smoke", "e2e").endswith(
        "p = 0.5 — no evidence that smoke passes more or less often than e2e.")
    assert stats.mcnemar_reading(stats.mcnemar_exact(0, 0), "smoke", "e2e") == (
        "smoke and e2e never disagree on a pass: nothing to test.")


def test_saving_interval_by_the_delta_method_written_out():
    a = [3, 4, 2, 5, 3, 6, 2, 4, 3, 5]
    b = [7, 8, 6, 9, 5, 10, 6, 7, 8, 9]
    r = sum(a) / sum(b)
    resid = [x - r * y for x, y in zip(a, b)]
    se = statistics.stdev(resid) / math.sqrt(len(a)) / (sum(b) / len(b))
    t = 2.2621571628  # t(0.975, 9 df), from a t table
    got = stats.ratio_saving(a, b)
    assert got["saved_pct"] == pytest.approx(100 * (1 - r))
    assert got["low"] == pytest.approx(100 * (1 - (r + t * se)), rel=1e-6)
    assert got["high"] == pytest.approx(100 * (1 - (r - t * se)), rel=1e-6)


def bootstrap_saving(a: list[float], b: list[float], *, rounds: int, seed: int) -> tuple[float, float]:
    """The slow reference: resample pairs with replacement, percentile interval of the saving."""
    rng = random.Random(seed)
    n = len(a)
    values = []
    for _ in range(rounds):
        idx = [rng.randrange(n) for _ in range(n)]
        sb = sum(b[i] for i in idx)
        values.append(100 * (1 - sum(a[i] for i in idx) / sb))
    values.sort()
    return values[int(0.025 * rounds)], values[int(0.975 * rounds) - 1]


def test_saving_interval_agrees_with_a_paired_bootstrap():
    rng = random.Random(11)
    b = [rng.uniform(5, 15) for _ in range(60)]
    a = [x * rng.uniform(0.3, 0.9) for x in b]
    low, high = bootstrap_saving(a, b, rounds=4000, seed=3)
    got = stats.ratio_saving(a, b)
    assert got["low"] == pytest.approx(low, abs=2.0) and got["high"] == pytest.approx(high, abs=2.0)
    assert got["low"] < got["saved_pct"] < got["high"]


def test_saving_edge_cases():
    assert stats.ratio_saving([], []) is None
    assert stats.ratio_saving([1, 2], [0, 0]) is None
    one = stats.ratio_saving([2], [4])
    assert one == {"saved_pct": 50.0, "low": None, "high": None, "n": 1}
    # two pairs that saved the same share: no zero-width interval claiming certainty
    assert stats.ratio_saving([1, 2], [2, 4]) == {"saved_pct": 50.0, "low": None, "high": None, "n": 2}


def test_no_saving_interval_reaches_past_everything_saved():
    # three pairs, one of which used nothing: the linearised interval of R dips below 0
    a, b = [0, 6, 1], [10, 4, 3]
    r = sum(a) / sum(b)
    resid = [x - r * y for x, y in zip(a, b)]
    se = statistics.stdev(resid) / math.sqrt(3) / (sum(b) / 3)
    t = 4.3026527297  # t(0.975, 2 df), from a t table
    assert r - t * se < 0                                  # so the uncut interval would say > 100% saved
    got = stats.ratio_saving(a, b)
    assert got["high"] == 100.0
    assert got["low"] == pytest.approx(100 * (1 - (r + t * se)), rel=1e-6)
