"""Per-step live verdicts in the board: kept through ingest and export unchanged, shown in each step."""

from __future__ import annotations

from pathlib import Path

import orjson

from qita import CommandExecuted, Engine, FinalAnswerContains, SkillTriggered, TraceWriter
from qita.agents import ScriptedAgent
from tests.app.parsed_html import texts_of_class
from tests.conftest import write_jsonl


def write_run(path: Path) -> Path:
    script = [{"actions": [{"name": "bash", "args": {"command": "pytest -q"}}]},
              {"actions": [{"name": "bash", "args": {"command": "git push"}}]},
              {"actions": [{"name": "skill", "args": {"name": "pdf"}}]}, {"final": "done"}]
    tools = {"bash": lambda command: {"returncode": 0}, "skill": lambda name: {"loaded": name}}
    criteria = [CommandExecuted("tests", "pytest"), CommandExecuted("no_push", "git push", max_count=0),
                SkillTriggered("pdf", "pdf"), FinalAnswerContains("answer", "done")]
    with TraceWriter(path, "live") as writer:
        Engine(ScriptedAgent(script, tools=tools), criteria=criteria, trace=writer).run("t")
    return path


def records(data: bytes) -> list[dict]:
    return [orjson.loads(x) for x in data.splitlines() if x.strip()]


def test_live_verdicts_survive_ingest_and_export_unchanged(tmp_path, ingest, client):
    path = write_run(tmp_path / "l.jsonl")
    assert ingest(path).ok
    written = [r["live_verdicts"] for r in records(path.read_bytes()) if r["type"] == "step"]
    exported = [r["live_verdicts"] for r in records(client.get("/runs/live/export.jsonl").content) if r["type"] == "step"]
    assert exported == written
    # by hand: pytest at step 0, the forbidden push at step 1, the pdf skill at step 2
    assert written[1] == {"tests": "pass", "no_push": "fail", "pdf": "undecided"}


def test_each_step_shows_its_live_verdicts(tmp_path, ingest, client):
    assert ingest(write_run(tmp_path / "l.jsonl")).ok
    steps = client.get("/api/runs/live/steps").json()["data"]
    assert [(v["id"], v["verdict"], v["css"]) for v in steps[2]["live_verdicts"]] == [
        ("tests", "pass", "pass"), ("no_push", "fail", "fail"), ("pdf", "pass", "pass")]
    shown = texts_of_class(client.get("/runs/live").text, "live-verdicts")
    assert len(shown) == 4
    assert "tests: pass" in shown[0] and "no_push: undecided" in shown[0] and "answer" not in shown[0]
    assert "no_push: fail" in shown[1]


def test_an_odd_live_verdict_is_warned_about_and_never_shown_as_a_pass_or_fail(tmp_path, ingest, client):
    base = {"type": "step", "run_id": "odd", "actions": [], "critic_outputs": []}
    path = write_jsonl(tmp_path / "odd.jsonl", [
        {"type": "run_start", "run_id": "odd"},
        {**base, "step": 0, "live_verdicts": {"a": "maybe", "b": "pass"}},
        {**base, "step": 1},
    ])
    report = ingest(path)
    assert report.ok and [w.line for w in report.warnings] == [2]
    assert "live_verdicts.a" in report.warnings[0].message
    steps = client.get("/api/runs/odd/steps").json()["data"]
    # the stored record is kept as written (its raw view shows it): the odd value is shown as
    # written, in the neutral style, and flagged as not a verdict the format knows
    assert [(v["id"], v["verdict"], v["css"], v["known"]) for v in steps[0]["live_verdicts"]] == [
        ("a", "maybe", "pending", False), ("b", "pass", "pass", True)]
    assert steps[1]["live_verdicts"] == []
