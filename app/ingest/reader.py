"""Reading a line source into batches, in the writer's process or in one of its own.

`read_chunks` is the whole reading side of an ingest pass over a file of lines: it checks
that the bytes read before are unchanged (a resumed pass) or starts again from the top
(a new version), reads and hashes every line, checks and parses it, and hands out one
`Chunk` per batch (app.ingest.batch): the batch's rows, its bad lines and warnings, and
the offset and digest to save with it. It never touches the database; the writer
(app.ingest.Ingestor) commits each chunk in one transaction.

A large file is read in a forked child process (`ReaderProcess`): reading, checking,
building rows and masking search texts are most of an ingest's Python, and a process of
their own puts them on the second core while the writer's transaction runs on the
first. What crosses the pipe is the chunks (rows, not parsed records), pickled. The child
only reads the file and writes the pipe: it touches no lock, connection or thread of the
parent's, ignores Ctrl-C (the parent stops it) and ends with `os._exit`, so nothing of
the parent's is finalised twice. If it fails, the writer reads the rest itself.
"""

from __future__ import annotations

import hashlib
import os
import pickle
import queue
import signal
import sys
import threading
import traceback
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from typing import Any, Callable, Iterator, Optional

from .batch import ReadBatch
from .lines import ENTRY_ERRORS, LimitExceeded, iter_items, open_stream

#: A batch ends after this many bytes of the source even before `batch_lines` lines: the
#: writer holds a batch whole, and 2,000 lines of 1 MB observations made a writer of 511 MiB
#: (101 MiB with this cap, at the same speed).
BATCH_BYTES = 8 * 1024 * 1024
#: Lines read between two looks at the stop flag (a look is a call; a line costs ~10 µs).
STOP_CHECK_LINES = 64
#: How often the writer looks at its stop flag while it waits for the reader process.
POLL_S = 0.1


class Stopped(Exception):
    """The ingest was told to stop (cancel, time budget, a stop signal): the batch being
    built was not written; every batch before it was, with its file offset. `report` is
    what those batches did (set by `Ingestor.ingest_discovery`)."""

    report: Optional[Any] = None


class ReaderFailed(Exception):
    """The reader process ended without finishing (a bug, or killed): the writer reads the
    rest of the source itself."""


@dataclass(slots=True)
class Chunk:
    """One batch of a pass and where the pass stands after it."""

    batch: ReadBatch
    #: (line or None, message, is an error) for bad lines and warnings, in the order read
    issues: list[tuple[Optional[int], str, bool]] = field(default_factory=list)
    #: per run, warnings about its records (shown on the run's page)
    run_warnings: dict[str, list[str]] = field(default_factory=dict)
    #: where the chunk begins in the source
    start: int = 0
    #: the bytes and lines consumed so far, and the sha256 of those bytes
    offset: int = 0
    line: int = 0
    #: the number of its first line (the lines before it, plus one)
    first_line: int = 1
    digest: str = ""
    #: the last chunk of the pass (the end of the source, or a limit of the stream)
    last: bool = False
    #: the source's bytes before the saved offset changed: the pass started from the top
    rewrite: bool = False


def open_source(src: Any, settings: Any):
    """A source's byte stream: a zip entry's own opener, else the file (gzip decompressed with its caps)."""
    if src.open is not None:
        return src.open()
    return open_stream(src.path, gz=src.kind == "gz", max_decompressed=settings.max_archive_bytes,
                       max_ratio=settings.max_archive_ratio)


