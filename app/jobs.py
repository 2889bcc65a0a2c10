"""The single writer: every write (uploads, the folder watcher, sweeps) runs on one thread.

SQLite allows one writer at a time; funnelling writes through one queue means readers
(WAL) never wait and writers never meet a lock timeout. Each submitted job gets an id
so a page can poll its progress until it is done.
"""

from __future__ import annotations

import itertools
import logging
import queue
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from sqlalchemy.engine import Engine

from .errors import QitaError
from .ingest import Ingestor
from .settings import Settings

log = logging.getLogger("qita.jobs")

MAX_KEPT_JOBS = 200


@dataclass
class Job:
    """A unit of write work and what became of it."""

    id: int
    label: str
    fn: Callable[["Job", Ingestor], Any]
    state: str = "queued"  # queued | running | done | failed
    done_bytes: int = 0
    total_bytes: int = 0
    result: Any = None
    error: Optional[str] = None
    created: float = field(default_factory=time.time)
    finished: threading.Event = field(default_factory=threading.Event)

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "label": self.label, "state": self.state, "done_bytes": self.done_bytes,
                "total_bytes": self.total_bytes, "error": self.error,
                "result": self.result.to_json() if hasattr(self.result, "to_json") else self.result}


class Writer:
    """Owns the ingest queue and its thread."""

    def __init__(self, engine: Engine, settings: Settings):
        self.engine = engine
        self.settings = settings
        self._queue: "queue.Queue[Optional[Job]]" = queue.Queue()
        self._jobs: dict[int, Job] = {}
        self._ids = itertools.count(1)
        self._thread: Optional[threading.Thread] = None
        self._current: Optional[Job] = None
        self._ingestor = Ingestor(engine, settings, progress=self._progress)
        self.version = 0  # bumped after every job: pages use it to know data changed

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._loop, name="qita-writer", daemon=True)
            self._thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        if self._thread is not None:
            self._queue.put(None)
            self._thread.join(timeout)
            self._thread = None

    def submit(self, label: str, fn: Callable[[Job, Ingestor], Any], *, total_bytes: int = 0) -> Job:
        job = Job(id=next(self._ids), label=label, fn=fn, total_bytes=total_bytes)
        self._jobs[job.id] = job
        if len(self._jobs) > MAX_KEPT_JOBS:
            for old in sorted(self._jobs)[: len(self._jobs) - MAX_KEPT_JOBS]:
                if self._jobs[old].finished.is_set():
                    self._jobs.pop(old, None)
        self._queue.put(job)
        return job

    def run(self, label: str, fn: Callable[[Job, Ingestor], Any], *, timeout: Optional[float] = None) -> Job:
        """Submit and wait for the job to finish."""
        job = self.submit(label, fn)
        job.finished.wait(timeout)
        return job

    def get(self, job_id: int) -> Optional[Job]:
        return self._jobs.get(job_id)

    def _progress(self, n: int) -> None:
        if self._current is not None:
            self._current.done_bytes += n

    def _loop(self) -> None:
        while True:
            job = self._queue.get()
            if job is None:
                return
            self._current = job
            job.state = "running"
            try:
                job.result = job.fn(job, self._ingestor)
                job.state = "done"
            except QitaError as exc:
                job.state, job.error = "failed", exc.message
            except Exception as exc:  # a bad job must never kill the writer
                log.exception("write job %s failed", job.label)
                job.state, job.error = "failed", f"internal error: {type(exc).__name__}"
            finally:
                self._current = None
                self.version += 1
                job.finished.set()
