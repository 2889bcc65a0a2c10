"""Alias of `qita.core.errors` (where QitOS keeps `StopReason`), so `from qita.errors import ...` keeps working."""

from .core.errors import EarlyStopConfigError, QitaError, StopReason, TaskValidationError

__all__ = ["EarlyStopConfigError", "QitaError", "StopReason", "TaskValidationError"]