def read_chunks(src: Any, prev: Optional[dict[str, Any]], *, settings: Any, final: bool, encode: bool,
                stop: Optional[Callable[[], bool]] = None, positions: bool = False) -> Iterator[Chunk]:
    """The chunks of one pass over a line source. `prev`: its saved offset, line and
    content hash (a resumed pass), or None. `stop`, polled every few lines, ends the pass
    with `Stopped`. `positions`: rows say where their text lies in the file instead of
    holding it (`FileText` puts it in)."""
    hasher = hashlib.sha256()
    offset = line = 0
    rewrite = False
    fh = open_source(src, settings)
    try:
        if prev is not None and prev["offset"] and prev["content_hash"]:
            # Resume only if the bytes already read are still the same.
            remaining = prev["offset"]
            try:
                while remaining > 0:
                    data = fh.read(min(remaining, 1 << 20))
                    if not data:
                        break
                    hasher.update(data)
                    remaining -= len(data)
            except ENTRY_ERRORS:
                remaining = 1
            if remaining == 0 and hasher.hexdigest() == prev["content_hash"]:
                offset, line = prev["offset"], prev["lines"]
            else:
                fh.close()
                fh = open_source(src, settings)
                hasher = hashlib.sha256()
                rewrite = True  # read before, and its bytes changed: a new version
        yield from _chunks(src, fh, offset, line, hasher, rewrite, settings=settings, final=final, encode=encode,
                           stop=stop, positions=positions)
    finally:
        fh.close()


def _chunks(src: Any, fh: Any, offset: int, line: int, hasher: Any, rewrite: bool, *, settings: Any, final: bool,
            encode: bool, stop: Optional[Callable[[], bool]], positions: bool) -> Iterator[Chunk]:
    label = src.label
    name = label.rsplit("/", 1)[-1]
    limit = settings.batch_lines
    chunk = Chunk(ReadBatch(label, encode=encode, positions=positions), start=offset, offset=offset, line=line,
                  first_line=line + 1, rewrite=rewrite)
    digest = hasher.copy()
    batch, issues = chunk.batch, chunk.issues
    tick = 0
    try:
        for item in iter_items(fh, start_offset=offset, start_line=line, max_line_bytes=settings.max_line_bytes,
                               final=final, transform=src.transform, hasher=hasher):
            tick += 1
            if stop is not None and tick >= STOP_CHECK_LINES:
                tick = 0
                if stop():
                    raise Stopped()
            if item.error:
                issues.append((item.line, item.error, True))
            if item.record is not None:
                batch.add(item.record, item.raw, item.line, item.at)
                if item.warnings:
                    for w in item.warnings:
                        issues.append((item.line, w, False))
                    chunk.run_warnings.setdefault(item.record["run_id"], []).extend(
                        f"{name}:{item.line}: {w}" for w in item.warnings)
            if item.pending or item.more:
                continue
            # iter_items hashes exactly the consumed lines, so this is the digest of [0, end).
            chunk.offset, chunk.line = item.end, item.line
            digest = hasher.copy()
            if len(batch) >= limit or chunk.offset - chunk.start >= BATCH_BYTES:
                chunk.digest = digest.hexdigest()
                batch.close()
                yield chunk
                chunk = Chunk(ReadBatch(label, encode=encode, positions=positions), start=chunk.offset,
                              offset=chunk.offset, line=chunk.line, first_line=chunk.line + 1)
                batch, issues = chunk.batch, chunk.issues
    except LimitExceeded as exc:
        # A limit of the stream, not of a line: named by file only.
        issues.append((None, str(exc), True))
    except ENTRY_ERRORS as exc:
        issues.append((chunk.line + 1, f"cannot decompress: {exc}", True))
    chunk.digest = digest.hexdigest()
    chunk.last = True
    batch.close()
    yield chunk


# -- the reader process -------------------------------------------------------------------


def use_process(src: Any, prev: Optional[dict[str, Any]], size: int, settings: Any) -> bool:
    """Whether to read this source in a process of its own: a plain or gzip file on disk
    with at least `reader_process_bytes` left to read, on Linux (fork)."""
    least = settings.reader_process_bytes
    if not least or not sys.platform.startswith("linux") or not hasattr(os, "fork"):
        return False
    if src.open is not None or src.transform is not None or src.finish is not None:
        return False  # a zip entry's stream, or a reader keeping state across lines (QitOS)
    done = prev["offset"] if prev is not None and prev["offset"] else 0
    return size - done >= least


