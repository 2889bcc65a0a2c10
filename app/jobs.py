"""Write jobs: uploads, folder-watch passes and sweeps, run in the background, fairly, and stoppable.

- **Fair queue.** Jobs wait in one queue per owner (an upload's client address, the
  watcher, the board's own sweeps) and are started round-robin across owners, on up to
  `ingest_workers` threads, so one client's long upload does not hold back another's.
- **One write at a time.** SQLite allows one writer: every batch's transaction takes
  `gate`, a lock handed over first-come first-served, so running jobs take turns batch
  by batch (a 20-minute upload and a small one running together: the small one is done
  after its own few batches, not after the long one). Readers (WAL) never wait.
- **Stoppable.** A job's ingest checks its stop flag between lines (`Ingestor.stop`):
  cancel (`POST /api/jobs/{id}/cancel`), its time budget (`job_budget_s`) and the board
  stopping all end it at the next check. The batch being built is then not written;
  every batch written before stays, with its file offset, so the same upload (or pass)
  later resumes where it stopped.
- **Progress.** Each job counts bytes read and records written, for the page that polls it.
"""

from __future__ import annotations

import functools
import itertools
import logging
import threading
import time
from collections import OrderedDict, deque
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Optional

from sqlalchemy.engine import Engine

from .errors import BoardError
from .ingest import Ingestor, Stopped
from .settings import Settings

log = logging.getLogger("qita.jobs")

MAX_KEPT_JOBS = 200


