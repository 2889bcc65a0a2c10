"""The experiments overview's figures, as pure functions (the queries are in app.queries.experiments).

- Every figure belongs to one variant of one experiment; nothing is added up across
  variants (a smoke run and an e2e run of the same task are different measurements).
- A run counts as pass, fail or error by its verdict; runs not graded and runs with no
  verdict yet (running, abandoned) are counted apart and are not in the pass rate.
- Pass rate = pass / (pass + fail + error), as coder_eval counts it, with a 95% Wilson
  score interval (z = 1.96): wide when few runs decide it, never outside [0, 1]. None
  when runs were not graded and none of the others was measured (coder_eval's
  `nothing_was_measured`: an `execute` night whose only graded rows are crashes and
  budget breaches, with no `weighted_score`, was never measured, and 0% would read as a
  total failure). Without a not-graded run the rate stands, as coder_eval's does (a
  run.json from before `execute` counts no measured row at all).
- Median cost is the median of the runs that recorded a cost (an even count averages
  the middle two); runs without one are left out and counted in `cost_missing`.
"""

from __future__ import annotations

import math
from typing import Any, Optional

#: The normal quantile of a two-sided 95% interval.
Z95 = 1.959963984540054


def pass_rate(passed: int, failed: int, errored: int = 0, measured: Optional[int] = None,
              not_graded: int = 0) -> Optional[float]:
    """pass / (pass + fail + error), or None when no run has one of those verdicts, or when
    `not_graded` runs were not graded and `measured` (how many of the others carry a
    measured verdict, app.queries.run_list.MEASURED) is 0."""
    n = passed + failed + errored
    return passed / n if n and not (not_graded > 0 and measured == 0) else None


def wilson(successes: int, n: int, z: float = Z95) -> Optional[tuple[float, float]]:
    """The Wilson score interval of successes/n, or None when n is 0."""
    if n <= 0:
        return None
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def median(values: list[float]) -> Optional[float]:
    """The median of `values` (sorted or not), None when empty."""
    if not values:
        return None
    ordered = sorted(values)
    mid = len(ordered) // 2
    return float(ordered[mid]) if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def variant_figures(counts: dict[str, Any], costs: list[float]) -> dict[str, Any]:
    """One variant's row: counts by verdict, pass rate with its interval, median cost."""
    passed, failed, errored = counts["passed"], counts["failed"], counts["errored"]
    decided = passed + failed + errored
    rate = pass_rate(passed, failed, errored, counts.get("measured"), counts.get("not_graded") or 0)
    interval = wilson(passed, decided) if rate is not None else None
    return {
        **counts,
        "decided": decided,
        "pass_rate": rate,
        "interval": list(interval) if interval else None,
        "median_cost_usd": median(costs),
        "cost_runs": len(costs),
        "cost_missing": counts["runs"] - len(costs),
    }


def task_figures(tasks: list[tuple[int, int, int]], *, measured: bool = True) -> dict[str, Any]:
    """A variant's figures by task, from (decided, passed, errored replicates) per task.

    coder_eval's variant.json counts a task once however many replicates it ran (its
    `pass_rate` is per task there, per replicate in run.json), each in one of its status
    categories: `tasks_succeeded`, `tasks_failed`, `tasks_error`. Replicates are folded to
    their worst verdict, as coder_eval folds them (experiment.json's `task_summaries` give
    each task's folded `final_status`): a task is an error when any replicate errored, else
    a failure when any failed, else a pass. `tasks_mixed` names the tasks whose replicates
    disagree, counted by that rule. An error is decided, as in coder_eval's rate (it counts
    as 0.0).
    `measured`: False when the variant's run-level rate has nothing to be a fraction of
    (`pass_rate`: ungraded runs and no measured verdict); the rate by task is withheld
    too, as run.json's rule says (variant.json, which folds an errored replicate's missing
    score to 0.0, can report 0.0 there)."""
    passed = sum(1 for d, p, _e in tasks if d and p == d)
    errored = sum(1 for d, _p, e in tasks if d and e)
    failed = sum(1 for d, p, e in tasks if d and not e and p < d)
    mixed = sum(1 for d, p, e in tasks if d and p != d and e != d and (p or e))
    decided = passed + failed + errored
    return {"tasks": len(tasks), "tasks_passed": passed, "tasks_failed": failed, "tasks_error": errored,
            "tasks_mixed": mixed, "task_pass_rate": passed / decided if decided and measured else None}


def sort_experiments(experiments: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Latest activity first; experiments with no time last; ties by name, runs without an experiment last."""
    def key(e: dict[str, Any]) -> tuple:
        latest = e.get("latest")
        return (e["experiment"] is None, latest is None, -(latest.timestamp()) if latest is not None else 0,
                e["experiment"] or "")
    return sorted(experiments, key=key)
