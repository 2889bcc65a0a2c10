"""Opt-in early stop: arming checks, the watcher of the armed criteria, and the verdict rule.

A criterion is armed when the run's `stop_early` switch is on and the criterion has a
`stop_when`. Live verdicts come from the run's `LiveTracker` (`qita.live`, the same
code that computes them for recorded traces); the watcher follows the armed ones and,
once every armed criterion is decided in its armed polarity, asks the engine to cut
the run at the end of the current step.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional, Sequence, cast

from .core.errors import EarlyStopConfigError
from .criteria import PASS, Criterion, CriterionResult
from .live import LiveTracker, armed_decided, capability


def armed_criteria(criteria: Sequence[Criterion], stop_early: bool) -> list[Criterion]:
    """The criteria that can end the run early. None unless the switch is on."""
    if not stop_early:
        return []
    return [c for c in criteria if c.stop_when is not None]


def validate_early_stop(criteria: Sequence[Criterion], stop_early: bool) -> list[Criterion]:
    """Check the early-stop configuration before the run; return the armed criteria.

    Every way an arming could silently never fire is an error here: the switch with
    nothing armed, a criterion that has no live verdict, or a polarity the criterion
    cannot decide mid-run. `stop_when="decided"` needs both polarities, because a
    criterion that can only decide one of them would silently ignore the other half.
    With the switch off nothing is armed and nothing is checked, so the default path
    is exactly the path without the feature.
    """
    ids = [c.id for c in criteria]
    dupes = sorted({i for i in ids if ids.count(i) > 1})
    if dupes:
        raise ValueError(f"criterion ids must be unique in a run; repeated: {dupes}")
    if not stop_early:
        return []
    armed = armed_criteria(criteria, stop_early)
    if not armed:
        raise EarlyStopConfigError(
            "stop_early is on but no criterion is armed: give at least one criterion "
            "stop_when='pass', 'fail' or 'decided', or turn stop_early off")
    for c in armed:
        refusal = capability(c).arming_refusal(c.stop_when)
        if refusal is not None:
            raise EarlyStopConfigError(refusal)
    return armed


@dataclass
class EarlyStopDecision:
    """Why and when the watcher asked for the run to be cut."""

    reason: str
    deciding_criterion: str
    armed_criteria: list[str]
    step: int
    tool_call_index: Optional[int]


@dataclass
class LiveWatcher:
    """Follows the armed criteria's live verdicts and decides when the run is cut.

    A live verdict of an armed criterion that raises switches early stop off for the
    rest of the run (fail open to a full run), remembering the error so the trace can
    say so. After that, or once the decision is taken, nothing here changes.
    """

    armed: list[Criterion]
    verdicts: dict[str, str] = field(default_factory=dict)
    decided_at: dict[str, int] = field(default_factory=dict)
    decision: Optional[EarlyStopDecision] = None
    failed_open: Optional[dict[str, Any]] = None

    @property
    def active(self) -> bool:
        return bool(self.armed) and self.failed_open is None

    def update(self, live: LiveTracker, step: int, tool_call_index: Optional[int]) -> None:
        """Take in what the tracker has just observed."""
        if not self.active or self.decision is not None:
            return
        broken = next((c for c in self.armed if c.id in live.errors), None)
        if broken is not None:
            self.failed_open = dict(live.errors[broken.id])
            return
        last = None
        for c in self.armed:
            if c.id not in self.verdicts and c.id in live.decided:
                self.verdicts[c.id] = live.decided[c.id].verdict
                self.decided_at[c.id] = live.decided[c.id].step
                last = c
        if last is not None and armed_decided(self.verdicts, {c.id: cast(str, c.stop_when) for c in self.armed}):
            self.decision = EarlyStopDecision(
                reason="criterion_passed" if self.verdicts[last.id] == PASS else "criterion_failed",
                deciding_criterion=last.id, armed_criteria=[c.id for c in self.armed], step=step,
                tool_call_index=tool_call_index)


def compute_verdict(criteria: Sequence[Criterion], results: dict[str, CriterionResult],
                    stopped_early: bool, armed_ids: Sequence[str]) -> str:
    """`pass`/`fail`/`not_graded` for a run, per the trace-format rule.

    Early-stopped runs are gated on the armed criteria only (the rest are advisory);
    any other run is gated on every gating criterion.
    """
    if not criteria:
        return "not_graded"
    if stopped_early:
        gate = [c for c in criteria if c.id in set(armed_ids)]
    else:
        gate = [c for c in criteria if c.gating]
    if not gate:
        return "not_graded"
    return "pass" if all(results[c.id].score >= c.pass_threshold for c in gate) else "fail"
