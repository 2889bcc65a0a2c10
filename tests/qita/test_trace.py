"""The trace the engine writes: record order, v1 validity, live flushing, crashes, no-trace runs."""

import subprocess
import sys
import textwrap

import orjson
import pytest
from qita_helpers import ROOT, echo_tools, of_type, read_records, step

from qita import Engine, ReturnCodeCritic, SkillTriggered, StopReason, TraceWriter
from qita.agents import ScriptedAgent
from qita.demo import run_demo
from qita.format import RECORD_MODELS

NOTE = ("note", {"text": "x"})
SCRIPT = [step(NOTE), step(("bash", {"command": "pytest", "returncode": 1})), step(("bash", {"command": "pytest"})),
          step(final="done", tokens=(30, 12))]


def test_record_order_and_phase_events(trace_file):
    agent = ScriptedAgent(SCRIPT, tools=echo_tools(), model="m-1")
    with TraceWriter(trace_file, "run-1") as w:
        Engine(agent, [ReturnCodeCritic()], criteria=[SkillTriggered("sk", "pdf")], trace=w,
               experiment="exp", variant="e2e", replicate=1, tags=["a"]).run("t")
    records = read_records(trace_file)
    kinds = [r["type"] for r in records]
    assert kinds[0] == "run_start" and kinds[-1] == "run_end"
    assert kinds.index("criterion") > max(i for i, k in enumerate(kinds) if k == "step")
    start = records[0]
    assert (start["experiment"], start["variant"], start["replicate"], start["tags"], start["model"]) == \
        ("exp", "e2e", 1, ["a"], "m-1")
    phases = [(e["step"], e["phase"]) for e in of_type(records, "event")]
    assert phases[0] == (None, "INIT") and phases[-1][1] == "END"
    for s in range(4):
        assert [p for st, p in phases if st == s and p != "END"] == \
            ["OBSERVE", "DECIDE", "ACT", "REDUCE", "CRITIC", "CHECK_STOP"]
    steps = of_type(records, "step")
    assert [s["retry"] for s in steps] == [False, False, True, False]
    assert steps[1]["critic_outputs"][0]["critic"] == "ReturnCodeCritic"
    assert steps[1]["tool_invocations"][0]["tool_name"] == "bash"
    assert steps[1]["action_results"][0]["returncode"] == 1
    assert steps[3]["decision"]["final_answer"] == "done"
    assert steps[3]["state_diff"]["final_result"] == {"before": None, "after": "done"}
    assert steps[3]["tokens"] == {"input": 30, "output": 12, "total": 42}
    end = records[-1]
    # 3 steps of 10+5 and one of 30+12
    assert end["tokens"] == {"input": 60, "output": 27, "total": 87}
    assert end["status"] == "completed" and end["steps"] == 4 and end["final_result"] == "done"


def _validate_all(records):
    for r in records:
        RECORD_MODELS[r["type"]].model_validate(r)


def test_every_record_of_the_demo_validates_against_the_format(tmp_path):
    paths = run_demo(tmp_path, tasks=8, seed=3)
    total = 0
    for path in paths:
        records = read_records(path)
        _validate_all(records)
        total += len(records)
        assert records[0]["type"] == "run_start" and records[-1]["type"] == "run_end"
    assert total > 100


def test_records_of_error_runs_validate_too(trace_file):
    agent = ScriptedAgent([step(NOTE), {"raise": "boom"}], tools={"note": lambda text: object()})
    with TraceWriter(trace_file, "r") as w:
        Engine(agent, trace=w).run("t")
    _validate_all(read_records(trace_file))


def test_lines_are_flushed_as_they_are_written(trace_file):
    seen = []

    class Peek(ScriptedAgent):
        def decide(self, state, observation):
            seen.append([orjson.loads(line)["type"] for line in trace_file.read_bytes().splitlines()])
            return super().decide(state, observation)

    with TraceWriter(trace_file, "r") as w:
        Engine(Peek([step(NOTE), step(final="d")], tools=echo_tools()), trace=w).run("t")
    assert seen[0][0] == "run_start" and "step" not in seen[0]
    assert seen[1].count("step") == 1  # the first step is on disk before the second is decided


