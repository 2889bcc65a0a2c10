"""docs/architecture.md matches the tree: it names every module of `app/`, names no module
that is gone, and its shared modules import nothing of the board but each other."""

from __future__ import annotations

import re

from tests.app.test_import_graph import ROOT, import_graph, module_name

DOC = ROOT / "docs" / "architecture.md"
PATH = re.compile(r"`(app/[\w/]+\.py)`")


def _named(text: str) -> set[str]:
    return set(PATH.findall(text))


def test_the_page_names_every_module_and_only_modules_that_exist():
    named = _named(DOC.read_text(encoding="utf-8"))
    tree = {p.relative_to(ROOT).as_posix() for p in (ROOT / "app").rglob("*.py")}
    assert sorted(tree - named) == [], "modules the page does not place"
    assert sorted(named - tree) == [], "modules the page names that do not exist"


def test_shared_modules_import_only_each_other():
    text = DOC.read_text(encoding="utf-8")
    section = text.split("**Shared modules**", 1)[1].split("\n## ", 1)[0]
    shared = {module_name(ROOT / p) for p in _named(section)}
    graph = import_graph()
    outside = {m: sorted(graph[m] - shared) for m in sorted(shared) if graph[m] - shared}
    assert outside == {}
