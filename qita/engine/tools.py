"""Dispatching an action to its tool: how arguments are passed, and a failing tool as a result."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Optional

from ..core.decision import Action


@dataclass
class ToolOutcome:
    """What one tool call gave back; `error` is set when the tool is unknown or raised."""

    result: Any
    error: Optional[str] = None

    @property
    def status(self) -> str:
        return "ok" if self.error is None else "error"


def available_tools(env: Any, agent: Any) -> dict[str, Callable[..., Any]]:
    """The tools a run can call: the environment's, then the agent's (the agent's win on a name clash)."""
    tools: dict[str, Callable[..., Any]] = {}
    tools.update(getattr(env, "tools", None) or {})
    tools.update(getattr(agent, "tools", None) or {})
    return tools


def call_tool(tools: dict[str, Callable[..., Any]], action: Action) -> ToolOutcome:
    """Call the action's tool with its args: as keyword arguments (a dict), none (None), or one argument.

    A failing tool is something the agent should see and react to, not a crash: an
    unknown name or an exception becomes `{"status": "error", "error": ...}`.
    """
    fn = tools.get(action.name)
    if fn is None:
        error = f"unknown tool {action.name!r}"
        return ToolOutcome({"status": "error", "error": error}, error)
    try:
        if isinstance(action.args, dict):
            return ToolOutcome(fn(**action.args))
        if action.args is None:
            return ToolOutcome(fn())
        return ToolOutcome(fn(action.args))
    except Exception as exc:
        error = f"{type(exc).__name__}: {exc}"
        return ToolOutcome({"status": "error", "error": error}, error)