class FairGate:
    """A lock handed to waiters in the order they asked (threading.Lock makes no such promise:
    a job releasing and re-taking it at once could starve the others)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._waiters: deque[threading.Event] = deque()
        self._held = False

    @contextmanager
    def hold(self) -> Iterator[None]:
        ticket: Optional[threading.Event] = None
        with self._lock:
            if self._held or self._waiters:
                ticket = threading.Event()
                self._waiters.append(ticket)
            else:
                self._held = True
        if ticket is not None:
            ticket.wait()  # the holder hands the gate over: _held stays True
        try:
            yield
        finally:
            with self._lock:
                if self._waiters:
                    self._waiters.popleft().set()
                else:
                    self._held = False


@dataclass
class Job:
    """A unit of write work and what became of it."""

    id: int
    label: str
    fn: Callable[["Job", Ingestor], Any]
    owner: str = "board"
    state: str = "queued"  # queued | running | done | failed | cancelled
    done_bytes: int = 0
    total_bytes: int = 0
    result: Any = None
    error: Optional[str] = None
    created: float = field(default_factory=time.time)
    started: Optional[float] = None
    ended: Optional[float] = None
    finished: threading.Event = field(default_factory=threading.Event)
    #: why it should stop: "cancel", "budget" or "shutdown" (None: go on)
    stop_reason: Optional[str] = None
    #: called when the job ends or is dropped unrun (an upload removes its stored files)
    cleanup: Optional[Callable[[], None]] = None
    ingestor: Optional[Ingestor] = None
    deadline: Optional[float] = None
    #: Cancel was asked for after the job had done all its work: everything was read and
    #: kept, which the result says (it showed as if no Cancel had been pressed)
    cancel_late: bool = False

    @property
    def is_upload(self) -> bool:
        """An upload's job (the board's own work — a pass of the watcher, the lab's index,
        a sweep — is neither shown as an upload nor cancelled by a visitor)."""
        return self.owner.startswith("upload:")

    @property
    def records(self) -> int:
        return self.ingestor.records_done if self.ingestor is not None else 0

    def should_stop(self) -> bool:
        if self.stop_reason is None and self.deadline is not None and time.monotonic() > self.deadline:
            self.stop_reason = "budget"
        return self.stop_reason is not None

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "label": self.label, "state": self.state, "done_bytes": self.done_bytes,
                "total_bytes": self.total_bytes, "records": self.records, "error": self.error,
                "cancel_late": self.cancel_late,
                "result": self.result.to_json() if hasattr(self.result, "to_json") else self.result}


class Writer:
    """Owns the job queue, its worker threads and the write gate."""

    def __init__(self, engine: Engine, settings: Settings):
        self.engine = engine
        self.settings = settings
        self.gate = FairGate()
        self._lock = threading.Condition()
        self._queues: "OrderedDict[str, deque[Job]]" = OrderedDict()
        self._jobs: dict[int, Job] = {}
        self._running: set[int] = set()
        self._ids = itertools.count(1)
        self._threads: list[threading.Thread] = []
        self._stopping = False
        self.version = 0  # bumped after every job: pages use it to know data changed

    # -- life ---------------------------------------------------------------------------------
    def start(self) -> None:
        if self._threads:
            return
        self._stopping = False
        for i in range(max(1, self.settings.ingest_workers)):
            t = threading.Thread(target=self._loop, name=f"qita-writer-{i}", daemon=True)
            t.start()
            self._threads.append(t)

    def stop(self, timeout: float = 2.0) -> None:
        """Stop: queued jobs are dropped (their files removed), running ones told to stop at
        their next check; waits up to `timeout` seconds for them. A job still inside a batch
        then is in an open transaction that the database rolls back when the process ends."""
        with self._lock:
            self._stopping = True
            dropped = [job for q in self._queues.values() for job in q]
            self._queues.clear()
            for job_id in self._running:
                self._jobs[job_id].stop_reason = "shutdown"
            self._lock.notify_all()
        for job in dropped:
            self._end(job, "cancelled", error="the board stopped before this job ran")
        deadline = time.monotonic() + timeout
        for t in self._threads:
            t.join(max(0.0, deadline - time.monotonic()))
        self._threads = []

    # -- jobs ---------------------------------------------------------------------------------
    def submit(self, label: str, fn: Callable[[Job, Ingestor], Any], *, total_bytes: int = 0, owner: str = "board",
               cleanup: Optional[Callable[[], None]] = None, budget_s: Optional[float] = None) -> Job:
        job = Job(id=next(self._ids), label=label, fn=fn, owner=owner, total_bytes=total_bytes, cleanup=cleanup)
        job.deadline = None if budget_s is None else budget_s
        with self._lock:
            if self._stopping:
                self._end(job, "cancelled", error="the board is stopping", locked=True)
                return job
            self._jobs[job.id] = job
            if len(self._jobs) > MAX_KEPT_JOBS:
                for old in sorted(self._jobs)[: len(self._jobs) - MAX_KEPT_JOBS]:
                    if self._jobs[old].finished.is_set():
                        self._jobs.pop(old, None)
            self._queues.setdefault(owner, deque()).append(job)
            self._lock.notify()
        return job

    def run(self, label: str, fn: Callable[[Job, Ingestor], Any], *, timeout: Optional[float] = None) -> Job:
        """Submit and wait for the job to finish."""
        job = self.submit(label, fn)
        job.finished.wait(timeout)
        return job

    def get(self, job_id: int) -> Optional[Job]:
        return self._jobs.get(job_id)

    def upload(self, job_id: int) -> Optional[Job]:
        """Job `job_id` if it is an upload's (the pages and buttons of uploads show no other)."""
        job = self._jobs.get(job_id)
        return job if job is not None and job.is_upload else None

    def cancel(self, job_id: int) -> Optional[Job]:
        """Cancel a queued job at once, a running one at its next check; a finished one stays as it is."""
        with self._lock:
            job = self._jobs.get(job_id)
            if job is None or job.finished.is_set():
                if job is not None and job.state == "done":
                    job.cancel_late = True
                return job
            queue = self._queues.get(job.owner)
            if queue is not None and job in queue:
                queue.remove(job)
                if not queue:
                    del self._queues[job.owner]
                self._end(job, "cancelled", error="it had not started: nothing was read", locked=True)
                return job
            job.stop_reason = "cancel"
        return job

    def queued_before(self, job: Job) -> int:
        """Jobs that will start before this one (for the page)."""
        with self._lock:
            if job.state != "queued":
                return 0
            owners = list(self._queues)
            q = self._queues.get(job.owner)
            if q is None or job not in q:
                return 0
            rounds = list(q).index(job)
            return sum(min(len(self._queues[o]), rounds + (1 if owners.index(o) < owners.index(job.owner) else 0))
                       for o in owners if o != job.owner) + rounds

    # -- workers ------------------------------------------------------------------------------
    def _next(self) -> Optional[Job]:
        with self._lock:
            while not self._stopping and not self._queues:
                self._lock.wait()
            if self._stopping:
                return None
            owner, queue = next(iter(self._queues.items()))
            job = queue.popleft()
            # Round robin: this owner goes to the back of the line.
            del self._queues[owner]
            if queue:
                self._queues[owner] = queue
            self._running.add(job.id)
            job.state = "running"
            return job

    def _loop(self) -> None:
        while True:
            job = self._next()
            if job is None:
                return
            job.started = time.monotonic()
            if job.deadline is not None:
                job.deadline = job.started + job.deadline
            try:
                job.ingestor = Ingestor(self.engine, self.settings, progress=functools.partial(self._progress, job),
                                        gate=self.gate.hold, stop=job.should_stop)
                job.result = job.fn(job, job.ingestor)
                # A stop asked for during the last batch finds no next check: all was read.
                job.cancel_late = job.stop_reason == "cancel"
                self._end(job, "done")
            except Stopped:
                reason = job.stop_reason
                message = {"cancel": "what was read before is kept; upload the same files again to go on",
                           "budget": f"stopped after its time budget of {self.settings.job_budget_s:g} s "
                                     "(QITA_JOB_BUDGET_S): what was read is kept; upload the same files again to go on",
                           }.get(reason or "", "the board stopped: what was read is kept")
                self._end(job, "failed" if reason == "budget" else "cancelled", error=message)
            except BoardError as exc:
                self._end(job, "failed", error=exc.message)
            except Exception as exc:  # a bad job must never kill the writer
                log.exception("write job %s failed", job.label)
                self._end(job, "failed", error=f"internal error: {type(exc).__name__}")

    def _end(self, job: Job, state: str, *, error: Optional[str] = None, locked: bool = False) -> None:
        if job.cleanup is not None:
            try:
                job.cleanup()
            except Exception:  # cleanup is best effort; stale files go at the next start
                log.exception("cleanup of job %s failed", job.label)
        job.state, job.error = state, error if error is not None else job.error
        job.ended = time.monotonic()
        if locked:
            self._running.discard(job.id)
        else:
            with self._lock:
                self._running.discard(job.id)
        self.version += 1
        job.finished.set()

    def _progress(self, job: Job, n: int) -> None:
        job.done_bytes += n
