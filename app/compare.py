"""Comparing two groups of runs (smoke vs e2e): pairing and every figure, as pure functions.

The inputs are run rows as `app.queries.comparison.group_runs` returns them; nothing here
touches the database, so the figures can be checked by hand on a handful of dicts.

- Pairing is by (task_id, replicate). When one group holds two runs with the same key,
  the latest (by start time, then by store order) is kept and the others are listed as
  duplicates.
- Every total counts paired runs only. Runs without a partner are listed per side and
  never counted as passing.
- Verdicts compare by outcome: `pass` against a miss, where a miss is `fail` or `error`
  (a run that never produced a gradeable attempt counts as a miss, as coder_eval's pass
  rate counts it). Errors are counted apart too (`errors`).
- A pair where either side is `not_graded`, or has no verdict yet (running or
  abandoned), is left out of verdict agreement, the confusion matrix and the
  early-stop agreement counts, and is counted in `not_graded`.
- A group that holds not-graded runs and no measured verdict (coder_eval's
  `nothing_was_measured`: an `execute` night whose other rows are crashes and budget
  stops with no score) measured nothing: its errors and fails are not verdicts either,
  so every pair with it is counted in `not_graded` (`summary.unmeasured` names the side).
- A measure (steps, tool calls, tokens, cost, agent time, end-to-end time) totals the
  pairs where both sides recorded it; pairs where either side lacks it are left out of
  that measure only, and counted in its `missing`. Time saved is the agent's own time
  (`agent_s`: without setup and grading); end to end (`elapsed_s`) is beside it. A
  cost measure counts in `lower_bound` the pairs it totals where a side's cost is a
  lower bound (coder_eval's `cost_complete: false`): its totals are lower bounds then.
- saved_pct = 100 * (b - a) / b: positive when the first group (a) used less. It is
  null when b's total is 0 or no pair has the measure. Its 95% interval, the agreement's
  Wilson interval and the exact McNemar test come from app.stats.
- Tasks and replicates are counted apart: a pair is one (task, replicate); a task whose
  replicates get different verdicts within one group is flaky there.
- Flags on an early stop (app.compare_flags) need the group's criteria and the evidence
  of the deciding steps; without them a pair has no flags.
- Grouping (`group_pairs`) splits the pairs by a tag, a metadata key, the deciding
  criterion, its type, or the stop reason of the a-run, with each group's figures.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterable, Optional

from qita.format import BUDGET_STOP_REASONS

from . import stats
from .compare_flags import early_stop_flags, step_calls
from .errors import BoardError
from .jsontext import column_value
from .secrets import is_secret_key
from .words import contain_bidi, plural

#: (name in the summary, run column, label): the order of the savings bars.
MEASURES = (("steps", "steps", "steps"), ("tool_calls", "tool_calls", "tool calls"),
            ("tokens", "tokens_total", "tokens"), ("cost_usd", "cost_usd", "cost"),
            ("agent_cost_usd", "agent_cost_usd", "agent cost"),
            ("agent_s", "agent_elapsed_s", "agent time"), ("elapsed_s", "elapsed_s", "end to end"))
#: The measures in money, each with the side's field that says its cost is a lower bound.
COST_MEASURES = {"cost_usd": "cost_floor", "agent_cost_usd": "agent_cost_floor"}
GRADED = ("pass", "fail", "error")
SORTS = ("task", "savings", "disagreement")


@dataclass(frozen=True)
class Group:
    """One side of a comparison: a variant of an experiment, a whole experiment, or a tag."""

    kind: str  # variant | experiment | tag
    value: str
    experiment: Optional[str] = None

    @property
    def label(self) -> str:
        """The name as the board's sentences write it (headline, McNemar reading, Markdown)."""
        return contain_bidi(self.value)

    @property
    def description(self) -> str:
        if self.kind == "variant":
            return f"variant {self.label} of experiment {contain_bidi(self.experiment or '')}"
        return f"{self.kind} {self.label}"

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "value": self.value, "experiment": self.experiment}

    def masked_with(self, mask: Callable[[str], str]) -> "Group":
        """The group with its names masked as a page shows them (app.secrets.Masker): the
        chart's label and the headline carried a secret-shaped variant name raw."""
        return Group(self.kind, mask(self.value), mask(self.experiment) if self.experiment is not None else None)


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
    """pass, fail and error are verdicts; not_graded and no verdict yet are not."""
    return verdict in GRADED


