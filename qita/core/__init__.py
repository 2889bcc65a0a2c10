"""The agent-facing data types: actions, decisions, tasks, budgets, token usage and state.

The modules mirror QitOS (`qita.core.decision`, `qita.core.task`, `qita.core.errors`,
`qita.core.state`), so code written against QitOS imports them with only `qitos`
replaced by `qita`; everything is also importable from `qita.core` itself.
"""

from .decision import Action, Decision, Usage
from .errors import EarlyStopConfigError, QitaError, StopReason, TaskValidationError
from .state import AgentState, StateSchema
from .task import RuntimeBudget, Task, TaskBudget
from .trajectory import ToolCall, Trajectory

__all__ = [
    "Action",
    "AgentState",
    "Decision",
    "EarlyStopConfigError",
    "QitaError",
    "RuntimeBudget",
    "StateSchema",
    "StopReason",
    "Task",
    "TaskBudget",
    "TaskValidationError",
    "ToolCall",
    "Trajectory",
    "Usage",
]
