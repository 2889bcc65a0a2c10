"""Receiving uploaded trace files: a streaming multipart reader with a size cap, and the ingest job.

The request body is read chunk by chunk and each file part is written straight into a
private temporary folder, so memory stays flat and the size limit is enforced while the
bytes arrive (and up front from Content-Length). Files are stored under names the
board makes (`0.jsonl`, `1.zip`): the client's filename is only a label, cleaned to a
base name, used in messages and as the source's identity (`upload:NAME`), which is
what makes uploading the same file twice change nothing.
"""

from __future__ import annotations

import os
import shutil
import unicodedata
from dataclasses import dataclass, field
from typing import Any, Optional

from fastapi import Request
from python_multipart.exceptions import FormParserError
from python_multipart.multipart import MultipartParser, parse_options_header
from starlette.requests import ClientDisconnect

from . import tempfiles
from .errors import BoardError
from .ingest import IngestIssue, IngestReport, Stopped
from .ingest.sources import UPLOAD_KEY_PREFIX, upload_name
from .removal import after_upload

#: Accepted names and the suffix the stored copy gets (which tells ingest how to read it).
SUFFIXES = ((".jsonl.gz", ".jsonl.gz"), (".ndjson.gz", ".jsonl.gz"), (".jsonl", ".jsonl"), (".ndjson", ".jsonl"),
            (".zip", ".zip"), (".json", ".json"))
MAX_NAME = 200
MAX_FILES = 1000


def too_large(limit: int) -> BoardError:
    return BoardError(f"upload too large: the limit is {limit:,} bytes (QITA_MAX_UPLOAD_BYTES); "
                      "split the files or ingest them with `qita ingest PATH` on the board's machine", status=413)


def clean_name(name: str) -> Optional[str]:
    """The client's filename reduced to a printable base name, or None when nothing is left."""
    base = name.replace("\\", "/").rsplit("/", 1)[-1]
    base = "".join(ch for ch in base if unicodedata.category(ch)[0] != "C").strip()
    if base in ("", ".", ".."):
        return None
    return base[-MAX_NAME:]


def stored_suffix(name: str) -> Optional[str]:
    low = name.lower()
    for given, suffix in SUFFIXES:
        if low.endswith(given):
            return suffix
    return None


@dataclass
class Received:
    """What one upload request delivered."""

    folder: str
    files: list[tuple[str, str, int]] = field(default_factory=list)  # (label, stored path, bytes)
    rejected: list[IngestIssue] = field(default_factory=list)
    total: int = 0
    names: set[str] = field(default_factory=set)  # the labels given so far, each once

    def label_for(self, name: str) -> str:
        """`name`, or `NAME (2)`, `NAME (3)`… when a file of this upload already has it."""
        label, n = name, 1
        while label in self.names:
            n += 1
            label = upload_name(name, n)
        self.names.add(label)
        return label

    def remove(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)


class _Collector:
    """MultipartParser callbacks that write file parts to disk as they arrive."""

    def __init__(self, out: Received):
        self.out = out
        self.header_name = b""
        self.header_value = b""
        self.disposition = b""
        self.fh = None
        self.label: Optional[str] = None
        self.path: Optional[str] = None
        self.size = 0
        self.skip = False

    def on_part_begin(self) -> None:
        self.disposition, self.fh, self.label, self.path, self.size, self.skip = b"", None, None, None, 0, False

    def on_header_field(self, data: bytes, start: int, end: int) -> None:
        self.header_name += data[start:end]

    def on_header_value(self, data: bytes, start: int, end: int) -> None:
        self.header_value += data[start:end]

    def on_header_end(self) -> None:
        if self.header_name.lower() == b"content-disposition":
            self.disposition = self.header_value
        self.header_name, self.header_value = b"", b""

    def on_headers_finished(self) -> None:
        _kind, options = parse_options_header(self.disposition)
        if b"filename" not in options:
            self.skip = True  # an ordinary form field: nothing to keep
            return
        raw = options[b"filename"].decode("utf-8", errors="replace")
        name = clean_name(raw)
        if not raw:
            self.skip = True  # the browser's empty part when no file was chosen
            return
        if name is None:
            self.out.rejected.append(IngestIssue(raw[:MAX_NAME] or "(no name)", None, "rejected: the file has no usable name"))
            self.skip = True
            return
        suffix = stored_suffix(name)
        if suffix is None:
            self.out.rejected.append(IngestIssue(
                name, None, "rejected: not a trace file (expected .jsonl, .jsonl.gz, .zip or a coder_eval task.json)"))
            self.skip = True
            return
        if len(self.out.files) >= MAX_FILES:
            raise BoardError(f"too many files in one upload (at most {MAX_FILES})", status=413)
        self.label = self.out.label_for(name)
        self.path = os.path.join(self.out.folder, f"{len(self.out.files)}{suffix}")
        self.fh = open(self.path, "xb")

    def on_part_data(self, data: bytes, start: int, end: int) -> None:
        if self.fh is not None:
            self.fh.write(data[start:end])
            self.size += end - start

    def on_part_end(self) -> None:
        if self.fh is not None:
            self.fh.close()
            self.out.files.append((self.label, self.path, self.size))
            self.fh = None

    def close(self) -> None:
        if self.fh is not None:
            self.fh.close()
            self.fh = None


async def receive_files(request: Request, *, max_bytes: int) -> Received:
    """Stream the request's multipart body into a new temporary folder (removed on any error)."""
    length = request.headers.get("content-length")
    if length and length.isdigit() and int(length) > max_bytes:
        raise too_large(max_bytes)
    ctype, params = parse_options_header(request.headers.get("content-type", ""))
    if ctype != b"multipart/form-data" or b"boundary" not in params:
        raise BoardError("send the files as multipart/form-data (field name: files)", status=415)
    out = Received(folder=tempfiles.make_dir("upload-"))
    collector = _Collector(out)
    callbacks: Any = {name: getattr(collector, name) for name in (
        "on_part_begin", "on_part_data", "on_part_end", "on_header_field", "on_header_value", "on_header_end",
        "on_headers_finished")}
    try:
        parser = MultipartParser(params[b"boundary"], callbacks)
        async for chunk in request.stream():
            out.total += len(chunk)
            if out.total > max_bytes:
                raise too_large(max_bytes)
            parser.write(chunk)
        parser.finalize()
    except FormParserError as exc:
        collector.close()
        out.remove()
        raise BoardError(f"invalid multipart upload: {exc}") from exc
    except ClientDisconnect as exc:
        # The browser went away (a reload or a closed tab mid-upload): nothing to answer,
        # and no error of the board's (it was logged as one, with two tracebacks).
        collector.close()
        out.remove()
        raise BoardError("the upload was cut off before all of it arrived: nothing was read", status=400) from exc
    except BaseException:
        collector.close()
        out.remove()
        raise
    collector.close()
    if not out.files and not out.rejected:
        out.remove()
        raise BoardError("no file in the upload: choose .jsonl, .jsonl.gz, .zip or task.json files (field name: files)")
    return out


def ingest_job(received: Received):
    """The writer job: ingest the stored files under their uploaded names (the writer then
    removes them through the job's cleanup, `Received.remove`, on every path)."""

    def run(job, ingestor) -> dict[str, Any]:
        if received.files:
            try:
                report = ingestor.ingest_paths([p for _l, p, _s in received.files], closed=True, key_prefix=UPLOAD_KEY_PREFIX,
                                               labels=[label for label, _p, _s in received.files])
            except Stopped as stopped:
                # Cancelled or out of time: what it wrote before stays, so the upload is
                # remembered with it (its runs can be removed with it later).
                partial = stopped.report
                if partial is not None and partial.run_ids:
                    job.result = {**upload_result(partial, received),
                                  **after_upload(ingestor.engine, report=partial, files=received.files,
                                                 rejected=received.rejected), "partial": True}
                raise
        else:
            report = IngestReport()
        return {**upload_result(report, received),
                **after_upload(ingestor.engine, report=report, files=received.files, rejected=received.rejected)}

    return run


def upload_result(report: IngestReport, received: Received) -> dict[str, Any]:
    """What the upload did, for the page and the API: runs created/updated and every rejected line."""
    errors = [*received.rejected, *report.errors]
    return {
        "files": [{"name": label, "bytes": size} for label, _p, size in received.files],
        "records": report.records,
        "runs_created": sorted(report.created),
        "runs_updated": report.runs_updated,
        "runs_unchanged": report.runs_unchanged,
        "rejected": [str(e) for e in errors],
        "errors": [e.to_json() for e in errors],
        # Same shape as `errors` (and the CLI's report): {file, line, message}.
        "warnings": [w.to_json() for w in report.warnings],
        # read before, not a file that holds no records (an empty file is not "nothing new")
        "unchanged": bool(received.files) and not report.fresh and not report.records and not errors,
    }