def outcome(verdict: Optional[str]) -> Optional[str]:
    """pass, or miss for fail and error (None when not graded)."""
    return None if verdict not in GRADED else "pass" if verdict == "pass" else "miss"


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
        "tool_calls": row.get("tool_calls"),
        "tokens": row.get("tokens_total"),
        "elapsed_s": row.get("elapsed_s"),
        "agent_s": row.get("agent_elapsed_s"),
        "cost_usd": row.get("cost_usd"),
        # the agent's slice of the bill (judges and a dialog's simulator left out): what
        # coder_eval compares two harnesses by
        "agent_cost_usd": row.get("agent_cost_usd"),
        # app.queries.comparison: 1 or True when it is
        "cost_floor": bool(row.get("cost_floor")),
        "agent_cost_floor": bool(row.get("agent_cost_floor")),
        "state": row.get("state"),
        "status": row.get("status"),
        "source_status": row.get("source_status"),
    }


def measured_nothing(rows: Iterable[dict[str, Any]]) -> bool:
    """Whether a group's verdicts measured nothing: it holds a not-graded run and none of its
    verdicts is measured (a row's `measured`, app.queries.comparison; rows without it count
    as measured). coder_eval reports no pass rate for such a group (`nothing_was_measured`)."""
    rows = list(rows)
    return (any(r.get("verdict") == "not_graded" for r in rows)
            and not any(graded(r.get("verdict")) and r.get("measured", True) for r in rows))


def make_pair(key: tuple[str, int], a: dict[str, Any], b: dict[str, Any], *,
              flags: Optional[list[dict[str, Any]]] = None, measured: tuple[bool, bool] = (True, True)) -> dict[str, Any]:
    """One paired task: both sides, whether their verdicts agree, the per-pair savings, and
    the flags on a's early stop. `measured`: False for a side whose group measured nothing
    (`measured_nothing`), whose verdict then is not one."""
    sa, sb = _side(a), _side(b)
    both = graded(sa["verdict"]) and graded(sb["verdict"]) and all(measured)
    return {
        "task_id": key[0],
        "replicate": key[1],
        "agree": (outcome(sa["verdict"]) == outcome(sb["verdict"])) if both else None,
        "graded": both,
        "a": sa,
        "b": sb,
        "saved_pct": {name: saved_pct(sa[name], sb[name]) for name, _col, _label in MEASURES},
        "flags": flags or [],
    }


def _total(pairs: list[dict[str, Any]], name: str) -> dict[str, Any]:
    va, vb = [], []
    floors = 0
    for p in pairs:
        x, y = p["a"][name], p["b"][name]
        if x is not None and y is not None:
            va.append(x)
            vb.append(y)
            floor = COST_MEASURES.get(name)
            if floor and (p["a"].get(floor) or p["b"].get(floor)):
                floors += 1
    if not va:
        return {"a": None, "b": None, "saved_pct": None, "pairs": 0, "missing": len(pairs), "low": None, "high": None,
                "lower_bound": 0}
    a, b = sum(va), sum(vb)
    ci = stats.ratio_saving(va, vb)
    return {"a": a, "b": b, "saved_pct": saved_pct(a, b), "pairs": len(va), "missing": len(pairs) - len(va),
            "low": ci["low"] if ci else None, "high": ci["high"] if ci else None, "lower_bound": floors}


def agreement_of(pairs: list[dict[str, Any]]) -> dict[str, Any]:
    """{agree, total, rate, low, high} over the graded pairs (Wilson interval)."""
    graded_pairs = [p for p in pairs if p["graded"]]
    agree = sum(1 for p in graded_pairs if p["agree"])
    ci = stats.wilson(agree, len(graded_pairs))
    return {"agree": agree, "total": len(graded_pairs), "rate": ci["rate"] if ci else None,
            "low": ci["low"] if ci else None, "high": ci["high"] if ci else None}


