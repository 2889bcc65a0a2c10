"""Alias of `qita.engine.stop_criteria` (where QitOS keeps them), so `from qita.stop_criteria import ...` keeps working."""

from .engine.stop_criteria import (
    FinalResultCriteria,
    MaxRuntimeCriteria,
    MaxStepsCriteria,
    MaxTokensCriteria,
    StagnationCriteria,
    StopCriteria,
    StopVerdict,
    default_signature,
)

__all__ = ["FinalResultCriteria", "MaxRuntimeCriteria", "MaxStepsCriteria", "MaxTokensCriteria", "StagnationCriteria",
           "StopCriteria", "StopVerdict", "default_signature"]
