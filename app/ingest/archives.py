"""Zip archives: entries read straight from the archive, every one checked, with limits while streaming.

Trace files inside (`.jsonl`, `.jsonl.gz`) are read from the archive as they are
ingested, never unpacked to disk. Folders with a layout of their own (QitOS runs, a
coder_eval results folder or any part of one: recognised by their `manifest.json`,
`run.json`, `experiment.json` or `task.json`) are unpacked into a private temporary
folder (`app.tempfiles`) and read from there.

Limits, all counted on the bytes actually produced (headers can lie): the number of
entries (`max_archive_entries`), the total decompressed size (`max_archive_bytes`), and
the ratio of decompressed to compressed size, per entry and for the whole archive
(`max_archive_ratio`, past `lines.RATIO_FLOOR`). One line's length is capped by the
line reader (`max_line_bytes`). An entry that breaks a rule or cannot be unpacked is
skipped with an error naming it; the rest of the archive, and of the upload, is read.

Entry names never become paths outside the temporary folder (absolute names, `..`
parts and drive letters are rejected), symbolic links are not created, and an entry
whose path the file system refuses (a name too long, a file where a folder must be) is
skipped like any unreadable entry.
"""

from __future__ import annotations

import os
import posixpath
import stat
import zipfile
from typing import Optional

from .. import tempfiles
from .lines import ENTRY_ERRORS, Budget, LimitedReader, LimitExceeded, gzip_reader, ratio_limit
from .sources import Discovery, Source, is_trace_file, walk_folder

CHUNK = 1 << 20
#: Files that mark a folder as a layout read as a whole (unpacked, then read from disk).
#: A coder_eval results folder has run.json only once its run ended, and a variant or
#: task folder zipped on its own has none: its task.json files mark it too.
LAYOUT_MARKERS = ("manifest.json", "run.json", "experiment.json", "task.json")
ENTRY_FAILURES = (*ENTRY_ERRORS, zipfile.BadZipFile)


class _Stamp:
    """What `os.stat` would say of an entry, for the skip-unchanged check: its size and CRC."""

    def __init__(self, info: zipfile.ZipInfo):
        self.st_size = info.file_size
        self.st_mtime = float(info.CRC)


def safe_entry_name(name: str) -> Optional[str]:
    """The entry's relative path inside the archive, or None when it would escape."""
    name = name.replace("\\", "/")
    if not name or name.startswith("/") or (len(name) > 1 and name[1] == ":"):
        return None
    parts = [p for p in name.split("/") if p not in ("", ".")]
    if not parts or any(p == ".." for p in parts) or any("\x00" in p for p in parts):
        return None
    return posixpath.join(*parts)


#: The zip flag that says an entry's name is UTF-8 (APPNOTE 4.4.4, bit 11).
UTF8_NAME_FLAG = 0x800


def entry_name(info: zipfile.ZipInfo) -> str:
    """The entry's name as its maker wrote it. Info-ZIP's `zip` (Linux's) writes names as
    UTF-8 bytes without the UTF-8 flag, which zipfile then reads as cp437: a task folder
    `t03-ünï` became `t03-├╝n├»`, no longer the task's id. Unflagged bytes that are valid
    UTF-8 are read as UTF-8, as `unzip` reads them; others stay cp437."""
    if info.flag_bits & UTF8_NAME_FLAG:
        return info.filename
    try:
        return info.filename.encode("cp437").decode("utf-8")
    except (UnicodeEncodeError, UnicodeDecodeError):
        return info.filename


#: Archives named inside an archive: said to be skipped, never opened.
NESTED_ARCHIVES = (".zip", ".tar", ".tar.gz", ".tgz", ".7z", ".rar")


def _entry_label(label: str, rel: str) -> str:
    """How an archive entry is named in reports and warnings: `archive.zip/inner/path`."""
    return f"{label.rstrip('/')}/{rel}"


