"""What the run side adds to a step, in real Chromium: critic patches in the Critic section, live verdicts per step."""

from __future__ import annotations

from pathlib import Path

from qita import CommandExecuted, Critic, Engine, SkillTriggered, TraceWriter
from qita.agents import ScriptedAgent


class Fixer(Critic):
    name = "fixer"

    def evaluate(self, state, decision, results):
        if state.step == 0:
            return {"action": "retry", "reason": "wrong operator", "score": 0.0,
                    "patches": {"file": "calc.py", "diff": "-return a - b\n+return a + b"}}
        return {"action": "continue", "reason": "fine", "score": 1.0}


def write_run(path: Path) -> Path:
    script = [{"actions": [{"name": "bash", "args": {"command": "pytest"}}]},
              {"actions": [{"name": "bash", "args": {"command": "pytest"}}]},
              {"actions": [{"name": "bash", "args": {"command": "git push"}}]}, {"final": "done"}]
    criteria = [CommandExecuted("tests", "pytest"), CommandExecuted("no_push", "git push", max_count=0),
                SkillTriggered("pdf", "pdf")]
    with TraceWriter(path, "run-side") as writer:
        Engine(ScriptedAgent(script, tools={"bash": lambda command: {"returncode": 0}}), [Fixer()],
               criteria=criteria, trace=writer).run("fix it")
    return path


def test_patches_and_live_verdicts_show_in_their_steps(live_server, page, ingest, tmp_path):
    assert ingest(write_run(tmp_path / "r.jsonl")).ok
    page.goto(live_server.url + "/runs/run-side")
    step0, step2 = page.locator("#step-0"), page.locator("#step-2")
    patches = step0.locator("section.critic tr.critic-patches")
    assert patches.count() == 1 and patches.is_visible()
    assert "+return a + b" in patches.inner_text()
    assert page.locator("#step-1 tr.critic-patches").count() == 0  # the passing output proposed none

    def badges(step):
        return [b.strip() for b in step.locator(".live-verdicts .badge").all_text_contents()]

    # steps after the first are folded to one line: open step 2 as a reader would
    if not step2.locator(".live-verdicts").is_visible():
        step2.locator("summary.step-head").click()

    assert badges(step0) == ["tests: pass", "no_push: undecided", "pdf: undecided"]
    assert badges(step2) == ["tests: pass", "no_push: fail", "pdf: undecided"]
    assert step2.locator(".live-verdicts .badge.verdict-fail").inner_text().strip() == "no_push: fail"
    assert step2.locator(".live-verdicts").is_visible()
    assert page.errors == []
