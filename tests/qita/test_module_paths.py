"""The run side's import paths: the QitOS module layout, the flat paths that came before it, and packaging."""

from __future__ import annotations

import importlib
import re

import pytest
from qita_helpers import ROOT

import qita

#: QitOS path -> names a QitOS script imports from it (qitos replaced by qita).
QITOS_LAYOUT = {
    "qita.engine.critic": ["Critic"],
    "qita.engine.stop_criteria": ["StopCriteria", "FinalResultCriteria", "MaxStepsCriteria", "MaxRuntimeCriteria",
                                  "MaxTokensCriteria", "StagnationCriteria"],
    "qita.engine.engine": ["Engine"],
    "qita.core.decision": ["Decision"],
    "qita.core.task": ["Task", "TaskBudget"],
    "qita.core.errors": ["StopReason"],
    "qita.core.state": ["StateSchema"],
    "qita.harness": ["resolve_family_preset"],
}

#: Paths that existed before the packages, with what was imported from them.
FLAT_PATHS = {
    "qita.engine": ["Engine", "RunResult", "coerce_task", "DEFAULT_MAX_STEPS"],
    "qita.core": ["Action", "Decision", "Usage", "Task", "TaskBudget", "RuntimeBudget", "AgentState", "ToolCall",
                  "Trajectory"],
    "qita.critic": ["Critic", "FunctionCritic", "ReturnCodeCritic", "ForbiddenCommandCritic", "CONTINUE", "STOP", "RETRY",
                    "critic_name", "effective_action"],
    "qita.stop_criteria": ["StopCriteria", "FinalResultCriteria", "MaxStepsCriteria", "MaxRuntimeCriteria",
                           "MaxTokensCriteria", "StagnationCriteria", "default_signature"],
    "qita.errors": ["StopReason", "QitaError", "EarlyStopConfigError", "TaskValidationError"],
}


def test_qitos_module_paths_hold_the_same_objects_as_the_top_level():
    for module, names in QITOS_LAYOUT.items():
        mod = importlib.import_module(module)
        for name in names:
            assert getattr(mod, name) is getattr(qita, name), f"{module}.{name}"


def test_the_flat_paths_still_import_and_are_the_same_objects():
    homes = {"qita.engine": "qita.engine.engine", "qita.critic": "qita.engine.critic",
             "qita.stop_criteria": "qita.engine.stop_criteria", "qita.errors": "qita.core.errors"}
    for module, names in FLAT_PATHS.items():
        mod = importlib.import_module(module)
        home = importlib.import_module(homes[module]) if module in homes else mod
        for name in names:
            assert getattr(mod, name) is getattr(home, name), f"{module}.{name}"


def test_every_top_level_name_is_importable():
    for name in qita.__all__:
        assert getattr(qita, name) is not None, name


def test_every_qita_package_is_listed_for_installation():
    # pyproject lists packages by hand: a package missing there is absent from a fresh install
    tomllib = pytest.importorskip("tomllib")
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    on_disk = {".".join(p.parent.relative_to(ROOT).parts) for p in (ROOT / "qita").rglob("__init__.py")}
    assert on_disk <= listed, sorted(on_disk - listed)


def test_qita_never_imports_the_board():
    for path in (ROOT / "qita").rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        assert not re.search(r"^\s*(from app\b|import app\b)", text, re.M), path


@pytest.mark.parametrize("package", ["qita", "qita.engine"])
def test_lazy_names_and_their_type_checking_imports_agree(package):
    """A package's names load on first use from `_HOMES`; its TYPE_CHECKING imports say the
    same to type checkers: the two name the same module for every name, and `__all__` is
    exactly what they provide (with the aliases)."""
    import ast

    mod = importlib.import_module(package)
    path = ROOT.joinpath(*package.split("."), "__init__.py")
    checked: dict[str, str] = {}
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.If) and getattr(node.test, "id", None) == "TYPE_CHECKING":
            for imp in node.body:
                if isinstance(imp, ast.ImportFrom):
                    checked.update({a.name: "." * imp.level + (imp.module or "") for a in imp.names})
    assert checked == mod._HOMES
    assert set(mod.__all__) == set(mod._HOMES) | set(getattr(mod, "_ALIASES", {}))


def test_importing_one_contract_does_not_load_the_run_loop():
    """The board imports `qita.engine.critic` for the ranking of critic actions; the engine,
    live verdicts and the harness load only when a name of theirs is used."""
    import subprocess
    import sys

    code = ("import sys, qita.engine.critic; print(sorted(m for m in sys.modules if m.startswith('qita'))); "
            "import qita; qita.Engine; print('qita.engine.engine' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.splitlines()
    loaded = set(__import__("ast").literal_eval(out[0]))
    assert "qita.engine.critic" in loaded
    assert not loaded & {"qita.engine.engine", "qita.live", "qita.harness", "qita.early_stop", "qita.criteria"}
    assert out[1] == "True"
