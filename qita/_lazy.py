"""A package's names loaded on first use (PEP 562), for `qita` and `qita.engine`: the board
imports one contract of the run side (`qita.engine.critic`), and loading every module of
a package with it cost each `qita ingest` start 0.16 s on a slow machine (docs/performance.md)."""

from __future__ import annotations

import importlib
from typing import Any, Callable, Optional


def lazy_names(namespace: dict[str, Any], homes: dict[str, str],
               aliases: Optional[dict[str, str]] = None) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """`__getattr__` and `__dir__` for the package whose globals are `namespace`: a name in
    `homes` (relative module) or `aliases` (another name) is imported when first asked for
    and kept in the package."""
    package = namespace["__name__"]
    aliases = aliases or {}

    def __getattr__(name: str) -> Any:
        target = aliases.get(name, name)
        home = homes.get(target)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(home, package), target)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *namespace.get("__all__", ())})

    return __getattr__, __dir__
