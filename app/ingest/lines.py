"""Reading trace lines: streaming, bounded, and explicit about every bad line.

A line source yields `Item`s: a parsed record with the byte offset just past its line,
or an error naming the line. Lines are read one at a time with a size cap, so memory
stays flat however large the file is; a line longer than the cap is skipped in chunks.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import re
import zlib
from dataclasses import dataclass
from typing import IO, Any, Callable, Iterator, Optional

import orjson
from pydantic import ValidationError

from qita.format import INT32_MAX, LIVE_VERDICTS, RECORD_MODELS, TOKENS_MAX, without_lone_surrogates

BOM = b"\xef\xbb\xbf"
#: Blank bytes skipped in one go before the reader yields (see iter_items).
BLANK_RUN_BYTES = 16 * 1024 * 1024

#: A carriage return not followed by a newline: the line ending of classic Mac OS, which
#: makes a whole file one line to a JSON Lines reader (looked for on rejected lines only).
_BARE_CR = re.compile(rb"\r(?!\n)")
_CR_HINT = "its lines end in a carriage return alone (CR): JSON Lines ends each record with a newline (LF or CRLF); "


def _ends_in_cr(line: bytes) -> bool:
    """Whether a rejected line is records joined by lone carriage returns: one comes before
    the line's end and what stands before it is a JSON object (a CR inside a record is
    only whitespace to JSON, and such a line's error is its own)."""
    cr = _BARE_CR.search(line, 0, len(line) - 1)
    if cr is None:
        return False
    try:
        return isinstance(orjson.loads(line[:cr.start()]), dict)
    except orjson.JSONDecodeError:
        return False
#: Most bad lines reported per file; the rest are counted in one closing message.
MAX_ERRORS_PER_FILE = 1000


@dataclass(slots=True)
class Item:
    """One line's outcome: `record` or `error`, with where the line ends."""

    line: int
    end: int
    record: Optional[dict[str, Any]] = None
    raw: Optional[bytes] = None
    error: Optional[str] = None
    #: a partial last line without newline: not consumed, the offset stays before it
    pending: bool = False
    #: more records of the same line follow (a transform that yields several)
    more: bool = False
    #: values of this line that were ignored (wrong type), the record itself kept
    warnings: Optional[list[str]] = None
    #: where `raw` starts in the stream (its line's offset, after a byte-order mark)
    at: int = 0


class LimitExceeded(Exception):
    """A decompressed stream grew past a limit (size or ratio); the message says which, whole."""


#: Decompressed bytes always allowed before the ratio limit applies: small files compress
#: very well (a trace of identical steps reaches 100:1) and cost nothing to read.
RATIO_FLOOR = 16 * 1024 * 1024


class Budget:
    """Decompressed bytes a set of streams may still produce (one archive's entries share one)."""

    def __init__(self, limit: int, message: str):
        self.limit = limit
        self.message = message
        self.count = 0

    def take(self, n: int) -> None:
        self.count += n
        if self.count > self.limit:
            raise LimitExceeded(self.message)


def ratio_limit(compressed: int, ratio: float) -> int:
    """Most decompressed bytes allowed for `compressed` bytes at `ratio`."""
    return int(RATIO_FLOOR + max(0, compressed) * ratio)


class LimitedReader:
    """Wrap a decompressing stream: every byte it produces is counted against its budgets,
    checked as the bytes arrive (a bomb is stopped at the limit, never unpacked whole)."""

    def __init__(self, raw: IO[bytes], *budgets: Budget):
        self.raw = raw
        self.budgets = budgets
        self.count = 0

    def _count(self, data: bytes) -> bytes:
        self.count += len(data)
        for b in self.budgets:
            b.take(len(data))
        return data

    def readline(self, size: int = -1) -> bytes:
        return self._count(self.raw.readline(size))

    def read(self, size: int = -1) -> bytes:
        return self._count(self.raw.read(size))

    def peek(self, size: int = 0) -> bytes:
        return self.raw.peek(size) if hasattr(self.raw, "peek") else b""

    def close(self) -> None:
        self.raw.close()