def replicate_figures(pairs: list[dict[str, Any]], rows_a: Iterable[dict[str, Any]],
                      rows_b: Iterable[dict[str, Any]], *, unmeasured: tuple[bool, bool] = (False, False)) -> dict[str, Any]:
    """Tasks against replicates: how many tasks the pairs hold, which tasks got different
    verdicts across replicates of one group (flaky), whether each task's pairs all agree,
    and the agreement without the flaky tasks. `per_task` lists the tasks with more than
    one paired run or a flaky group (a task run once has nothing to say about replicates).
    `unmeasured`: the groups that measured nothing (`measured_nothing`), which have no
    verdicts to differ."""
    def flaky(rows: Iterable[dict[str, Any]], nothing: bool) -> list[str]:
        if nothing:
            return []
        seen: dict[str, set] = {}
        for r in rows:
            o = outcome(r.get("verdict"))
            if o is not None:
                seen.setdefault(r.get("task_id") or r.get("run_id") or "", set()).add(o)
        return sorted(t for t, outs in seen.items() if len(outs) > 1)

    count: dict[str, int] = {}
    verdicts: dict[str, Optional[bool]] = {}  # True: every graded pair agrees; False: one does not
    for p in pairs:
        t = p["task_id"]
        count[t] = count.get(t, 0) + 1
        if p["graded"]:
            verdicts[t] = verdicts.get(t, True) and bool(p["agree"])
    flaky_a, flaky_b = flaky(rows_a, unmeasured[0]), flaky(rows_b, unmeasured[1])
    unstable = set(flaky_a) | set(flaky_b)
    per_task = [{"task_id": t, "pairs": n, "agree": verdicts.get(t), "flaky_a": t in flaky_a, "flaky_b": t in flaky_b}
                for t, n in sorted(count.items()) if n > 1 or t in unstable]
    steady = [p for p in pairs if p["task_id"] not in unstable] if unstable else pairs
    return {
        "tasks": len(count),
        "tasks_with_replicates": sum(1 for n in count.values() if n > 1),
        "tasks_all_agree": sum(1 for v in verdicts.values() if v),
        "tasks_some_disagree": sum(1 for v in verdicts.values() if not v),
        "flaky_a": flaky_a,
        "flaky_b": flaky_b,
        "flaky_pairs": len(pairs) - len(steady),
        "agreement_without_flaky": agreement_of(steady),
        "per_task": per_task,
    }


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
    names = {"pass": "pass", "miss": "fail"}
    for p in graded_pairs:
        confusion[f"{names[outcome(p['a']['verdict'])]}_{names[outcome(p['b']['verdict'])]}"] += 1
    early = [p for p in pairs if p["a"]["early_stopped"]]
    early_graded = [p for p in early if p["graded"]]
    # A run that errored did not run to its end, whether or not it was to stop early.
    errored = [p for p in pairs if not p["a"]["early_stopped"] and _errored(p["a"])]
    # A budget that cut the run (a TIMEOUT, its turns or tokens spent) is not an end either.
    cut = [p for p in pairs if not p["a"]["early_stopped"] and not _errored(p["a"])
           and p["a"].get("stop_reason") in BUDGET_STOP_REASONS]
    mcnemar = stats.mcnemar_exact(confusion["pass_fail"], confusion["fail_pass"])
    flag_counts: dict[str, int] = {}
    for p in pairs:
        for f in p.get("flags") or []:
            flag_counts[f["kind"]] = flag_counts.get(f["kind"], 0) + 1
    return {
        "paired": len(pairs),
        "tasks": len({p["task_id"] for p in pairs}),
        "tasks_graded": len({p["task_id"] for p in graded_pairs}),
        "agreement": agreement_of(pairs),
        "mcnemar": mcnemar,
        "flags": flag_counts,
        "flagged_pairs": sum(1 for p in pairs if p.get("flags")),
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
        "early_stop_pass_fail": sum(1 for p in early_graded
                                    if p["a"]["verdict"] == "pass" and outcome(p["b"]["verdict"]) == "miss"),
        "errored_a": len(errored),
        "cut_by_budget_a": len(cut),
        "ran_to_end_a": len(pairs) - len(early) - len(errored) - len(cut),
        "errors": {"a": sum(1 for p in pairs if p["a"]["verdict"] == "error"),
                   "b": sum(1 for p in pairs if p["b"]["verdict"] == "error"),
                   "both": sum(1 for p in pairs if p["a"]["verdict"] == "error" and p["b"]["verdict"] == "error")},
        **{name: _total(pairs, name) for name, _col, _label in MEASURES},
        "stop_reasons": {"a": _reasons(pairs, "a"), "b": _reasons(pairs, "b")},
    }


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _errored(side: dict[str, Any]) -> bool:
    return side.get("verdict") == "error" or side.get("status") == "error"


