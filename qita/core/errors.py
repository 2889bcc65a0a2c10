"""Why a run ended: the `StopReason` string enum and the engine's own exceptions.

QitOS keeps `StopReason` in `qitos.core.errors`; so does qita (`qita.errors` is an alias).

`StopReason` mixes in `str`, so `state.stop_reason == "final"` holds and the value
serialises as its plain string in traces.
"""

from __future__ import annotations

from enum import Enum


class StopReason(str, Enum):
    """Why the loop ended. Written to `state.stop_reason` at the end of every run."""

    SUCCESS = "success"
    FINAL = "final"
    BUDGET_STEPS = "budget_steps"
    BUDGET_TIME = "budget_time"
    BUDGET_TOKENS = "budget_tokens"
    CRITIC_STOP = "critic_stop"
    STAGNATION = "stagnation"
    AGENT_CONDITION = "agent_condition"
    ENV_TERMINAL = "env_terminal"
    TASK_VALIDATION_FAILED = "task_validation_failed"
    ENV_CAPABILITY_MISMATCH = "env_capability_mismatch"
    UNRECOVERABLE_ERROR = "unrecoverable_error"
    EARLY_STOP = "early_stop"

    def __str__(self) -> str:  # f"{reason}" should read like the trace, not like the enum repr
        return self.value


class QitaError(Exception):
    """Base class of errors raised by qita itself."""


class EarlyStopConfigError(QitaError, ValueError):
    """Early stop was configured in a way that could never take effect.

    Raised before the run starts, so a misconfigured smoke test fails loudly instead of
    silently running in full.
    """


class TaskValidationError(QitaError, ValueError):
    """A task failed preflight validation (raised by an agent's `validate_task`)."""
