"""JSON pointers (RFC 6901) into stored records: parsed, made and resolved, never touching a file."""

from __future__ import annotations

from typing import Any

#: Longest JSON pointer accepted for a lazily loaded value, and its deepest nesting.
MAX_POINTER_CHARS = 1000
MAX_POINTER_DEPTH = 32


def parse_pointer(pointer: str) -> list[str]:
    """The tokens of a JSON pointer (RFC 6901) into a stored record; ValueError when malformed.

    It addresses data inside one record, never a file: tokens are only looked up as
    keys or list indexes of the parsed record.
    """
    if not isinstance(pointer, str) or len(pointer) > MAX_POINTER_CHARS:
        raise ValueError("path too long")
    if pointer == "":
        return []
    if not pointer.startswith("/"):
        raise ValueError("path must be a JSON pointer starting with '/'")
    tokens = pointer[1:].split("/")
    if len(tokens) > MAX_POINTER_DEPTH:
        raise ValueError("path too deep")
    out = []
    for tok in tokens:
        if "~" in tok.replace("~0", "").replace("~1", ""):
            raise ValueError("bad escape in path")
        out.append(tok.replace("~1", "/").replace("~0", "~"))
    return out


def make_pointer(*tokens: Any) -> str:
    """A JSON pointer from keys and indexes (inverse of parse_pointer)."""
    return "".join("/" + str(t).replace("~", "~0").replace("/", "~1") for t in tokens)


def resolve_pointer(value: Any, tokens: list[str]) -> Any:
    """The value at `tokens` inside `value`; KeyError when it is not there."""
    for tok in tokens:
        if isinstance(value, dict):
            if tok not in value:
                raise KeyError(tok)
            value = value[tok]
        elif isinstance(value, list):
            if not tok.isdigit() or int(tok) >= len(value):
                raise KeyError(tok)
            value = value[int(tok)]
        else:
            raise KeyError(tok)
    return value

