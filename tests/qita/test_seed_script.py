"""The seed QitOS documents' examples run on qita.

Two ways: every code example extracted from the seed documents themselves (read from
`../shared/seeds/` at test time) and run with only `qitos` replaced by `qita`; and a
script written from those examples with its imports changed to `from qita import ...`,
so the top-level imports keep working too.
"""

import contextlib
import inspect
import io
import re
from pathlib import Path
from typing import Any, Dict, Optional, Tuple

import pytest
from qita_helpers import ROOT, step

import qita

from qita import (
    Critic,
    Decision,
    Engine,
    FinalResultCriteria,
    MaxRuntimeCriteria,
    MaxStepsCriteria,
    MaxTokensCriteria,
    StagnationCriteria,
    StopCriteria,
    StopReason,
    Task,
    TaskBudget,
)
from qita.agents import ScriptedAgent
from qita.harness import resolve_family_preset


class VerificationCritic(Critic):
    """Stop the run if the verification command returned a non-zero exit code."""

    def evaluate(self, state: Any, decision: Decision[Any], results: list[Any]) -> Dict[str, Any]:
        for result in results:
            if isinstance(result, dict):
                returncode = int(result.get("returncode", 0))
                if returncode != 0:
                    return {"action": "retry", "reason": f"command failed with returncode={returncode}", "score": 0.0}
        return {"action": "continue", "score": 1.0}


class MinEvidenceCriteria(StopCriteria):
    """Stop only after at least N evidence items have been collected."""

    def __init__(self, min_evidence: int = 3):
        self.min_evidence = min_evidence

    def should_stop(self, state: Any, step_count: int, runtime_info: Optional[Dict[str, Any]] = None
                    ) -> Tuple[bool, Optional[StopReason], Optional[str]]:
        evidence = getattr(state, "evidence", [])
        final_result = getattr(state, "final_result", None)
        if final_result and len(evidence) >= self.min_evidence:
            return True, StopReason.FINAL, f"evidence={len(evidence)} >= min={self.min_evidence}"
        return False, None, None


def make_agent():
    def bash(command):
        return {"returncode": 1 if command == "verify --strict" else 0, "stdout": command}

    script = [
        step(("bash", {"command": "verify --strict"}), evidence=["e1"]),  # critic asks for a retry
        step(("bash", {"command": "verify"}), evidence=["e2"]),
        step(final="draft answer"),  # final, but only 2 evidence items: MinEvidence keeps going
        step(("bash", {"command": "collect"}), evidence=["e3"]),
        step(final="answer with evidence"),
    ] + [step(("bash", {"command": "idle"}))] * 5
    return ScriptedAgent(script, tools={"bash": bash})


def test_seed_examples_run_with_qita_imports():
    agent = make_agent()
    result = agent.run(task="...", max_steps=10, critics=[VerificationCritic()],
                       stop_criteria=[MinEvidenceCriteria(min_evidence=3), MaxRuntimeCriteria(max_runtime_seconds=300.0),
                                      StagnationCriteria(max_stagnant_steps=4,
                                                         signature_fn=lambda s: (s.final_result,
                                                                                 getattr(s, "cursor", None)))],
                       return_state=True)
    # step 0 is sent back by the critic, step 1 (the retry) passes, step 2 answers with only
    # 2 evidence items so MinEvidence keeps going, step 3 collects the third while the draft
    # answer is still set -> FINAL after 4 steps, before the second answer is ever given
    assert result.state.stop_reason == "final"
    assert result.state.final_result == "draft answer"
    assert result.steps == 4
    if result.state.stop_reason == "final":
        outcome = "Done: " + result.state.final_result
    elif result.state.stop_reason == "budget_steps":
        outcome = "partial"
    else:
        outcome = "other"
    assert outcome == "Done: draft answer"


def test_seed_task_budget_example():
    task = Task(id="research-001", objective="Summarize the article at the given URL.",
                budget=TaskBudget(max_steps=15, max_runtime_seconds=180.0, max_tokens=8192))
    agent = ScriptedAgent([step(("bash", {"command": "fetch"}), tokens=(3000, 1000))] * 20,
                          tools={"bash": lambda command: {"returncode": 0}})
    result = agent.run(task=task, return_state=True)
    # 4000 tokens a step: 8000 after two steps is not over 8192, 12000 after three is
    assert result.state.stop_reason == "budget_tokens" and result.steps == 3


