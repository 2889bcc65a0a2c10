"""Success criteria: what a run is graded on, and which of them can be decided mid-run.

Every criterion has an end-of-run `check(trajectory) -> CriterionResult`. Criteria that
can be decided while the agent is still working also declare `live_stop_polarities`
(the subset of `{"pass", "fail"}` they can decide live) and implement
`live_verdict(trajectory) -> "pass" | "fail" | "undecided"`.

A live verdict is only offered for signals that cannot un-happen (a tool was called, a
command ran N times). That is what makes the early verdict and the end-of-run check
agree: nothing after the deciding event can change the answer. A criterion without a
live verdict says why in `not_live_reason`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Sequence, TypeVar

from .core import ToolCall, Trajectory

PASS, FAIL, UNDECIDED = "pass", "fail", "undecided"
STOP_WHEN_VALUES = ("pass", "fail", "decided")

#: Why a criterion that is only checked on the finished run has no live verdict.
END_STATE_REASON = "an end-state check: not observable step by step, so it has no live verdict and cannot be armed"

Acc = TypeVar("Acc")


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
    #: Why the criterion has no live verdict (read only when `live_stop_polarities` is empty).
    not_live_reason: str = END_STATE_REASON

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

    def _fold_calls(self, trajectory: Trajectory, step: Callable[[Acc, ToolCall], Acc], initial: Acc) -> Acc:
        """Fold `step` over the trajectory's tool calls, remembering how far it got.

        Live verdicts are asked after every tool call; re-reading the whole trajectory
        each time would make a long run (or a replayed trace) quadratic. Tool calls are
        only ever appended, so the fold resumes where it stopped; a list changed in any
        other way is read again from the start.
        """
        calls = trajectory.tool_calls
        seen, acc, last = trajectory.memo.get(self, (0, initial, None))
        if seen > len(calls) or (seen and calls[seen - 1] is not last):
            seen, acc = 0, initial
        for call in calls[seen:]:
            acc = step(acc, call)
        if calls:
            trajectory.memo[self] = (len(calls), acc, calls[-1])
        return acc

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
    `min_count` defaults to 1, or to 0 when `max_count=0`. With `require_success` only
    calls that succeeded count (no error, exit code 0 when one is known).
    """

    def __init__(self, id: str, *, min_count: Optional[int] = None, max_count: Optional[int] = None,
                 require_success: bool = False, **kw: Any):
        super().__init__(id, **kw)
        if min_count is None:
            # "at least once" unless the upper bound says otherwise: `max_count=0` alone is
            # the must-not-run form, with nothing required.
            min_count = 1 if max_count is None else min(1, max_count)
        if min_count < 0 or (max_count is not None and max_count < min_count):
            raise ValueError(f"criterion {id!r}: need 0 <= min_count <= max_count")
        self.min_count = min_count
        self.max_count = max_count
        self.require_success = bool(require_success)
        self.live_stop_polarities = frozenset({PASS} if max_count is None else {FAIL})

    def matches(self, call: ToolCall) -> bool:
        raise NotImplementedError

    def counts(self, call: ToolCall) -> bool:
        return self.matches(call) and (call.succeeded or not self.require_success)

    def evaluate(self, trajectory):
        hits = [c for c in trajectory.tool_calls if self.counts(c)]
        ok = len(hits) >= self.min_count and (self.max_count is None or len(hits) <= self.max_count)
        return ok, {"count": len(hits), "min_count": self.min_count, "max_count": self.max_count,
                    "tool_call_indexes": [c.index for c in hits]}

    def live_verdict(self, trajectory):
        count = self._fold_calls(trajectory, lambda n, call: n + 1 if self.counts(call) else n, 0)
        if self.max_count is not None and count > self.max_count:
            return FAIL
        if self.max_count is None and count >= self.min_count:
            return PASS
        return UNDECIDED

    def spec(self):
        out = {**super().spec(), "min_count": self.min_count, "max_count": self.max_count}
        if self.require_success:
            out["require_success"] = True
        return out


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
        # the must-not-run form reads as what it requires, not as its opposite
        kw.setdefault("description", f"tool {tool!r} was never invoked" if kw.get("max_count") == 0
                      else f"tool {tool!r} was invoked")
        super().__init__(id, **kw)
        self.tool = tool

    def matches(self, call):
        return call.name == self.tool

    def spec(self):
        return {**super().spec(), "tool": self.tool}


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

    def evaluate(self, trajectory):
        names = [n for n in (engaged_skill(c) for c in trajectory.tool_calls) if n is not None]
        ok = (bool(names) and names[0] == self.skill) if self.policy == "first" else (self.skill in names)
        return ok, {"engaged": names, "policy": self.policy, "skill": self.skill}

    def live_verdict(self, trajectory):
        if self.policy == "first":
            first = self._fold_calls(trajectory,
                                     lambda found, call: found if found is not None else engaged_skill(call), None)
            if first is None:
                return UNDECIDED
            return PASS if first == self.skill else FAIL
        hit = self._fold_calls(trajectory, lambda found, call: found or engaged_skill(call) == self.skill, False)
        return PASS if hit else UNDECIDED

    def spec(self):
        return {**super().spec(), "skill": self.skill, "policy": self.policy}


