"""Masking secrets found in trace data before it is shown (pages, JSON twins, exports).

Traces often carry API keys, bearer tokens, cloud keys, private keys and JWTs that an
agent read or printed. The database keeps the raw text; everything the board shows
passes through `mask_data`, which replaces each secret with a visible placeholder
such as `[secret masked: aws-access-key …CDEF]`. Only the last four characters of
longer secrets are kept, so two different keys can still be told apart.

Speed: one case-insensitive trigger scan per string decides whether the (more
expensive) detectors run at all, so ordinary text costs a single regex search.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

PLACEHOLDER_PREFIX = "[secret masked: "

#: Nesting followed when masking data: well past ingest's 1024 levels; only a cycle in a
#: context object gets this deep, and is cut here.
MAX_DEPTH = 4096

#: Substrings at least one of which every detector needs; strings without any are skipped.
_TRIGGER = re.compile(
    r"sk-|bearer|akia|asia|gh[pousr]_|github_pat_|xox[abposr]-|aiza|-----begin|eyj|"
    r"pass|pwd|secret|api[_-]?key|token|auth",
    re.IGNORECASE,
)

#: Dict keys whose string value is a secret whatever it looks like.
_SECRET_KEYS = re.compile(
    r"(?:password|passwd|pwd|passphrase|secret|secret[_-]?key|client[_-]?secret|api[_-]?key|apikey|"
    r"x[_-]api[_-]key|token|access[_-]?token|auth[_-]?token|refresh[_-]?token|id[_-]?token|bearer|"
    r"private[_-]?key|aws[_-]?secret[_-]?access[_-]?key|authorization|proxy[_-]authorization|cookie)",
    re.IGNORECASE,
)

#: Values that are clearly not secrets even under a secret-sounding name.
_NOT_SECRET_VALUES = {"", "null", "none", "true", "false", "undefined", "nil", "redacted", "<redacted>", "***",
                      "xxx", "changeme?", "****", "********"}

_ASSIGN = r"""(\s*["']?\s*[:=]\s*["']?)"""


@dataclass(frozen=True)
class Detector:
    kind: str
    pattern: re.Pattern
    #: regex group holding the secret itself (0: the whole match)
    group: int = 0


def _c(pattern: str, flags: int = 0) -> re.Pattern:
    return re.compile(pattern, flags)


# Order matters: specific shapes first, so a JWT inside "Bearer eyJ..." is called a JWT
# only when no bearer prefix claims it, and generic assignments come last.
DETECTORS: tuple[Detector, ...] = (
    Detector("private-key", _c(r"-----BEGIN ([A-Z0-9 ]*)PRIVATE KEY-----(?:.*?-----END \1PRIVATE KEY-----|"
                               r"[A-Za-z0-9+/=\s\\]{16,})", re.DOTALL)),
    Detector("bearer-token", _c(r"\b[Bb][Ee][Aa][Rr][Ee][Rr]\s+([A-Za-z0-9._~+/=-]{8,})"), 1),
    Detector("jwt", _c(r"\beyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]{8,}")),
    Detector("anthropic-key", _c(r"\bsk-ant-[A-Za-z0-9_-]{16,}")),
    Detector("openai-key", _c(r"\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}")),
    Detector("aws-access-key", _c(r"\b(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA|AIPA)[A-Z0-9]{16}\b")),
    Detector("aws-secret-key", _c(r"(?i)\baws_?secret_?(?:access_?)?key\b" + _ASSIGN + r"([A-Za-z0-9/+=]{30,})"), 2),
    Detector("github-token", _c(r"\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{22,})")),
    Detector("slack-token", _c(r"\bxox[abposr]-[A-Za-z0-9-]{10,}")),
    Detector("google-api-key", _c(r"\bAIza[0-9A-Za-z_-]{35}")),
    Detector("password", _c(r"(?i)\b(?:password|passwd|pwd|passphrase)\b" + _ASSIGN + r"""([^\s"',;&}\]]{3,})"""), 2),
    Detector("secret", _c(r"(?i)\b(?:api[_-]?key|apikey|client[_-]?secret|secret[_-]?key|secret|access[_-]?token|"
                          r"auth[_-]?token|refresh[_-]?token|token)\b" + _ASSIGN + r"""([^\s"',;&}\]]{6,})"""), 2),
)


def placeholder(kind: str, value: str) -> str:
    """The text shown instead of a secret."""
    tail = value.strip()[-4:] if len(value.strip()) >= 16 and kind != "private-key" else ""
    return f"{PLACEHOLDER_PREFIX}{kind} …{tail}]" if tail else f"{PLACEHOLDER_PREFIX}{kind}]"


@dataclass
class Masker:
    """Masks strings and nested data; counts what it masked (the page tells the user)."""

    count: int = 0
    kinds: set[str] = field(default_factory=set)

    def text(self, value: str) -> str:
        """`value` with every detected secret replaced by its placeholder."""
        if len(value) < 8 or not _TRIGGER.search(value):
            return value
        for det in DETECTORS:
            value = det.pattern.sub(self._replacer(det), value)
        return value

    def _replacer(self, det: Detector) -> Callable[[re.Match], str]:
        def repl(m: re.Match) -> str:
            secret = m.group(det.group)
            if secret.lower() in _NOT_SECRET_VALUES or secret.startswith(PLACEHOLDER_PREFIX) or secret.startswith("[secret"):
                return m.group(0)
            self.count += 1
            self.kinds.add(det.kind)
            whole = m.group(0)
            if det.group == 0:
                return placeholder(det.kind, secret)
            start, end = m.start(det.group) - m.start(0), m.end(det.group) - m.start(0)
            return whole[:start] + placeholder(det.kind, secret) + whole[end:]

        return repl

    def value_under_key(self, key: Any, value: str) -> str:
        """A string stored under a secret-sounding key is masked whole."""
        if (isinstance(key, str) and _SECRET_KEYS.fullmatch(key.strip()) and value.strip().lower() not in _NOT_SECRET_VALUES
                and not value.startswith(PLACEHOLDER_PREFIX)):
            masked = self.text(value)
            if masked != value:
                return masked  # a recognised shape inside: keep the surrounding text
            self.count += 1
            kind = "password" if "pass" in key.lower() or key.lower() == "pwd" else "secret"
            self.kinds.add(kind)
            return placeholder(kind, value)
        return self.text(value)

    def data(self, obj: Any) -> Any:
        """A copy of `obj` (dicts, lists, tuples, strings) with secrets masked in keys and values.

        Iterative, not recursive: ingest accepts records nested 1024 levels deep, and a
        secret at the bottom of one must be masked like any other (a recursive copy would
        hit Python's recursion limit, or give up part way down).
        """
        if not isinstance(obj, (dict, list, tuple)):
            return self.text(obj) if isinstance(obj, str) else obj
        text, under_key = self.text, self.value_under_key
        root: list[Any] = []
        # One frame per open container: its remaining items, the copy being built, its type,
        # and where the finished copy goes (parent copy, key). A child is finished before
        # its parent goes on, so dict key order and list order are kept.
        stack: list[tuple[Any, Any, type, Any, Any]] = [(_items(obj), _empty(obj), type(obj), root, None)]
        while stack:
            items, out, kind, parent, slot = stack[-1]
            is_dict = isinstance(out, dict)
            for key, value in items:
                if is_dict and isinstance(key, str):
                    key_out = text(key)
                else:
                    key_out = key
                if isinstance(value, (dict, list, tuple)) and len(stack) < MAX_DEPTH:
                    stack.append((_items(value), _empty(value), type(value), out, key_out))
                    break
                if isinstance(value, str):
                    value = under_key(key, value) if is_dict else text(value)
                # numbers and None as they are; past MAX_DEPTH (only a cycle) containers too
                if is_dict:
                    out[key_out] = value
                else:
                    out.append(value)
            else:
                stack.pop()
                done = tuple(out) if kind is tuple else out
                if isinstance(parent, dict):
                    parent[slot] = done
                else:
                    parent.append(done)
        return root[0]


def _items(obj: Any):
    return iter(obj.items()) if isinstance(obj, dict) else ((None, v) for v in obj)


def _empty(obj: Any) -> Any:
    return {} if isinstance(obj, dict) else []


def mask_text(value: str) -> str:
    """One string with its secrets masked."""
    return Masker().text(value)


def mask_data(obj: Any) -> Any:
    """Nested data (dicts, lists, strings; keys too) with every secret masked. Exports call this."""
    return Masker().data(obj)


def find_secrets(value: str) -> list[tuple[str, str]]:
    """(kind, secret) pairs found in `value`, for tests and diagnostics."""
    found: list[tuple[str, str]] = []
    if not _TRIGGER.search(value):
        return found
    for det in DETECTORS:
        for m in det.pattern.finditer(value):
            found.append((det.kind, m.group(det.group)))
    return found


def reveal_requested(query_value: Optional[str]) -> bool:
    return query_value == "secrets"
