"""The seed QitOS documents' examples run on qita, with only `qitos` replaced by `qita`.

Every code example is extracted from the seed documents themselves (read from
`../shared/seeds/` at test time; the tests skip when that folder is absent), so no seed
text lives in this repository. Each page runs top to bottom in one namespace; the
critic, the stop criterion and the task it defines then drive real runs of a scripted
agent, and the same examples run again with their imports rewritten to `from qita import ...`.
"""

import contextlib
import inspect
import io
import re
from pathlib import Path
from typing import Any, Callable, Optional

import pytest
from qita_helpers import ROOT, of_type, read_records, step

import qita
from qita.agents import ScriptedAgent

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
    agent = ScriptedAgent([step(("bash", {"command": "pytest"})), step(final="all tests pass")],
                          tools={"bash": lambda command: {"returncode": 0, "stdout": command}})
    return {"agent": agent, "MyScoreCritic": MyScoreCritic, "MyGroundingCritic": MyGroundingCritic}


def to_qita(code: str) -> str:
    """The port the documents promise: `qitos` replaced by `qita`, nothing else."""
    return code.replace("qitos", "qita")


def to_top_level(code: str) -> str:
    """`from qitos.engine.critic import Critic` -> `from qita import Critic`: the flat form keeps working."""
    return to_qita(re.sub(r"^from qitos(\.[\w.]+)? import", "from qita import", code, flags=re.M))


def run_example(code: str, namespace: Optional[dict[str, Any]] = None,
                port: Callable[[str], str] = to_qita) -> tuple[dict[str, Any], str]:
    """Run one example in `namespace` (the page's examples so far), ported by `port`."""
    ported = port(code)
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


def run_page(blocks: list[str], port: Callable[[str], str] = to_qita) -> tuple[dict[str, Any], int]:
    """Run every example of a page in order; the page's namespace afterwards and how many ran.

    One namespace for the whole page, as a reader follows it: a snippet may use a name an
    earlier example imported (the preset example uses MaxTokensCriteria from the one before).
    """
    ran = 0
    namespace: dict[str, Any] = {"__name__": "seed_example"}
    for code in runnable_examples(blocks):
        namespace, printed = run_example(code, namespace, port)
        namespace["__doc_code__"] = code
        check_example(namespace, printed)
        ran += 1
    return namespace, ran


def _run_all(blocks: list[str]) -> int:
    return run_page(blocks)[1]


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


# -- what the pages define, driving real runs --------------------------------------------------------
#: page -> (where it is, how its examples are found, how many it has)
PAGES = {"en": (SEED_EN, fenced_blocks, 16), "zh": (SEED_ZH, unfenced_blocks, 12)}


def page_blocks(page: str) -> list[str]:
    path, extract, _ = PAGES[page]
    return extract(_seed(path))


@pytest.mark.parametrize("page", sorted(PAGES))
def test_the_seed_examples_also_run_importing_everything_from_qita(page):
    # `from qita import ...` keeps working for every name the documents import
    blocks = page_blocks(page)
    rewritten = [to_top_level(b) for b in blocks]
    assert not any(re.search(r"^from qita\.", b, re.M) for b in rewritten)
    assert run_page(blocks, port=to_top_level)[1] == PAGES[page][2]


def evidence_agent() -> ScriptedAgent:
    """A scripted agent for the page's critic and criterion: a failing check, then evidence, answers."""
    def bash(command):
        return {"returncode": 1 if command == "verify --strict" else 0, "stdout": command}

    script = [
        step(("bash", {"command": "verify --strict"}), evidence=["e1"]),  # the critic asks for a retry
        step(("bash", {"command": "verify"}), evidence=["e2"]),
        step(final="draft answer"),  # final, but only 2 evidence items: the criterion keeps going
        step(("bash", {"command": "collect"}), evidence=["e3"]),
        step(final="answer with evidence"),
    ] + [step(("bash", {"command": "idle"}))] * 5
    return ScriptedAgent(script, tools={"bash": bash})


@pytest.mark.parametrize("page", sorted(PAGES))
def test_the_seed_critic_and_criterion_drive_a_run(page, tmp_path):
    namespace, _ = run_page(page_blocks(page))
    critic, criterion = namespace["VerificationCritic"](), namespace["MinEvidenceCriteria"](min_evidence=3)
    with qita.TraceWriter(tmp_path / "run.jsonl", "seed") as writer:
        result = qita.Engine(evidence_agent(), critics=[critic], trace=writer,
                             stop_criteria=[criterion, qita.MaxRuntimeCriteria(max_runtime_seconds=300.0)],
                             max_steps=10).run("...")
    # step 0 is sent back by the critic, step 1 (the retry) passes, step 2 answers with only
    # 2 evidence items so the criterion keeps going, step 3 collects the third while the draft
    # answer is still set -> FINAL after 4 steps, before the second answer is ever given
    assert (result.state.stop_reason, result.state.final_result, result.steps) == ("final", "draft answer", 4)
    assert result.stop_detail == "evidence=3 >= min=3"
    steps = of_type(read_records(tmp_path / "run.jsonl"), "step")
    assert [s["critic_outputs"][0]["action"] for s in steps] == ["retry", "continue", "continue", "continue"]
    assert steps[0]["critic_outputs"][0]["reason"] == "command failed with returncode=1"


@pytest.mark.parametrize("page", sorted(PAGES))
def test_the_seed_task_budget_caps_a_run(page):
    namespace, _ = run_page(page_blocks(page))
    task = namespace["task"]
    assert isinstance(task, qita.Task) and task.budget.max_tokens == 8192
    def fetching_agent() -> ScriptedAgent:
        return ScriptedAgent([step(("bash", {"command": "fetch"}), tokens=(3000, 1000))] * 20,
                             tools={"bash": lambda command: {"returncode": 0}})

    result = fetching_agent().run(task=task, max_steps=50, return_state=True)
    # 4,000 tokens a step: 8,000 after two steps is within 8,192, 12,000 after three is not
    assert result.state.stop_reason == "budget_tokens" and result.steps == 3
    assert fetching_agent().run(task=task) is None  # without return_state: the final result (none here)
