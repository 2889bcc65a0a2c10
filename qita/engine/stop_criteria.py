"""The StopCriteria contract and the built-in loop-termination rules.

Each criterion answers `(should_stop, reason, detail)` at a step boundary. The engine
resets every criterion before a run, so one instance can serve many runs.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, Callable, Dict, Optional, Tuple

from ..core.errors import StopReason

StopVerdict = Tuple[bool, Optional[StopReason], Optional[str]]
_NOT_YET: StopVerdict = (False, None, None)


class StopCriteria(ABC):
    """Decide whether the loop should end after the current step."""

    @abstractmethod
    def should_stop(self, state: Any, step_count: int,
                    runtime_info: Optional[Dict[str, Any]] = None) -> StopVerdict:
        """Return `(should_stop, reason, detail)`."""

    def reset(self) -> None:
        """Called once before each run; stateful criteria clear themselves here."""

    def params(self) -> dict[str, Any]:
        """What the trace shows as this criterion's parameters in `run_start.stop_criteria`."""
        return {k: v for k, v in vars(self).items()
                if not k.startswith("_") and isinstance(v, (int, float, str, bool, type(None)))}

    @property
    def name(self) -> str:
        return type(self).__name__


def _has_final(value: Any) -> bool:
    # An empty string is "no answer yet"; any other non-None value counts as an answer.
    if value is None:
        return False
    if isinstance(value, str):
        return value != ""
    return True


class FinalResultCriteria(StopCriteria):
    """Stop once `state.final_result` is set (non-empty). The default when none are given."""

    def should_stop(self, state, step_count, runtime_info=None):
        if _has_final(getattr(state, "final_result", None)):
            return True, StopReason.FINAL, "final_result is set"
        return _NOT_YET


class MaxStepsCriteria(StopCriteria):
    """Stop when the number of executed steps reaches `max_steps`."""

    def __init__(self, max_steps: int):
        self.max_steps = int(max_steps)

    def should_stop(self, state, step_count, runtime_info=None):
        if step_count >= self.max_steps:
            return True, StopReason.BUDGET_STEPS, f"step_count={step_count} reached max_steps={self.max_steps}"
        return _NOT_YET


class MaxRuntimeCriteria(StopCriteria):
    """Stop when wall-clock time since the run started exceeds `max_runtime_seconds`."""

    def __init__(self, max_runtime_seconds: float):
        self.max_runtime_seconds = float(max_runtime_seconds)

    def should_stop(self, state, step_count, runtime_info=None):
        elapsed = float((runtime_info or {}).get("elapsed_seconds") or 0.0)
        if elapsed > self.max_runtime_seconds:
            return (True, StopReason.BUDGET_TIME,
                    f"elapsed_seconds={elapsed:.3f} exceeded max_runtime_seconds={self.max_runtime_seconds}")
        return _NOT_YET


class MaxTokensCriteria(StopCriteria):
    """Stop when the run's cumulative `total_tokens` exceeds `max_tokens`."""

    def __init__(self, max_tokens: int):
        self.max_tokens = int(max_tokens)

    def should_stop(self, state, step_count, runtime_info=None):
        total = int((runtime_info or {}).get("total_tokens") or 0)
        if total > self.max_tokens:
            return True, StopReason.BUDGET_TOKENS, f"total_tokens={total} exceeded max_tokens={self.max_tokens}"
        return _NOT_YET


def default_signature(state: Any) -> Any:
    return (getattr(state, "final_result", None), getattr(state, "phase", None))


class StagnationCriteria(StopCriteria):
    """Stop when the state's signature has not changed for `max_stagnant_steps` checks in a row.

    The first check only records the signature; each later check with an equal
    signature counts one stagnant step. With `max_stagnant_steps=3` the run therefore
    stops at the fourth consecutive check that sees the same signature.
    """

    def __init__(self, max_stagnant_steps: int = 3, signature_fn: Optional[Callable[[Any], Any]] = None):
        self.max_stagnant_steps = int(max_stagnant_steps)
        self.signature_fn = signature_fn or default_signature
        self.reset()

    def reset(self) -> None:
        self._last: Any = _UNSET
        self._stagnant = 0

    def params(self) -> dict[str, Any]:
        custom = self.signature_fn is not default_signature
        return {"max_stagnant_steps": self.max_stagnant_steps, "signature_fn": "custom" if custom else "default"}

    def should_stop(self, state, step_count, runtime_info=None):
        signature = self.signature_fn(state)
        if self._last is not _UNSET and signature == self._last:
            self._stagnant += 1
        else:
            self._stagnant = 0
        self._last = signature
        if self._stagnant >= self.max_stagnant_steps:
            return (True, StopReason.STAGNATION,
                    f"state unchanged for {self._stagnant} consecutive steps (max_stagnant_steps="
                    f"{self.max_stagnant_steps})")
        return _NOT_YET


class _Unset:
    def __repr__(self) -> str:
        return "<unset>"


_UNSET = _Unset()
