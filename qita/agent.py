"""The agent shape the engine drives, and a convenient base class.

Any object with `init_state(task, **kw)`, `decide(state, observation)` and
`reduce(state, observation, decision)` can be run; `should_stop(state)`, `observe(...)`,
`validate_task(task)`, a `tools` mapping and `model`/`name` attributes are optional.
Subclassing `Agent` adds `agent.run(...)` and `report_usage(...)`.
"""

from __future__ import annotations

from typing import Any, Callable, Optional

from .core import AgentState, Decision, Task, Usage


class Agent:
    """Base class for agents.

    `tools` maps a tool name to a callable; the engine calls it with the action's args
    (as keyword arguments when they are a dict). A step reports token usage either on
    the Decision (`Decision.act(..., usage=Usage(...))`) or, for agents that call a
    model more than once per step, through `report_usage` any time during the step.
    """

    name: Optional[str] = None
    model: Optional[str] = None

    def __init__(self, tools: Optional[dict[str, Callable[..., Any]]] = None, *, model: Optional[str] = None,
                 name: Optional[str] = None):
        self.tools: dict[str, Callable[..., Any]] = dict(getattr(type(self), "tools", None) or {})
        if tools:
            self.tools.update(tools)
        if model is not None:
            self.model = model
        if name is not None:
            self.name = name
        self._pending_usage: list[Usage] = []

    # -- the contract ---------------------------------------------------------------
    def init_state(self, task: Task, **kw: Any) -> Any:
        return AgentState(task=task)

    def decide(self, state: Any, observation: Any) -> Decision[Any]:
        raise NotImplementedError

    def reduce(self, state: Any, observation: Any, decision: Decision[Any]) -> Any:
        memory = getattr(state, "memory", None)
        if isinstance(memory, list):
            results = observation.get("action_results") if isinstance(observation, dict) else None
            memory.append({"decision": decision.to_record(), "results": results})
        return state

    def should_stop(self, state: Any) -> bool:
        return False

    # -- helpers --------------------------------------------------------------------
    def register_tool(self, name: str, fn: Callable[..., Any]) -> None:
        self.tools[name] = fn

    def report_usage(self, input: int = 0, output: int = 0, cost_usd: float = 0.0) -> None:
        """Add token usage to the step in progress (the engine collects it at the step's end)."""
        self._pending_usage.append(Usage(input=input, output=output, cost_usd=cost_usd))

    def drain_usage(self) -> list[Usage]:
        pending = getattr(self, "_pending_usage", None) or []
        self._pending_usage = []
        return pending

    def run(self, task: Any, *, max_steps: Optional[int] = None, critics: Optional[list[Any]] = None,
            stop_criteria: Optional[list[Any]] = None, return_state: bool = False, **engine_kwargs: Any) -> Any:
        """Run this agent on `task` with a fresh Engine.

        Returns the run's final result, or the whole `RunResult` (with `.state`) when
        `return_state=True`. Extra keyword arguments go to `Engine` (criteria,
        stop_early, trace, trace_path, experiment, variant, ...).
        """
        from .engine import Engine  # the engine imports this module; import late to avoid a cycle

        engine = Engine(agent=self, critics=critics, stop_criteria=stop_criteria, max_steps=max_steps,
                        **engine_kwargs)
        result = engine.run(task)
        return result if return_state else result.final_result
