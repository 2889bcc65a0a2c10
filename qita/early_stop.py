"""Opt-in early stop: arming checks, the live watcher, and the verdict rule.

A criterion is armed when the run's `stop_early` switch is on and the criterion has a
`stop_when`. The watcher re-evaluates the armed criteria's live verdicts after every
tool call; once every armed criterion is decided in its armed polarity, it asks the
engine to cut the run at the end of the current step.
"""

from __future__ import annotations

import traceback
from dataclasses import dataclass, field
from typing import Any, Optional, Sequence

from .core import Trajectory
from .criteria import FAIL, PASS, UNDECIDED, Criterion, CriterionResult
from .core.errors import EarlyStopConfigError


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
        can = set(c.live_stop_polarities)
        if not can:
            raise EarlyStopConfigError(
                f"criterion {c.id!r} ({c.type}) cannot be decided mid-run, so it cannot be armed "
                f"(stop_when={c.stop_when!r}); remove stop_when or arm a live-decidable criterion")
        needed = {PASS, FAIL} if c.stop_when == "decided" else {c.stop_when}
        missing = needed - can
        if missing:
            raise EarlyStopConfigError(
                f"criterion {c.id!r} ({c.type}) can decide only {sorted(can)} mid-run, not "
                f"{sorted(missing)}; stop_when={c.stop_when!r} would never fire for that polarity")
    return armed


def _in_polarity(verdict: str, stop_when: str) -> bool:
    if verdict == UNDECIDED:
        return False
    return stop_when == "decided" or verdict == stop_when


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
    """Tracks live verdicts of the armed criteria over the growing trajectory.

    Verdicts latch: the first decided verdict of a criterion is the one kept, since the
    events behind it cannot un-happen. A live verdict that raises switches early stop
    off for the rest of the run (fail open to a full run) and remembers the error so the
    trace can say so.
    """

    armed: list[Criterion]
    verdicts: dict[str, str] = field(default_factory=dict)
    decided_at: dict[str, int] = field(default_factory=dict)
    decision: Optional[EarlyStopDecision] = None
    failed_open: Optional[dict[str, Any]] = None

    @property
    def active(self) -> bool:
        return bool(self.armed) and self.failed_open is None

    def observe(self, trajectory: Trajectory, step: int, tool_call_index: Optional[int]) -> None:
        if not self.active or self.decision is not None:
            return
        last = None
        for c in self.armed:
            if c.id in self.verdicts:
                continue
            try:
                verdict = c.live_verdict(trajectory)
                if verdict not in (PASS, FAIL, UNDECIDED):
                    raise ValueError(f"live verdict must be pass, fail or undecided, not {verdict!r}")
            except Exception as exc:  # a watcher bug must never be what ends or breaks a run
                self.failed_open = {"criterion": c.id, "error": f"{type(exc).__name__}: {exc}",
                                    "traceback": traceback.format_exc(limit=5), "step": step,
                                    "tool_call_index": tool_call_index}
                return
            if verdict != UNDECIDED:
                self.verdicts[c.id] = verdict
                self.decided_at[c.id] = step
                last = c
        if last is None:
            return
        if all(_in_polarity(self.verdicts.get(c.id, UNDECIDED), c.stop_when) for c in self.armed):
            verdict = self.verdicts[last.id]
            self.decision = EarlyStopDecision(
                reason="criterion_passed" if verdict == PASS else "criterion_failed",
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
