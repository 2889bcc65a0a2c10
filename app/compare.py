"""Comparing two groups of runs (smoke vs e2e): pairing and every figure, as pure functions.

The inputs are run rows as `app.compare_queries.group_runs` returns them; nothing here
touches the database, so the figures can be checked by hand on a handful of dicts.

- Pairing is by (task_id, replicate). When one group holds two runs with the same key,
  the latest (by start time, then by store order) is kept and the others are listed as
  duplicates.
- Every total counts paired runs only. Runs without a partner are listed per side and
  never counted as passing.
- A pair where either side is `not_graded`, or has no verdict yet (running or
  abandoned), is left out of verdict agreement, the confusion matrix and the
  early-stop agreement counts, and is counted in `not_graded`.
- A measure (steps, tokens, elapsed, cost) totals the pairs where both sides recorded
  it; pairs where either side lacks it are left out of that measure only, and counted
  in its `missing`.
- saved_pct = 100 * (b - a) / b: positive when the first group (a) used less. It is
  null when b's total is 0 or no pair has the measure.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Optional

MEASURES = (("steps", "steps", "steps"), ("tokens", "tokens_total", "tokens"),
            ("elapsed_s", "elapsed_s", "time"), ("cost_usd", "cost_usd", "cost"))
GRADED = ("pass", "fail")
SORTS = ("task", "savings", "disagreement")


@dataclass(frozen=True)
class Group:
    """One side of a comparison: a variant of an experiment, a whole experiment, or a tag."""

    kind: str  # variant | experiment | tag
    value: str
    experiment: Optional[str] = None

    @property
    def label(self) -> str:
        return self.value

    @property
    def description(self) -> str:
        if self.kind == "variant":
            return f"variant {self.value} of experiment {self.experiment}"
        return f"{self.kind} {self.value}"

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "value": self.value, "experiment": self.experiment}


def _key(row: dict[str, Any]) -> tuple[str, int]:
    return (row.get("task_id") or row.get("run_id") or "", int(row.get("replicate") or 0))


def pair_key(row: dict[str, Any]) -> tuple[str, int]:
    """The key runs are paired on, (task_id, or the run id without one; replicate)."""
    return _key(row)


def _recency(row: dict[str, Any]) -> tuple:
    started = row.get("started_at")
    return (started is not None, started.isoformat() if hasattr(started, "isoformat") else (started or ""), row.get("id") or 0)


def index_runs(rows: Iterable[dict[str, Any]]) -> tuple[dict[tuple[str, int], dict[str, Any]], list[dict[str, Any]]]:
    """Runs by (task_id, replicate), keeping the latest; and the duplicates that were set aside."""
    by_key: dict[tuple[str, int], dict[str, Any]] = {}
    dropped: list[dict[str, Any]] = []
    for row in rows:
        key = _key(row)
        other = by_key.get(key)
        if other is None:
            by_key[key] = row
        elif _recency(row) > _recency(other):
            dropped.append(other)
            by_key[key] = row
        else:
            dropped.append(row)
    duplicates = [{"task_id": _key(r)[0], "replicate": _key(r)[1], "run_id": r["run_id"],
                   "kept_run_id": by_key[_key(r)]["run_id"]} for r in dropped]
    duplicates.sort(key=lambda d: (d["task_id"], d["replicate"], d["run_id"]))
    return by_key, duplicates


def graded(verdict: Optional[str]) -> bool:
    """Only pass and fail are verdicts; not_graded and no verdict yet are not."""
    return verdict in GRADED


def saved_pct(a: Optional[float], b: Optional[float]) -> Optional[float]:
    """100 * (b - a) / b, or None when b is 0 or a value is missing."""
    if a is None or b is None or b == 0:
        return None
    return 100.0 * (b - a) / b


def _side(row: dict[str, Any]) -> dict[str, Any]:
    return {
        "run_id": row["run_id"],
        "verdict": row.get("verdict"),
        "stop_reason": row.get("stop_reason"),
        "early_stopped": bool(row.get("early_stopped")),
        "early_stop_reason": row.get("early_stop_reason"),
        "steps": row.get("steps"),
        "tokens": row.get("tokens_total"),
        "elapsed_s": row.get("elapsed_s"),
        "cost_usd": row.get("cost_usd"),
        "state": row.get("state"),
    }


def make_pair(key: tuple[str, int], a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """One paired task: both sides, whether their verdicts agree, and the per-pair savings."""
    sa, sb = _side(a), _side(b)
    both = graded(sa["verdict"]) and graded(sb["verdict"])
    return {
        "task_id": key[0],
        "replicate": key[1],
        "agree": (sa["verdict"] == sb["verdict"]) if both else None,
        "graded": both,
        "a": sa,
        "b": sb,
        "saved_pct": {name: saved_pct(sa[name], sb[name]) for name, _col, _label in MEASURES},
    }


def _total(pairs: list[dict[str, Any]], name: str) -> dict[str, Any]:
    counted = [p for p in pairs if p["a"][name] is not None and p["b"][name] is not None]
    if not counted:
        return {"a": None, "b": None, "saved_pct": None, "pairs": 0, "missing": len(pairs)}
    a = sum(p["a"][name] for p in counted)
    b = sum(p["b"][name] for p in counted)
    return {"a": a, "b": b, "saved_pct": saved_pct(a, b), "pairs": len(counted), "missing": len(pairs) - len(counted)}


def _reasons(pairs: list[dict[str, Any]], side: str) -> list[dict[str, Any]]:
    counts: dict[Optional[str], int] = {}
    for p in pairs:
        reason = p[side]["stop_reason"]
        counts[reason] = counts.get(reason, 0) + 1
    return [{"stop_reason": r, "count": c} for r, c in sorted(counts.items(), key=lambda rc: (-rc[1], rc[0] or ""))]


def summarize(pairs: list[dict[str, Any]], only_a: list[dict[str, Any]], only_b: list[dict[str, Any]]) -> dict[str, Any]:
    """Every summary figure of a comparison (see the module docstring and docs/compare.md)."""
    graded_pairs = [p for p in pairs if p["graded"]]
    confusion = {"pass_pass": 0, "pass_fail": 0, "fail_pass": 0, "fail_fail": 0}
    for p in graded_pairs:
        confusion[f"{p['a']['verdict']}_{p['b']['verdict']}"] += 1
    early = [p for p in pairs if p["a"]["early_stopped"]]
    early_graded = [p for p in early if p["graded"]]
    return {
        "paired": len(pairs),
        "only_a": [r["task_id"] for r in only_a],
        "only_b": [r["task_id"] for r in only_b],
        "not_graded": len(pairs) - len(graded_pairs),
        "verdict_agreement": {"agree": sum(1 for p in graded_pairs if p["agree"]), "total": len(graded_pairs)},
        "confusion": confusion,
        "early_stopped_a": len(early),
        "early_stopped_b": sum(1 for p in pairs if p["b"]["early_stopped"]),
        "early_stop_agree": sum(1 for p in early_graded if p["agree"]),
        "early_stop_disagree": sum(1 for p in early_graded if not p["agree"]),
        "early_stop_not_graded": len(early) - len(early_graded),
        # The one-sided risk: a stopped on a pass, b went on and failed.
        "early_stop_pass_fail": sum(1 for p in early_graded if p["a"]["verdict"] == "pass" and p["b"]["verdict"] == "fail"),
        "ran_to_end_a": len(pairs) - len(early),
        **{name: _total(pairs, name) for name, _col, _label in MEASURES},
        "stop_reasons": {"a": _reasons(pairs, "a"), "b": _reasons(pairs, "b")},
    }


def compare_rows(rows_a: Iterable[dict[str, Any]], rows_b: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """Pair two groups' runs and compute the summary: {summary, pairs, unpaired, duplicates}."""
    index_a, dup_a = index_runs(rows_a)
    index_b, dup_b = index_runs(rows_b)
    pairs = [make_pair(k, index_a[k], index_b[k]) for k in sorted(index_a.keys() & index_b.keys())]
    only_a = [_unpaired(k, index_a[k]) for k in sorted(index_a.keys() - index_b.keys())]
    only_b = [_unpaired(k, index_b[k]) for k in sorted(index_b.keys() - index_a.keys())]
    return {
        "summary": summarize(pairs, only_a, only_b),
        "pairs": pairs,
        "unpaired": {"a": only_a, "b": only_b},
        "duplicates": {"a": dup_a, "b": dup_b},
    }


def _unpaired(key: tuple[str, int], row: dict[str, Any]) -> dict[str, Any]:
    return {"task_id": key[0], "replicate": key[1], **_side(row)}


def sort_pairs(pairs: list[dict[str, Any]], *, sort: str = "task", disagreements_only: bool = False) -> list[dict[str, Any]]:
    """The per-task table's rows: by task, by steps saved (most first), or disagreements first."""
    rows = [p for p in pairs if p["agree"] is False] if disagreements_only else list(pairs)
    if sort == "savings":
        def by_saving(p: dict[str, Any]) -> tuple:
            s = p["saved_pct"]["steps"]
            t = p["saved_pct"]["tokens"]
            return (s is None, -(s or 0), t is None, -(t or 0), p["task_id"], p["replicate"])
        rows.sort(key=by_saving)
    elif sort == "disagreement":
        rank = {False: 0, None: 1, True: 2}
        rows.sort(key=lambda p: (rank[p["agree"]], p["task_id"], p["replicate"]))
    return rows


def _pct_phrase(pct: Optional[float], noun: str) -> Optional[str]:
    if pct is None:
        return None
    if round(pct) == 0:
        return f"about the same {noun}"
    return f"{abs(pct):.0f}% {'fewer' if pct > 0 else 'more'} {noun}"


