"""The policy frontier: a family of candidate policies simulated over one set of runs,
their savings against their false-pass rate, and the one to recommend.

Candidates (for the live criteria of the set, each with the polarities it can decide):
each criterion armed alone in every polarity it can stop on (pass, fail, and decided
when it can decide both); all of them armed on pass, all on fail, all decided (each in
the polarity it has); the arming the runs declare, and that arming without each of its
criteria in turn (to find the one that costs false passes); and each of those again with a
minimum number of steps (half the runs' median length, at least 2). Duplicates are
dropped; at most `MAX_CANDIDATES`.

The recommended policy is the one with the largest saving (on the chosen measure)
among those with no observed false pass, ties going to fewer false fails, then to
fewer armed criteria; with it comes the one-sided 95% upper bound of its false-pass
rate given the number of graded runs (`app.stats.upper_bound`: no false pass in n runs
still allows a rate up to about 3/n).
"""

from __future__ import annotations

import statistics
from typing import Any, Optional, Sequence

from .sim import Policy, SimRun, simulate

MAX_CANDIDATES = 40
MEASURES = ("tokens", "steps", "agent_s", "cost_usd", "elapsed_s", "tool_calls")


def min_steps_for(runs: Sequence[SimRun]) -> int:
    """Half the runs' median length (at least 2): the minimum the frontier tries."""
    lengths = [r.step_count for r in runs if r.step_count]
    return max(2, round(statistics.median(lengths) / 2)) if lengths else 2


def candidates(catalogue: Sequence[dict[str, Any]], *, min_steps: int, declared: bool) -> list[Policy]:
    """The candidate policies for a set whose criteria are `catalogue` (app.lab.queries)."""
    # Informational criteria never gate, so they are never armed (app.lab.view.informational_refusal).
    live = [c for c in catalogue if c["live"] and c.get("gating", True)]
    base: list[Policy] = []
    for c in live:
        pols = c["polarities"]
        for when in [*pols, *(["decided"] if len(pols) == 2 else [])]:
            base.append(Policy(arm=((c["id"], when),)))
    for when in ("pass", "fail"):
        armed = tuple((c["id"], when) for c in live if when in c["polarities"])
        if len(armed) > 1:
            base.append(Policy(arm=armed))
    every = tuple((c["id"], "decided" if len(c["polarities"]) == 2 else c["polarities"][0]) for c in live)
    if len(every) > 1:
        base.append(Policy(arm=every))
    if declared:
        base.append(Policy(declared=True))
        for c in catalogue:
            if c["declared"] and c["live"]:
                base.append(Policy(declared=True, without=(c["id"],)))
    out: list[Policy] = []
    for p in base:
        for q in (p, Policy(arm=p.arm, declared=p.declared, without=p.without, min_steps=min_steps)):
            if q not in out:
                out.append(q)
    return out[:MAX_CANDIDATES]


def point(policy: Policy, runs: Sequence[SimRun], measure: str) -> dict[str, Any]:
    """One policy's place on the frontier: its saving on `measure` (with its interval), its
    false passes and false fails (rates with intervals), agreement, and how many runs it cut."""
    result = simulate(policy, runs)
    s = result["summary"]
    m = s[measure]
    return {"policy": policy.to_json(), "params": policy.params(), "label": policy.label,
            "saved_pct": m["saved_pct"], "low": m["low"], "high": m["high"], "pairs": m["pairs"],
            "false_passes": s["false_passes"], "false_fails": s["false_fails"], "agreement": s["agreement"],
            "graded": s["verdict_agreement"]["total"], "cut": s["cut"], "armed_count": len(policy.arm)}


def recommend(points: Sequence[dict[str, Any]]) -> Optional[dict[str, Any]]:
    """The largest saving with no observed false pass (None when no policy saves anything)."""
    safe = [p for p in points if p["false_passes"]["count"] == 0 and p["graded"] and p["saved_pct"] is not None
            and p["saved_pct"] > 0]
    if not safe:
        return None
    return max(safe, key=lambda p: (round(p["saved_pct"], 6), -p["false_fails"]["count"], -p["armed_count"],
                                    p["policy"]["min_steps"] is None))


def frontier(runs: Sequence[SimRun], catalogue: Sequence[dict[str, Any]], *, measure: str = "tokens") -> dict[str, Any]:
    """Every candidate's point, the recommended one, and the chart's geometry."""
    if measure not in MEASURES:
        raise ValueError(measure)
    min_steps = min_steps_for(runs)
    declared = any(c["declared"] for c in catalogue)
    points = [point(p, runs, measure) for p in candidates(catalogue, min_steps=min_steps, declared=declared)]
    best = recommend(points)
    for i, p in enumerate(points):
        p["index"] = i
        p["recommended"] = best is not None and p is best
        p["efficient"] = not any(_dominates(q, p) for q in points)
    return {"measure": measure, "min_steps_tried": min_steps, "points": points,
            "recommended": best, "chart": chart(points)}


def _dominates(q: dict[str, Any], p: dict[str, Any]) -> bool:
    """q saves at least as much with at most the false passes of p, and is better at one."""
    if q is p or q["saved_pct"] is None or p["saved_pct"] is None:
        return False
    qf, pf = q["false_passes"]["count"], p["false_passes"]["count"]
    return q["saved_pct"] >= p["saved_pct"] and qf <= pf and (q["saved_pct"] > p["saved_pct"] or qf < pf)


def _pct(value: float) -> str:
    """A tick label: whole percents, one decimal when the ticks are closer than that."""
    return f"{value:.0f}%" if abs(value - round(value)) < 0.05 else f"{value:.1f}%"


#: the chart's size and margins, in SVG units
WIDTH, HEIGHT, LEFT, RIGHT, TOP, BOTTOM = 560, 300, 56, 16, 16, 40


def chart(points: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Server-rendered SVG geometry: x is the false-pass rate (0 to the largest seen, at
    least 10%), y the saving (from the lowest seen, at most 0, to 100%)."""
    shown = [p for p in points if p["saved_pct"] is not None and p["false_passes"]["rate"] is not None]
    x_max = max([0.1] + [p["false_passes"]["rate"] for p in shown])
    y_min = min([0.0] + [p["saved_pct"] for p in shown])
    y_max = 100.0
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def x(rate: float) -> float:
        return round(LEFT + plot_w * rate / x_max, 1)

    def y(saved: float) -> float:
        return round(TOP + plot_h * (y_max - saved) / (y_max - y_min), 1)

    dots = [{"index": p["index"], "cx": x(p["false_passes"]["rate"]), "cy": y(p["saved_pct"]), "label": p["label"],
             "saved_pct": p["saved_pct"], "rate": p["false_passes"]["rate"], "recommended": p["recommended"],
             "efficient": p["efficient"]} for p in shown]
    line = sorted((d for d in dots if d["efficient"]), key=lambda d: (d["cx"], -d["cy"]))
    x_ticks = [{"x": x(x_max * i / 4), "label": _pct(100 * x_max * i / 4)} for i in range(5)]
    span = y_max - y_min
    y_ticks = [{"y": y(y_max - span * i / 4), "label": _pct(y_max - span * i / 4)} for i in range(5)]
    return {"width": WIDTH, "height": HEIGHT, "left": LEFT, "top": TOP, "right": WIDTH - RIGHT,
            "bottom": HEIGHT - BOTTOM, "dots": dots, "path": " ".join(f"{d['cx']},{d['cy']}" for d in line),
            "x_ticks": x_ticks, "y_ticks": y_ticks, "zero_y": y(0.0) if y_min < 0 else None}