def by_position(src: Any, prev: Optional[dict[str, Any]]) -> bool:
    """Whether the reader process sends where each line's text lies instead of the text
    (`FileText`): for a plain file on disk read from its first byte (the writer checks what
    it reads against the reader's digest of the bytes from there)."""
    return src.kind == "jsonl" and src.open is None and src.transform is None and not (prev and prev["offset"])


#: Most bytes of one chunk the writer reads in one go for its rows' texts; past that (a
#: chunk of very long lines) each text is read on its own, so memory stays bounded.
WINDOW_BYTES = 32 << 20


class FileText:
    """The writer's side of texts sent by position: it reads each chunk's bytes from the
    file itself, puts each row's text in place (`ReadBatch.resolve`), and checks those
    bytes against the digest the reader took of the bytes it parsed. A file rewritten in
    between would give rows of one version and texts of another: the pass fails instead
    (`ReaderFailed`), and the writer reads the rest itself.

    Pickling every text in the reader and reading it back from the pipe in the writer cost
    more than the writer reading the file (0.3 s and 0.2 s of CPU for 106 MB, against
    0.15 s to read and hash it: docs/performance.md)."""

    def __init__(self, path: str):
        self.fd = os.open(path, os.O_RDONLY)
        self.start = 0
        self.hasher = hashlib.sha256()

    def fill(self, chunk: Chunk) -> None:
        """Put the texts in `chunk`'s rows, from the bytes between the last chunk and its end."""
        lo, hi = self.start, chunk.offset
        batch = chunk.batch
        if hi - lo <= WINDOW_BYTES:
            data = self._read(lo, hi - lo)
            batch.resolve(data, lo)
            self.hasher.update(data)
        else:
            batch.resolve(b"", lo, self._read)
            for at in range(lo, hi, WINDOW_BYTES):
                self.hasher.update(self._read(at, min(WINDOW_BYTES, hi - at)))
        if self.hasher.hexdigest() != chunk.digest:
            raise ReaderFailed("the file changed while it was read")
        self.start = hi

    def _read(self, at: int, n: int) -> bytes:
        parts: list[bytes] = []
        while n > 0:
            try:
                data = os.pread(self.fd, n, at)
            except OSError as exc:  # the writer reads the rest itself, as for a reader that failed
                raise ReaderFailed(f"cannot read the file's texts: {exc.strerror or exc}") from exc
            if not data:
                raise ReaderFailed("the file changed while it was read (it is shorter)")
            parts.append(data)
            at += len(data)
            n -= len(data)
        return parts[0] if len(parts) == 1 else b"".join(parts)

    def close(self) -> None:
        os.close(self.fd)


class ReaderProcess:
    """`read_chunks` in a forked child; iterate it in the writer for the chunks, in order."""

    def __init__(self, src: Any, prev: Optional[dict[str, Any]], *, settings: Any, final: bool, encode: bool,
                 stop: Optional[Callable[[], bool]] = None, ahead: Optional[int] = None):
        self.stop = stop
        # Opened before the child opens it, so both read the same file unless it is replaced
        # at that moment (which the digest check finds).
        r, w = os.pipe()
        try:
            self.text = FileText(src.path) if by_position(src, prev) else None
        except OSError:
            os.close(r)
            os.close(w)
            raise
        try:
            pid = os.fork()
        except OSError:
            os.close(r)
            os.close(w)
            if self.text is not None:
                self.text.close()
            raise
        if pid == 0:  # the child: never returns
            os.close(r)
            _child(Connection(w, readable=False), src, prev, settings=settings, final=final, encode=encode,
                   positions=self.text is not None, ahead=ahead or AHEAD)
        os.close(w)
        self.pid: Optional[int] = pid
        self.conn = Connection(r, writable=False)

    def ready(self) -> bool:
        """Whether the next chunk has arrived (or begun to)."""
        return self.pid is not None and self.conn.poll(0)

    def __iter__(self) -> Iterator[Chunk]:
        try:
            while True:
                while not self.conn.poll(POLL_S):
                    if self.stop is not None and self.stop():
                        raise Stopped()
                try:
                    kind, payload = pickle.loads(self.conn.recv_bytes())
                except (EOFError, OSError) as exc:
                    raise ReaderFailed("the reader process ended early") from exc
                except Exception as exc:  # noqa: BLE001 — a message that does not unpickle
                    raise ReaderFailed(f"the reader process sent what cannot be read: {exc}") from exc
                if kind == "chunk":
                    if self.text is not None:
                        self.text.fill(payload)
                    yield payload
                    if payload.last:
                        return
                elif kind == "oserror":
                    raise OSError(payload[0], payload[1])
                else:
                    raise ReaderFailed(payload)
        finally:
            self.close()

    def close(self) -> None:
        """End the child (at once when it has not finished) and collect it."""
        if self.pid is None:
            return
        pid, self.pid = self.pid, None
        self.conn.close()
        if self.text is not None:
            self.text.close()
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        try:
            os.waitpid(pid, 0)
        except ChildProcessError:
            pass


