"""qita: the run side of qita board.

The trace-format models and the TraceWriter live here; the engine with the critic and
stop-criteria contracts builds on them. This package never imports the board (`app`).
"""

from .format import (
    SCHEMA_ID,
    STOP_REASONS,
    CriterionSpec,
    RunEnd,
    RunStart,
    StepRecord,
)
from .writer import TraceWriter

__all__ = [
    "SCHEMA_ID",
    "STOP_REASONS",
    "CriterionSpec",
    "RunEnd",
    "RunStart",
    "StepRecord",
    "TraceWriter",
]
