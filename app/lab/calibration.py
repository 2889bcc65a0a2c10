"""Criterion calibration: across every experiment in the store, how often a criterion's
early (live) decision matched the final verdict of the run, per criterion type and per
criterion id. Pure functions over counts (`app.lab.queries.calibration_rows`).

Only full runs count: finished, not stopped early, with a graded verdict (pass, fail, or
error as a miss). A decision *matches* when a live pass comes in a run that passed, or a
live fail in a run that missed. A live pass in a run that missed is a **false pass**
(arming it on pass would have passed a failing run); a live fail in a run that passed a
**false fail**. Together they are the flips.

Labels, per polarity and overall (the thresholds are in docs/lab.md):
- `risky`: at least one flip was seen: arming it there can change a verdict;
- `safe to arm`: no flip, and enough decisions that the one-sided 95% upper bound of
  the flip rate is at most `SAFE_UPPER` (10%: at least 29 decisions);
- `not enough data`: no flip yet, but too few decisions to bound the rate that low.
"""

from __future__ import annotations

from typing import Any, Iterable, Optional

from .. import compare, stats

SAFE_UPPER = 0.10
SAFE, RISKY, UNKNOWN = "safe to arm", "risky", "not enough data"


def label(flips: int, n: int) -> tuple[str, str]:
    """(label, the numbers behind it in words) for `flips` flipped verdicts in `n` decisions."""
    if n == 0:
        return UNKNOWN, "never decided live"
    upper = stats.upper_bound(flips, n) or 1.0
    if flips:
        ci = stats.wilson(flips, n)
        return RISKY, (f"{flips} flipped of {compare.plural(n, 'decision')} ({100 * ci['rate']:.0f}%, 95% CI "
                       f"{100 * ci['low']:.0f}–{100 * ci['high']:.0f}%)")
    if upper <= SAFE_UPPER:
        return SAFE, f"no flip in {compare.plural(n, 'decision')}: the flip rate is below {100 * upper:.1f}% (95% upper bound)"
    return UNKNOWN, (f"no flip in {compare.plural(n, 'decision')}, which only bounds the flip rate below {100 * upper:.0f}% "
                     f"(95%); {_needed()} are needed to bound it below {100 * SAFE_UPPER:.0f}%")


def _needed() -> int:
    n = 1
    while (stats.upper_bound(0, n) or 1.0) > SAFE_UPPER:
        n += 1
    return n


def _figures(pass_ok: int, false_pass: int, fail_ok: int, false_fail: int) -> dict[str, Any]:
    n_pass, n_fail = pass_ok + false_pass, fail_ok + false_fail
    n, flips = n_pass + n_fail, false_pass + false_fail
    out: dict[str, Any] = {"decisions": n, "matched": n - flips, "flips": flips}
    for name, k, m in (("overall", flips, n), ("on_pass", false_pass, n_pass), ("on_fail", false_fail, n_fail)):
        ci = stats.wilson(k, m)
        text_label, why = label(k, m)
        out[name] = {"decided": m, "flips": k, "rate": ci["rate"] if ci else None, "low": ci["low"] if ci else None,
                     "high": ci["high"] if ci else None, "upper": stats.upper_bound(k, m), "label": text_label,
                     "why": why}
    out["false_passes"], out["false_fails"] = false_pass, false_fail
    out["match_rate"] = (n - flips) / n if n else None
    return out


def calibrate(rows: Iterable[dict[str, Any]], experiments: Optional[dict[tuple[str, str], int]] = None
              ) -> dict[str, Any]:
    """{by_type, by_criterion, thresholds} from rows {type, criterion_id, decision, run_verdict, n}
    and, per (type, criterion id), the number of experiments it was decided in."""
    by_type: dict[str, list[int]] = {}
    by_id: dict[tuple[str, str], list[int]] = {}
    experiments = experiments or {}
    for r in rows:
        slot = {("pass", "pass"): 0, ("pass", "miss"): 1, ("fail", "miss"): 2, ("fail", "pass"): 3}.get(
            (r["decision"], compare.outcome(r["run_verdict"])))
        if slot is None:
            continue
        t = r["type"] or "(no type)"
        for table, key in ((by_type, t), (by_id, (t, r["criterion_id"]))):
            table.setdefault(key, [0, 0, 0, 0])[slot] += int(r["n"])
    types = [{"type": t, **_figures(*c)} for t, c in by_type.items()]
    criteria = [{"type": t, "criterion_id": cid, "experiments": experiments.get((t, cid), 0), **_figures(*c)}
                for (t, cid), c in by_id.items()]
    order = {RISKY: 0, SAFE: 1, UNKNOWN: 2}
    types.sort(key=lambda x: (order[x["overall"]["label"]], -x["decisions"], x["type"]))
    criteria.sort(key=lambda x: (order[x["overall"]["label"]], -x["decisions"], x["type"], x["criterion_id"]))
    return {"by_type": types, "by_criterion": criteria,
            "thresholds": {"safe_upper": SAFE_UPPER, "min_decisions_without_flip": _needed(), "confidence": 0.95}}