def test_seed_engine_example_and_builtin_constructors():
    preset = resolve_family_preset("qwen")
    criteria = [FinalResultCriteria(), MaxStepsCriteria(max_steps=15), MaxRuntimeCriteria(max_runtime_seconds=120.0),
                MaxTokensCriteria(max_tokens=preset.recommended_max_tokens or 500_000),
                StagnationCriteria(max_stagnant_steps=3)]
    agent = ScriptedAgent([step(final="ok")])
    engine = Engine(agent=agent, critics=[VerificationCritic()], stop_criteria=criteria)
    result = engine.run("my task")
    assert result.state.stop_reason == StopReason.FINAL and result.final_result == "ok"
    assert agent.run(task="...", max_steps=10, critics=[VerificationCritic()]) == "ok"  # without return_state


# -- every example of the seed documents, with only `qitos` -> `qita` --------------------------------
SEEDS = ROOT.parent / "shared" / "seeds"
SEED_EN = SEEDS / "qitos-critics-and-stop-criteria.en.md"
SEED_ZH = SEEDS / "qitos-critics-and-stop-criteria.zh.md"

#: The QitOS module paths the English document imports from (read off the document by hand).
QITOS_PATHS = {"qitos.engine.critic", "qitos.core.decision", "qitos.engine.engine", "qitos.engine.stop_criteria",
               "qitos.core.errors", "qitos.core.task", "qitos.harness"}


def _seed(path: Path) -> str:
    if not path.exists():
        pytest.skip(f"seed document not found at {path}")
    return path.read_text(encoding="utf-8")


def fenced_blocks(text: str) -> list[str]:
    """The ```python blocks of a Markdown document (the English seed)."""
    return [m.group(1).rstrip() for m in re.finditer(r"```python[^\n]*\n(.*?)```", text, re.S)]


_CODE_START = re.compile(r"^(from |import |class |def |@|[A-Za-z_][A-Za-z_0-9]* = )")
_CJK = re.compile(r"[\u3000-\u9fff\uff00-\uffef]")


def unfenced_blocks(text: str) -> list[str]:
    """Code examples of a page saved as text without fences (the Chinese seed).

    A block starts at a line that opens a Python statement and runs until the next line
    of Chinese prose; the example code itself is all ASCII.
    """
    blocks, current = [], None
    for line in text.splitlines():
        if current is None:
            if _CODE_START.match(line):
                current = [line]
        elif _CJK.search(line):
            blocks.append("\n".join(current).rstrip())
            current = None
        else:
            current.append(line)
    if current:
        blocks.append("\n".join(current).rstrip())
    return blocks


def _compiles(code: str) -> bool:
    try:
        compile(code, "<seed>", "exec")
        return True
    except SyntaxError:
        return False


def runnable_examples(blocks: list[str]) -> list[str]:
    """The blocks to run. A block that is not valid Python on its own must be a cut-off copy of
    a later, complete example (the English seed cuts one StagnationCriteria example short and
    gives it whole further down); it runs as its own imports plus that complete example.
    """
    out = []
    for i, block in enumerate(blocks):
        if _compiles(block):
            out.append(block)
            continue
        imports = [line for line in block.splitlines() if line.startswith(("from ", "import "))]
        body = "\n".join(line for line in block.splitlines() if line not in imports).strip()
        later = [b for b in blocks[i + 1:] if b.strip().startswith(body) and _compiles(b)]
        assert later, f"seed example {i} is not valid Python and no later example completes it:\n{block}"
        out.append("\n".join(imports) + "\n\n" + later[0])
    return out


class MyScoreCritic(qita.Critic):
    """Stands in for the critics the seed's snippets name without defining."""

    def evaluate(self, state, decision, results):
        return {"action": "continue", "reason": "scored", "score": 0.8}


class MyGroundingCritic(MyScoreCritic):
    pass


def _prelude() -> dict[str, Any]:
    """The names the seed's snippets use without defining them: an `agent` and two critics."""
    from qita.agents import ScriptedAgent

    agent = ScriptedAgent([step(("bash", {"command": "pytest"})), step(final="all tests pass")],
                          tools={"bash": lambda command: {"returncode": 0, "stdout": command}})
    return {"agent": agent, "MyScoreCritic": MyScoreCritic, "MyGroundingCritic": MyGroundingCritic}


