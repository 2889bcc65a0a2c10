"""qita: the run side of qita board.

The Engine drives an agent through observe -> decide -> act -> reduce -> critics -> stop
criteria, with opt-in early stop on armed success criteria, and writes trace format v1
through the TraceWriter. Everything a seed example imports is importable from here.
This package never imports the board (`app`).

Each name loads on first use (PEP 562, `qita._lazy`): the board imports one contract of the run side
(`qita.engine.critic`, for the ranking of critic actions), and loading every module here
with it was 0.16 s of each `qita ingest` start on a slow machine (docs/performance.md).
`_HOMES` says where each name lives; the imports under TYPE_CHECKING say the same for type
checkers, and tests/qita/test_module_paths.py holds the two equal.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._lazy import lazy_names

#: Where each name of the run side's API lives, relative to this package.
_HOMES = {
    "Agent": ".agent",
    "Action": ".core",
    "AgentState": ".core",
    "Decision": ".core",
    "RuntimeBudget": ".core",
    "StateSchema": ".core",
    "Task": ".core",
    "TaskBudget": ".core",
    "ToolCall": ".core",
    "Trajectory": ".core",
    "Usage": ".core",
    "EarlyStopConfigError": ".core.errors",
    "QitaError": ".core.errors",
    "StopReason": ".core.errors",
    "TaskValidationError": ".core.errors",
    "CallableCriterion": ".criteria",
    "CommandExecuted": ".criteria",
    "Criterion": ".criteria",
    "CriterionResult": ".criteria",
    "FinalAnswerContains": ".criteria",
    "SkillTriggered": ".criteria",
    "ToolInvoked": ".criteria",
    "criterion_from_spec": ".criteria",
    "Engine": ".engine",
    "RunResult": ".engine",
    "Critic": ".engine.critic",
    "ForbiddenCommandCritic": ".engine.critic",
    "FunctionCritic": ".engine.critic",
    "ReturnCodeCritic": ".engine.critic",
    "FinalResultCriteria": ".engine.stop_criteria",
    "MaxRuntimeCriteria": ".engine.stop_criteria",
    "MaxStepsCriteria": ".engine.stop_criteria",
    "MaxTokensCriteria": ".engine.stop_criteria",
    "StagnationCriteria": ".engine.stop_criteria",
    "StopCriteria": ".engine.stop_criteria",
    "SCHEMA_ID": ".format",
    "STOP_REASONS": ".format",
    "CriterionSpec": ".format",
    "RunEnd": ".format",
    "RunStart": ".format",
    "StepRecord": ".format",
    "resolve_family_preset": ".harness",
    "LiveCapability": ".live",
    "LiveReplay": ".live",
    "live_capabilities": ".live",
    "replay_live_verdicts": ".live",
    "TraceWriter": ".writer",
}
#: Other names for the same objects.
_ALIASES = {
    # The name QitOS code uses for the agent base class, so scripts port with only their imports changed.
    "AgentModule": "Agent",
}

if TYPE_CHECKING:
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

    AgentModule = Agent


__getattr__, __dir__ = lazy_names(globals(), _HOMES, _ALIASES)


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
