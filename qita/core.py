"""The agent-facing data types: actions, decisions, tasks, budgets, token usage and state.

These are the shapes the seed documents assume (`Decision.act([...])`,
`Decision.final(answer)`, `Task(id, objective, budget=TaskBudget(...))`). They are plain
dataclasses so an agent can build them without knowing anything about traces.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Generic, Optional, TypeVar

T = TypeVar("T")


@dataclass
class Action:
    """One tool call the agent asks the engine to dispatch."""

    name: str
    args: Any = field(default_factory=dict)

    def to_record(self) -> dict[str, Any]:
        return {"name": self.name, "args": self.args}


@dataclass
class Usage:
    """Tokens (and optionally money) one step spent. Agents attach it to a Decision."""

    input: int = 0
    output: int = 0
    cost_usd: float = 0.0

    @property
    def total(self) -> int:
        return int(self.input) + int(self.output)


@dataclass
class Decision(Generic[T]):
    """The model's structured output for one step: either actions to run or a final answer.

    `payload` is free for agents that want to carry their own typed data through the
    loop (the `T` in `Decision[T]`); the engine never looks at it.
    """

    mode: str = "act"
    actions: list[Action] = field(default_factory=list)
    rationale: Optional[str] = None
    final_answer: Optional[Any] = None
    payload: Optional[T] = None
    usage: Optional[Usage] = None

    @classmethod
    def act(cls, actions: list[Action], rationale: Optional[str] = None, *, payload: Any = None,
            usage: Optional[Usage] = None) -> "Decision[Any]":
        return cls(mode="act", actions=list(actions), rationale=rationale, payload=payload, usage=usage)

    @classmethod
    def final(cls, answer: Any, rationale: Optional[str] = None, *, payload: Any = None,
              usage: Optional[Usage] = None) -> "Decision[Any]":
        return cls(mode="final", final_answer=answer, rationale=rationale, payload=payload, usage=usage)

    @classmethod
    def wait(cls, rationale: Optional[str] = None, *, usage: Optional[Usage] = None) -> "Decision[Any]":
        """A step that does nothing this turn (no actions, no answer)."""
        return cls(mode="wait", rationale=rationale, usage=usage)

    @property
    def is_final(self) -> bool:
        return self.mode == "final"

    def to_record(self) -> dict[str, Any]:
        answer = self.final_answer
        if answer is not None and not isinstance(answer, str):
            answer = str(answer)
        return {
            "mode": self.mode,
            "rationale": self.rationale,
            "actions": [a.to_record() for a in self.actions],
            "final_answer": answer,
        }


@dataclass
class TaskBudget:
    """Per-task limits. A None field leaves the engine's own default in place."""

    max_steps: Optional[int] = None
    max_runtime_seconds: Optional[float] = None
    max_tokens: Optional[int] = None


@dataclass
class RuntimeBudget:
    """The limits actually in force for one run (engine defaults, then the task's budget)."""

    max_steps: Optional[int] = 20
    max_runtime_seconds: Optional[float] = None
    max_tokens: Optional[int] = None

    def apply(self, budget: Optional[TaskBudget]) -> "RuntimeBudget":
        """A copy with every non-None field of `budget` taking precedence."""
        if budget is None:
            return RuntimeBudget(self.max_steps, self.max_runtime_seconds, self.max_tokens)
        return RuntimeBudget(
            max_steps=budget.max_steps if budget.max_steps is not None else self.max_steps,
            max_runtime_seconds=(budget.max_runtime_seconds if budget.max_runtime_seconds is not None
                                 else self.max_runtime_seconds),
            max_tokens=budget.max_tokens if budget.max_tokens is not None else self.max_tokens,
        )

    def to_record(self) -> dict[str, Any]:
        return {"max_steps": self.max_steps, "max_runtime_seconds": self.max_runtime_seconds,
                "max_tokens": self.max_tokens}


@dataclass
class Task:
    """What a run attempts. A plain string given to `Engine.run` becomes `Task(id=..., objective=s)`.

    `required_tools` lets the engine refuse a task up front when the agent cannot do it
    (stop reason `env_capability_mismatch`) instead of failing halfway.
    """

    id: str
    objective: str
    budget: Optional[TaskBudget] = None
    required_tools: list[str] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass
class AgentState:
    """A convenient base for agent state. Any object with these attributes works.

    The engine reads `final_result` and `phase` (for stagnation) and writes
    `stop_reason`, `step` and `retry_feedback`. Agents add their own fields by subclassing.
    """

    task: Optional[Task] = None
    final_result: Optional[Any] = None
    stop_reason: Optional[Any] = None
    phase: Optional[str] = None
    step: int = 0
    retry_feedback: Optional[dict[str, Any]] = None
    memory: list[Any] = field(default_factory=list)


@dataclass
class ToolCall:
    """One dispatched tool call as the live-verdict watchers and criteria see it."""

    index: int  # 1-based across the run, so a trace reader can say "the 3rd tool call"
    step: int
    name: str
    args: Any
    result: Any = None
    status: str = "ok"
    error: Optional[str] = None


@dataclass
class Trajectory:
    """The run so far, as success criteria see it: tool calls, steps taken and the answer."""

    task: Optional[Task] = None
    tool_calls: list[ToolCall] = field(default_factory=list)
    steps: int = 0
    final_result: Optional[Any] = None
    state: Any = None
