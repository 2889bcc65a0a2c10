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
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

import orjson

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

#: A cheap first look at a whole value serialised to JSON: every detector and every
#: secret-sounding key needs one of these substrings, so a value without any is returned
#: as it is, without walking it (most steps of most runs hold no secret).
_PRECHECK = re.compile(_TRIGGER.pattern.encode() + rb"|private|cookie|passphrase", re.IGNORECASE)
#: Levels below the top at which each container is looked at on its own before walking.
#: One: deeper checks re-serialise and re-scan the same bytes at every level and cost more
#: than the walk they save once clean strings are remembered (run page of 25 steps of
#: 2 KB observations: 3 levels 32 ms, 1 level 20 ms, in-process).
PRECHECK_LEVELS = 1
#: JSON size past which a container is walked without the look (see `Masker.data`).
PRECHECK_MAX_BYTES = 64 * 1024

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
    #: lower-case substrings one of which every match contains: a string without any is
    #: not searched with this detector's (much slower) pattern
    needles: tuple[str, ...] = ()


def _c(pattern: str, flags: int = 0) -> re.Pattern:
    return re.compile(pattern, flags)


# Order matters: specific shapes first, so a JWT inside "Bearer eyJ..." is called a JWT
# only when no bearer prefix claims it, and generic assignments come last.
DETECTORS: tuple[Detector, ...] = (
    Detector("private-key", _c(r"-----BEGIN ([A-Z0-9 ]*)PRIVATE KEY-----(?:.*?-----END \1PRIVATE KEY-----|"
                               r"[A-Za-z0-9+/=\s\\]{16,})", re.DOTALL), 0, ("-----begin",)),
    Detector("bearer-token", _c(r"\b[Bb][Ee][Aa][Rr][Ee][Rr]\s+([A-Za-z0-9._~+/=-]{8,})"), 1, ("bearer",)),
    Detector("jwt", _c(r"\beyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]{8,}"), 0, ("eyj",)),
    Detector("anthropic-key", _c(r"\bsk-ant-[A-Za-z0-9_-]{16,}"), 0, ("sk-ant-",)),
    Detector("openai-key", _c(r"\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}"), 0, ("sk-",)),
    Detector("aws-access-key", _c(r"\b(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA|AIPA)[A-Z0-9]{16}\b"), 0,
             ("akia", "asia", "agpa", "aida", "aroa", "anpa", "aipa")),
    Detector("aws-secret-key", _c(r"(?i)\baws_?secret_?(?:access_?)?key\b" + _ASSIGN + r"([A-Za-z0-9/+=]{30,})"), 2,
             ("aws",)),
    Detector("github-token", _c(r"\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{22,})"), 0,
             ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_")),
    Detector("slack-token", _c(r"\bxox[abposr]-[A-Za-z0-9-]{10,}"), 0, ("xox",)),
    Detector("google-api-key", _c(r"\bAIza[0-9A-Za-z_-]{35}"), 0, ("aiza",)),
    Detector("password", _c(r"(?i)\b(?:password|passwd|pwd|passphrase)\b" + _ASSIGN + r"""([^\s"',;&}\]]{3,})"""), 2,
             ("pass", "pwd")),
    Detector("secret", _c(r"(?i)\b(?:api[_-]?key|apikey|client[_-]?secret|secret[_-]?key|secret|access[_-]?token|"
                          r"auth[_-]?token|refresh[_-]?token|token)\b" + _ASSIGN + r"""([^\s"',;&}\]]{6,})"""), 2,
             ("key", "secret", "token")),
)


#: Levels copied recursively before the iterative walk takes over (deep nesting).
RECURSE_LEVELS = 64

#: Strings at least this long have their masking remembered (by hash and length).
CACHE_MIN_CHARS = 2048
CACHE_ENTRIES = 20_000
_TEXT_CACHE: "OrderedDict[tuple[int, int], tuple[Optional[str], int, tuple[str, ...]]]" = OrderedDict()
_CACHE_LOCK = threading.Lock()

_ALL_NEEDLES = tuple(dict.fromkeys(n for det in DETECTORS for n in det.needles))

#: The same check as plain substrings of the lower-cased JSON (about twice as fast as the
#: case-insensitive regex over long values): every string `_PRECHECK` matches holds one of
#: these, and so does every detector's match (its needles are included).
_PRECHECK_NEEDLES = tuple(dict.fromkeys(
    [n.encode() for det in DETECTORS for n in det.needles]
    + [b"sk-", b"bearer", b"akia", b"asia", b"ghp_", b"gho_", b"ghu_", b"ghs_", b"ghr_", b"github_pat_", b"xox",
       b"aiza", b"-----begin", b"eyj", b"pass", b"pwd", b"secret", b"apikey", b"api_key", b"api-key", b"token",
       b"auth", b"private", b"cookie"]))

#: Shorter strings (8 .. CACHE_MIN_CHARS chars) found to hold no secret. A page repeats
#: the same short strings many times over (dict keys, run ids, phase names, tool names):
#: a set lookup replaces the needle scan. Only the verdict "nothing to mask" is kept, and
#: it depends on the content alone, so masking is unchanged. Cleared when full.
CLEAN_ENTRIES = 100_000
_CLEAN: set[str] = set()
#: Whether a dict key is secret-sounding (keys repeat on every record).
_KEY_IS_SECRET: dict[str, bool] = {}


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
        if len(value) < 8:
            return value
        if len(value) >= CACHE_MIN_CHARS:
            # Long values (observations, tool output) come back on every page view of a
            # run: their masking is remembered by content, not redone.
            key = (hash(value), len(value))
            with _CACHE_LOCK:
                hit = _TEXT_CACHE.get(key)
                if hit is not None:
                    _TEXT_CACHE.move_to_end(key)
            if hit is not None:
                masked, count, kinds = hit
                self.count += count
                self.kinds.update(kinds)
                return value if masked is None else masked
            before, kinds_before = self.count, set(self.kinds)
            out = self._text(value)
            entry = (None if out == value else out, self.count - before, tuple(self.kinds - kinds_before))
            with _CACHE_LOCK:
                _TEXT_CACHE[key] = entry
                while len(_TEXT_CACHE) > CACHE_ENTRIES:
                    _TEXT_CACHE.popitem(last=False)
            return out
        if value in _CLEAN:
            return value
        before = self.count
        out = self._text(value)
        if self.count == before and out == value:
            if len(_CLEAN) >= CLEAN_ENTRIES:
                _CLEAN.clear()
            _CLEAN.add(value)
        return out

    def _text(self, value: str) -> str:
        # Plain substring tests first: far cheaper than any regex over a long observation.
        low = value.lower()
        if not any(n in low for n in _ALL_NEEDLES):
            return value
        for det in DETECTORS:
            if any(n in low for n in det.needles):
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
        if (isinstance(key, str) and _key_is_secret(key) and value.strip().lower() not in _NOT_SECRET_VALUES
                and not value.startswith(PLACEHOLDER_PREFIX)):
            masked = self.text(value)
            if masked != value:
                return masked  # a recognised shape inside: keep the surrounding text
            self.count += 1
            kind = "password" if "pass" in key.lower() or key.lower() == "pwd" else "secret"
            self.kinds.add(kind)
            return placeholder(kind, value)
        return self.text(value)

    def data(self, obj: Any, _levels: int = PRECHECK_LEVELS) -> Any:
        """`obj` with secrets masked in keys and values: the same object when it holds no
        candidate secret, else a copy (dicts, lists, tuples, strings).

        Each container near the top (a page's steps, each step) is first looked at as JSON
        text; only those that may hold a secret are walked. Past PRECHECK_MAX_BYTES of JSON
        the look is skipped: scanning that many bytes for every needle costs more than the
        walk, whose long strings are remembered by content.
        """
        if isinstance(obj, (dict, list, tuple)):
            verdict = _may_hold_secret(obj)
            if verdict is None:
                return self._copy(obj, 0)
            if not verdict:
                return obj
            if _levels > 0:
                if isinstance(obj, dict):
                    return {(self.text(k) if isinstance(k, str) else k):
                            (self.value_under_key(k, v) if isinstance(v, str) else self.data(v, _levels - 1))
                            for k, v in obj.items()}
                items = [self.data(v, _levels - 1) for v in obj]
                return tuple(items) if isinstance(obj, tuple) else items
        return self._copy(obj, 0)

    def _copy(self, obj: Any, depth: int) -> Any:
        """Like `_walk`, recursively for the first levels: most data is shallow, and a plain
        recursive copy costs about half of the iterative walk per item."""
        if depth >= RECURSE_LEVELS:
            return self._walk(obj)
        if isinstance(obj, dict):
            out = {}
            for key, value in obj.items():
                key_out = self.text(key) if isinstance(key, str) else key
                if isinstance(value, str):
                    out[key_out] = self.value_under_key(key, value)
                elif isinstance(value, (dict, list, tuple)):
                    out[key_out] = self._copy(value, depth + 1)
                else:
                    out[key_out] = value
            return out
        if isinstance(obj, (list, tuple)):
            items = [self.text(v) if isinstance(v, str) else
                     self._copy(v, depth + 1) if isinstance(v, (dict, list, tuple)) else v for v in obj]
            return tuple(items) if isinstance(obj, tuple) else items
        return self.text(obj) if isinstance(obj, str) else obj

    def _walk(self, obj: Any) -> Any:
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


def _key_is_secret(key: str) -> bool:
    hit = _KEY_IS_SECRET.get(key)
    if hit is None:
        hit = _SECRET_KEYS.fullmatch(key.strip()) is not None
        if len(_KEY_IS_SECRET) >= CLEAN_ENTRIES:
            _KEY_IS_SECRET.clear()
        _KEY_IS_SECRET[key] = hit
    return hit


def _may_hold_secret(obj: Any) -> Optional[bool]:
    """False when `obj` surely holds no secret, True when it may, None when too big to tell cheaply."""
    try:
        blob = orjson.dumps(obj, default=str, option=orjson.OPT_NON_STR_KEYS)
    except TypeError:
        return True  # too deep for orjson: walk it
    if len(blob) > PRECHECK_MAX_BYTES:
        return None
    low = blob.lower()
    return any(n in low for n in _PRECHECK_NEEDLES)


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