def describe_validation_error(exc: ValidationError) -> str:
    """The first validation problem as `field 'a.b': message`."""
    err = exc.errors(include_url=False)[0]
    loc_parts = list(err.get("loc", ()))
    # A discriminated union puts the record type first; a field may share a type's name
    # (the `step` field of a step record), so only that leading tag is dropped.
    if len(loc_parts) > 1 and isinstance(loc_parts[0], str) and loc_parts[0] in RECORD_MODELS:
        loc_parts = loc_parts[1:]
    loc = ".".join(str(p) for p in loc_parts)
    msg = _error_message(err)
    if err.get("type") == "missing":
        return f"missing field '{loc}'"
    return f"field '{loc}': {msg}" if loc else msg


#: pydantic's error types for a value of another JSON type (strict models, qita.format):
#: their message names the type wanted, ours adds the one given.
_TYPE_ERRORS = frozenset({"int_type", "float_type", "bool_type", "string_type"})


def _error_message(err: Any) -> str:
    msg = err.get("msg", "invalid value")
    if err.get("type") in _TYPE_ERRORS and "input" in err:
        given = err["input"]
        if err["type"] == "int_type" and type(given) is float:
            return f"{msg}, got a number with a fractional part"
        return f"{msg}, got {_json_kind(given)}"
    return msg


def _json_kind(value: Any) -> str:
    return {list: "an array", dict: "an object", str: "a string", int: "a number", float: "a number",
            bool: "a boolean", type(None): "null"}.get(type(value), type(value).__name__)


_UTF16_LINE = "UTF-16 text (a NUL byte between characters), not a UTF-8 JSON line: save the file as UTF-8"
_BINARY_LINE = "binary data (NUL byte), not a JSON line"


def _nul_kind(raw: bytes) -> str:
    """Why bytes holding a NUL are no JSON line: UTF-16 text or binary data (the message)."""
    n = len(raw)
    printable = raw.strip(b"\x00\r\n")  # none at all: a file's NUL-filled tail (an unclean shutdown)
    odd, even = raw[1::2].count(0), raw[0::2].count(0)
    if raw[:2] in (b"\xff\xfe", b"\xfe\xff") or (n < 4 and not printable) or (
            printable and max(odd, even) * 4 >= n and min(odd, even) * 20 <= n):
        # NULs on one side of the byte pairs only: text saved as UTF-16 (Windows'
        # "Unicode"), not binary; most of them, where the text is not all Latin letters.
        # A line of NULs alone is what UTF-16's last newline leaves, when short.
        return _UTF16_LINE
    return _BINARY_LINE


#: Bytes at a file's start looked at for a NUL (see _whole_file_error).
SNIFF_BYTES = 4096


def _whole_file_error(head: bytes) -> Optional[str]:
    """The one error for a whole file whose first bytes say it is no JSON Lines text at all.

    A NUL byte never stands in JSON text (a string writes it as \\u0000): one among the
    first bytes means an image, a database file or random bytes named .jsonl (1 MB of them
    was 1,001 "bad lines", one per newline byte that happened to fall in it), or UTF-16 text,
    every line of which carried the same error. A head of NULs alone (space kept for a
    file that was never written) is left to the lines, as before.
    """
    nul = head.find(b"\x00")
    if nul < 0 or not head.strip(b"\x00\r\n"):
        return None
    before = head[:nul].split(b"\n")
    if any(line.lstrip()[:1] == b"{" for line in before[:-1]):
        # Records come first (a UTF-8 trace that something appended other bytes to, such as
        # Windows PowerShell's `>>` writing UTF-16): they are read, the bad lines reported.
        return None
    if _nul_kind(head) == _UTF16_LINE:
        return ("UTF-16 text (a NUL byte between characters), not UTF-8 JSON Lines: the file was not read; "
                "save it as UTF-8")
    if before[-1].lstrip()[:1] == b"{":
        return None  # a record holding a raw NUL: that line's error, the lines after it read
    return "binary data (a NUL byte in its first bytes), not a JSON Lines file: the file was not read"


#: parse_line's answer for a line that escapes half a UTF-16 surrogate pair (`"\\ud800"`),
#: which iter_items mends (see mend_surrogates).
LONE_SURROGATE = "line holds a lone UTF-16 surrogate escape"
SURROGATE_WARNING = ("a lone UTF-16 surrogate escape (such as \\ud800) stands for no character: read as "
                     "U+FFFD (\ufffd), the rest of the record kept")


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def mend_surrogates(raw: bytes) -> tuple[Optional[dict[str, Any]], Optional[str]]:
    """A line whose strings escape half a surrogate pair, read with each such half as U+FFFD.

    Python's json.dumps writes one for a string that holds bytes decoded with
    `surrogateescape` (a tool's output read that way): valid JSON text that orjson refuses,
    so the whole record was lost as "not valid UTF-8". The standard library reads it (as
    strictly otherwise: NaN and Infinity stay errors); every lone half becomes U+FFFD.
    """
    try:
        value = json.loads(raw, parse_constant=_reject_constant)
    except UnicodeDecodeError:
        return None, "line is not valid UTF-8"
    except RecursionError:
        return None, "invalid JSON: nested too deeply (more than 1024 levels)"
    except ValueError as exc:  # past the surrogate, what orjson would have said next
        if str(exc).endswith(" is not JSON"):
            return None, f"invalid JSON (NaN and Infinity are not JSON): {exc}"
        return None, f"invalid JSON: {exc}"
    if not isinstance(value, dict):
        return None, f"not a JSON object (got {_json_kind(value)})"
    return without_lone_surrogates(value), None


def parse_line(raw: bytes) -> tuple[Optional[dict[str, Any]], Optional[str]]:
    """Parse one line (without its newline) into a dict, or say why it is not a record."""
    if b"\x00" in raw:
        return None, _nul_kind(raw)
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        text = str(exc)
        if "surrogate in string" in text:
            return None, LONE_SURROGATE
        if "utf-8" in text.lower() or "surrogate" in text.lower():
            return None, "line is not valid UTF-8"
        if "recursion" in text.lower() or "depth limit" in text.lower():
            return None, "invalid JSON: nested too deeply (more than 1024 levels)"
        if raw.lstrip()[:3] in (b"NaN", b"Inf", b"-In") or b"NaN" in raw or b"Infinity" in raw:
            return None, f"invalid JSON (NaN and Infinity are not JSON): {text}"
        return None, f"invalid JSON: {text}"
    if not isinstance(value, dict):
        return None, f"not a JSON object (got {_json_kind(value)})"
    return value, None


#: Fields a record cannot do without: a wrong or missing value here rejects the line.
REQUIRED_FIELDS = {"step": {"step"}, "event": {"phase"}, "criterion": {"id"}}
#: How many bad optional values one record may have before it is rejected as a whole.
MAX_REPAIRS = 20


def check_record(value: dict[str, Any]) -> Optional[str]:
    """Validate a parsed record; None when it is acceptable as it is (see `validate_record`)."""
    _record, error, _warnings = validate_record(value)
    if error is None and _warnings:
        return None
    return error


def validate_record(value: dict[str, Any]) -> tuple[Optional[dict[str, Any]], Optional[str], list[str]]:
    """(record to store, error, warnings) for one parsed line.

    `type`, `run_id` and each type's key field (a step's index, an event's phase, a
    criterion's id) must be right, or the line is rejected. Any other field with a value
    of the wrong type is dropped from the stored copy with a warning naming it, and the
    rest of the record is kept: one odd value never costs a whole step.
    """
    rtype = value.get("type")
    if type(rtype) is not str:
        if "type" not in value:
            return None, "missing field 'type'", []
        if not isinstance(rtype, str):
            return None, f"field 'type': must be a string, got {_json_kind(rtype)}", []
    run_id = value.get("run_id")
    if type(run_id) is not str:
        if "run_id" not in value:
            return None, "missing field 'run_id'", []
        if not isinstance(run_id, str):
            return None, f"field 'run_id': must be a string, got {_json_kind(run_id)}", []
    if not 1 <= len(run_id) <= 200:
        return None, f"field 'run_id': must be 1 to 200 characters, got {len(run_id)}", []
    if "\x00" in run_id:
        # The run id is a key: it cannot be cleaned like other text, and PostgreSQL rejects NUL.
        return None, "field 'run_id': must not contain the NUL character (\\u0000)", []
    model = RECORD_MODELS.get(rtype)
    if model is None:
        return value, None, []  # unknown types are kept raw
    fast = _FAST_CHECKS.get(rtype)
    if fast is not None and fast(value):
        return value, None, []
    record = value
    warnings: list[str] = []
    for _ in range(MAX_REPAIRS):
        try:
            model.model_validate(record)
            if rtype == "step" and type(record["step"]) is float:
                # 2.0 is the step 2 (JSON has one kind of number): a key is stored as an
                # integer (PostgreSQL's integer column refused "2.0" and the batch with it).
                record = {**record, "step": int(record["step"])}
            return record, None, warnings
        except ValidationError as exc:
            failure = exc
        first = failure.errors(include_url=False)[0]
        loc = list(first.get("loc", ()))
        if not loc or loc[0] in REQUIRED_FIELDS.get(rtype, ()) or loc[0] in ("type", "run_id"):
            return None, describe_validation_error(failure), []
        if first.get("type") == "missing" and len(loc) > 1:
            # A nested object without its key field (a criterion spec without id): drop the object.
            loc = loc[:-1]
        if record is value:
            record = _copy_along(value, loc)
        else:
            record = _copy_along(record, loc)
        if not _drop(record, loc):
            return None, describe_validation_error(failure), []
        path = ".".join(str(p) for p in loc)
        warnings.append(f"field '{path}': {_error_message(first)}; value ignored, the rest of the record kept")
    return None, "too many invalid fields", []


def _copy_along(value: Any, loc: list[Any]) -> Any:
    """A copy of `value` in which the containers along `loc` are new (the rest is shared)."""
    if isinstance(value, dict):
        out: Any = dict(value)
    elif isinstance(value, list):
        out = list(value)
    else:
        return value
    if loc:
        key = loc[0]
        try:
            out[key] = _copy_along(out[key], loc[1:])
        except (KeyError, IndexError, TypeError):
            pass
    return out


def _drop(record: Any, loc: list[Any]) -> bool:
    """Remove the value at `loc` (a dict key, or a list element); False when it is not there."""
    parent = record
    for key in loc[:-1]:
        try:
            parent = parent[key]
        except (KeyError, IndexError, TypeError):
            return False
    last = loc[-1]
    if isinstance(parent, dict) and last in parent:
        del parent[last]
        return True
    if isinstance(parent, list) and isinstance(last, int) and 0 <= last < len(parent):
        del parent[last]
        return True
    return False


# Fast acceptance of the two record types that make up nearly every line (steps and
# events). Building the pydantic models was the largest single cost of ingest after the
# database (docs/performance.md). These checks accept only values the models surely
# accept (exact types, nothing coerced); anything else, valid or not, goes on to the
# models, so the error messages stay theirs.


def _actions_ok(holder: dict[str, Any]) -> bool:
    """No `actions`, or a list of objects with a string `name` (a step's, or its decision's)."""
    x = holder.get("actions")
    if x is None and "actions" not in holder:
        return True
    if type(x) is not list:
        return False
    for a in x:
        if type(a) is not dict or type(a.get("name")) is not str:
            return False
    return True


def _fast_step(v: dict[str, Any]) -> bool:
    # Written out (locals, no helper per value): this runs for every step, and a step has
    # several critic outputs and actions (the helpers cost a third of its time, measured).
    get = v.get
    step = get("step")
    if type(step) is not int or step < 0 or step > INT32_MAX:
        return False
    x = get("ts")
    if x is not None and type(x) is not str:
        return False
    x = get("duration_s")
    if x is not None and type(x) is not float and type(x) is not int:
        return False
    x = get("cost_usd")
    if x is not None and type(x) is not float and type(x) is not int:
        return False
    if type(get("retry", False)) is not bool:
        return False
    d = get("decision")
    if d is not None:
        if type(d) is not dict:
            return False
        for key in ("mode", "rationale", "final_answer"):
            x = d.get(key)
            if x is not None and type(x) is not str:
                return False
        if not _actions_ok(d):
            return False
    if not _actions_ok(v):
        return False
    outs = get("critic_outputs")
    if outs is not None or "critic_outputs" in v:
        if type(outs) is not list:
            return False
        for o in outs:
            if type(o) is not dict:
                return False
            c = o.get("critic")
            r = o.get("reason")
            sc = o.get("score")
            if not ((c is None or type(c) is str) and type(o.get("action", "continue")) is str
                    and (r is None or type(r) is str) and (sc is None or type(sc) is float or type(sc) is int)):
                return False
    x = get("action_results")
    if (x is not None or "action_results" in v) and type(x) is not list:
        return False
    x = get("tool_invocations")
    if x is not None or "tool_invocations" in v:
        if type(x) is not list:
            return False
        for t in x:
            if type(t) is not dict:
                return False
    x = get("state_diff")
    if (x is not None or "state_diff" in v) and type(x) is not dict:
        return False
    t = get("tokens")
    if t is not None:
        if type(t) is not dict:
            return False
        for key in ("input", "output", "total", "cache_read", "cache_write"):
            x = t.get(key)
            if x is not None and (type(x) is not int or not -TOKENS_MAX <= x <= TOKENS_MAX):
                return False
    lv = get("live_verdicts")
    if lv is not None and not (type(lv) is dict and all(x in LIVE_VERDICTS for x in lv.values())):
        return False
    return True


def _fast_event(v: dict[str, Any]) -> bool:
    # The helpers above written out: this runs for most lines of a trace.
    step = v.get("step")
    ok = v.get("ok")
    ts = v.get("ts")
    return (type(v.get("phase")) is str and (step is None or (type(step) is int and -INT32_MAX <= step <= INT32_MAX))
            and (ok is None or type(ok) is bool)
            and (ts is None or type(ts) is str))


_FAST_CHECKS: dict[str, Callable[[dict[str, Any]], bool]] = {"step": _fast_step, "event": _fast_event}


Transform = Callable[[dict[str, Any], int], list[dict[str, Any]]]


def iter_items(
    fh: IO[bytes],
    *,
    start_offset: int = 0,
    start_line: int = 0,
    max_line_bytes: int,
    final: bool,
    transform: Optional[Transform] = None,
    hasher: Optional["hashlib._Hash"] = None,
) -> Iterator[Item]:
    """Yield an Item per line of `fh`, which is positioned at `start_offset`.

    `final` says the source is complete: a last line without a newline is then either a
    record (when it parses) or an error; otherwise it is left pending for the writer to
    finish. `transform` maps a parsed foreign line to v1 records (QitOS, coder_eval).
    """
    offset = start_offset
    line_no = start_line
    errors = 0
    suppressed = 0
    peek = getattr(fh, "peek", None)
    if start_offset == 0 and peek is not None:
        whole = _whole_file_error(peek(SNIFF_BYTES)[:SNIFF_BYTES])
        if whole is not None:
            # Read through (hashed, counted) so the file is done with, as its bad lines were.
            while chunk := fh.read(1 << 20):
                offset += len(chunk)
                if hasher is not None:
                    hasher.update(chunk)
            yield Item(line=1, end=offset, error=whole)
            return
    while True:
        raw = fh.readline(max_line_bytes + 1)
        if not raw:
            break
        line_no += 1
        start = offset
        offset += len(raw)
        complete = raw.endswith(b"\n")
        if not complete and len(raw) > max_line_bytes:
            # Over-long line: skip the rest of it without holding it in memory.
            if hasher is not None:
                hasher.update(raw)
            while True:
                chunk = fh.readline(1 << 20)
                if not chunk:
                    break
                offset += len(chunk)
                if hasher is not None:
                    hasher.update(chunk)
                if chunk.endswith(b"\n"):
                    break
            item = Item(line=line_no, end=offset, error=f"line longer than the maximum of {max_line_bytes} bytes")
            if _ends_in_cr(raw):
                item.error = _CR_HINT + item.error
        else:
            if not complete and not final:
                # The writer has not finished this line yet: leave it for the next pass.
                yield Item(line=line_no, end=start, pending=True)
                return
            body = raw.rstrip(b"\r\n") if complete else raw.rstrip(b"\r")
            at = start
            if body[:1] == b"\xef" and body.startswith(BOM):
                # at the start of the file, and of a line where two files that each began
                # with one were joined (`cat a.jsonl b.jsonl`): it was "not valid UTF-8"
                body = body[len(BOM):]
                at += len(BOM)
            # A record starts with "{": only other lines need the copy strip() makes.
            if not body or (body[0] != 0x7B and not body.strip()):
                if hasher is not None:
                    hasher.update(raw)
                if complete and peek is not None:
                    # A run of blank lines is skipped a buffer at a time, not a line at a
                    # time: a gzip of 1 GiB of newlines took 23 minutes line by line. At most
                    # BLANK_RUN_BYTES at once, so the caller still sees progress (and can stop).
                    skipped = 0
                    while skipped < BLANK_RUN_BYTES:
                        ahead = peek(1 << 16)
                        blank = len(ahead) - len(ahead.lstrip(b"\r\n"))
                        whole = ahead.rfind(b"\n", 0, blank) + 1 if blank else 0
                        if not whole:
                            break
                        run = fh.read(whole)
                        if hasher is not None:
                            hasher.update(run)
                        offset += len(run)
                        skipped += len(run)
                        line_no += run.count(b"\n")
                        if len(run) < whole:
                            break
                yield Item(line=line_no, end=offset)
                continue
            value, err = parse_line(body)
            mended = err is LONE_SURROGATE
            if mended:
                value, err = mend_surrogates(body)
            if err is None and transform is None:
                # One line, one record: the usual case, without the lists the general path
                # below builds (it runs for every line). A rejected record falls through.
                rec, err, warns = validate_record(value)
                if mended and err is None:
                    warns = [SURROGATE_WARNING, *(warns or ())]
                if err is None:
                    if hasher is not None:
                        hasher.update(raw)
                    # a mended record is stored as mended, never as the line's bytes
                    yield Item(line=line_no, end=offset, record=rec, raw=None if mended else body,
                               warnings=warns or None, at=at)
                    continue
            elif err is None and transform is not None:
                try:
                    records = transform(value, line_no)
                except (ValueError, TypeError, KeyError, AttributeError) as exc:
                    records, err = [], str(exc) or type(exc).__name__
            else:
                records = [value] if value is not None else []
            item_warnings: list[str] = [SURROGATE_WARNING] if mended else []
            if err is None:
                checked: list[dict[str, Any]] = []
                for rec in records:
                    rec, err, warns = validate_record(rec)
                    if err:
                        break
                    checked.append(rec)
                    item_warnings.extend(warns)
                records = checked if err is None else records
            if err is None or complete:
                if hasher is not None:
                    hasher.update(raw)
            if err is None:
                if not records:
                    yield Item(line=line_no, end=offset)
                for i, rec in enumerate(records):
                    yield Item(line=line_no, end=offset, record=rec, raw=body if transform is None and not mended else None,
                               warnings=item_warnings if (item_warnings and i == 0) else None,
                               more=i < len(records) - 1, at=at)
                continue
            cr_only = err.startswith("invalid JSON") and _ends_in_cr(body)
            item = Item(line=line_no, end=offset, error=_CR_HINT + err if cr_only else err)
            if not complete:
                # Reported, but not consumed: if the file grows, the line is read again.
                if not cr_only:
                    item.error = f"truncated last line (no newline at end of file): {err}"
                item.end = start
                item.pending = True
        errors += 1
        if errors <= MAX_ERRORS_PER_FILE:
            yield item
        else:
            suppressed += 1
            yield Item(line=line_no, end=item.end, pending=item.pending)
        if item.pending:
            break
    if suppressed:
        yield Item(line=line_no, end=offset, error=f"{suppressed} more bad lines not listed", pending=True)


def gzip_reader(raw: IO[bytes], compressed: int, *, max_decompressed: int, max_ratio: float,
                extra: tuple[Budget, ...] = ()) -> IO[bytes]:
    """A gzip stream decompressed as it is read, stopped at the size cap or the ratio cap."""
    size = Budget(max_decompressed, f"cannot decompress: decompressed data exceeds the limit of {max_decompressed} bytes")
    ratio = Budget(ratio_limit(compressed, max_ratio),
                   f"cannot decompress: data decompresses to more than {max_ratio:g} times its compressed size "
                   "(QITA_MAX_ARCHIVE_RATIO); the rest was not read")
    return LimitedReader(gzip.GzipFile(fileobj=raw, mode="rb"), size, ratio, *extra)  # type: ignore[return-value]


def open_stream(path: str, *, gz: bool, max_decompressed: int, max_ratio: float = 200.0) -> IO[bytes]:
    """Open a trace file for binary line reading; gzip is decompressed with size and ratio caps."""
    fh = open(path, "rb", buffering=1 << 20)
    if gz:
        import os

        return gzip_reader(fh, os.fstat(fh.fileno()).st_size, max_decompressed=max_decompressed, max_ratio=max_ratio)
    return fh


GZIP_ERRORS = (OSError, EOFError, zlib.error, LimitExceeded)
#: What reading a zip entry may raise besides those (a damaged or unsupported entry).
ENTRY_ERRORS = (*GZIP_ERRORS, RuntimeError, NotImplementedError, ValueError)