def compare_rows(rows_a: Iterable[dict[str, Any]], rows_b: Iterable[dict[str, Any]], *,
                 criteria_a: Optional[dict[int, list[dict[str, Any]]]] = None,
                 criteria_b: Optional[dict[int, list[dict[str, Any]]]] = None,
                 evidence: Optional[dict[int, dict[str, Any]]] = None,
                 label_a: str = "a", label_b: str = "b") -> dict[str, Any]:
    """Pair two groups' runs and compute the summary: {summary, pairs, unpaired, duplicates, replicates}.

    With the groups' criteria and the evidence of a's deciding steps (app.queries.comparison),
    each pair whose a-run stopped early carries its flags.
    """
    rows_a, rows_b = list(rows_a), list(rows_b)
    # A run in both groups (it carries both tags compared) would be paired with itself:
    # it is left out of both sides and named.
    ids_a = {r.get("run_id") for r in rows_a}
    in_both = sorted(r["run_id"] for r in rows_b if r.get("run_id") in ids_a)
    if in_both:
        both = set(in_both)
        rows_a = [r for r in rows_a if r.get("run_id") not in both]
        rows_b = [r for r in rows_b if r.get("run_id") not in both]
    index_a, dup_a = index_runs(rows_a)
    index_b, dup_b = index_runs(rows_b)
    unmeasured = (measured_nothing(index_a.values()), measured_nothing(index_b.values()))
    measured = (not unmeasured[0], not unmeasured[1])
    pairs = []
    for k in sorted(index_a.keys() & index_b.keys()):
        a, b = index_a[k], index_b[k]
        flags = None
        if a.get("early_stopped") and criteria_a is not None and evidence is not None:
            flags = early_stop_flags(evidence=evidence.get(a.get("id")), criteria_a=criteria_a.get(a.get("id"), []),
                                     criteria_b=(criteria_b or {}).get(b.get("id"), []),
                                     early_stop_enabled=bool(a.get("early_stop_enabled")),
                                     armed_ids=_list(column_value(a.get("armed_criteria"))),
                                     verdict_a=a.get("verdict"), label_a=label_a, label_b=label_b,
                                     deciding=a.get("deciding_criterion"))
        pairs.append(make_pair(k, a, b, flags=flags, measured=measured))
    only_a = [_unpaired(k, index_a[k]) for k in sorted(index_a.keys() - index_b.keys())]
    only_b = [_unpaired(k, index_b[k]) for k in sorted(index_b.keys() - index_a.keys())]
    summary = summarize(pairs, only_a, only_b)
    summary["mcnemar"]["reading"] = stats.mcnemar_reading(summary["mcnemar"], label_a, label_b)
    summary["in_both"] = len(in_both)
    summary["unmeasured"] = {"a": unmeasured[0], "b": unmeasured[1]}
    return {
        "summary": summary,
        "pairs": pairs,
        "unpaired": {"a": only_a, "b": only_b},
        "in_both": in_both,
        "duplicates": {"a": dup_a, "b": dup_b},
        "replicates": replicate_figures(pairs, index_a.values(), index_b.values(), unmeasured=unmeasured),
    }


#: What pairs can be grouped by (besides `meta:KEY`, a metadata key of the a-run).
GROUP_BY = ("tag", "deciding_criterion", "criterion_type", "stop_reason")
NO_EARLY_STOP = "(did not stop early)"


def check_group_by(group: Optional[str]) -> Optional[str]:
    """`group` when pairs can be grouped by it (a 400 naming the choices otherwise). A
    metadata key that sounds secret (`meta:DB_PASSWORD`) is refused: its values are masked
    everywhere, and groups named by them would show them (app.secrets.is_secret_key)."""
    if not group:
        return None
    if group.startswith("meta:") and len(group) > 5:
        if is_secret_key(group[5:]):
            raise BoardError(f"metadata key {group[5:205]!r} holds secrets: its values are masked, so pairs cannot "
                             "be grouped by them")
        return group
    if group in GROUP_BY:
        return group
    raise BoardError(f"group must be one of {', '.join(GROUP_BY)} or meta:KEY (a metadata key), not {group[:60]!r}")


