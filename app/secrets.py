"""Masking secrets found in trace data before it is shown (pages, JSON twins, field views, exports).

Traces often carry API keys, bearer tokens, cloud keys, private keys and JWTs that an
agent read or printed. The database keeps the raw text; everything the board shows
passes through a `Masker`, which replaces each secret with a visible placeholder such
as `[secret masked: aws-access-key …CDEF]`. Only the last four characters of longer
secrets are kept, so two different keys can still be told apart.

Two rules, applied together:

- **Where a value lives.** A value under a secret-sounding key (`password`,
  `DB_PASSWORD`, `OPENAI_API_KEY`, `Set-Cookie`, `SessionToken` …: `is_secret_key`) is a
  secret whatever it looks like, and so is every string below such a key. Field views
  pass the key path of the value they show (`mask_at`), so a value fetched on its own
  is judged by the keys it was stored under.
- **What a value looks like.** Detectors find known shapes inside any text.

Every detector runs in time linear in the text: token runs are possessive and start
only where their alphabet starts (`(?<![…])`), so no two attempts rescan the same run;
assignments use possessive separators; private-key blocks are found with `str.find`
and a remembered end position. Strings longer than `WINDOW_CHARS` are masked window by
window (`iter_masked`), and a `Masker` with `max_chars` (pages) cuts longer strings to
that many characters, saying so, before looking at them.
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator, Optional

import orjson

PLACEHOLDER_PREFIX = "[secret masked: "

#: Nesting followed when masking data: well past ingest's 1024 levels; only a cycle in a
#: context object gets this deep, and is cut here.
MAX_DEPTH = 4096

#: Longest string masked in one piece; longer ones are masked in windows of this size
#: cut at a line break (or other white space) near the end, so no secret is split.
WINDOW_CHARS = 1 << 20
#: How far back from a window's end a cut point is looked for.
WINDOW_SLACK = 64 * 1024
#: Longest string a page (or its JSON twin) shows: longer ones are cut, with a note,
#: before masking, so one value costs a page a bounded time. Above PRECHECK_MAX_BYTES.
PAGE_MAX_CHARS = 256 * 1024
#: Longest private-key block recognised (a 16384-bit RSA key is about 12 KB).
MAX_PEM_CHARS = 32 * 1024

#: Key names (lower-cased, without `_ - . ` and spaces) that end in one of these hold secrets.
SECRET_KEY_SUFFIXES = ("password", "passwd", "passphrase", "passwords", "secret", "secrets", "secretkey",
                       "apikey", "token", "privatekey", "accesskey", "authorization", "cookie", "cookies", "credential",
                       "credentials", "encryptionkey", "signingkey", "accountkey", "masterkey", "sessionkey", "authkey",
                       "secretkeybase", "privatekeypem", "credentialsjson", "secretvalue", "passwordconfirmation",
                       "passwordhash", "jwt")
#: Key names that are secret only on their own.
SECRET_KEY_NAMES = frozenset({"pwd", "pw", "pass", "auth", "bearer", "pin", "sessionid", "session"})
#: Names ending like a secret that are not (tokenizer settings seen in model configs).
NOT_SECRET_KEY_NAMES = frozenset({"bostoken", "eostoken", "padtoken", "unktoken", "septoken", "clstoken",
                                  "masktoken", "stoptoken", "nexttoken"})
#: Keys whose numbers are secrets too (a numeric password or PIN).
_NUMERIC_SECRET_SUFFIXES = ("password", "passwd", "passphrase", "pin", "pwd")

#: Values that are clearly not secrets even under a secret-sounding name.
_NOT_SECRET_VALUES = {"", "null", "none", "true", "false", "undefined", "nil", "redacted", "<redacted>", "***",
                      "xxx", "changeme?", "****", "********"}

_KEY_SEPARATORS = str.maketrans("", "", "_-. ")

#: Lower-case substrings one of which every secret-sounding key contains (with any of
#: the separators `is_secret_key` removes inside split words).
_KEY_NEEDLES = ("pass", "pwd", "pw", "secret", "token", "auth", "cookie", "credential", "private", "bearer", "pin",
                "session", "jwt", *(f"{w}{s}key" for w in ("api", "access", "encryption", "signing", "account", "master")
                                    for s in ("", "_", "-", ".", " ")))


def is_secret_key(name: Any) -> bool:
    """Whether a value stored under this key is a secret (the one rule for key names)."""
    if not isinstance(name, str) or len(name) > 200:
        return False
    hit = _KEY_IS_SECRET.get(name)
    if hit is None:
        norm = name.strip().lower().translate(_KEY_SEPARATORS)
        hit = bool(norm) and norm not in NOT_SECRET_KEY_NAMES and (
            norm in SECRET_KEY_NAMES or norm.endswith(SECRET_KEY_SUFFIXES))
        if len(_KEY_IS_SECRET) >= CLEAN_ENTRIES:
            _KEY_IS_SECRET.clear()
        _KEY_IS_SECRET[name] = hit
    return hit


def _key_kind(name: str) -> str:
    norm = name.strip().lower().translate(_KEY_SEPARATORS)
    if "secretaccesskey" in norm:
        return "aws-secret-key"
    if "pass" in norm or norm == "pwd":
        return "password"
    return "secret"


def placeholder(kind: str, value: str) -> str:
    """The text shown instead of a secret."""
    tail = value.strip()[-4:] if len(value.strip()) >= 16 and kind != "private-key" else ""
    return f"{PLACEHOLDER_PREFIX}{kind} …{tail}]" if tail else f"{PLACEHOLDER_PREFIX}{kind}]"


_PLACEHOLDER = re.compile(r"\[secret masked: [a-z-]{1,40}(?: …[^\]]{1,4})?\]")
_PLACEHOLDER_KIND = re.compile(r"\[secret masked: ([a-z-]{1,40})")


def _is_placeholder(text: str) -> bool:
    """A whole value that is one of our placeholders (and nothing else: a value that only
    begins like one, `[secret]hunter2`, is not)."""
    return _PLACEHOLDER.fullmatch(text.strip()) is not None


# -- detectors ---------------------------------------------------------------------------------
# A detector finds secrets in text and gives the spans to replace. Each `sub` is linear in the
# text (see the module docstring); the patterns below are written so that it stays so.

#: `name = value` separators, possessive: `\s*["']?\s*[:=]` backtracked quadratically over
#: a long run of spaces ("password" + 100 KB of spaces took 53 s).
_ASSIGN = r"""(\s*+\\?+["']?+\s*+(?:=>|[:=])\s*+\\?+["']?+)"""
_VALUE = r"""([^\s"',;&}\]\\]++)"""
_NAME = r"(?<![\w.-])([\w.-]{1,200}+)"


@dataclass(frozen=True)
class Detector:
    kind: str
    pattern: Optional[re.Pattern]
    #: regex group holding the secret itself (0: the whole match)
    group: int = 0
    #: lower-case substrings one of which every match contains: a string without any is
    #: not searched with this detector's pattern
    needles: tuple[str, ...] = ()
    #: (match) -> the kind to report, or None to leave the match alone
    accept: Optional[Callable[[re.Match], Optional[str]]] = None
    #: a whole custom substitution, for what a regex cannot do in linear time
    custom: Optional[Callable[[str, Callable[[str, str], str]], str]] = None
    #: when `accept` refuses a match, look for matches inside its secret group (`named`)
    nested: bool = False


#: How many rejected names deep a `named` assignment is looked for inside a value (each
#: level scans a suffix of the one above once: `x: y: DB_PASSWORD=…` is two levels).
NESTED_LEVELS = 3


def _c(pattern: str, flags: int = 0) -> re.Pattern:
    return re.compile(pattern, flags)


def _accept_named(min_other: int) -> Callable[[re.Match], Optional[str]]:
    def accept(m: re.Match) -> Optional[str]:
        name, value = m.group(1), m.group(3)
        if not is_secret_key(name) or _HEADER_NAME.fullmatch(name):
            return None  # headers are the http-header detector's: their value is the whole line
        assign = m.group(2)
        if name.strip().lower() in _PROSE_NAMES and "=" not in assign and not _quoted_key(m, assign):
            # "tests pass: 3 of 3", "premature pass: c_note", "criterion 'unit tests pass':
            # python3 -m unittest" (coder_eval's grading log): English, not an assignment.
            # `pass=…` and `"pass": "…"` still are.
            return None
        kind = _key_kind(name)
        if kind == "secret" and len(value) < min_other:
            return None
        if kind == "password" and len(value) < 3:
            return None
        return kind

    return accept


def _quoted_key(m: re.Match, assign: str) -> bool:
    """`"pass": …`: the name is a quoted key, its opening quote right before it and the same
    quote closing it (a quote that closes a longer string, `'unit tests pass':`, is not)."""
    start = m.start(1)
    before = m.string[start - 1] if start > 0 else ""
    return before in ('"', "'") and assign.lstrip().startswith(before)


def _accept_flag(m: re.Match) -> Optional[str]:
    return _key_kind(m.group(1)) if is_secret_key(m.group(1)) else None


#: Secret key names that are also everyday words: as `NAME: value` in prose they are not
#: assignments (see `_accept_named`).
_PROSE_NAMES = frozenset({"pass", "auth", "pin", "bearer"})
_HEADER_NAME = re.compile(r"(?i)(?:proxy-)?authorization|(?:set-)?cookie")
_PEM_BEGIN = "-----BEGIN "
_PEM_LABEL = re.compile(r"[A-Z0-9 ]{0,40}?PRIVATE KEY(?: BLOCK)?-----")
_PEM_BODY = re.compile(r"[A-Za-z0-9+/=\s\\:,-]{16,%d}+" % MAX_PEM_CHARS)


def _pem_sub(text: str, replace: Callable[[str, str], str]) -> str:
    """Private-key blocks: BEGIN line, then up to the END line or the end of the base64 body.

    Linear: the next `-----END ` is searched for once and remembered until the scan
    passes it (a regex with `.*?` rescanned the rest of the text for every BEGIN).
    """
    out: list[str] = []
    pos = 0
    next_end = -2  # unknown
    n = len(text)
    while pos < n:
        i = text.find(_PEM_BEGIN, pos)
        if i < 0:
            break
        head = _PEM_LABEL.match(text, i + len(_PEM_BEGIN))
        if head is None:
            out.append(text[pos:i + len(_PEM_BEGIN)])
            pos = i + len(_PEM_BEGIN)
            continue
        body_start = head.end()
        if next_end != -1 and next_end < body_start:
            next_end = text.find("-----END ", body_start)
        stop = -1
        if next_end >= 0 and next_end - body_start <= MAX_PEM_CHARS:
            close = text.find("-----", next_end + 9, next_end + 9 + 64)
            if close >= 0:
                stop = close + 5
        if stop < 0:
            body = _PEM_BODY.match(text, body_start)
            if body is None:
                out.append(text[pos:body_start])
                pos = body_start
                continue
            stop = body.end()
        out.append(text[pos:i])
        out.append(replace("private-key", text[i:stop]))
        pos = stop
    if pos == 0:
        return text
    out.append(text[pos:])
    return "".join(out)


# Order matters: specific shapes first, so a JWT inside "Bearer eyJ..." is called a bearer
# token, and named assignments come last.
DETECTORS: tuple[Detector, ...] = (
    Detector("private-key", None, 0, ("-----begin",), custom=_pem_sub),
    Detector("url-password", _c(r"(?<![\w+.-])[A-Za-z][A-Za-z0-9+.-]{0,30}+://[^\s/:@'\"<>]{0,256}+:"
                                r"([^\s/@'\"<>]{1,512}+)@"), 1, ("://",)),
    Detector("bearer-token", _c(r"(?i)(?<![\w-])bearer\s++([A-Za-z0-9._~+/=-]{8,}+)"), 1, ("bearer",)),
    Detector("basic-auth", _c(r"(?i)(?<![\w-])basic\s++([A-Za-z0-9+/]{8,}+={0,2}+)(?![\w+/=])"), 1, ("basic",),
             accept=lambda m: "basic-auth" if _after_authorization(m) else None),
    Detector("jwt", _c(r"(?<![A-Za-z0-9_-])eyJ[A-Za-z0-9_-]{4,}+\.[A-Za-z0-9_-]{4,}+\.[A-Za-z0-9_-]{8,}+"), 0, ("eyj",)),
    Detector("anthropic-key", _c(r"(?<![\w-])sk-ant-[A-Za-z0-9_-]{16,}+"), 0, ("sk-ant-",)),
    Detector("openai-key", _c(r"(?<![\w-])sk-(?:proj-|svcacct-|admin-)?+[A-Za-z0-9_-]{20,}+"), 0, ("sk-",)),
    Detector("aws-access-key", _c(r"(?<![A-Za-z0-9])(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA|AIPA)[A-Z0-9]{16}(?![A-Za-z0-9])"),
             0, ("akia", "asia", "agpa", "aida", "aroa", "anpa", "aipa")),
    Detector("github-token", _c(r"(?<![A-Za-z0-9_])(?:gh[pousr]_[A-Za-z0-9]{30,}+|github_pat_[A-Za-z0-9_]{22,}+)"), 0,
             ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_")),
    Detector("slack-token", _c(r"(?<![\w-])xox[abposr]-[A-Za-z0-9-]{10,}+"), 0, ("xox",)),
    Detector("stripe-key", _c(r"(?<![\w-])(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}+"), 0, ("sk_live_", "sk_test_",
                                                                                         "rk_live_", "rk_test_")),
    Detector("gitlab-token", _c(r"(?<![\w-])gl(?:pat|dt|ptt|rt)-[A-Za-z0-9_-]{20,}+"), 0, ("glpat-", "gldt-", "glptt-", "glrt-")),
    Detector("sendgrid-key", _c(r"(?<![\w.-])SG\.[A-Za-z0-9_-]{16,}+\.[A-Za-z0-9_-]{16,}+"), 0, ("sg.",)),
    Detector("google-api-key", _c(r"(?<![\w-])AIza[0-9A-Za-z_-]{35}"), 0, ("aiza",)),
    # `Authorization: <scheme> <credentials>`, `Cookie: …`, `Set-Cookie: …`: the rest of the line.
    Detector("http-header", _c(r"(?i)(?<![\w.-])((?:proxy-)?authorization|(?:set-)?cookie)" + r"""(\s*+["']?+\s*+[:=]\s*+["']?+)"""
                               r"""(?:(?:basic|bearer|digest|token|negotiate|ntlm)[ \t]++)?+([^\r\n"']{3,}+)"""), 3,
             ("authorization", "cookie"), accept=lambda m: "secret"),
    # `curl -u user:password`, `--user user:password`: the part after the colon
    Detector("cli-user", _c(r"""(?<![\w-])(?:-u|--user)(?:=|[ \t]*+)["']?+[^\s:"']{1,200}+:([^\s"'@]{1,512}+)"""), 1,
             ("-u", "--user")),
    # `mysql -pSECRET` (the value joined to the flag; `-p` alone asks for it), `sshpass -p SECRET`
    Detector("cli-password", _c(r"""(?<![\w-])(?:mysql|mysqldump|mariadb)\b[^\n|;&]{0,200}?\s-p["']?+([^\s"']{2,}+)"""), 1,
             ("mysql", "mariadb")),
    Detector("cli-password", _c(r"""(?<![\w-])sshpass[ \t]++-p[ \t]*+["']?+([^\s"']++)"""), 1, ("sshpass",)),
    # `DB_PASSWORD=Tr0ub4dor&3`: an environment variable's value runs to the next white space
    Detector("env-assign", _c(r"""(?<![\w.-])([A-Z][A-Z0-9_]{0,100}+)=((?!["'])[^\s"';]++)"""), 2, _KEY_NEEDLES,
             accept=lambda m: _key_kind(m.group(1)) if is_secret_key(m.group(1)) else None),
    # `--password x`, `--api-key=x`
    Detector("cli-flag", _c(r"""(?<![\w-])--([A-Za-z][\w-]{0,100}+)(?:=|[ \t]++)["']?+([^\s"']++)"""), 2,
             ("--",), accept=_accept_flag),
    # `password=…`, `DB_PASSWORD=…`, `"SecretAccessKey": "…"`, `api_key: …`
    Detector("named", _c(_NAME + _ASSIGN + _VALUE), 3, _KEY_NEEDLES, accept=_accept_named(5), nested=True),
)


def _after_authorization(m: re.Match) -> bool:
    # "Basic" is an English word: only credentials after an Authorization name are a secret.
    before = m.string[max(0, m.start() - 40):m.start()].lower()
    return "authorization" in before


#: Levels copied recursively before the iterative walk takes over (deep nesting).
RECURSE_LEVELS = 64

#: Strings at least this long have their masking remembered (by hash and length).
CACHE_MIN_CHARS = 2048
CACHE_ENTRIES = 20_000
_TEXT_CACHE: "OrderedDict[tuple[int, int], tuple[Optional[str], int, tuple[str, ...]]]" = OrderedDict()
_CACHE_LOCK = threading.Lock()

_ALL_NEEDLES = tuple(dict.fromkeys(n for det in DETECTORS for n in det.needles))
#: Whether a value a `named` match was refused for may hold a secret-sounding name of its own.
_KEY_NEEDLES_RE = re.compile("|".join(re.escape(n) for n in _KEY_NEEDLES))
#: The same test as `any(n in low for n in _ALL_NEEDLES)` in one C call: an alternation of
#: literals finds a match exactly when one of them occurs. Half the time on short strings
#: (8 µs against 14 µs for an 80-character critic reason, measured), which the search
#: index pays for every critic reason it holds.
_ALL_NEEDLES_RE = re.compile("|".join(re.escape(n) for n in _ALL_NEEDLES))

#: A cheap first look at a whole value serialised to JSON: every detector and every
#: secret-sounding key needs one of these substrings, so a value without any is returned
#: as it is, without walking it (most steps of most runs hold no secret).
_PRECHECK_NEEDLES = tuple(dict.fromkeys(n.encode() for n in (*_ALL_NEEDLES, *_KEY_NEEDLES)))
#: Levels below the top at which each container is looked at on its own before walking.
#: One: deeper checks re-serialise and re-scan the same bytes at every level and cost more
#: than the walk they save once clean strings are remembered (run page of 25 steps of
#: 2 KB observations: 3 levels 32 ms, 1 level 20 ms, in-process).
PRECHECK_LEVELS = 1
#: JSON size past which a container is walked without the look (see `Masker.data`).
PRECHECK_MAX_BYTES = 64 * 1024

#: Shorter strings (8 .. CACHE_MIN_CHARS chars) found to hold no secret. A page repeats
#: the same short strings many times over (dict keys, run ids, phase names, tool names):
#: a set lookup replaces the needle scan. Only the verdict "nothing to mask" is kept, and
#: it depends on the content alone, so masking is unchanged. Cleared when full.
CLEAN_ENTRIES = 100_000
_CLEAN: set[str] = set()
#: Whether a dict key is secret-sounding (keys repeat on every record).
_KEY_IS_SECRET: dict[str, bool] = {}


def cut_note(total: int) -> str:
    """What replaces the rest of a string cut by a masker's `max_chars`."""
    return f"… [cut: {total:,} characters in all; open the value's field view for the whole text]"


def cut_text(value: str, limit: int, total: Optional[int] = None) -> str:
    """`value` cut to about `limit` characters where no secret is split, with `cut_note`
    (`total`: the whole value's length when `value` is already a prefix of it)."""
    if len(value) <= limit:
        return value
    return value[:cut_point(value, 0, limit)] + cut_note(total if total is not None else len(value))


@dataclass
class Masker:
    """Masks strings and nested data; counts what it masked (the page tells the user).

    `max_chars`: strings longer than this are cut to it (with `cut_note`) before being
    masked, so a page never spends more than that per value; None masks whole values.
    """

    count: int = 0
    kinds: set[str] = field(default_factory=set)
    max_chars: Optional[int] = None
    #: False: only cut long strings (a page whose secrets are shown raw)
    detect: bool = True

    # -- text -----------------------------------------------------------------------------
    def text(self, value: str) -> str:
        """`value` with every detected secret replaced by its placeholder."""
        if self.max_chars is not None and len(value) > self.max_chars:
            return self.text(value[:cut_point(value, 0, self.max_chars)]) + cut_note(len(value))
        if len(value) < 8 or not self.detect:
            return value
        if len(value) > WINDOW_CHARS:
            return "".join(self.iter_text(value))
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

    def iter_text(self, value: str, window: int = WINDOW_CHARS) -> Iterator[str]:
        """`value` masked and given back in pieces of about `window` characters (field views,
        exports): each piece ends at a line break, or other white space, near its end, so
        no secret (none holds a line break, private keys aside, which are kept whole) is
        split between two pieces."""
        pos, n = 0, len(value)
        while pos < n:
            end = cut_point(value, pos, window)
            yield self._text(value[pos:end]) if self.detect else value[pos:end]
            pos = end

    def _text(self, value: str) -> str:
        # Plain substring tests first: far cheaper than any regex over a long observation.
        low = value.lower()
        if _ALL_NEEDLES_RE.search(low) is None:
            return value
        for det in DETECTORS:
            if not any(n in low for n in det.needles):
                continue
            if det.custom is not None:
                value = det.custom(value, self._replace)
            else:
                value = det.pattern.sub(self._replacer(det), value)
        return value

    def _replace(self, kind: str, secret: str) -> str:
        self.count += 1
        self.kinds.add(kind)
        return placeholder(kind, secret)

    def _sub_within(self, det: Detector, string: str, start: int, end: int, depth: int) -> str:
        """`string[start:end]` with `det`'s matches inside it replaced (matched in `string`
        itself: its lookbehinds and placeholders see the text around)."""
        assert det.pattern is not None
        cache = self.__dict__.setdefault("_nested", {})
        repl = cache.get((det.kind, depth))
        if repl is None:
            repl = cache[(det.kind, depth)] = self._replacer(det, depth)
        out, pos = [], start
        for inner in det.pattern.finditer(string, start, end):
            out.append(string[pos:inner.start()])
            out.append(repl(inner))
            pos = inner.end()
        out.append(string[pos:end])
        return "".join(out)

    def _replacer(self, det: Detector, depth: int = 0) -> Callable[[re.Match], str]:
        def repl(m: re.Match) -> str:
            secret = m.group(det.group)
            kind = det.kind
            if det.accept is not None:
                kind = det.accept(m)
                if kind is None:
                    if det.nested and depth < NESTED_LEVELS and _KEY_NEEDLES_RE.search(secret.lower()):
                        # `crash: DB_PASSWORD=x`, `GET /v1?api_key=x`: the rejected name's value
                        # holds the real assignment; look into it (a few levels, so linear),
                        # in the whole string, so a placeholder there is seen whole
                        vs, ve = m.start(det.group), m.end(det.group)
                        inner = self._sub_within(det, m.string, vs, ve, depth + 1)
                        return m.string[m.start(0):vs] + inner + m.string[ve:m.end(0)]
                    return m.group(0)
            if secret.lower() in _NOT_SECRET_VALUES or _PLACEHOLDER.match(m.string, m.start(det.group)):
                return m.group(0)  # nothing, or one of our placeholders (an earlier detector's)
            whole = m.group(0)
            if det.group == 0:
                return self._replace(kind, secret)
            start, end = m.start(det.group) - m.start(0), m.end(det.group) - m.start(0)
            return whole[:start] + self._replace(kind, secret) + whole[end:]

        return repl

    def _secret_value(self, kind: str, value: str) -> str:
        """A string known to be a secret by where it lives."""
        if not self.detect:
            return self.text(value)
        if value.strip().lower() in _NOT_SECRET_VALUES or _is_placeholder(value):
            return value
        # The whole value, whatever it holds: a cookie header's other cookies, a passphrase's
        # other words (keeping the text around a recognised shape showed them). A shape
        # recognised inside names the kind (an OpenAI key under OPENAI_API_KEY).
        before = self.count
        found = _PLACEHOLDER_KIND.search(self.text(value)) if not self.max_chars or len(value) <= self.max_chars else None
        self.count = before
        return self._replace(found.group(1) if found else kind, value)

    def _secret_scalar(self, kind: str, value: Any, key: Any) -> Any:
        """A number under a password-like key is a secret too; other scalars stay."""
        if (self.detect and type(value) in (int, float) and isinstance(key, str)
                and key.strip().lower().translate(_KEY_SEPARATORS).endswith(_NUMERIC_SECRET_SUFFIXES)):
            return self._replace(kind, str(value))
        return value

    # -- data -------------------------------------------------------------------------------
    def data(self, obj: Any, _levels: int = PRECHECK_LEVELS) -> Any:
        """`obj` with secrets masked in keys and values: the same object when it holds no
        candidate secret, else a copy (dicts, lists, tuples, strings).

        Each container near the top (a page's steps, each step) is first looked at as JSON
        text; only those that may hold a secret are walked. Past PRECHECK_MAX_BYTES of JSON
        the look is skipped: scanning that many bytes for every needle costs more than the
        walk, whose long strings are remembered by content.
        """
        if isinstance(obj, (dict, list, tuple)):
            verdict = _may_hold_secret(obj, needles=self.detect)
            if verdict is None:
                return self._copy(obj, 0, None)
            if not verdict:
                return obj
            if _levels > 0:
                if isinstance(obj, dict):
                    out = {}
                    for k, v in obj.items():
                        k_out = self.text(k) if isinstance(k, str) else k
                        if is_secret_key(k):
                            out[k_out] = self._under(v, _key_kind(k), k)
                        elif isinstance(v, str):
                            out[k_out] = self.text(v)
                        else:
                            out[k_out] = self.data(v, _levels - 1)
                    return out
                items = [self.data(v, _levels - 1) for v in obj]
                return tuple(items) if isinstance(obj, tuple) else items
        return self._copy(obj, 0, None)

    def at(self, value: Any, path: Iterable[Any]) -> Any:
        """`value` as found at `path` (the keys and indexes from a record's root) masked as
        it would be inside the whole record: under a secret-sounding key it is a secret."""
        kind, key = None, None
        for token in path:
            if is_secret_key(token):
                kind, key = _key_kind(token), token
        if kind is not None:
            return self._under(value, kind, key)
        return self.data(value) if isinstance(value, (dict, list, tuple)) else (
            self.text(value) if isinstance(value, str) else value)

    def _under(self, value: Any, kind: str, key: Any) -> Any:
        if isinstance(value, str):
            return self._secret_value(kind, value)
        if isinstance(value, (dict, list, tuple)):
            return self._copy(value, 0, kind)
        return self._secret_scalar(kind, value, key)

    def _copy(self, obj: Any, depth: int, under: Optional[str]) -> Any:
        """Like `_walk`, recursively for the first levels: most data is shallow, and a plain
        recursive copy costs about half of the iterative walk per item. `under` is the kind
        of the nearest secret-sounding key above (every string below it is a secret)."""
        if depth >= RECURSE_LEVELS:
            return self._walk(obj, under)
        if isinstance(obj, dict):
            out = {}
            for key, value in obj.items():
                key_out = self.text(key) if isinstance(key, str) else key
                kind = under
                if isinstance(key, str) and is_secret_key(key):
                    kind = _key_kind(key)
                if isinstance(value, str):
                    out[key_out] = self._secret_value(kind, value) if kind else self.text(value)
                elif isinstance(value, (dict, list, tuple)):
                    out[key_out] = self._copy(value, depth + 1, kind)
                else:
                    out[key_out] = self._secret_scalar(kind, value, key) if kind else self._object(value)
            return out
        if isinstance(obj, (list, tuple)):
            items = [(self._secret_value(under, v) if under else self.text(v)) if isinstance(v, str) else
                     self._copy(v, depth + 1, under) if isinstance(v, (dict, list, tuple)) else self._object(v)
                     for v in obj]
            return tuple(items) if isinstance(obj, tuple) else items
        if isinstance(obj, str):
            return self._secret_value(under, obj) if under else self.text(obj)
        return self._object(obj)

    def _object(self, value: Any) -> Any:
        """A value that is neither text nor a container: as it is, or, for an object of the
        board's own that carries trace names (app.compare.Group), its masked copy (a
        comparison's groups are handed to the page as objects: the chart's label and every
        heading carried a secret-shaped variant name raw)."""
        return value.masked_with(self.text) if hasattr(value, "masked_with") else value

    def _walk(self, obj: Any, under: Optional[str] = None) -> Any:
        """A copy of `obj` (dicts, lists, tuples, strings) with secrets masked in keys and values.

        Iterative, not recursive: ingest accepts records nested 1024 levels deep, and a
        secret at the bottom of one must be masked like any other (a recursive copy would
        hit Python's recursion limit, or give up part way down).
        """
        if not isinstance(obj, (dict, list, tuple)):
            if isinstance(obj, str):
                return self._secret_value(under, obj) if under else self.text(obj)
            return self._object(obj)
        text = self.text
        root: list[Any] = []
        # One frame per open container: its remaining items, the copy being built, its type,
        # where the finished copy goes (parent copy, key), and the secret kind it lives under.
        # A child is finished before its parent goes on, so dict key order and list order are kept.
        stack: list[tuple[Any, Any, type, Any, Any, Optional[str]]] = [
            (_items(obj), _empty(obj), type(obj), root, None, under)]
        while stack:
            items, out, kind, parent, slot, frame_under = stack[-1]
            is_dict = isinstance(out, dict)
            for key, value in items:
                item_under = frame_under
                if is_dict and isinstance(key, str):
                    key_out = text(key)
                    if is_secret_key(key):
                        item_under = _key_kind(key)
                else:
                    key_out = key
                if isinstance(value, (dict, list, tuple)) and len(stack) < MAX_DEPTH:
                    stack.append((_items(value), _empty(value), type(value), out, key_out, item_under))
                    break
                if isinstance(value, str):
                    value = self._secret_value(item_under, value) if item_under else text(value)
                elif item_under:
                    value = self._secret_scalar(item_under, value, key)
                else:
                    value = self._object(value)
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


_TOKEN_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_+/=.-")
#: Longest run of token characters backed out of at a hard cut (no secret is longer).
MAX_TOKEN_CHARS = 1024


def cut_point(value: str, pos: int, window: int) -> int:
    """Where a piece of `value` starting at `pos` and at most `window` long should end so that
    no secret is split: after a line break (else white space) in the last WINDOW_SLACK
    characters, never inside a private-key block; with neither, before the run of token
    characters the hard end falls in (unless that run is longer than any secret)."""
    end = pos + window
    if end >= len(value):
        return len(value)
    lo = max(pos + 1, end - WINDOW_SLACK)
    cut = value.rfind("\n", lo, end)
    if cut < 0:
        cut = max(value.rfind(" ", lo, end), value.rfind("\t", lo, end))
    if cut >= 0:
        cut += 1
    else:
        cut = end
        back = end
        while back > max(pos + 1, end - MAX_TOKEN_CHARS) and value[back - 1] in _TOKEN_CHARS:
            back -= 1
        if back > pos + 1 and value[back - 1] not in _TOKEN_CHARS and value[end] in _TOKEN_CHARS:
            cut = back
    begin = value.rfind(_PEM_BEGIN, max(pos, cut - MAX_PEM_CHARS), cut)
    if begin > pos and value.find("-----END ", begin, cut) < 0:
        cut = begin  # keep a key block whole in the next window
    return cut


def _may_hold_secret(obj: Any, *, needles: bool = True) -> Optional[bool]:
    """False when `obj` surely holds no secret, True when it may, None when too big to tell cheaply.

    Below PRECHECK_MAX_BYTES no string in `obj` is long enough to be cut by a page's
    `max_chars`, so False also says there is nothing to cut; `needles=False` asks only that.
    """
    try:
        blob = orjson.dumps(obj, default=str, option=orjson.OPT_NON_STR_KEYS)
    except TypeError:
        return True  # too deep for orjson: walk it
    if len(blob) > PRECHECK_MAX_BYTES:
        return None
    if not needles:
        return False
    if not blob.isascii():
        return True  # bytes.lower() folds ASCII only: `TO\u212aEN` (a Kelvin sign) is "token" to is_secret_key
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


def mask_at(value: Any, path: Iterable[Any]) -> Any:
    """A value found at `path` inside a record, masked as it would be in the whole record."""
    return Masker().at(value, path)


def find_secrets(value: str) -> list[tuple[str, str]]:
    """(kind, secret) pairs found in `value`, for tests and diagnostics."""
    found: list[tuple[str, str]] = []

    class _Recorder(Masker):
        def _replace(self, kind: str, secret: str) -> str:
            found.append((kind, secret))
            return super()._replace(kind, secret)

    _Recorder()._text(value)
    return found
