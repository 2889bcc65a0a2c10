"""What a run attempts and the limits it runs under: `Task`, `TaskBudget`, `RuntimeBudget`.

QitOS keeps `Task` and `TaskBudget` in `qitos.core.task`; the budget in force for one
run (`RuntimeBudget`, the engine's defaults overridden by the task's budget) lives here
beside them because it is built from them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional


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
