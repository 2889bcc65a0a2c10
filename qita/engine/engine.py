"""The Engine: runs an agent on tasks with critics, stop criteria, budgets, criteria and a trace.

`Engine` holds the configuration and can run many tasks; each run's bookkeeping lives
in `qita.engine.run`. QitOS code imports it from here (`qita.engine.engine`).
"""

from __future__ import annotations

import hashlib
import time
import uuid
from pathlib import Path
from typing import Any, Callable, Optional, Sequence, Union

from ..core import RuntimeBudget, Task
from ..core.errors import StopReason
from ..criteria import Criterion
from ..early_stop import validate_early_stop
from ..writer import TraceWriter
from .result import RunResult
from .run import _Run
from .stop_criteria import (
    FinalResultCriteria,
    MaxRuntimeCriteria,
    MaxStepsCriteria,
    MaxTokensCriteria,
    StopCriteria,
)

DEFAULT_MAX_STEPS = 20


def coerce_task(task: Union[str, Task]) -> Task:
    if isinstance(task, Task):
        return task
    if isinstance(task, str):
        # A stable id from the text, so the same string task compares across variants.
        digest = hashlib.sha1(task.encode("utf-8")).hexdigest()[:10]
        return Task(id=f"task-{digest}", objective=task)
    raise TypeError(f"task must be a str or a Task, not {type(task).__name__}")


class Engine:
    """Run one agent on tasks with critics, stop criteria, budgets, criteria and a trace.

    `stop_criteria=None` means `[FinalResultCriteria()]`; passing a list replaces it.
    Budgets (`max_steps`, `max_runtime_seconds`, `max_tokens`) are the defaults a
    task's `TaskBudget` overrides field by field. `trace` is a `TraceWriter` for exactly
    one run; `trace_path` makes the engine open a writer per run. With neither, no trace
    is written.
    """

    def __init__(self, agent: Any, critics: Optional[Sequence[Any]] = None,
                 stop_criteria: Optional[Sequence[StopCriteria]] = None, *,
                 max_steps: Optional[int] = None, max_runtime_seconds: Optional[float] = None,
                 max_tokens: Optional[int] = None, criteria: Optional[Sequence[Criterion]] = None,
                 stop_early: bool = False, trace: Optional[TraceWriter] = None,
                 trace_path: Optional[Union[str, Path]] = None, run_id: Optional[str] = None,
                 experiment: Optional[str] = None, variant: Optional[str] = None, replicate: int = 0,
                 tags: Optional[Sequence[str]] = None, metadata: Optional[dict[str, Any]] = None,
                 env: Any = None, model: Optional[str] = None, clock: Optional[Callable[[], float]] = None):
        if trace is not None and trace_path is not None:
            raise ValueError("give either trace or trace_path, not both")
        self.agent = agent
        self.critics = list(critics or [])
        self.stop_criteria = None if stop_criteria is None else list(stop_criteria)
        self.budget = RuntimeBudget(max_steps=DEFAULT_MAX_STEPS if max_steps is None else max_steps,
                                    max_runtime_seconds=max_runtime_seconds, max_tokens=max_tokens)
        self.criteria = list(criteria or [])
        self.stop_early = bool(stop_early)
        self.trace = trace
        self.trace_path = Path(trace_path) if trace_path is not None else None
        self.run_id = run_id
        self.experiment = experiment
        self.variant = variant
        self.replicate = replicate
        self.tags = list(tags or [])
        self.metadata = dict(metadata or {})
        self.env = env
        self.model = model or getattr(agent, "model", None)
        # A monotonic seconds function; the demo passes a simulated one so its runs have
        # realistic durations. Trace timestamps follow it from the real start time.
        self.clock = clock or time.monotonic
        # Fail before the run, not in the middle of it, when early stop cannot work as configured.
        validate_early_stop(self.criteria, self.stop_early)

    # -- helpers ----------------------------------------------------------------------
    def _stop_criteria(self) -> list[StopCriteria]:
        return list(self.stop_criteria) if self.stop_criteria is not None else [FinalResultCriteria()]

    @staticmethod
    def _budget_criteria(budget: RuntimeBudget) -> list[StopCriteria]:
        out: list[StopCriteria] = []
        if budget.max_steps is not None:
            out.append(MaxStepsCriteria(budget.max_steps))
        if budget.max_runtime_seconds is not None:
            out.append(MaxRuntimeCriteria(budget.max_runtime_seconds))
        if budget.max_tokens is not None:
            out.append(MaxTokensCriteria(budget.max_tokens))
        return out

    # -- the run ------------------------------------------------------------------------
    def run(self, task: Union[str, Task], **init_kwargs: Any) -> RunResult:
        """Run the agent on `task` (a Task or a plain string) until a stop rule fires."""
        task = coerce_task(task)
        budget = self.budget.apply(task.budget)
        armed = validate_early_stop(self.criteria, self.stop_early)
        stop_criteria = self._stop_criteria()
        budget_criteria = self._budget_criteria(budget)
        for item in [*self.critics, *stop_criteria]:
            reset = getattr(item, "reset", None)
            if callable(reset):
                reset()

        run_id = self.run_id or f"{task.id}-{uuid.uuid4().hex[:8]}"
        writer, own_writer = self.trace, False
        if writer is None and self.trace_path is not None:
            writer, own_writer = TraceWriter(self.trace_path, run_id), True
        if writer is not None:
            run_id = writer.run_id
        run = _Run(self, task, budget, stop_criteria, budget_criteria, armed, writer, run_id)
        try:
            return run.execute(init_kwargs)
        except BaseException as exc:
            run.crash_detail = f"{type(exc).__name__}: {exc}"[:2000]
            raise
        finally:
            # A crash in the engine itself still leaves a finished run in the trace when the
            # process survives long enough to get here; only a hard kill leaves it "running".
            if writer is not None and writer.started and not writer.ended:
                try:
                    writer.run_end(status="error", stop_reason=StopReason.UNRECOVERABLE_ERROR.value,
                                   stop_detail=run.crash_detail or "run interrupted",
                                   steps=run.steps_done, verdict=None,
                                   failure_report={"errors": run.errors or [{"error": run.crash_detail}]})
                except Exception:
                    pass
            if own_writer and writer is not None:
                writer.close()
