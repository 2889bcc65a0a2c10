"""A deterministic agent that plays back a script, and simulated tools for it.

The script is a list of step entries (plain dicts, so task files can be data):

    {"rationale": "...", "actions": [{"name": "bash", "args": {"command": "pytest"}}],
     "final": None, "tokens": [input, output], "cost_usd": 0.001,
     "set": {"phase": "testing"}, "evidence": ["..."]}

Each executed step consumes one entry, retried steps included, so a script spells out
every attempt. When the script runs out the agent keeps producing `exhausted` (by
default a no-op "wait" step), which is how a script models an agent that stalls.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any, Optional

from ..agent import Agent
from ..core import Action, AgentState, Decision, Task, Usage


@dataclass
class ScriptedState(AgentState):
    """State of a scripted agent: a cursor into the script and the evidence collected."""

    cursor: int = 0
    evidence: list[Any] = field(default_factory=list)
    notes: dict[str, Any] = field(default_factory=dict)


def _action(spec: Any) -> Action:
    if isinstance(spec, Action):
        return spec
    if isinstance(spec, dict):
        return Action(name=spec["name"], args=copy.deepcopy(spec.get("args", {})))
    name, args = spec
    return Action(name=name, args=copy.deepcopy(args))


class ScriptedAgent(Agent):
    """Replay `script`, one entry per step. No network, no randomness.

    `price_per_1k` = (input, output) dollars per thousand tokens turns a step's tokens
    into `cost_usd` when the entry does not give one.
    """

    name = "scripted"

    def __init__(self, script: list[dict[str, Any]], *, tools: Optional[dict[str, Any]] = None,
                 model: str = "scripted-1", name: Optional[str] = None,
                 exhausted: Optional[dict[str, Any]] = None, price_per_1k: tuple[float, float] = (0.0, 0.0)):
        super().__init__(tools=tools, model=model, name=name)
        self.script = list(script)
        self.exhausted = exhausted or {"rationale": "nothing left to do; waiting", "actions": []}
        self.price_per_1k = price_per_1k

    def init_state(self, task: Task, **kw: Any) -> ScriptedState:
        return ScriptedState(task=task, phase=kw.get("phase", "start"))

    def _entry(self, state: ScriptedState) -> dict[str, Any]:
        return self.script[state.cursor] if state.cursor < len(self.script) else self.exhausted

    def decide(self, state: ScriptedState, observation: Any) -> Decision[Any]:
        entry = self._entry(state)
        if "raise" in entry:
            raise RuntimeError(entry["raise"])
        tokens = entry.get("tokens") or (0, 0)
        cost = entry.get("cost_usd")
        if cost is None:
            cost = round(tokens[0] / 1000 * self.price_per_1k[0] + tokens[1] / 1000 * self.price_per_1k[1], 6)
        usage = Usage(input=int(tokens[0]), output=int(tokens[1]), cost_usd=float(cost))
        if entry.get("final") is not None:
            return Decision.final(entry["final"], rationale=entry.get("rationale"), usage=usage)
        actions = [_action(a) for a in entry.get("actions", [])]
        if not actions:
            return Decision.wait(rationale=entry.get("rationale"), usage=usage)
        return Decision.act(actions, rationale=entry.get("rationale"), usage=usage)

    def reduce(self, state: ScriptedState, observation: Any, decision: Decision[Any]) -> ScriptedState:
        entry = self._entry(state)
        for key, value in (entry.get("set") or {}).items():
            setattr(state, key, copy.deepcopy(value))
        state.evidence.extend(entry.get("evidence") or [])
        if entry.get("stop_reason"):
            state.stop_reason = entry["stop_reason"]
        results = observation.get("action_results") if isinstance(observation, dict) else None
        state.memory.append({"step": state.step, "mode": decision.mode, "results": results})
        if state.cursor < len(self.script):
            state.cursor += 1
        return state

    def should_stop(self, state: ScriptedState) -> bool:
        return bool(state.notes.get("give_up"))


class SimulatedTools:
    """Deterministic stand-ins for a coding agent's tools, driven by fixtures.

    `commands` maps a command prefix to a result dict, or to a list of result dicts
    played in order (the last one repeats), so "tests fail, then pass" can be scripted.
    Create one per run: it counts calls.
    """

    def __init__(self, *, commands: Optional[dict[str, Any]] = None, files: Optional[dict[str, str]] = None,
                 skills: Optional[dict[str, str]] = None, search: Optional[dict[str, list[str]]] = None):
        self.commands = copy.deepcopy(commands or {})
        self.files = dict(files or {})
        self.skills = dict(skills or {})
        self.search_index = dict(search or {})
        self._seen: dict[str, int] = {}

    def bash(self, command: str) -> dict[str, Any]:
        for prefix in sorted(self.commands, key=len, reverse=True):
            if command.startswith(prefix):
                outcome = self.commands[prefix]
                if isinstance(outcome, list):
                    n = self._seen.get(prefix, 0)
                    self._seen[prefix] = n + 1
                    outcome = outcome[min(n, len(outcome) - 1)]
                return {"command": command, "returncode": 0, "stdout": "", "stderr": "", **outcome}
        return {"command": command, "returncode": 0, "stdout": "", "stderr": ""}

    def read_file(self, path: str) -> dict[str, Any]:
        if path in self.files:
            return {"path": path, "content": self.files[path]}
        raise FileNotFoundError(path)

    def write_file(self, path: str, content: str) -> dict[str, Any]:
        self.files[path] = content
        return {"path": path, "bytes": len(content.encode("utf-8"))}

    def skill(self, name: str) -> dict[str, Any]:
        return {"skill": name, "loaded": True,
                "instructions": self.skills.get(name, f"Instructions for the {name} skill.")}

    def search(self, query: str) -> dict[str, Any]:
        return {"query": query, "hits": list(self.search_index.get(query, []))}

    def as_tools(self) -> dict[str, Any]:
        return {"bash": self.bash, "read_file": self.read_file, "write_file": self.write_file,
                "skill": self.skill, "search": self.search}
