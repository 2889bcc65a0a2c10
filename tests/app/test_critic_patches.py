"""A critic's patches, written by the run side, in the board: the steps API, the Critic section, both exports."""

from __future__ import annotations

from pathlib import Path

import orjson

from qita import Critic, Engine, TraceWriter
from qita.agents import ScriptedAgent
from tests.app.parsed_html import texts_of_class

PATCH = [{"file": "calc.py", "diff": "-    return a - b\n+    return a + b"}, "<b>not html</b>"]


class PatchingCritic(Critic):
    """Sends step 0 back with a proposed fix; passes the rest."""

    name = "fixer"

    def evaluate(self, state, decision, results):
        if state.step == 0:
            return {"action": "retry", "reason": "subtraction", "score": 0.0, "patches": PATCH}
        return {"action": "continue", "reason": "ok", "score": 1.0}


def write_run(path: Path) -> Path:
    script = [{"actions": [{"name": "bash", "args": {"command": "pytest"}}]},
              {"actions": [{"name": "bash", "args": {"command": "pytest"}}]}, {"final": "fixed"}]
    agent = ScriptedAgent(script, tools={"bash": lambda command: {"returncode": 0}})
    with TraceWriter(path, "patched") as writer:
        Engine(agent, [PatchingCritic()], trace=writer).run("fix add")
    return path


def test_patches_survive_ingest_and_show_in_the_critic_section(tmp_path, ingest, client):
    assert ingest(write_run(tmp_path / "p.jsonl")).ok
    steps = client.get("/api/runs/patched/steps").json()["data"]
    assert [s["critic_outputs"][0]["patches"] for s in steps] == [PATCH, None, None]

    page = client.get("/runs/patched").text
    shown = texts_of_class(page, "critic-patches")
    assert len(shown) == 1  # only the output that proposed patches gets a patches row
    assert "patches" in shown[0] and "return a + b" in shown[0] and "<b>not html</b>" in shown[0]
    assert "<b>not html</b>" not in page  # trace text is escaped, never markup


def test_patches_are_kept_in_both_exports(tmp_path, ingest, client):
    assert ingest(write_run(tmp_path / "p.jsonl")).ok
    lines = [orjson.loads(x) for x in client.get("/runs/patched/export.jsonl").content.splitlines()]
    written = [r for r in (orjson.loads(x) for x in (tmp_path / "p.jsonl").read_bytes().splitlines()) if r["type"] == "step"]
    exported = [r for r in lines if r["type"] == "step"]
    assert [s["critic_outputs"] for s in exported] == [s["critic_outputs"] for s in written]
    assert exported[0]["critic_outputs"][0]["patches"] == PATCH

    html = client.get("/runs/patched/export.html").text
    shown = texts_of_class(html, "critic-patches")
    assert len(shown) == 1 and "return a + b" in shown[0]
