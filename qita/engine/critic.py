"""The Critic contract: a step-level validator that runs after `reduce()`.

A critic returns a dict with `action` (`continue`, `stop` or `retry`), `reason`,
`score` and `details`. Anything other than `stop`/`retry` counts as `continue`, so a
critic that only scores never changes the run.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, Callable, Dict, Optional

from ..core.decision import Decision

CONTINUE, STOP, RETRY = "continue", "stop", "retry"


class Critic(ABC):
    """Validate one step. Subclasses implement `evaluate`.

    `name` is what the trace shows in `critic_outputs[].critic`; it defaults to the class
    name, so two instances of one class should be given distinct names.
    """

    name: Optional[str] = None

    @abstractmethod
    def evaluate(self, state: Any, decision: Decision[Any], results: list[Any]) -> Dict[str, Any]:
        """Return `{"action": ..., "reason": ..., "score": ..., "details": ...}`."""

    def reset(self) -> None:
        """Called once before each run; stateful critics clear themselves here."""


def critic_name(critic: Any) -> str:
    return getattr(critic, "name", None) or type(critic).__name__


def effective_action(output: Any) -> str:
    """The action the engine acts on: `stop`, `retry`, else `continue`."""
    action = output.get("action") if isinstance(output, dict) else None
    return action if action in (STOP, RETRY) else CONTINUE


class FunctionCritic(Critic):
    """Wrap a plain function `(state, decision, results) -> dict` as a critic."""

    def __init__(self, fn: Callable[[Any, Decision[Any], list[Any]], Dict[str, Any]], name: Optional[str] = None):
        self.fn = fn
        self.name = name or getattr(fn, "__name__", "FunctionCritic")

    def evaluate(self, state, decision, results):
        return self.fn(state, decision, results)


class ReturnCodeCritic(Critic):
    """Ask for a retry when a command result carries a non-zero `returncode`.

    The demo's verification critic; it reads dict results only, as the seed's example does.
    """

    name = "ReturnCodeCritic"

    def evaluate(self, state, decision, results):
        for result in results:
            if isinstance(result, dict) and "returncode" in result:
                code = int(result.get("returncode") or 0)
                if code != 0:
                    return {"action": RETRY, "reason": f"command failed with returncode={code}", "score": 0.0,
                            "details": {"returncode": code}}
        return {"action": CONTINUE, "reason": "no failing command", "score": 1.0}


class ForbiddenCommandCritic(Critic):
    """Stop the run as soon as a shell action contains one of the forbidden fragments."""

    name = "ForbiddenCommandCritic"

    def __init__(self, forbidden: tuple[str, ...] = ("rm -rf /", "mkfs", ":(){")):
        self.forbidden = tuple(forbidden)

    def evaluate(self, state, decision, results):
        for action in decision.actions:
            command = action.args.get("command", "") if isinstance(action.args, dict) else ""
            for bad in self.forbidden:
                if bad in str(command):
                    return {"action": STOP, "reason": f"forbidden command: {bad!r}", "score": 0.0,
                            "details": {"command": command}}
        return {"action": CONTINUE, "reason": "no forbidden command", "score": 1.0}
