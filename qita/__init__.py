"""qita: the run side of qita board.

The Engine drives an agent through observe -> decide -> act -> reduce -> critics -> stop
criteria, with opt-in early stop on armed success criteria, and writes trace format v1
through the TraceWriter. Everything a seed example imports is importable from here.
This package never imports the board (`app`).
"""

from .agent import Agent
from .core import (
    Action,
    AgentState,
    Decision,
    RuntimeBudget,
    StateSchema,
    Task,
    TaskBudget,
    ToolCall,
    Trajectory,
    Usage,
)
from .core.errors import EarlyStopConfigError, QitaError, StopReason, TaskValidationError
from .criteria import (
    CallableCriterion,
    CommandExecuted,
    Criterion,
    CriterionResult,
    FinalAnswerContains,
    SkillTriggered,
    ToolInvoked,
    criterion_from_spec,
)
from .engine import Engine, RunResult
from .engine.critic import Critic, ForbiddenCommandCritic, FunctionCritic, ReturnCodeCritic
from .engine.stop_criteria import (
    FinalResultCriteria,
    MaxRuntimeCriteria,
    MaxStepsCriteria,
    MaxTokensCriteria,
    StagnationCriteria,
    StopCriteria,
)
from .format import (
    SCHEMA_ID,
    STOP_REASONS,
    CriterionSpec,
    RunEnd,
    RunStart,
    StepRecord,
)
from .harness import resolve_family_preset
from .live import LiveCapability, LiveReplay, live_capabilities, replay_live_verdicts
from .writer import TraceWriter

# The name QitOS code uses for the agent base class, so scripts port with only their imports changed.
AgentModule = Agent

__all__ = [
    "SCHEMA_ID",
    "STOP_REASONS",
    "Action",
    "Agent",
    "AgentModule",
    "AgentState",
    "CallableCriterion",
    "CommandExecuted",
    "Critic",
    "Criterion",
    "CriterionResult",
    "CriterionSpec",
    "Decision",
    "EarlyStopConfigError",
    "Engine",
    "FinalAnswerContains",
    "FinalResultCriteria",
    "ForbiddenCommandCritic",
    "FunctionCritic",
    "LiveCapability",
    "LiveReplay",
    "MaxRuntimeCriteria",
    "MaxStepsCriteria",
    "MaxTokensCriteria",
    "QitaError",
    "ReturnCodeCritic",
    "RunEnd",
    "RunResult",
    "RunStart",
    "RuntimeBudget",
    "SkillTriggered",
    "StagnationCriteria",
    "StateSchema",
    "StepRecord",
    "StopCriteria",
    "StopReason",
    "Task",
    "TaskBudget",
    "TaskValidationError",
    "ToolCall",
    "ToolInvoked",
    "Trajectory",
    "TraceWriter",
    "Usage",
    "criterion_from_spec",
    "live_capabilities",
    "replay_live_verdicts",
    "resolve_family_preset",
]