def _child(conn: Connection, src: Any, prev: Optional[dict[str, Any]], *, settings: Any, final: bool,
           encode: bool, positions: bool, ahead: int) -> None:
    code = 0
    try:
        # Ctrl-C reaches the whole process group: the writer decides when to stop this.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        _widen_pipe(conn.fileno())
        sender = _Sender(conn, ahead)
        try:
            for chunk in read_chunks(src, prev, settings=settings, final=final, encode=encode, positions=positions):
                sender.put(pickle.dumps(("chunk", chunk), protocol=pickle.HIGHEST_PROTOCOL))
        except OSError as exc:
            code = 1
            sender.put(pickle.dumps(("oserror", (exc.errno or 0, exc.strerror or type(exc).__name__))))
        except Exception:  # noqa: BLE001 — told to the writer, which reads the rest itself
            code = 1
            sender.put(pickle.dumps(("failed", traceback.format_exc(limit=8))))
        # The message goes after the chunks before it, by the same thread: never in the
        # middle of one (the writer would read a torn message).
        sender.finish()
    except BaseException:  # noqa: BLE001 — the writer went away (a broken pipe), or the sender failed
        code = 1
    finally:
        os._exit(code)


#: Chunks the reader process may have built ahead of the writer (each ~2 MB at 2,000 lines;
#: `ahead` of a ReaderProcess for more, app.ingest.early).
AHEAD = 3


class _Sender:
    """The child's pipe writer, in a thread: the reader goes on building the next chunks
    while the writer is busy with its transaction, instead of waiting for it to take the
    last one (a pipe holds 64 KB to 1 MB; a chunk is about 2 MB)."""

    def __init__(self, conn: Connection, ahead: int = AHEAD):
        self.conn = conn
        self.queue: "queue.Queue[Optional[bytes]]" = queue.Queue(maxsize=ahead)
        self.error: Optional[BaseException] = None
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            while (data := self.queue.get()) is not None:
                self.conn.send_bytes(data)
        except BaseException as exc:  # noqa: BLE001 — handed to the reading thread
            self.error = exc

    def put(self, data: Optional[bytes]) -> None:
        while True:
            if self.error is not None:
                raise self.error
            try:
                self.queue.put(data, timeout=POLL_S)
                return
            except queue.Full:
                continue

    def finish(self) -> None:
        self.put(None)
        self.thread.join()
        if self.error is not None:
            raise self.error


def _widen_pipe(fd: int) -> None:
    """Let the pipe hold 1 MB (Linux's limit for any user) instead of 64 KB: a chunk then
    crosses in a few writes, not dozens of wake-ups on both sides."""
    try:
        import fcntl

        fcntl.fcntl(fd, getattr(fcntl, "F_SETPIPE_SZ", 1031), 1 << 20)
    except (OSError, ImportError):
        pass


