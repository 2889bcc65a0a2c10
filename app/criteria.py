"""How a run's criteria weigh on its verdict: the one place the rule is written.

The verdict (app.derive), the run page's criteria (app.queries.run_detail.get_criteria),
the failure reasons of the list and the overview (app.failures) and the compare flags
(app.compare_flags) all read it from here.

- Armed: the run enabled early stop and the criterion has a `stop_when`. When none has
  one, the criteria the early-stop record lists (`armed_criteria`) are armed, and only
  with the run's switch on (the contract: without it the record's list arms nothing).
- Gating: the criterion says `gating`, and the run declared it (a result for an id the
  run never declared is shown, but does not gate, once the run declares any).
- An early-stopped run with armed criteria is gated on those alone; its other gating
  criteria are advisory. Criteria that do not gate are informational.
- Passed: the recorded `passed`, else the score against the threshold; an armed
  criterion of an early-stopped run is judged by its score first.
- The armed gate is weighted (coder_eval's `armed_criteria_passed`): each armed criterion
  counts 1 if it passed, times its spec's `weight` (default 1), over the armed weight,
  against the run's `early_stop.gate_threshold` (default 1: every armed one passed, the
  plain AND). A run gated at 0.5 passes with one of two equal armed criteria failed.

Criteria are mappings with the criteria table's names: criterion_id, stop_when, gating,
pass_threshold, has_result, score, passed, has_spec.
"""

from __future__ import annotations

from typing import Any, Mapping, NamedTuple, Optional, Sequence


class Weight(NamedTuple):
    """How one criterion weighs on its run's verdict."""

    armed: bool
    advisory: bool
    informational: bool
    #: whether it passed as the verdict counts it; None when it has no result
    passed: Optional[bool]


def criterion_passed(score: Optional[float], passed: Optional[bool], threshold: Optional[float], *,
                     by_score: bool = False) -> Optional[bool]:
    """Whether a graded criterion passed; None when it has no result.

    `by_score` applies the armed-criteria rule (score against threshold first).
    """
    if by_score and score is not None and threshold is not None:
        return score >= threshold
    if passed is not None:
        return passed
    if score is not None and threshold is not None:
        return score >= threshold
    return None


def weight_of(value: Any) -> Optional[float]:
    """A spec's weight, when it gives one that can weigh (a number, not negative)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0:
        return None
    return float(value)


def gate_threshold_of(start: Any) -> Optional[float]:
    """The run's gate threshold, as its run_start says (`early_stop.gate_threshold`, in [0, 1]:
    coder_eval allows 0, a gate every early stop passes)."""
    early = start.get("early_stop") if isinstance(start, dict) else None
    value = early.get("gate_threshold") if isinstance(early, dict) else None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
        return None
    return float(value)


def run_gate_threshold(early_record: Any, start_record: Any) -> Optional[float]:
    """The gate threshold in effect for an early stop: the early_stop record's own, else the
    one its run_start announced (None: 1, every armed criterion)."""
    own = gate_threshold_of({"early_stop": early_record})
    return own if own is not None else gate_threshold_of(start_record)


def armed_gate_passed(passed: Sequence[bool], weights: Sequence[Optional[float]],
                      gate_threshold: Optional[float]) -> bool:
    """The weighted armed gate over the armed criteria's results (each already judged).

    A total weight of 0 fails closed, as coder_eval's gate does."""
    ws = [1.0 if w is None else w for w in weights]
    total = sum(ws)
    if total <= 0:
        return False
    share = sum(w for ok, w in zip(passed, ws) if ok) / total
    return share >= (1.0 if gate_threshold is None else gate_threshold)


def is_armed(early_stop_enabled: bool, stop_when: Optional[str]) -> bool:
    """A criterion is armed by its spec when the run enabled early stop and it has a stop_when."""
    return bool(early_stop_enabled) and stop_when is not None


def armed_flags(criteria: Sequence[Mapping[str, Any]], *, early_stop_enabled: bool,
                armed_ids: Optional[Sequence[str]] = None) -> list[bool]:
    """Which of a run's criteria are armed (see the module docstring)."""
    by_spec = [is_armed(early_stop_enabled, c["stop_when"]) for c in criteria]
    if any(by_spec) or not early_stop_enabled:
        return by_spec
    ids = set(armed_ids or ())
    return [c["criterion_id"] in ids for c in criteria]


def gating_flags(criteria: Sequence[Mapping[str, Any]]) -> list[bool]:
    """Which of a run's criteria gate its verdict when it is not gated on armed ones."""
    declared = any(c.get("has_spec", True) for c in criteria)
    return [bool(c["gating"]) and (bool(c.get("has_spec", True)) or not declared) for c in criteria]


def weigh(criteria: Sequence[Mapping[str, Any]], *, early_stop_enabled: bool, early_stopped: bool,
          armed_ids: Optional[Sequence[str]] = None) -> list[Weight]:
    """How each of a run's criteria weighs on its verdict."""
    armed = armed_flags(criteria, early_stop_enabled=early_stop_enabled, armed_ids=armed_ids)
    gating = gating_flags(criteria)
    on_armed = early_stopped and any(armed)
    return [Weight(armed=arm,
                   advisory=on_armed and gates and not arm,
                   informational=not gates,
                   passed=criterion_passed(c["score"], c["passed"], c["pass_threshold"], by_score=early_stopped and arm)
                   if c["has_result"] else None)
            for c, arm, gates in zip(criteria, armed, gating)]


def failed(criterion: Mapping[str, Any]) -> bool:
    """A graded criterion that did not pass, whatever it weighed (recorded `passed`, else score against threshold)."""
    return bool(criterion.get("has_result")) and criterion_passed(
        criterion.get("score"), criterion.get("passed"), criterion.get("pass_threshold")) is False


def weighs_against(weight: Weight) -> bool:
    """A criterion that failed and weighed on the verdict (not informational, not advisory)."""
    return weight.passed is False and not weight.informational and not weight.advisory
