"""How sure a comparison's figures are: pure functions over counts and paired values.

- Agreement (a proportion): the Wilson score interval, from SciPy's binomial test.
- Does one side pass more often? An exact McNemar test: the discordant pairs (a passed
  where b missed, and the reverse) against a fair coin, two-sided, from SciPy's exact
  binomial test.
- A rate seen k times in n (the policy lab's false passes): the one-sided exact
  (Clopper-Pearson) upper bound, also from SciPy.
- Savings (100 * (B - A) / B over paired totals A and B): a 95% interval for the ratio
  of the two paired means by the delta method, with a t quantile on n - 1 degrees of
  freedom. It is a t-interval on the linearised ratio (`a_i - R b_i`), so it needs no
  resampling: it costs one pass over the pairs, which keeps a 10,000-pair comparison
  fast (docs/compare.md says why this and not a bootstrap).

SciPy is used rather than hand-written distributions (docs/compare.md, "Statistics").
"""

from __future__ import annotations

import math
from typing import Optional, Sequence

import numpy as np


def _scipy_stats():
    # Imported on first use (or by `warm`): SciPy's statistics take ~0.9 s to import, and
    # every command reaching this module paid it at import, `qita ingest` included
    # (through the overwrite rule's wording), before doing anything (-X importtime).
    from scipy import stats

    return stats


CONFIDENCE = 0.95
#: Pairs a saving needs for an interval. With two, t has one degree of freedom and the
#: interval is either enormous or, when both pairs saved the same share, of width zero:
#: neither says anything about how sure the figure is.
MIN_PAIRS_CI = 3


def wilson(k: int, n: int, *, confidence: float = CONFIDENCE) -> Optional[dict[str, float]]:
    """{rate, low, high} of k successes in n (Wilson score interval); None when n is 0."""
    if n <= 0:
        return None
    ci = _scipy_stats().binomtest(k, n).proportion_ci(confidence_level=confidence, method="wilson")
    return {"rate": k / n, "low": float(ci.low), "high": float(ci.high)}


def mcnemar_exact(a_only: int, b_only: int) -> dict:
    """Exact McNemar test on the discordant pairs.

    `a_only`: pairs where a passed and b missed; `b_only`: the reverse. Under "neither
    side passes more often" each discordant pair is a fair coin: the two-sided exact
    binomial p-value. With no discordant pair there is nothing to test (p = 1).
    """
    n = a_only + b_only
    p = 1.0 if n == 0 else float(_scipy_stats().binomtest(a_only, n, 0.5).pvalue)
    return {"a_only": a_only, "b_only": b_only, "discordant": n, "p_value": min(1.0, p)}


def mcnemar_reading(test: dict, label_a: str, label_b: str, *, alpha: float = 0.05) -> str:
    """The test in plain words."""
    a_only, b_only, p = test["a_only"], test["b_only"], test["p_value"]
    if test["discordant"] == 0:
        return f"{label_a} and {label_b} never disagree on a pass: nothing to test."
    counts = (f"{label_a} passed where {label_b} missed {a_only}×, missed where {label_b} passed {b_only}×")
    if p < alpha:
        more = label_a if a_only > b_only else label_b
        return f"{counts}: exact McNemar p = {p:.3g} — {more} passes more often than chance explains."
    return (f"{counts}: exact McNemar p = {p:.3g} — no evidence that {label_a} passes more or less often "
            f"than {label_b}.")


def ratio_saving(a: Sequence[float], b: Sequence[float], *, confidence: float = CONFIDENCE) -> Optional[dict]:
    """The saving 100 * (1 - sum(a) / sum(b)) over paired values, with its interval.

    Delta method for R = mean(a) / mean(b): Var(R) ~ var(a_i - R b_i) / (n mean(b)^2),
    and the interval is R -+ t(n-1) * se, turned into savings. None when there are no
    pairs or b sums to zero; no interval (low/high None) with fewer than MIN_PAIRS_CI
    pairs. The measures are counts, tokens, money and time, never negative, so R >= 0
    and no saving is above 100%: the linearised interval is cut there (on few pairs
    it can reach past it, e.g. [-40%, 120%] on 3 pairs).
    """
    n = len(a)
    if n == 0 or n != len(b):
        return None
    va, vb = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    sa, sb = float(va.sum()), float(vb.sum())
    if sb == 0:
        return None
    r = sa / sb
    saved = 100.0 * (1.0 - r)
    if n < MIN_PAIRS_CI:
        return {"saved_pct": saved, "low": None, "high": None, "n": n}
    mb = sb / n
    # var(a_i - R b_i) with ddof 1: the residuals of the ratio estimator sum to zero
    var = float(np.var(va - r * vb, ddof=1))
    se = math.sqrt(var / n) / abs(mb)
    t = _t_quantile(confidence, n - 1)
    low_r, high_r = r - t * se, r + t * se
    if va.min() >= 0 and vb.min() >= 0:
        low_r = max(low_r, 0.0)
    return {"saved_pct": saved, "low": 100.0 * (1.0 - high_r), "high": 100.0 * (1.0 - low_r), "n": n}


def upper_bound(k: int, n: int, *, confidence: float = CONFIDENCE) -> Optional[float]:
    """The one-sided upper confidence bound of a rate seen k times in n (Clopper-Pearson,
    exact, from SciPy's beta distribution); None when n is 0.

    With k = 0 it is 1 - (1 - confidence)^(1/n): about 3/n at 95%, the rule of three. It
    answers "how high could this rate be, given that we saw it k times in n?", the
    question a policy with no observed false pass leaves open."""
    if n <= 0:
        return None
    if k >= n:
        return 1.0
    return float(_scipy_stats().beta.ppf(confidence, k + 1, n - k))


_T_CACHE: dict[tuple[float, int], float] = {}


def _t_quantile(confidence: float, df: int) -> float:
    key = (confidence, df)
    q = _T_CACHE.get(key)
    if q is None:
        q = _T_CACHE[key] = float(_scipy_stats().t.ppf(0.5 + confidence / 2, df))
    return q


def warm() -> None:
    """Import SciPy and load the parts of its distributions it loads on first use: the
    board does this in its warming thread at start (app.warm), so no visitor's first
    comparison pays for it, and commands that never compare (`qita ingest`) never do."""
    wilson(1, 2)
    mcnemar_exact(1, 1)