def run_example(code: str, namespace: Optional[dict[str, Any]] = None) -> tuple[dict[str, Any], str]:
    """Run one example in `namespace` (the page's examples so far), with only `qitos` -> `qita`."""
    ported = code.replace("qitos", "qita")
    assert "qitos" not in ported
    namespace = {"__name__": "seed_example"} if namespace is None else namespace
    namespace.update(_prelude())
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(ported, "<seed example>", "exec"), namespace)
    return namespace, out.getvalue()


def check_example(namespace: dict[str, Any], printed: str) -> None:
    """What each kind of example promises, checked on what it left behind."""
    result = namespace.get("result")
    if isinstance(result, qita.RunResult):
        # "The value is written to state.stop_reason at the end of every run."
        assert isinstance(result.state.stop_reason, qita.StopReason)
        assert result.state.stop_reason == result.stop_reason
    if "elif result.state.stop_reason" in namespace.get("__doc_code__", ""):
        assert printed == "Done: all tests pass\n"
    criterion = namespace.get("criterion")
    if criterion is not None:
        assert isinstance(criterion, qita.StopCriteria)
    for name, contract, method in (("Critic", qita.Critic, "evaluate"), ("StopCriteria", qita.StopCriteria, "should_stop")):
        defined = namespace.get(name)
        if isinstance(defined, type) and defined is not contract:
            # the document restates the contract: ours has the same method and parameters
            assert list(inspect.signature(getattr(defined, method)).parameters) == \
                list(inspect.signature(getattr(contract, method)).parameters)
    verification = namespace.get("VerificationCritic")
    if verification is not None:
        assert issubclass(verification, qita.Critic)
        critic = verification()
        assert critic.evaluate(None, qita.Decision.wait(), [{"returncode": 2}])["action"] == "retry"
        assert critic.evaluate(None, qita.Decision.wait(), [{"returncode": 0}])["action"] == "continue"
    min_evidence = namespace.get("MinEvidenceCriteria")
    if min_evidence is not None:
        assert issubclass(min_evidence, qita.StopCriteria)
        state = qita.AgentState(final_result="answer")
        state.evidence = ["a", "b"]
        assert min_evidence(min_evidence=3).should_stop(state, 1, {}) == (False, None, None)
        state.evidence.append("c")
        assert min_evidence(min_evidence=3).should_stop(state, 1, {})[:2] == (True, qita.StopReason.FINAL)


def _run_all(blocks: list[str]) -> int:
    # One namespace for the whole page, as a reader follows it: a snippet may use a name an
    # earlier example imported (the preset example uses MaxTokensCriteria from the one before).
    ran = 0
    namespace: dict[str, Any] = {"__name__": "seed_example"}
    for code in runnable_examples(blocks):
        namespace, printed = run_example(code, namespace)
        namespace["__doc_code__"] = code
        check_example(namespace, printed)
        ran += 1
    return ran


def test_every_english_seed_example_runs_with_qitos_replaced_by_qita():
    text = _seed(SEED_EN)
    blocks = fenced_blocks(text)
    # every import line of the page is inside an extracted example, so none was missed
    assert sum(b.count("from qitos") for b in blocks) == text.count("from qitos")
    assert {m.group(1) for m in re.finditer(r"from (qitos[\w.]*) import", text)} == QITOS_PATHS
    assert _run_all(blocks) == len(blocks) == 16


def test_every_chinese_seed_example_runs_with_qitos_replaced_by_qita():
    text = _seed(SEED_ZH)
    blocks = unfenced_blocks(text)
    assert sum(b.count("from qitos") for b in blocks) == text.count("from qitos")
    assert all(_compiles(b) for b in blocks)
    assert _run_all(blocks) == len(blocks) == 12


def test_the_extractor_runs_what_it_extracts():
    # a made-up page: prose, a block, prose again; and a cut-off block completed later
    page = "说明\nfrom qitos.core.errors import StopReason\nx = StopReason.FINAL\n下一段\n"
    assert unfenced_blocks(page) == ["from qitos.core.errors import StopReason\nx = StopReason.FINAL"]
    namespace, _ = run_example(unfenced_blocks(page)[0])
    assert namespace["x"] is qita.StopReason.FINAL
    cut = ["from qitos.harness import resolve_family_preset\n\np = resolve_family_preset(", "p = resolve_family_preset(\n  'qwen')"]
    assert runnable_examples(cut)[0].startswith("from qitos.harness import resolve_family_preset")
    with pytest.raises(AssertionError, match="no later example completes it"):
        runnable_examples(["x = (", "y = 1"])
