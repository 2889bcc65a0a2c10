"""What an agent decides in one step: the actions to run or a final answer, and the tokens it spent.

`Decision.act([...])`, `Decision.final(answer)` and `Decision.wait()` are the shapes the
seed documents assume (QitOS: `qitos.core.decision`). Plain dataclasses, so an agent can
build them without knowing anything about traces.
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
