"""Alias of `qita.engine.critic` (where QitOS keeps the Critic contract), so `from qita.critic import ...` keeps working."""

from .engine.critic import (
    ACTION_RANK,
    CONTINUE,
    RETRY,
    STOP,
    Critic,
    CriticPass,
    ForbiddenCommandCritic,
    FunctionCritic,
    ReturnCodeCritic,
    critic_name,
    effective_action,
    run_critics,
    strongest_action,
)

__all__ = ["ACTION_RANK", "CONTINUE", "RETRY", "STOP", "Critic", "CriticPass", "ForbiddenCommandCritic", "FunctionCritic",
           "ReturnCodeCritic", "critic_name", "effective_action", "run_critics", "strongest_action"]
