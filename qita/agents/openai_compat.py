"""An agent backed by any OpenAI-compatible `/chat/completions` endpoint (urllib only).

Optional and never called in tests: the HTTP call goes through `transport`, which
defaults to a urllib POST and can be replaced to run the agent offline. The model's
tool calls become actions; a reply without tool calls becomes the final answer.
"""

from __future__ import annotations

import json
import urllib.request
from typing import Any, Callable, Optional

from ..agent import Agent
from ..core import Action, AgentState, Decision, Task, Usage

Transport = Callable[[str, dict[str, str], dict[str, Any]], dict[str, Any]]


def urllib_transport(timeout: float = 120.0) -> Transport:
    def post(url: str, headers: dict[str, str], body: dict[str, Any]) -> dict[str, Any]:
        req = urllib.request.Request(url, data=json.dumps(body).encode("utf-8"), headers=headers, method="POST")
        with urllib.request.urlopen(req, timeout=timeout) as resp:  # noqa: S310 - the URL is the user's config
            return json.loads(resp.read().decode("utf-8"))
    return post


class OpenAICompatAgent(Agent):
    """Chat-completions agent.

    `tool_schemas` are OpenAI function-tool schemas for the callables in `tools`.
    `price_per_1k` = (input, output) dollars per thousand tokens for `cost_usd`.
    """

    name = "openai-compat"

    def __init__(self, base_url: str, api_key: Optional[str], model: str, *,
                 tools: Optional[dict[str, Callable[..., Any]]] = None,
                 tool_schemas: Optional[list[dict[str, Any]]] = None,
                 system_prompt: str = "You are a careful agent. Use tools when useful; reply with the final answer when done.",
                 temperature: float = 0.0, price_per_1k: tuple[float, float] = (0.0, 0.0),
                 transport: Optional[Transport] = None):
        super().__init__(tools=tools, model=model)
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.api_key = api_key
        self.tool_schemas = list(tool_schemas or [])
        self.system_prompt = system_prompt
        self.temperature = temperature
        self.price_per_1k = price_per_1k
        self.transport = transport or urllib_transport()

    def init_state(self, task: Task, **kw: Any) -> AgentState:
        state = AgentState(task=task, phase="chat")
        state.memory = [{"role": "system", "content": self.system_prompt},
                        {"role": "user", "content": task.objective}]
        return state

    def decide(self, state: AgentState, observation: Any) -> Decision[Any]:
        body: dict[str, Any] = {"model": self.model, "messages": state.memory, "temperature": self.temperature}
        if self.tool_schemas:
            body["tools"] = self.tool_schemas
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        reply = self.transport(self.url, headers, body)
        usage = reply.get("usage") or {}
        tin, tout = int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0)
        cost = tin / 1000 * self.price_per_1k[0] + tout / 1000 * self.price_per_1k[1]
        step_usage = Usage(input=tin, output=tout, cost_usd=round(cost, 8))
        message = (reply.get("choices") or [{}])[0].get("message") or {}
        calls = message.get("tool_calls") or []
        state.memory.append({k: v for k, v in message.items() if k in ("role", "content", "tool_calls")}
                            or {"role": "assistant", "content": ""})
        if not calls:
            return Decision.final(message.get("content") or "", usage=step_usage)
        actions = []
        for call in calls:
            fn = call.get("function") or {}
            try:
                args = json.loads(fn.get("arguments") or "{}")
            except json.JSONDecodeError:
                args = {"_raw": fn.get("arguments")}
            actions.append(Action(name=fn.get("name", ""), args=args))
        return Decision.act(actions, rationale=message.get("content"), payload=[c.get("id") for c in calls],
                            usage=step_usage)

    def reduce(self, state: AgentState, observation: Any, decision: Decision[Any]) -> AgentState:
        results = observation.get("action_results", []) if isinstance(observation, dict) else []
        for call_id, result in zip(decision.payload or [], results):
            state.memory.append({"role": "tool", "tool_call_id": call_id,
                                 "content": json.dumps(result, default=str)[:20000]})
        return state