def test_engine_runs_without_any_trace():
    result = Engine(ScriptedAgent(SCRIPT, tools=echo_tools()), [ReturnCodeCritic()]).run("t")
    assert result.stop_reason == StopReason.FINAL and result.trace_path is None


def test_trace_path_makes_the_engine_own_a_writer(tmp_path):
    path = tmp_path / "sub" / "t.jsonl"
    result = Engine(ScriptedAgent(SCRIPT, tools=echo_tools()), trace_path=path, run_id="rid").run("t")
    records = read_records(path)
    assert result.trace_path == path and {r["run_id"] for r in records} == {"rid"}
    assert records[-1]["type"] == "run_end"


def test_hard_crash_leaves_a_readable_trace_without_run_end(tmp_path):
    path = tmp_path / "crash.jsonl"
    script = textwrap.dedent(f"""
        import os, sys
        sys.path.insert(0, {str(ROOT)!r})
        from qita import Engine, TraceWriter
        from qita.agents import ScriptedAgent
        def die(**kw):
            os._exit(3)  # a kill: no finally, no atexit
        script = [{{"actions": [{{"name": "ok", "args": {{}}}}]}}, {{"actions": [{{"name": "die", "args": {{}}}}]}}]
        agent = ScriptedAgent(script, tools={{"ok": lambda: "fine", "die": die}})
        Engine(agent, trace=TraceWriter({str(path)!r}, "crashed")).run("t")
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=60)
    assert proc.returncode == 3
    records = read_records(path)  # every line is whole JSON
    _validate_all(records)
    kinds = [r["type"] for r in records]
    assert kinds[0] == "run_start" and "run_end" not in kinds
    assert kinds.count("step") == 1  # the first step made it; the second died mid-ACT


def test_interrupt_is_finalized_in_finally(trace_file):
    def interrupt():
        raise KeyboardInterrupt()

    agent = ScriptedAgent([step(("stop", {}))], tools={"stop": interrupt})
    with pytest.raises(KeyboardInterrupt):
        Engine(agent, trace=TraceWriter(trace_file, "r")).run("t")
    end = read_records(trace_file)[-1]
    assert end["type"] == "run_end" and end["status"] == "error" and end["stop_reason"] == "unrecoverable_error"
    assert "KeyboardInterrupt" in end["stop_detail"]


def test_state_snapshots_survive_any_field():
    # a snapshot is one round trip for the whole state; a field the encoder refuses
    # (an integer over 64 bits) costs only that field, which becomes its repr
    from qita.engine.snapshot import diff, snapshot

    class State:
        def __init__(self):
            self.final_result = None
            self.phase = {"name": "plan", "tags": {"a"}}
            self.huge = 2 ** 70
            self._private = "hidden"

    taken = snapshot(State())
    assert taken == {"final_result": None, "phase": {"name": "plan", "tags": ["a"]}, "huge": repr(2 ** 70)}
    assert snapshot({1: "int key", "x": (1, 2)}) == {1: "int key", "x": [1, 2]}  # keys kept as they are
    assert snapshot(42) == {"value": 42}
    assert diff(taken, dict(taken, phase="act")) == {"phase": {"before": {"name": "plan", "tags": ["a"]},
                                                                "after": "act"}}


def test_a_tool_output_holding_surrogate_escaped_bytes_is_written_not_a_crash(tmp_path):
    # A tool's raw bytes decoded with surrogateescape hold lone surrogates, which orjson
    # refuses: the engine's trace writing raised TypeError and the run stopped there.
    raw = b"bad \xff byte".decode("utf-8", "surrogateescape")

    def cat(path=""):
        return {"stdout": raw, "returncode": 0}

    path = tmp_path / "t.jsonl"
    result = Engine(ScriptedAgent([step(("cat", {"path": "x\udc80"})), step(final="done")], tools={"cat": cat}),
                    trace_path=path, run_id="s").run("t")
    assert result.stop_reason == StopReason.FINAL
    records = read_records(path)
    first = of_type(records, "step")[0]
    assert first["action_results"][0]["stdout"] == "bad \ufffd byte"
    assert first["actions"][0]["args"] == {"path": "x\ufffd"}
    assert records[-1]["type"] == "run_end"
