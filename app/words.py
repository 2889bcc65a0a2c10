"""How the board writes a count in a sentence, on pages, in Markdown and on the command line.

A shared module (docs/architecture.md): the ingest's warnings, the comparison's sentences
and the templates all import it, and it imports nothing.
"""

from __future__ import annotations

from typing import Optional


def plural(n: int, word: str, many: Optional[str] = None) -> str:
    """"1 pair", "2 pairs" ("1 false pass", "2 false passes" with `many`): every sentence the
    board writes about a count (pages, Markdown, the command line)."""
    return f"{n} {word if n == 1 else (many or word + 's')}"
