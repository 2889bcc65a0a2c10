"""The shipped agents: usage reporting, the OpenAI-compatible adapter (offline), Decision shapes."""

import json

from qita import Action, Agent, AgentState, Decision, Engine, StopReason, Usage
from qita.agents import OpenAICompatAgent


def test_report_usage_and_decision_usage_are_summed_per_step():
    class TwoCalls(Agent):
        def decide(self, state, observation):
            self.report_usage(100, 10, cost_usd=0.001)  # e.g. a planning call
            self.report_usage(50, 5, cost_usd=0.0005)
            return Decision.final("ok", usage=Usage(input=7, output=3, cost_usd=0.0001))

    result = Engine(TwoCalls()).run("t")
    assert result.tokens == {"input": 157, "output": 18, "total": 175}
    assert abs(result.cost_usd - 0.0016) < 1e-12


def test_a_step_that_raises_after_deciding_still_counts_the_decision_tokens():
    # the model call happened and was paid for, even though reduce() then failed
    class BadReduce(Agent):
        def decide(self, state, observation):
            self.report_usage(20, 2)
            return Decision.act([], usage=Usage(input=300, output=40, cost_usd=0.01))

        def reduce(self, state, observation, decision):
            raise ValueError("reduce bug")

    result = Engine(BadReduce()).run("t")
    assert result.stop_reason == StopReason.UNRECOVERABLE_ERROR and result.steps == 1
    assert result.tokens == {"input": 320, "output": 42, "total": 362} and result.cost_usd == 0.01
    assert result.failure_report["errors"][0]["phase"] == "REDUCE"


def test_openai_compat_agent_with_a_fake_transport():
    replies = [
        {"choices": [{"message": {"role": "assistant", "content": "checking",
                                  "tool_calls": [{"id": "c1", "type": "function",
                                                  "function": {"name": "add", "arguments": json.dumps({"a": 2, "b": 3})}}]}}],
         "usage": {"prompt_tokens": 1000, "completion_tokens": 100}},
        {"choices": [{"message": {"role": "assistant", "content": "The sum is 5."}}],
         "usage": {"prompt_tokens": 1200, "completion_tokens": 20}},
    ]
    sent = []

    def transport(url, headers, body):
        sent.append((url, headers, json.loads(json.dumps(body))))
        return replies[len(sent) - 1]

    agent = OpenAICompatAgent("http://localhost:9/v1/", "sk-test", "tiny", tools={"add": lambda a, b: a + b},
                              price_per_1k=(0.001, 0.002), transport=transport)
    result = agent.run(task="add 2 and 3", return_state=True)
    assert result.stop_reason == StopReason.FINAL and result.final_result == "The sum is 5."
    assert sent[0][0] == "http://localhost:9/v1/chat/completions"
    assert sent[0][1]["Authorization"] == "Bearer sk-test"
    assert sent[1][2]["messages"][-1] == {"role": "tool", "tool_call_id": "c1", "content": "5"}
    assert result.tokens == {"input": 2200, "output": 120, "total": 2320}
    # 2.2k input at $0.001/1k + 0.12k output at $0.002/1k
    assert abs(result.cost_usd - 0.00244) < 1e-9


def test_duck_typed_agent_without_the_base_class():
    class Plain:
        tools = {"echo": lambda text: text}

        def init_state(self, task, **kw):
            return AgentState(task=task, phase=kw.get("phase"))

        def decide(self, state, observation):
            if state.step == 0:
                return Decision.act([Action("echo", {"text": "hi"})], rationale="say hi")
            return Decision.final(observation["last_results"][0])

        def reduce(self, state, observation, decision):
            return state

    result = Engine(Plain()).run("greet", phase="p0")
    assert result.final_result == "hi" and result.steps == 2 and result.state.phase == "p0"
