"""Alias of `qita.engine.critic` (where QitOS keeps the Critic contract), so `from qita.critic import ...` keeps working."""

from .engine.critic import (
    CONTINUE,
    RETRY,
    STOP,
    Critic,
    ForbiddenCommandCritic,
    FunctionCritic,
    ReturnCodeCritic,
    critic_name,
    effective_action,
)

__all__ = ["CONTINUE", "RETRY", "STOP", "Critic", "ForbiddenCommandCritic", "FunctionCritic", "ReturnCodeCritic",
           "critic_name", "effective_action"]
