"""The Critic contract, how a step's critics are run, and the ranking of their actions.

A critic returns a dict with `action` (`continue`, `stop` or `retry`), `reason`,
`score`, `details` and optionally `patches` (the changes it proposes). Anything other than `stop`/`retry` counts as `continue`, so a
critic that only scores never changes the run. When critics disagree the strongest
action wins: stop > retry > continue. That ranking is defined here once; the board
imports it to rank the verdict lane.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterable, Optional

from ..core.decision import Decision
from .snapshot import jsonable

CONTINUE, STOP, RETRY = "continue", "stop", "retry"

#: How strongly each effective action acts on the run; the strongest of a step's wins.
ACTION_RANK = {CONTINUE: 0, RETRY: 1, STOP: 2}


def effective_action(action: Any) -> str:
    """The action the engine acts on for a critic's `action` value: `stop`, `retry`, else `continue`."""
    return action if action in (STOP, RETRY) else CONTINUE


def strongest_action(actions: Iterable[Any]) -> Optional[str]:
    """The effective action that wins among several critics' `action` values; None for none."""
    best = None
    for action in actions:
        eff = effective_action(action)
        if best is None or ACTION_RANK[eff] > ACTION_RANK[best]:
            best = eff
    return best


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


#: The keys of a critic's dict that have their own place in `critic_outputs`; others go under `extra`.
_OUTPUT_KEYS = ("action", "reason", "score", "details", "critic", "patches")


@dataclass
class CriticPass:
    """Every critic's output on one step, and the one action the engine takes on them."""

    outputs: list[dict[str, Any]] = field(default_factory=list)
    action: str = CONTINUE
    #: the first output with the winning action: its reason is the stop detail or the retry feedback
    deciding: Optional[dict[str, Any]] = None
    #: `{critic, error}` for each critic that raised or returned something other than a dict
    errors: list[dict[str, Any]] = field(default_factory=list)


def run_critics(critics: Iterable[Any], state: Any, decision: Decision[Any], results: list[Any]) -> CriticPass:
    """Run every critic, in order, and rank their actions.

    Every critic runs so every opinion is recorded, even after one has said stop. A
    critic that raises is recorded as `continue` with the error, so a broken critic
    never ends or crashes a run.
    """
    out = CriticPass()
    for critic in critics:
        name = critic_name(critic)
        try:
            raw = critic.evaluate(state, decision, results)
            if not isinstance(raw, dict):
                raise TypeError(f"critic returned {type(raw).__name__}, expected dict")
        except Exception as exc:
            text = f"{type(exc).__name__}: {exc}"
            out.errors.append({"critic": name, "error": text})
            out.outputs.append({"critic": name, "action": CONTINUE, "reason": f"critic raised {text}",
                                "score": None, "details": {"error": text, "raised": True}})
            continue
        output = _output(name, raw)
        out.outputs.append(output)
        eff = effective_action(raw.get("action"))
        if ACTION_RANK[eff] > ACTION_RANK[out.action]:
            out.action, out.deciding = eff, output
    return out


def _output(name: str, raw: dict[str, Any]) -> dict[str, Any]:
    """One `critic_outputs` entry from what a critic returned."""
    out = {"critic": name, "action": raw.get("action", CONTINUE), "reason": raw.get("reason"),
           "score": raw.get("score"), "details": raw.get("details")}
    if raw.get("patches") is not None:
        # Changes the critic proposes (to the instructions, the state, the code): kept whole
        # beside the verdict, so the board can show them in the Critic section.
        out["patches"] = jsonable(raw["patches"])
    extra = {k: v for k, v in raw.items() if k not in _OUTPUT_KEYS}
    if extra:
        out["extra"] = jsonable(extra)
    try:
        out["score"] = None if out["score"] is None else float(out["score"])
    except (TypeError, ValueError):
        out["details"] = {"details": out["details"], "unparsed_score": repr(out["score"])}
        out["score"] = None
    return out


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
