"""The board's modules import each other without a cycle.

The graph is built from the source with `ast`, not by importing: module-level imports
only (an import inside a function runs later, when every module is loaded), and imports
under `if TYPE_CHECKING:` left out (they never run). A cycle makes import order matter
and hides which module owns what (docs/architecture.md).
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Iterator, Optional

import pytest

ROOT = Path(__file__).resolve().parents[2]
#: the folder and the import name it installs as (pyproject.toml's package-dir)
FOLDER, PACKAGE = "app", "qita_board"


def module_name(path: Path) -> str:
    parts = [PACKAGE, *path.relative_to(ROOT / FOLDER).with_suffix("").parts]
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted((ROOT / FOLDER).rglob("*.py"))}


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def module_level_imports(tree: ast.Module) -> Iterator[ast.stmt]:
    """Import statements that run when the module is imported (into if/try blocks, not into
    functions or classes, and not into `if TYPE_CHECKING:`)."""
    pending: list[ast.stmt] = list(tree.body)
    while pending:
        node = pending.pop(0)
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        elif isinstance(node, ast.If):
            if not _is_type_checking(node.test):
                pending.extend(node.body)
            pending.extend(node.orelse)
        elif isinstance(node, ast.Try):
            pending.extend([*node.body, *node.orelse, *node.finalbody, *(s for h in node.handlers for s in h.body)])
        elif isinstance(node, (ast.With,)):
            pending.extend(node.body)


def _resolve(importer: str, is_package: bool, node: ast.ImportFrom) -> Optional[str]:
    if node.level == 0:
        return node.module
    base = importer.split(".") if is_package else importer.split(".")[:-1]
    if node.level > 1:
        base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def import_graph() -> dict[str, set[str]]:
    """Module → the board modules it imports at module level."""
    known = modules()
    graph: dict[str, set[str]] = {}
    for name, path in known.items():
        targets: set[str] = set()
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in module_level_imports(tree):
            if isinstance(node, ast.Import):
                targets.update(a.name for a in node.names if a.name in known)
                continue
            source = _resolve(name, path.name == "__init__.py", node)
            for alias in node.names:
                # `from pkg import mod` imports the module pkg.mod; `from mod import name` imports mod.
                sub = f"{source}.{alias.name}"
                if sub in known:
                    targets.add(sub)
                elif source in known:
                    targets.add(source)
        targets.discard(name)
        graph[name] = targets
    return graph


def find_cycle(graph: dict[str, set[str]]) -> Optional[list[str]]:
    """One cycle as a path (first module repeated at the end), or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> Optional[list[str]]:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        path.pop()
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state:
            found = visit(start)
            if found:
                return found
    return None


def test_the_board_has_no_import_cycle():
    cycle = find_cycle(import_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_the_graph_sees_relative_imports():
    # The checker itself: it must find the board's own edges, or an empty graph would pass.
    graph = import_graph()
    assert "qita_board.queries.run_detail" in graph["qita_board.deps"]
    assert "qita_board.queries.cache" in graph["qita_board.queries.run_list"]
    assert "qita_board.compare" in graph["qita_board.queries.comparison"]


@pytest.mark.parametrize("graph, expected", [
    ({"a": {"b"}, "b": {"c"}, "c": {"a"}}, ["a", "b", "c", "a"]),
    ({"a": {"b"}, "b": {"c"}, "c": set()}, None),
])
def test_a_cycle_is_found(graph, expected):
    assert find_cycle(graph) == expected


def test_type_checking_and_function_imports_do_not_count():
    tree = ast.parse("import os\nif TYPE_CHECKING:\n    import a\ndef f():\n    import b\ntry:\n    import c\nexcept ImportError:\n    import d\n")
    names = [a.name for n in module_level_imports(tree) for a in n.names]
    assert names == ["os", "c", "d"]