def zip_sources(path: str, label: str, key_prefix: Optional[str], out: Discovery) -> None:
    """Add the trace sources inside the archive at `path` (read later, straight from it)."""
    try:
        zf = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError, ValueError, NotImplementedError) as exc:
        out.errors.append((label, None, f"not a readable zip archive: {exc}"))
        return
    out.cleanup.append(zf)
    prefix = key_prefix or f"zip:{os.path.realpath(path)}!"
    archive_size = os.path.getsize(path)
    total = Budget(min(out.max_archive_bytes, ratio_limit(archive_size, out.max_archive_ratio)), "")
    total.message = (f"archive decompresses to more than the limit of {out.max_archive_bytes} bytes"
                     if total.limit == out.max_archive_bytes else
                     f"archive decompresses to more than {out.max_archive_ratio:g} times its size "
                     "(QITA_MAX_ARCHIVE_RATIO)") + "; the rest of it was not read"
    entries = []
    for n, info in enumerate(zf.infolist()):
        if n >= out.max_archive_entries:
            out.errors.append((label, None, f"archive has more than {out.max_archive_entries} entries "
                                            "(QITA_MAX_ARCHIVE_ENTRIES); the rest of it was not read"))
            break
        if info.is_dir():
            continue
        name = entry_name(info)
        rel = safe_entry_name(name)
        if rel is None:
            out.errors.append((_entry_label(label, name), None, "archive entry skipped: its name points outside the archive"))
            continue
        mode = (info.external_attr >> 16) & 0o170000
        if mode and stat.S_ISLNK(mode):
            out.errors.append((_entry_label(label, rel), None, "archive entry skipped: symbolic link"))
            continue
        too_big = declared_too_big(info, total.limit, out)
        if too_big:
            # Refused on what the archive declares, before a byte is read: a bomb read until
            # its own ratio stopped it had used up the whole archive's budget, and the good
            # entries after it were refused too. (zipfile never gives more bytes than an
            # entry declares, and what the entries produce together is still counted.)
            out.errors.append((_entry_label(label, rel), None, too_big))
            continue
        entries.append((rel, info))
    layouts = {posixpath.dirname(rel) for rel, _ in entries if posixpath.basename(rel) in LAYOUT_MARKERS}

    def in_layout(rel: str) -> bool:
        parent = posixpath.dirname(rel)
        while True:
            if parent in layouts:
                return True
            if not parent:
                return False
            parent = posixpath.dirname(parent)

    unpack = []
    for rel, info in entries:
        if in_layout(rel):
            unpack.append((rel, info))
        elif is_trace_file(rel):
            out.sources.append(_entry_source(zf, info, rel, label, prefix, total, out))
        elif rel.lower().endswith(NESTED_ARCHIVES):
            # other files (notes, reports) are passed over as in a folder; an archive inside
            # is traces the upload seemed to hold and did not read
            out.errors.append((_entry_label(label, rel), None, "archive entry skipped: an archive inside an archive "
                                                               "is not read; upload it on its own"))
    if unpack:
        _unpack(zf, unpack, label, prefix, total, out)


def declared_too_big(info: zipfile.ZipInfo, total_limit: int, out: Discovery) -> Optional[str]:
    """Why an entry is skipped for the size it declares (past the archive's limit, or its
    ratio to its compressed size); None when it may be read."""
    if info.file_size > total_limit and total_limit == out.max_archive_bytes:
        return (f"archive entry declares {info.file_size} bytes, more than the limit of {out.max_archive_bytes} "
                "bytes: skipped")
    if info.file_size > ratio_limit(info.compress_size, out.max_archive_ratio):
        return (f"archive entry declares {info.file_size} bytes, more than {out.max_archive_ratio:g} times its "
                "compressed size (QITA_MAX_ARCHIVE_RATIO): skipped")
    return None


def _entry_source(zf: zipfile.ZipFile, info: zipfile.ZipInfo, rel: str, label: str, prefix: str, total: Budget,
                  out: Discovery) -> Source:
    entry_label = _entry_label(label, rel)
    gz = rel.lower().endswith(".gz")
    ratio, limit = out.max_archive_ratio, out.max_archive_bytes

    def open_entry():
        raw = zf.open(info)
        entry_ratio = Budget(ratio_limit(info.compress_size, ratio),
                             f"archive entry decompresses to more than {ratio:g} times its compressed size "
                             "(QITA_MAX_ARCHIVE_RATIO); the rest of it was not read")
        if gz:
            return gzip_reader(LimitedReader(raw, total, entry_ratio), info.compress_size, max_decompressed=limit,
                               max_ratio=ratio, extra=(total,))
        return LimitedReader(raw, total, entry_ratio)

    return Source(key=f"{prefix}{entry_label}", label=entry_label, path=f"{label}!{rel}", kind="gz" if gz else "jsonl",
                  size=info.file_size, open=open_entry, stamp=_Stamp(info))


def _unpack(zf: zipfile.ZipFile, entries, label: str, prefix: str, total: Budget, out: Discovery) -> None:
    """Unpack the entries of layout folders into a private folder, within the limits, and read it."""
    tmp = tempfiles.make_dir("zip-")
    out.cleanup.append(tmp)
    real_tmp = os.path.realpath(tmp) + os.sep
    ratio = out.max_archive_ratio
    for rel, info in entries:
        target = os.path.join(tmp, *rel.split("/"))
        if not os.path.realpath(target).startswith(real_tmp):
            out.errors.append((_entry_label(label, rel), None, "archive entry skipped: its name points outside the archive"))
            continue
        entry_ratio = Budget(ratio_limit(info.compress_size, ratio),
                             f"archive entry decompresses to more than {ratio:g} times its compressed size "
                             "(QITA_MAX_ARCHIVE_RATIO); the rest of it was not read")
        try:
            os.makedirs(os.path.dirname(target), exist_ok=True)
            with zf.open(info) as src, open(target, "xb") as dst:
                reader = LimitedReader(src, total, entry_ratio)
                while True:
                    chunk = reader.read(CHUNK)
                    if not chunk:
                        break
                    dst.write(chunk)
        except LimitExceeded as exc:
            _drop(target)
            if exc.args and exc.args[0] == total.message:
                out.errors.append((label, None, total.message))
                break
            out.errors.append((_entry_label(label, rel), None, str(exc)))
        except ENTRY_FAILURES as exc:
            _drop(target)
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc) or type(exc).__name__
            out.errors.append((_entry_label(label, rel), None, f"archive entry skipped: cannot unpack it: {reason}"))
    walk_folder(tmp, label, prefix, out)


def _drop(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass
