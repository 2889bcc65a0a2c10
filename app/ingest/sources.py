"""Finding trace sources under the paths a user gave, and the readers for foreign layouts.

A path may be a `.jsonl` / `.jsonl.gz` file, a `.zip` archive, a folder (searched
recursively), or a glob. Folders with a known layout are read as a whole: a QitOS run
folder (`manifest.json` + `steps.jsonl` + `events.jsonl`) and a coder_eval results
folder (`run.json` at the root). Each reader yields `Source`s that the ingest core
reads line by line.
"""

from __future__ import annotations

import glob
import os
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

import orjson

from .lines import Transform

TRACE_SUFFIXES = (".jsonl", ".jsonl.gz", ".ndjson", ".ndjson.gz")
MAX_MANIFEST_BYTES = 16 * 1024 * 1024


#: How the keys of uploaded sources begin (`ingest_paths(key_prefix=...)` for uploads).
UPLOAD_KEY_PREFIX = "upload:"

#: The extension of a name, `.gz` with the one before it (`t.jsonl.gz`).
_EXTENSION = re.compile(r"(\.[^./ ]+(?:\.gz)?)$", re.I)
#: A second file of one name in an upload is `NAME (2)`, before its extension (upload_name).
_NUMBERED = re.compile(r" \((\d+)\)(?=(\.[^./ ]+(?:\.gz)?)?$)", re.I)


def upload_name(name: str, n: int) -> str:
    """The `n`th file called `name` in one upload (n >= 2), as a browser names a second
    download: `task.json` -> `task (2).json`. An upload's files are told apart by name (it
    is their identity, `upload:NAME`): coder_eval writes every task's file as task.json, and
    two of them in one upload were taken for two versions of one file."""
    found = _EXTENSION.search(name)
    cut = found.start() if found else len(name)
    return f"{name[:cut]} ({n}){name[cut:]}"


def unnumbered(name: str) -> str:
    """The name a file had before upload_name numbered it (`task (2).json` -> `task.json`),
    for what the name itself says: a coder_eval task.json, run.json or experiment.json."""
    return _NUMBERED.sub("", name, count=1)


def text_name(name: str) -> str:
    """A file name as text the database and the terminal take: a name that is not valid
    UTF-8 reaches Python with its bad bytes as lone surrogates, which neither SQLite nor
    PostgreSQL stores (the ingest failed with a UnicodeEncodeError); they are written as
    `\\xff` escapes instead. The file is still opened by its real name (`Source.path`)."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        pass
    else:
        return name
    try:
        return name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    except UnicodeEncodeError:  # a surrogate no file system's bytes make (`\\ud800`)
        return name.encode("utf-8", "backslashreplace").decode("utf-8")


@dataclass
class Source:
    """One readable input: a file of lines, or a whole-document producer of records."""

    key: str  # identity in ingest_sources (absolute path, or "upload:NAME")
    label: str  # how errors name it: the path as given, or the uploaded name
    path: str  # where to read it on this machine (never shown)
    kind: str = "jsonl"  # jsonl | gz | qitos_manifest | qitos_steps | qitos_events | document
    source_format: str = "qita"
    transform: Optional[Transform] = None
    #: for whole-document sources: returns (records, errors as (line, message))
    produce: Optional[Callable[[], tuple[list[dict[str, Any]], list[tuple[Optional[int], str]]]]] = None
    #: called after the source was read (QitOS: emit run_end from an END event)
    finish: Optional[Callable[[], list[dict[str, Any]]]] = None
    size: int = 0
    #: a stream not on disk (a zip entry): how to open it, decompressing, with its limits
    open: Optional[Callable[[], Any]] = None
    #: (st_size, st_mtime) standing in for os.stat of a stream not on disk
    stamp: Optional[Any] = None
    #: what a run began by this source remembers as its origin (default: `key`), and its name
    #: for people (default: `label`); files read as one (a QitOS folder) share one
    origin: Optional[str] = None
    origin_label: Optional[str] = None
    #: set while reading: the source was read before and its bytes changed (not only grew),
    #: so this pass is a new version of it (app.ingest.overwrite screens what it replaces)
    rewrite: bool = False
    #: during such a pass over an upload, its reload (app.ingest.overwrite.Reload)
    reload: Optional[Any] = None
    #: during such a pass over a whole document whose bytes did not change: why it is read
    #: again (what it depends on, `context`, or its `reading` changed), as warnings say it
    changed: Optional[str] = None
    #: for whole-document sources: (run id, message) pairs `produce` found while reading a
    #: run it kept (a field of the wrong type, read as absent): each is listed in the
    #: report and shown on the run's page, and the rest of the run is read
    notes: list[tuple[str, str]] = field(default_factory=list)
    #: for whole-document sources: the bytes of the other files what `produce` makes
    #: depends on (a coder_eval task.json's run.json and experiment.json), so a pass reads
    #: it again when they change even if its own bytes did not
    context: Optional[Callable[[], bytes]] = None
    #: for whole-document sources: the version of the reading that makes its records; a
    #: new one (a reading rule fixed) reads every such document again, as a new version
    reading: str = ""

    def __post_init__(self) -> None:
        # What is stored and shown, never what is opened (`path`).
        self.key, self.label = text_name(self.key), text_name(self.label)
        self.origin = text_name(self.origin) if self.origin is not None else None
        self.origin_label = text_name(self.origin_label) if self.origin_label is not None else None


@dataclass
class Discovery:
    """What a set of user paths resolved to."""

    sources: list[Source] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    #: paths that exist but hold nothing the board can read (a usage error for the CLI)
    empty: list[str] = field(default_factory=list)
    errors: list[tuple[str, Optional[int], str]] = field(default_factory=list)
    #: temporary folders (unpacked archive layouts) and open archives, removed / closed once read
    cleanup: list[Any] = field(default_factory=list)
    max_archive_bytes: int = 4 * 1024**3
    max_archive_ratio: float = 200.0
    max_archive_entries: int = 10_000
    max_line_bytes: int = 64 * 1024 * 1024

    def remove_temporary(self) -> None:
        import shutil

        for item in self.cleanup:
            if isinstance(item, str):
                shutil.rmtree(item, ignore_errors=True)
            else:
                item.close()
        self.cleanup.clear()

    @property
    def total_bytes(self) -> int:
        return sum(s.size for s in self.sources)


def is_trace_file(name: str) -> bool:
    low = name.lower()
    return low.endswith(TRACE_SUFFIXES)


def read_document_bytes(path: str, limit: int = MAX_MANIFEST_BYTES) -> tuple[Optional[bytes], Optional[str]]:
    """The bytes of a small document with a size cap; (bytes, error)."""
    try:
        size = os.path.getsize(path)
        if size > limit:
            return None, f"file larger than {limit} bytes"
        with open(path, "rb") as fh:
            return fh.read(limit + 1), None
    except OSError as exc:
        return None, f"cannot read: {exc.strerror or type(exc).__name__}"


def read_json_document(path: str, limit: int = MAX_MANIFEST_BYTES) -> tuple[Optional[Any], Optional[str]]:
    """Read a small JSON document with a size cap; (value, error)."""
    data, err = read_document_bytes(path, limit)
    return (None, err) if data is None else parse_json_document(data)


def parse_json_document(data: bytes) -> tuple[Optional[Any], Optional[str]]:
    """A JSON document's value from its bytes (a byte-order mark allowed); (value, error)."""
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    try:
        return orjson.loads(data), None
    except orjson.JSONDecodeError as exc:
        return None, f"invalid JSON: {exc}"


def _file_source(path: str, label: str, key: Optional[str] = None) -> Source:
    gz = path.lower().endswith(".gz")
    try:
        size = os.path.getsize(path)
    except OSError:
        size = 0
    return Source(key=key or os.path.realpath(path), label=label, path=path, kind="gz" if gz else "jsonl", size=size)


#: Folder layouts other than plain JSONL: (detect(folder) -> bool, sources(folder, label, key_prefix)).
FolderReader = tuple[Callable[[str], bool], Callable[[str, str, Optional[str]], list[Source]]]


def walk_folder(root: str, label_root: str, key_prefix: Optional[str], out: Discovery) -> None:
    """The sources of a folder: a layout one of the readers knows (app/ingest/readers.py),
    else its trace files and sub-folders, recursively."""
    from .readers import FOLDER_READERS  # the readers build on this module's Source

    for detect, make in FOLDER_READERS:
        if detect(root):
            out.sources.extend(make(root, label_root, key_prefix))
            return
    try:
        entries = sorted(os.scandir(root), key=lambda e: e.name)
    except OSError as exc:
        out.errors.append((label_root, None, f"cannot read folder: {exc.strerror or type(exc).__name__}"))
        return
    for entry in entries:
        label = f"{label_root.rstrip('/')}/{entry.name}" if label_root else entry.name
        try:
            if entry.is_dir(follow_symlinks=False):
                walk_folder(entry.path, label, key_prefix, out)
            elif entry.is_file() and is_trace_file(entry.name):
                key = f"{key_prefix}{label}" if key_prefix else None
                out.sources.append(_file_source(entry.path, label, key))
        except OSError:
            continue


def discover(paths: list[str], *, key_prefix: Optional[str] = None, labels: Optional[list[str]] = None,
             max_archive_bytes: int = 4 * 1024**3, settings: Any = None) -> Discovery:
    """Resolve user paths (files, folders, globs) into sources.

    `key_prefix` and `labels` are for uploads: sources are then identified by the
    uploaded names, never by the temporary folder they were unpacked into.
    """
    out = Discovery(max_archive_bytes=max_archive_bytes)
    if settings is not None:
        out.max_archive_bytes = settings.max_archive_bytes
        out.max_archive_ratio = settings.max_archive_ratio
        out.max_archive_entries = settings.max_archive_entries
        out.max_line_bytes = settings.max_line_bytes
    for i, given in enumerate(paths):
        label = labels[i] if labels else given
        if not os.path.exists(given) and glob.has_magic(given):
            matches = sorted(glob.glob(given, recursive=True))
            if not matches:
                out.missing.append(given)
            for m in matches:
                _add(m, m, key_prefix, out)
            continue
        if not os.path.exists(given):
            out.missing.append(given)
            continue
        _add(given, label, key_prefix, out)
    return out


NOTHING_FOUND = "no traces found in {}: expected JSONL files, QitOS run folders or coder_eval results"
#: coder_eval's summaries: given alone they hold no run, only its results folder does.
SUMMARY_JSON = ("run.json", "experiment.json", "variant.json")


def _add(path: str, label: str, key_prefix: Optional[str], out: Discovery) -> None:
    before = (len(out.sources), len(out.errors))
    if os.path.isdir(path):
        walk_folder(path, label, key_prefix, out)
    elif path.lower().endswith(".zip"):
        from .archives import zip_sources

        try:
            zip_sources(path, label, key_prefix, out)
        except OSError as exc:
            out.errors.append((label, None, f"cannot read archive: {exc.strerror or type(exc).__name__}"))
    elif path.lower().endswith(".json"):
        _json_document(path, label, key_prefix, out)
        return
    else:
        key = f"{key_prefix}{label}" if key_prefix else None
        out.sources.append(_file_source(path, label, key))
    if (len(out.sources), len(out.errors)) == before:
        out.empty.append(label)
        out.errors.append((label, None, NOTHING_FOUND.format(label)))


def _json_document(path: str, label: str, key_prefix: Optional[str], out: Discovery) -> None:
    """A `.json` file: one JSON document, never JSON Lines. A coder_eval task.json is read;
    anything else is one clear error, not one per line."""
    from .coder_eval import task_json_source

    # The name as given: an upload's stored copy has a name the board made.
    name = unnumbered(label.replace("\\", "/").rsplit("/", 1)[-1].lower())
    if name in SUMMARY_JSON:
        out.empty.append(label)
        out.errors.append((label, None, f"coder_eval's {name} summarizes a results folder and holds no run itself: "
                                        "ingest the folder that holds it (or a zip of it)"))
        return
    head = b""
    try:
        with open(path, "rb") as fh:
            head = fh.read(1 << 16)
    except OSError as exc:
        out.errors.append((label, None, f"cannot read file: {exc.strerror or type(exc).__name__}"))
        return
    if name == "task.json" or (b'"final_status"' in head or b'"success_criteria_results"' in head):
        out.sources.append(task_json_source(path, label, key_prefix))
        return
    if _trace_record(head):
        # A trace saved under a .json name: its lines are records, read as what they are
        # (it was refused as "a JSON document, not JSON Lines", which it is not).
        out.sources.append(_file_source(path, label, f"{key_prefix}{label}" if key_prefix else None))
        return
    out.empty.append(label)
    out.errors.append((label, None, "not a trace: a JSON document, not JSON Lines (one record per line); "
                                    "expected JSONL files, QitOS run folders or coder_eval results"))


def _trace_record(head: bytes) -> bool:
    """Whether a file's first line is a trace record (an object naming its `type` and
    `run_id`), whatever the file is called."""
    first = head.removeprefix(b"\xef\xbb\xbf").lstrip(b" \t\r\n").split(b"\n", 1)[0]
    try:
        value = orjson.loads(first)
    except orjson.JSONDecodeError:
        return False
    return isinstance(value, dict) and isinstance(value.get("type"), str) and isinstance(value.get("run_id"), str)


def key_for(path: str, label: str, key_prefix: Optional[str]) -> str:
    """The ingest_sources identity of a file: its real path, or the upload's name."""
    return f"{key_prefix}{label}" if key_prefix else os.path.realpath(path)


def join_label(label: str, name: str) -> str:
    return f"{label.rstrip('/')}/{name}" if label else name


