"""Zip archives: unpacked into a private temporary folder with every entry checked.

Entry names never become paths outside that folder (absolute names, `..` parts and
drive letters are rejected), symlinks are not created, and the total decompressed
size is capped, counted on the bytes actually written (headers can lie).
"""

from __future__ import annotations

import os
import posixpath
import stat
import tempfile
import zipfile
from typing import Optional

from .sources import Discovery, _walk

CHUNK = 1 << 20


def safe_entry_name(name: str) -> Optional[str]:
    """The entry's relative path inside the archive, or None when it would escape."""
    name = name.replace("\\", "/")
    if not name or name.startswith("/") or (len(name) > 1 and name[1] == ":"):
        return None
    parts = [p for p in name.split("/") if p not in ("", ".")]
    if not parts or any(p == ".." for p in parts) or any("\x00" in p for p in parts):
        return None
    return posixpath.join(*parts)


def zip_sources(path: str, label: str, key_prefix: Optional[str], out: Discovery) -> None:
    """Unpack the archive at `path` and add the trace sources found inside."""
    limit = out.max_archive_bytes
    try:
        zf = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError) as exc:
        out.errors.append((label, None, f"not a readable zip archive: {exc}"))
        return
    tmp = tempfile.mkdtemp(prefix="qita-zip-")
    out.cleanup.append(tmp)
    written = 0
    with zf:
        for info in zf.infolist():
            if info.is_dir():
                continue
            rel = safe_entry_name(info.filename)
            if rel is None:
                out.errors.append((f"{label}!{info.filename}", None, "archive entry skipped: its name points outside the archive"))
                continue
            mode = (info.external_attr >> 16) & 0o170000
            if mode and stat.S_ISLNK(mode):
                out.errors.append((f"{label}!{rel}", None, "archive entry skipped: symbolic link"))
                continue
            target = os.path.join(tmp, *rel.split("/"))
            if not os.path.realpath(target).startswith(os.path.realpath(tmp) + os.sep):
                out.errors.append((f"{label}!{rel}", None, "archive entry skipped: its name points outside the archive"))
                continue
            os.makedirs(os.path.dirname(target), exist_ok=True)
            try:
                with zf.open(info) as src, open(target, "wb") as dst:
                    while True:
                        chunk = src.read(CHUNK)
                        if not chunk:
                            break
                        written += len(chunk)
                        if written > limit:
                            raise OverflowError
                        dst.write(chunk)
            except OverflowError:
                os.unlink(target)
                out.errors.append((label, None, f"archive decompresses to more than the limit of {limit} bytes; "
                                                "the rest of it was not read"))
                break
            except (zipfile.BadZipFile, OSError, EOFError, NotImplementedError, RuntimeError) as exc:
                out.errors.append((f"{label}!{rel}", None, f"archive entry unreadable: {exc}"))
                continue
    _walk(tmp, label, key_prefix or f"zip:{os.path.realpath(path)}!", out)
