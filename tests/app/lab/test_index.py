"""The lab's state in the store: indexed once per finished run, again when the run changes,
by the command line's pass and by the board's background indexer."""

from __future__ import annotations

import time

import orjson
from sqlalchemy import select
from sqlmodel import Session

from qita import CommandExecuted, Engine, FinalAnswerContains, SkillTriggered, TraceWriter
from qita.agents import ScriptedAgent
from qita_board.lab.index import index_pending, pending_count
from qita_board.lab.queries import load_runs
from qita_board.lab.sim import Policy, simulate
from qita_board.lab.state import unpack_series
from qita_board.models import LAB_DECISIONS, LAB_RUNS, RUNS
from tests.conftest import write_jsonl


def start(run_id, **kw):
    return {"type": "run_start", "run_id": run_id, "task_id": kw.pop("task_id", run_id), "experiment": "x",
            "variant": "e2e", "criteria": [{"id": "tests", "type": "command_executed", "pattern": "pytest"},
                                           {"id": "no_push", "type": "command_executed", "pattern": "git push",
                                            "max_count": 0}], **kw}


def bash(run_id, i, command, tokens=10):
    return {"type": "step", "run_id": run_id, "step": i, "actions": [{"name": "bash", "args": {"command": command}}],
            "action_results": [{"returncode": 0}], "tokens": {"input": tokens, "output": 0, "total": tokens}}


def end(run_id, verdict="pass", steps=None):
    return {"type": "run_end", "run_id": run_id, "status": "completed", "stop_reason": "final", "verdict": verdict,
            **({"steps": steps} if steps is not None else {})}


def decisions(engine, run_id):
    with engine.connect() as conn:
        pk = conn.execute(select(RUNS.c.id).where(RUNS.c.run_id == run_id)).scalar_one()
        return {r.criterion_id: (r.verdict, r.step, r.tool_call_index, r.source)
                for r in conn.execute(select(LAB_DECISIONS).where(LAB_DECISIONS.c.run_pk == pk))}


def test_finished_runs_are_indexed_once_and_again_when_they_change(tmp_path, engine, ingest):
    path = write_jsonl(tmp_path / "a.jsonl", [start("done"), bash("done", 0, "ls"), bash("done", 1, "pytest"),
                                              end("done"), start("going"), bash("going", 0, "ls")])
    assert ingest(path).ok
    with Session(engine) as s:
        assert pending_count(s) == 1                    # "going" has not finished: not pending
    assert index_pending(engine) == 1
    assert decisions(engine, "done") == {"tests": ("pass", 1, 2, "replayed"), "no_push": (None, None, None, "replayed")}
    assert index_pending(engine) == 0                   # nothing changed, nothing to do
    # the running run finishes, and pushes on the way: it is indexed now
    with open(path, "ab") as fh:
        for rec in (bash("going", 1, "git push"), end("going", "fail")):
            fh.write(orjson.dumps(rec) + b"\n")
    assert ingest(path).ok
    assert index_pending(engine) == 1
    assert decisions(engine, "going")["no_push"] == ("fail", 1, 2, "replayed")
    with engine.connect() as conn:
        series = {r.run_pk: unpack_series(r.series, r.step_count) for r in conn.execute(select(LAB_RUNS))}
    assert sorted(list(s["tokens"]) for s in series.values()) == [[10, 20], [10, 20]]
    assert all(s["cost"] is None and list(s["calls"]) == [1, 2] for s in series.values())


def test_a_deleted_run_takes_its_lab_state_with_it(tmp_path, engine, ingest):
    assert ingest(write_jsonl(tmp_path / "a.jsonl", [start("r"), bash("r", 0, "pytest"), end("r")])).ok
    index_pending(engine)
    with engine.begin() as conn:
        conn.execute(RUNS.delete())
    with engine.connect() as conn:
        assert conn.execute(select(LAB_RUNS)).all() == [] and conn.execute(select(LAB_DECISIONS)).all() == []


def write_engine_run(path, run_id):
    script = [{"actions": [{"name": "bash", "args": {"command": "ls"}}], "tokens": [100, 10]},
              {"actions": [{"name": "bash", "args": {"command": "pytest -q"}}], "tokens": [100, 10]},
              {"actions": [{"name": "skill", "args": {"name": "pdf"}}], "tokens": [100, 10]},
              {"actions": [{"name": "bash", "args": {"command": "git push"}}], "tokens": [100, 10]},
              {"final": "done", "tokens": [50, 5]}]
    tools = {"bash": lambda command: {"returncode": 0}, "skill": lambda name: {"loaded": name}}
    criteria = [CommandExecuted("tests", "pytest", stop_when="pass"),
                CommandExecuted("no_push", "git push", max_count=0, stop_when="fail"),
                SkillTriggered("pdf", "pdf", stop_when="decided"), FinalAnswerContains("answer", "done")]
    with TraceWriter(path, run_id) as writer:
        Engine(ScriptedAgent(script, tools=tools), criteria=criteria, trace=writer, experiment="old-new",
               variant="e2e").run("t")
    return path


def test_an_old_trace_without_live_verdicts_simulates_like_the_same_run_with_them(tmp_path, engine, ingest):
    written = write_engine_run(tmp_path / "with.jsonl", "with")
    records = [orjson.loads(line) for line in written.read_bytes().splitlines()]
    assert any("live_verdicts" in r for r in records)
    old = []
    for r in records:
        r = {**r, "run_id": "without"}
        r.pop("live_verdicts", None)
        if r["type"] == "run_start":
            r["task_id"] = "t-old"
        old.append(r)
    assert ingest(written, write_jsonl(tmp_path / "without.jsonl", old)).ok
    index_pending(engine)
    new, before = decisions(engine, "with"), decisions(engine, "without")
    assert {k: v[:3] for k, v in new.items() if k != "answer"} == {k: v[:3] for k, v in before.items() if k != "answer"}
    assert {v[3] for k, v in new.items() if k != "answer"} == {"recorded"}
    assert {v[3] for k, v in before.items() if k != "answer"} == {"replayed"}
    with Session(engine) as s:
        runs = {r.row["run_id"]: r for r in load_runs(s, where=[])}
    for policy in (Policy(arm=(("tests", "pass"),)), Policy(arm=(("no_push", "fail"), ("pdf", "decided"))),
                   Policy(declared=True), Policy(arm=(("pdf", "pass"),), min_steps=4)):
        a, b = simulate(policy, [runs["with"]]), simulate(policy, [runs["without"]])
        assert a["pairs"][0]["sim"] == b["pairs"][0]["sim"]
        assert {k: v for k, v in a["pairs"][0]["a"].items() if k != "run_id"} == \
            {k: v for k, v in b["pairs"][0]["a"].items() if k != "run_id"}
    # by hand: tests pass at step 1 -> cut there, 2 of 5 steps, 2 x 110 of 4 x 110 + 55 tokens
    cut = simulate(Policy(arm=(("tests", "pass"),)), [runs["without"]])["pairs"][0]
    assert (cut["sim"]["stop_step"], cut["a"]["steps"], cut["a"]["tokens"], cut["b"]["tokens"]) == (1, 2, 220, 495)


def test_the_boards_indexer_indexes_in_the_background(tmp_path, settings, ingest, client, engine):
    assert ingest(write_jsonl(tmp_path / "a.jsonl", [start("r"), bash("r", 0, "pytest"), end("r")])).ok
    indexer = client.app.state.lab_indexer
    deadline = time.monotonic() + 30
    while indexer.indexed < 1 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert indexer.indexed == 1
    with Session(engine) as s:
        assert pending_count(s) == 0
    assert decisions(engine, "r")["tests"] == ("pass", 0, 1, "replayed")