#: Tool names that run a shell command (compared case-insensitively), and the argument holding it.
COMMAND_TOOLS = ("bash", "shell", "run_command", "exec", "terminal")
COMMAND_ARG_KEYS = ("command", "cmd")


class CommandExecuted(CountCriterion):
    """A shell command matching `pattern` (a regular expression, searched) ran.

    `min_count`/`max_count` bound how many times; `max_count=0` means it must not run.
    Shell tools are the `COMMAND_TOOLS`, in any case (`Bash` counts), or only the tool
    named `tool` when given. A command that also matches `exclude_pattern` does not count.
    """

    type = "command_executed"

    def __init__(self, id: str, pattern: str, *, tool: Optional[str] = None, exclude_pattern: Optional[str] = None,
                 **kw: Any):
        kw.setdefault("description", f"no command matching {pattern!r} ran" if kw.get("max_count") == 0
                      else f"command matching {pattern!r} ran")
        super().__init__(id, **kw)
        self.pattern = pattern
        self.tool = tool
        self.exclude_pattern = exclude_pattern
        self._regex = re.compile(pattern)
        self._exclude = re.compile(exclude_pattern) if exclude_pattern else None

    def matches(self, call):
        if self.tool is not None:
            if call.name != self.tool:
                return False
        elif str(call.name).lower() not in COMMAND_TOOLS:
            return False
        command = _arg(call.args, COMMAND_ARG_KEYS)
        if command is None or self._regex.search(command) is None:
            return False
        return self._exclude is None or self._exclude.search(command) is None

    def spec(self):
        out = {**super().spec(), "pattern": self.pattern}
        if self.tool is not None:
            out["tool"] = self.tool
        if self.exclude_pattern is not None:
            out["exclude_pattern"] = self.exclude_pattern
        return out


class FinalAnswerContains(Criterion):
    """The final answer contains `text`. End-state only: it can flip until the run ends."""

    type = "final_answer_contains"
    not_live_reason = ("the final answer can change until the run ends: " + END_STATE_REASON)

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
    not_live_reason = "no live_fn with polarities was given: " + END_STATE_REASON

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


#: Keys every spec may carry, whatever its type.
_COMMON_KEYS = frozenset({"description", "stop_when", "gating", "pass_threshold"})
_COUNT_KEYS = frozenset({"min_count", "max_count", "require_success"})

#: type -> (class, the key it cannot do without, the other keys it takes)
SPEC_TYPES: dict[str, tuple[type, str, frozenset[str]]] = {
    "tool_invoked": (ToolInvoked, "tool", _COUNT_KEYS),
    "skill_triggered": (SkillTriggered, "skill", frozenset({"policy"})),
    "command_executed": (CommandExecuted, "pattern", _COUNT_KEYS | {"tool", "exclude_pattern"}),
    "final_answer_contains": (FinalAnswerContains, "text", frozenset({"case_sensitive"})),
}


def criterion_from_spec(spec: dict[str, Any], *, strict: bool = True) -> Criterion:
    """Build a criterion from a plain dict such as `{"id": "sk", "type": "skill_triggered", "skill": "pdf"}`.

    This is how task files stay data: the same dict serves a smoke and an e2e variant.
    A key set to null means "the default". With `strict=False`, keys the type does not
    take are ignored (a spec read from another tool's trace carries its own extras).
    Callable criteria need code and are built directly instead.
    """
    kind = spec.get("type")
    if kind not in SPEC_TYPES:
        raise ValueError(f"unknown criterion type {kind!r}; expected one of {sorted(SPEC_TYPES)}")
    cls, required, optional = SPEC_TYPES[kind]
    for key in ("id", required):
        if spec.get(key) is None:
            raise ValueError(f"a {kind} criterion spec needs {key!r}")
    allowed = _COMMON_KEYS | optional
    unknown = sorted(set(spec) - allowed - {"id", "type", required})
    if unknown and strict:
        raise ValueError(f"criterion {spec['id']!r}: {kind} takes no {unknown}")
    kwargs = {k: v for k, v in spec.items() if k in allowed and v is not None}
    return cls(spec["id"], spec[required], **kwargs)
