"""Success criteria: what a run is graded on, and which of them can be decided mid-run.

Every criterion has an end-of-run `check(trajectory) -> CriterionResult`. Criteria that
can be decided while the agent is still working also declare `live_stop_polarities`
(the subset of `{"pass", "fail"}` they can decide live) and implement
`live_verdict(trajectory) -> "pass" | "fail" | "undecided"`.

A live verdict is only offered for signals that cannot un-happen (a tool was called, a
command ran N times). That is what makes the early verdict and the end-of-run check
agree: nothing after the deciding event can change the answer.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Sequence

from .core import ToolCall, Trajectory

PASS, FAIL, UNDECIDED = "pass", "fail", "undecided"
STOP_WHEN_VALUES = ("pass", "fail", "decided")


@dataclass
class CriterionResult:
    """The end-of-run grade of one criterion."""

    score: float
    passed: bool
    details: dict[str, Any] = field(default_factory=dict)


class Criterion:
    """Base class of success criteria.

    `stop_when` arms the criterion for early stop (only when the run's `stop_early`
    switch is on). `gating=False` makes it informational: it is graded but never decides
    the verdict of a naturally completed run.
    """

    type: str = "criterion"
    #: Which verdicts `live_verdict` can reach mid-run. Empty: end-state only, cannot be armed.
    live_stop_polarities: frozenset[str] = frozenset()

    def __init__(self, id: str, *, description: Optional[str] = None, stop_when: Optional[str] = None,
                 gating: bool = True, pass_threshold: float = 0.9):
        if stop_when is not None and stop_when not in STOP_WHEN_VALUES:
            raise ValueError(f"criterion {id!r}: stop_when must be one of {STOP_WHEN_VALUES} or None, "
                             f"not {stop_when!r}")
        self.id = id
        self.description = description
        self.stop_when = stop_when
        self.gating = gating
        self.pass_threshold = pass_threshold

    # -- grading -----------------------------------------------------------------
    def evaluate(self, trajectory: Trajectory) -> Any:
        """Return a bool, a score in [0, 1], or `(score, details)`. Subclasses override."""
        raise NotImplementedError

    def check(self, trajectory: Trajectory) -> CriterionResult:
        raw = self.evaluate(trajectory)
        details: dict[str, Any] = {}
        if isinstance(raw, CriterionResult):
            return raw
        if isinstance(raw, tuple):
            raw, details = raw[0], dict(raw[1] or {})
        score = float(raw) if not isinstance(raw, bool) else (1.0 if raw else 0.0)
        score = min(1.0, max(0.0, score))
        return CriterionResult(score=score, passed=score >= self.pass_threshold, details=details)

    # -- live --------------------------------------------------------------------
    def live_verdict(self, trajectory: Trajectory) -> str:
        return UNDECIDED

    def spec(self) -> dict[str, Any]:
        """The criterion spec written in `run_start.criteria`."""
        return {"id": self.id, "type": self.type, "description": self.description, "stop_when": self.stop_when,
                "gating": self.gating, "pass_threshold": self.pass_threshold}


class CountCriterion(Criterion):
    """Count matching tool calls and require `min_count <= count <= max_count`.

    Counts only grow, so the bounds are decidable live in one direction each:
    reaching `min_count` with no upper bound is a pass that cannot be undone, and
    going over `max_count` is a fail that cannot be undone. `max_count=0` is the
    must-not-run form: any match fails it at once, and only the end of the run can pass it.
    `min_count` defaults to 1, or to 0 when `max_count=0`.
    """

    def __init__(self, id: str, *, min_count: Optional[int] = None, max_count: Optional[int] = None, **kw: Any):
        super().__init__(id, **kw)
        if min_count is None:
            # "at least once" unless the upper bound says otherwise: `max_count=0` alone is
            # the must-not-run form, with nothing required.
            min_count = 1 if max_count is None else min(1, max_count)
        if min_count < 0 or (max_count is not None and max_count < min_count):
            raise ValueError(f"criterion {id!r}: need 0 <= min_count <= max_count")
        self.min_count = min_count
        self.max_count = max_count
        polarities = set()
        if max_count is None:
            polarities.add(PASS)
        else:
            polarities.add(FAIL)
        self.live_stop_polarities = frozenset(polarities)

    def matches(self, call: ToolCall) -> bool:
        raise NotImplementedError

    def _matching(self, trajectory: Trajectory) -> list[ToolCall]:
        return [c for c in trajectory.tool_calls if self.matches(c)]

    def evaluate(self, trajectory):
        hits = self._matching(trajectory)
        ok = len(hits) >= self.min_count and (self.max_count is None or len(hits) <= self.max_count)
        return ok, {"count": len(hits), "min_count": self.min_count, "max_count": self.max_count,
                    "tool_call_indexes": [c.index for c in hits]}

    def live_verdict(self, trajectory):
        count = len(self._matching(trajectory))
        if self.max_count is not None and count > self.max_count:
            return FAIL
        if self.max_count is None and count >= self.min_count:
            return PASS
        return UNDECIDED


def _arg(args: Any, keys: Sequence[str]) -> Optional[str]:
    if isinstance(args, dict):
        for key in keys:
            if key in args and args[key] is not None:
                return str(args[key])
    elif isinstance(args, str):
        return args
    return None


class ToolInvoked(CountCriterion):
    """The agent called the tool `tool` (by default at least once)."""

    type = "tool_invoked"

    def __init__(self, id: str, tool: str, **kw: Any):
        kw.setdefault("description", f"tool {tool!r} was invoked")
        super().__init__(id, **kw)
        self.tool = tool

    def matches(self, call):
        return call.name == self.tool

    def spec(self):
        return {**super().spec(), "tool": self.tool, "min_count": self.min_count, "max_count": self.max_count}


#: Tool names through which an agent engages a skill, and the argument naming the skill.
SKILL_TOOLS = ("skill", "Skill", "load_skill", "activate_skill")
SKILL_ARG_KEYS = ("name", "skill", "skill_name")


def engaged_skill(call: ToolCall) -> Optional[str]:
    if call.name in SKILL_TOOLS:
        return _arg(call.args, SKILL_ARG_KEYS)
    return None


class SkillTriggered(Criterion):
    """The agent engaged the skill `skill`.

    With the default `policy="first"` the first skill the agent engages decides it: the
    target means pass, any other skill means fail, both decidable live. With
    `policy="any"` engaging the target at any point passes; only that is decidable live
    (a miss is only known at the end). The end-of-run check uses the same policy as the
    live verdict, so the two agree.
    """

    type = "skill_triggered"

    def __init__(self, id: str, skill: str, *, policy: str = "first", **kw: Any):
        if policy not in ("first", "any"):
            raise ValueError(f"criterion {id!r}: policy must be 'first' or 'any'")
        kw.setdefault("description", f"skill {skill!r} was triggered ({policy} engagement)")
        super().__init__(id, **kw)
        self.skill = skill
        self.policy = policy
        self.live_stop_polarities = frozenset({PASS, FAIL}) if policy == "first" else frozenset({PASS})

    def _engaged(self, trajectory: Trajectory) -> list[tuple[int, str]]:
        out = []
        for call in trajectory.tool_calls:
            name = engaged_skill(call)
            if name is not None:
                out.append((call.index, name))
        return out

    def evaluate(self, trajectory):
        engaged = self._engaged(trajectory)
        names = [n for _, n in engaged]
        ok = (bool(names) and names[0] == self.skill) if self.policy == "first" else (self.skill in names)
        return ok, {"engaged": names, "policy": self.policy, "skill": self.skill}

    def live_verdict(self, trajectory):
        engaged = self._engaged(trajectory)
        if self.policy == "first":
            if not engaged:
                return UNDECIDED
            return PASS if engaged[0][1] == self.skill else FAIL
        return PASS if any(n == self.skill for _, n in engaged) else UNDECIDED

    def spec(self):
        return {**super().spec(), "skill": self.skill, "policy": self.policy}


#: Tool names that run a shell command, and the argument holding it.
COMMAND_TOOLS = ("bash", "shell", "run_command", "exec", "terminal")
COMMAND_ARG_KEYS = ("command", "cmd")


class CommandExecuted(CountCriterion):
    """A shell command matching `pattern` (a regular expression, searched) ran.

    `min_count`/`max_count` bound how many times; `max_count=0` means it must not run.
    """

    type = "command_executed"

    def __init__(self, id: str, pattern: str, **kw: Any):
        kw.setdefault("description", f"command matching {pattern!r} ran")
        super().__init__(id, **kw)
        self.pattern = pattern
        self._regex = re.compile(pattern)

    def matches(self, call):
        if call.name not in COMMAND_TOOLS:
            return False
        command = _arg(call.args, COMMAND_ARG_KEYS)
        return command is not None and self._regex.search(command) is not None

    def spec(self):
        return {**super().spec(), "pattern": self.pattern, "min_count": self.min_count, "max_count": self.max_count}


class FinalAnswerContains(Criterion):
    """The final answer contains `text`. End-state only: it can flip until the run ends."""

    type = "final_answer_contains"

    def __init__(self, id: str, text: str, *, case_sensitive: bool = False, **kw: Any):
        kw.setdefault("description", f"final answer contains {text!r}")
        super().__init__(id, **kw)
        self.text = text
        self.case_sensitive = case_sensitive

    def evaluate(self, trajectory):
        answer = "" if trajectory.final_result is None else str(trajectory.final_result)
        needle = self.text
        if not self.case_sensitive:
            answer, needle = answer.lower(), needle.lower()
        return needle in answer, {"final_result": None if trajectory.final_result is None
                                  else str(trajectory.final_result)[:500]}

    def spec(self):
        return {**super().spec(), "text": self.text}


class CallableCriterion(Criterion):
    """A criterion from plain functions.

    `fn(trajectory)` grades the run (bool, score, or `(score, details)`). Pass
    `live_fn(trajectory) -> "pass" | "fail" | "undecided"` together with the
    `polarities` it can decide to make it armable; promise only what cannot un-happen.
    """

    type = "callable"

    def __init__(self, id: str, fn: Callable[[Trajectory], Any], *,
                 live_fn: Optional[Callable[[Trajectory], str]] = None,
                 polarities: Sequence[str] = (), **kw: Any):
        super().__init__(id, **kw)
        self.fn = fn
        self.live_fn = live_fn
        bad = set(polarities) - {PASS, FAIL}
        if bad:
            raise ValueError(f"criterion {id!r}: unknown polarities {sorted(bad)}")
        if polarities and live_fn is None:
            raise ValueError(f"criterion {id!r}: polarities given without a live_fn")
        self.live_stop_polarities = frozenset(polarities)

    def evaluate(self, trajectory):
        return self.fn(trajectory)

    def live_verdict(self, trajectory):
        if self.live_fn is None:
            return UNDECIDED
        verdict = self.live_fn(trajectory)
        if verdict not in (PASS, FAIL, UNDECIDED):
            raise ValueError(f"live verdict must be pass, fail or undecided, not {verdict!r}")
        return verdict


_FROM_SPEC = {
    "tool_invoked": lambda s: ToolInvoked(s.pop("id"), s.pop("tool"), **s),
    "skill_triggered": lambda s: SkillTriggered(s.pop("id"), s.pop("skill"), **s),
    "command_executed": lambda s: CommandExecuted(s.pop("id"), s.pop("pattern"), **s),
    "final_answer_contains": lambda s: FinalAnswerContains(s.pop("id"), s.pop("text"), **s),
}


def criterion_from_spec(spec: dict[str, Any]) -> Criterion:
    """Build a criterion from a plain dict such as `{"id": "sk", "type": "skill_triggered", "skill": "pdf"}`.

    This is how task files stay data: the same dict serves a smoke and an e2e variant.
    Callable criteria need code and are built directly instead.
    """
    spec = dict(spec)
    kind = spec.pop("type", None)
    if kind not in _FROM_SPEC:
        raise ValueError(f"unknown criterion type {kind!r}; expected one of {sorted(_FROM_SPEC)}")
    return _FROM_SPEC[kind](spec)