def headline(summary: dict[str, Any], label_a: str, label_b: str) -> str:
    """One sentence: how often the verdicts agree and what the first group saved."""
    if not summary["paired"]:
        return f"No paired tasks: {label_a} and {label_b} share no (task, replicate)."
    agreement = summary["verdict_agreement"]
    text = f"verdicts identical on {agreement['agree']} of {agreement['total']} paired tasks"
    if summary["not_graded"]:
        text += f" ({summary['not_graded']} not graded left out)"
    parts = [p for p in (_pct_phrase(summary["steps"]["saved_pct"], "steps"),
                         _pct_phrase(summary["tokens"]["saved_pct"], "tokens")) if p]
    if parts:
        text += f"; {label_a} used " + " and ".join(parts)
    return text[0].upper() + text[1:] + "."


def bars(summary: dict[str, Any], *, width: int = 320) -> list[dict[str, Any]]:
    """Geometry of the savings bars (one pair of bars per measure), scaled to the larger side."""
    out = []
    for name, _col, label in MEASURES:
        m = summary[name]
        if m["a"] is None or m["b"] is None:
            out.append({"name": name, "label": label, "a": None, "b": None, "wa": 0, "wb": 0,
                        "saved_pct": None, "pairs": 0, "missing": m["missing"]})
            continue
        top = max(m["a"], m["b"], 0) or 1
        out.append({"name": name, "label": label, "a": m["a"], "b": m["b"],
                    "wa": max(0, round(width * m["a"] / top)), "wb": max(0, round(width * m["b"] / top)),
                    "saved_pct": m["saved_pct"], "pairs": m["pairs"], "missing": m["missing"]})
    return out


def choose_default(variants: dict[str, list[str]]) -> Optional[tuple[str, str, str]]:
    """(experiment, a, b) to show when no groups were chosen: smoke vs e2e when there is one."""
    candidates = sorted((e, vs) for e, vs in variants.items() if len(vs) >= 2)
    for experiment, vs in candidates:
        if "smoke" in vs and "e2e" in vs:
            return experiment, "smoke", "e2e"
    if candidates:
        experiment, vs = candidates[0]
        return experiment, vs[0], vs[1]
    return None


def align_steps(steps_a: list[dict[str, Any]], steps_b: list[dict[str, Any]], *, stop_a: Optional[int]) -> list[dict[str, Any]]:
    """Rows of the pair view: the two runs' steps side by side by index.

    `stop_a` is the step at which the first run stopped (its early-stop step, else its
    last step); the second run's steps after it are the ones the first never ran.
    """
    by_a = {s["step"]: s for s in steps_a}
    by_b = {s["step"]: s for s in steps_b}
    rows = []
    for idx in sorted(by_a.keys() | by_b.keys()):
        rows.append({"step": idx, "a": by_a.get(idx), "b": by_b.get(idx),
                     "stop_here": stop_a is not None and idx == stop_a,
                     "not_run_by_a": stop_a is not None and idx > stop_a and idx not in by_a})
    return rows


def compact_step(step: dict[str, Any]) -> dict[str, Any]:
    """What the pair view shows of a step: tools called, critic action, tokens, time."""
    rec = step.get("record") if isinstance(step.get("record"), dict) else {}
    decision = rec.get("decision") if isinstance(rec.get("decision"), dict) else {}
    actions = rec.get("actions") or decision.get("actions") or []
    names = [a.get("name") if isinstance(a, dict) else str(a) for a in actions if a is not None] if isinstance(actions, list) else []
    final = decision.get("final_answer")
    return {"step": step["step"], "actions": [n for n in names if n is not None], "critic_action": step.get("critic_action"),
            "critic_score": step.get("critic_score"), "tokens": (step.get("tokens") or {}).get("total"),
            "duration_s": step.get("duration_s"), "retry": bool(step.get("retry")),
            "final_answer": final if isinstance(final, str) else None}