def group_keys(by: str, row: dict[str, Any], criteria: Optional[list[dict[str, Any]]]) -> list[str]:
    """The group(s) one pair falls in, read off its a-run (a run has several tags)."""
    if by == "tag":
        tags = [t for t in _list(column_value(row.get("tags"))) if isinstance(t, str)]
        return list(dict.fromkeys(tags)) or ["(no tag)"]
    if by.startswith("meta:"):
        meta = column_value(row.get("meta"))
        meta = meta if isinstance(meta, dict) else {}
        value = meta.get(by[5:])
        if value is None:
            return ["(none)"]
        return [value if isinstance(value, str) else str(value).lower() if isinstance(value, bool) else str(value)]
    if by == "stop_reason":
        return [row.get("stop_reason") or "(no stop reason)"]
    deciding = row.get("deciding_criterion")
    if not row.get("early_stopped"):
        return [NO_EARLY_STOP]
    if by == "deciding_criterion":
        return [deciding or "(unknown)"]
    if by == "criterion_type":
        for c in criteria or []:
            if c.get("criterion_id") == deciding:
                return [c.get("type") or "(no type)"]
        return ["(unknown)"]
    raise ValueError(by)


def group_pairs(pairs: list[dict[str, Any]], by: str, rows_a: dict[str, dict[str, Any]],
                criteria_a: Optional[dict[int, list[dict[str, Any]]]] = None) -> list[dict[str, Any]]:
    """The pairs split by `by`, each group with its pairs, tasks, agreement (with its
    interval), confusion and savings per measure (with their intervals); largest first."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for p in pairs:
        row = rows_a.get(p["a"]["run_id"], {})
        for key in group_keys(by, row, (criteria_a or {}).get(row.get("id"), [])):
            groups.setdefault(key, []).append(p)
    out = []
    for key, ps in groups.items():
        confusion = {"pass_pass": 0, "pass_fail": 0, "fail_pass": 0, "fail_fail": 0}
        for p in ps:
            if p["graded"]:
                a, b = outcome(p["a"]["verdict"]), outcome(p["b"]["verdict"])
                confusion[f"{'pass' if a == 'pass' else 'fail'}_{'pass' if b == 'pass' else 'fail'}"] += 1
        out.append({"group": key, "pairs": len(ps), "tasks": len({p["task_id"] for p in ps}),
                    "agreement": agreement_of(ps), "confusion": confusion,
                    "flagged_pairs": sum(1 for p in ps if p.get("flags")),
                    **{name: _total(ps, name) for name, _col, _label in MEASURES}})
    out.sort(key=lambda g: (-g["pairs"], g["group"]))
    return out


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


def _pct_phrase(pct: Optional[float], noun: str, *, mass: bool = False) -> Optional[str]:
    """"36% fewer steps", "62% less agent time" (`mass`: a noun one does not count)."""
    if pct is None:
        return None
    if round(pct) == 0:
        return f"about the same {noun}"
    less = "less" if mass else "fewer"
    return f"{abs(pct):.0f}% {less if pct > 0 else 'more'} {noun}"


def _pct(x: float) -> str:
    return f"{100 * x:.0f}%"


def unmeasured_labels(summary: dict[str, Any], label_a: str, label_b: str) -> list[str]:
    """The labels of the sides that measured nothing (`summary.unmeasured`), a first."""
    sides = summary.get("unmeasured") or {}
    return [label for label, side in ((label_a, "a"), (label_b, "b")) if sides.get(side)]


def headline(summary: dict[str, Any], label_a: str, label_b: str) -> str:
    """One sentence: how often the verdicts agree, how sure that is, and what the first
    group saved; tasks and paired runs counted apart."""
    if not summary["paired"]:
        return f"No paired tasks: {label_a} and {label_b} share no (task, replicate)."
    agreement = summary["verdict_agreement"]
    tasks = summary.get("tasks_graded", agreement["total"])
    text = (f"verdicts identical on {agreement['agree']} of {plural(agreement['total'], 'paired run')} "
            f"({plural(tasks, 'task')})")
    if summary["not_graded"]:
        text += f", {summary['not_graded']} not graded left out"
        nothing = unmeasured_labels(summary, label_a, label_b)
        if nothing:
            text += f" ({' and '.join(nothing)} measured no verdict: run without grading)"
    ag = summary.get("agreement") or {}
    if ag.get("rate") is not None:
        text += f": agreement {_pct(ag['rate'])} (95% CI {_pct(ag['low'])}–{_pct(ag['high'])})"
    parts = [p for p in (_pct_phrase(summary["steps"]["saved_pct"], "steps"),
                         _pct_phrase(summary["tokens"]["saved_pct"], "tokens"),
                         _pct_phrase(summary["agent_s"]["saved_pct"], "agent time", mass=True)) if p]
    if parts:
        text += f"; {label_a} used " + ", ".join(parts[:-1]) + (" and " if len(parts) > 1 else "") + parts[-1]
    return text[0].upper() + text[1:] + "."


def change_text(saved_pct: Optional[float]) -> str:
    """A saving shown as the change from b to a: 36% saved is "−36%", 12% more is "+12%"."""
    if saved_pct is None:
        return "—"
    change = round(-saved_pct)
    return f"−{-change}%" if change < 0 else (f"+{change}%" if change > 0 else "0%")


#: The savings chart: as wide as a phone's panel (a 390 px screen leaves it about 340 px),
#: so the chart is never scaled down and its text shows at its own size; `row` user units per
#: measure (a line of label, change and interval, then a bar per side). Bars take at most
#: `bar` units, leaving the rest for each bar's value.
BAR_CHART = {"width": 330, "row": 66, "bar": 170}


def bars(summary: dict[str, Any], *, width: int = BAR_CHART["bar"]) -> list[dict[str, Any]]:
    """Geometry of the savings bars (one pair of bars per measure), scaled to the larger side;
    the change and its interval in the same sign (a saving of 18–54% is a change of −54…−18%)."""
    out = []
    for name, _col, label in MEASURES:
        m = summary[name]
        if m["a"] is None or m["b"] is None:
            out.append({"name": name, "label": label, "a": None, "b": None, "wa": 0, "wb": 0,
                        "saved_pct": None, "low": None, "high": None, "pairs": 0, "missing": m["missing"],
                        "lower_bound": 0,
                        "change": "—", "change_ci": None})
            continue
        top = max(m["a"], m["b"], 0) or 1
        low, high = m.get("low"), m.get("high")
        out.append({"name": name, "label": label, "a": m["a"], "b": m["b"],
                    "wa": max(0, round(width * m["a"] / top)), "wb": max(0, round(width * m["b"] / top)),
                    "saved_pct": m["saved_pct"], "low": low, "high": high,
                    "pairs": m["pairs"], "missing": m["missing"], "lower_bound": m.get("lower_bound", 0),
                    "change": change_text(m["saved_pct"]),
                    "change_ci": None if low is None else f"{change_text(high)}…{change_text(low)}"})
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
    """What the pair view shows of a step: its tool calls with their outcome, every critic
    output (action, reason, score), tokens and time."""
    rec = step.get("record") if isinstance(step.get("record"), dict) else {}
    decision = rec.get("decision") if isinstance(rec.get("decision"), dict) else {}
    actions = rec.get("actions") or decision.get("actions") or []
    names = [a.get("name") if isinstance(a, dict) else str(a) for a in actions if a is not None] if isinstance(actions, list) else []
    final = decision.get("final_answer")
    critics = [{"critic": c.get("name") or c.get("critic"), "action": c.get("action"),
                "effective_action": c.get("effective_action"), "reason": c.get("reason"), "score": c.get("score")}
               for c in step.get("critic_outputs") or []]
    return {"step": step["step"], "actions": [n for n in names if n is not None], "calls": step_calls(rec),
            "critics": critics, "critic_action": step.get("critic_action"),
            "critic_score": step.get("critic_score"), "tokens": (step.get("tokens") or {}).get("total"),
            "duration_s": step.get("duration_s"), "retry": bool(step.get("retry")),
            "error": rec.get("error") if isinstance(rec.get("error"), str) else None,
            "final_answer": final if isinstance(final, str) else None}
