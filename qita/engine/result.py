"""What a run returns (`RunResult`) and why it stopped (`Stop`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from ..core.errors import StopReason
from ..core.task import Task
from ..criteria import CriterionResult


@dataclass(frozen=True)
class Stop:
    """The rule that ended the run: its reason, and the detail shown beside it."""

    reason: StopReason
    detail: Optional[str] = None


@dataclass
class RunResult:
    """What `Engine.run` returns. `state.stop_reason` is always set."""

    state: Any
    run_id: str
    task: Task
    stop_reason: StopReason
    stop_detail: Optional[str]
    status: str
    final_result: Any
    verdict: str
    steps: int
    tokens: dict[str, int]
    cost_usd: float
    elapsed_s: float
    criteria: dict[str, CriterionResult] = field(default_factory=dict)
    early_stop: Optional[dict[str, Any]] = None
    failure_report: dict[str, Any] = field(default_factory=dict)
    trace_path: Optional[Path] = None

    @property
    def stopped_early(self) -> bool:
        return self.stop_reason == StopReason.EARLY_STOP
