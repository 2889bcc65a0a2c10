"""How the board writes a count in a sentence, on pages, in Markdown and on the command line.

A shared module (docs/architecture.md): the ingest's warnings, the comparison's sentences
and the templates all import it, and it imports nothing.
"""

from __future__ import annotations

import re
from typing import Any, Optional


def plural(n: int, word: str, many: Optional[str] = None) -> str:
    """"1 pair", "2 pairs" ("1 false pass", "2 false passes" with `many`): every sentence the
    board writes about a count (pages, Markdown, the command line)."""
    return f"{n} {word if n == 1 else (many or word + 's')}"


#: Unicode's explicit direction controls: embeddings and overrides (closed by PDF, U+202C)
#: and isolates (closed by PDI, U+2069).
BIDI = re.compile("[\u202a-\u202e\u2066-\u2069]")
_EMBEDDINGS = frozenset("\u202a\u202b\u202d\u202e")
_ISOLATES = frozenset("\u2066\u2067\u2068")


class Verbatim(str):
    """Text a page hands back to the board as it is (a form value, a hidden field, a value
    its script reads): `contain_bidi` leaves it alone, or a filter would ask for a name
    with a closing control added and find nothing."""

    __slots__ = ()


def verbatim(value: Any) -> Any:
    """The template filter that marks an attribute's value as `Verbatim` (None stays None)."""
    return Verbatim(value) if type(value) is str else value  # Markup is already what it shows


def contain_bidi(value: Any) -> Any:
    """A value as a page shows it, with the direction controls it opens closed at its end.

    Every `{{ }}` of a template passes here (the environment's `finalize`), and so does a
    name the board writes into its own sentences (compare's group labels). Trace text may
    open a right-to-left override and never close it: shown beside the board's own words
    ("smoke\u202e pass"), it reversed them ("smokessap"). Closed at the value's end (UAX #9's
    pairing: a PDF closes the last embedding or override, a PDI the last isolate and what was
    opened inside it), it reorders only itself. What the value says is unchanged; the JSON
    twins carry it as written, and so does every value a page sends back (`verbatim`)."""
    if not isinstance(value, str) or type(value) is Verbatim or BIDI.search(value) is None:
        return value
    stack: list[str] = []
    for ch in BIDI.findall(value):
        if ch in _EMBEDDINGS or ch in _ISOLATES:
            stack.append(ch)
        elif ch == "\u202c":
            if stack and stack[-1] in _EMBEDDINGS:
                stack.pop()
        elif ch == "\u2069" and any(c in _ISOLATES for c in stack):
            while stack.pop() not in _ISOLATES:
                pass
    if not stack:
        return value
    closed = value + "".join("\u2069" if c in _ISOLATES else "\u202c" for c in reversed(stack))
    return closed if type(value) is str else type(value)(closed)  # Markup stays Markup
