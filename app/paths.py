"""Where the board's templates, static files and migrations are, installed or in a checkout.

In a checkout they sit at the top level (`templates/`, `static/`, `migrations/`); a
`pip install .` ships them inside the `app` package (see pyproject.toml).
"""

from __future__ import annotations

from pathlib import Path

_PKG = Path(__file__).resolve().parent


def _find(name: str) -> Path:
    installed = _PKG / name
    if installed.is_dir():
        return installed
    return _PKG.parent / name


TEMPLATES = _find("templates")
STATIC = _find("static")
MIGRATIONS = _find("migrations")
