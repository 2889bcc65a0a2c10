"""Agent state: `AgentState`, a convenient base (QitOS calls it `StateSchema`).

Any object with attributes works as state; the engine only reads and writes the few
fields named on `AgentState`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from .task import Task


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


#: The QitOS name for the same thing (`qitos.core.state.StateSchema`).
StateSchema = AgentState
