"""TraceWriter: writes one run's records in trace format v1, one flushed line at a time.

Each record is validated against the format models before it is written, so a
writer bug surfaces in the run, not later in the board. Lines are flushed as they
are written so a board watching the file can follow the run live. Several writers
may share one file (runs interleave); each write is a single `write()` of a whole
line, opened in append mode.
"""

from __future__ import annotations

import os
import threading
from datetime import datetime, timezone
from pathlib import Path
from typing import IO, Any, Optional, Union

import orjson

from .format import RECORD_MODELS, SCHEMA_ID, without_lone_surrogates


def utc_now() -> str:
    """The current time as an RFC 3339 string in UTC."""
    return datetime.now(timezone.utc).isoformat()


def _default(obj: Any) -> Any:
    # Traces must never fail to write because a payload holds an odd object.
    if hasattr(obj, "model_dump"):
        return obj.model_dump(mode="json", by_alias=True)
    if hasattr(obj, "__dataclass_fields__"):
        return {k: getattr(obj, k) for k in obj.__dataclass_fields__}
    if isinstance(obj, (set, frozenset, tuple)):
        return list(obj)
    if isinstance(obj, bytes):
        return obj.decode("utf-8", errors="replace")
    if hasattr(obj, "value") and isinstance(getattr(obj, "value"), str):
        return obj.value
    return repr(obj)


def dumps_record(record: dict[str, Any]) -> bytes:
    """Serialise one record to a JSON line (bytes, with the trailing newline).

    A string holding half a surrogate pair (a tool's output decoded with `surrogateescape`)
    is written with U+FFFD in its place: orjson refused it and the run's trace stopped
    with a TypeError.
    """
    try:
        return orjson.dumps(record, default=_default, option=orjson.OPT_NON_STR_KEYS) + b"\n"
    except TypeError as exc:
        if "surrogates" not in str(exc):
            raise
        return orjson.dumps(without_lone_surrogates(record), default=_default, option=orjson.OPT_NON_STR_KEYS) + b"\n"


class TraceWriter:
    """Write one run's trace.

    `target` is a path (appended to, parent folders created) or an open binary file.
    Experiment, variant, task id and replicate are the caller's to set in `run_start`.

    Use it as a context manager: when the block raises before `run_end` was written,
    the writer finishes the run with `status="error"` and
    `stop_reason="unrecoverable_error"`, so the board shows it finished with the error
    rather than running forever. A process killed outright leaves no `run_end`; the
    board then shows the run as running, then abandoned.
    """

    _locks: dict[str, threading.Lock] = {}

    def __init__(self, target: Union[str, os.PathLike[str], IO[bytes]], run_id: str, *, validate: bool = True):
        if not isinstance(run_id, str) or not (1 <= len(run_id) <= 200):
            raise ValueError("run_id must be a string of 1 to 200 characters")
        self.run_id = run_id
        self.validate = validate
        self.started = False
        self.ended = False
        self._own = False
        if isinstance(target, (str, os.PathLike)):
            path = Path(target)
            path.parent.mkdir(parents=True, exist_ok=True)
            self._fh: IO[bytes] = open(path, "ab")
            self._own = True
            self.path: Optional[Path] = path
        else:
            self._fh = target
            self.path = None
        key = str(self.path) if self.path else str(id(self._fh))
        self._lock = self._locks.setdefault(key, threading.Lock())

    # -- low level -------------------------------------------------------------------
    def write(self, record_type: str, **fields: Any) -> dict[str, Any]:
        """Write one record of `record_type` with `fields`; returns the record written."""
        record: dict[str, Any] = {"type": record_type, "run_id": self.run_id}
        record.update(fields)
        line = dumps_record(record)
        if self.validate and record_type in RECORD_MODELS:
            # Validate the line about to be written (read back from JSON, so enums and
            # dataclasses validate as the reader will see them); it is encoded only once.
            RECORD_MODELS[record_type].model_validate(orjson.loads(line))
        with self._lock:
            self._fh.write(line)
            self._fh.flush()
        return record

    # -- records ---------------------------------------------------------------------
    def run_start(self, **fields: Any) -> dict[str, Any]:
        """Write `run_start` (schema and ts filled in when not given)."""
        fields.setdefault("schema", SCHEMA_ID)
        fields.setdefault("ts", utc_now())
        self.started = True
        return self.write("run_start", **fields)

    def step(self, step: int, **fields: Any) -> dict[str, Any]:
        """Write one executed step."""
        fields.setdefault("ts", utc_now())
        return self.write("step", step=step, **fields)

    def event(self, phase: str, *, step: Optional[int] = None, ok: bool = True, payload: Any = None,
              error: Any = None, ts: Optional[str] = None) -> dict[str, Any]:
        """Write one phase event."""
        return self.write("event", step=step, phase=phase, ok=ok, payload=payload, error=error, ts=ts or utc_now())

    def criterion(self, id: str, **fields: Any) -> dict[str, Any]:
        """Write the graded result of one criterion."""
        return self.write("criterion", id=id, **fields)

    def early_stop(self, **fields: Any) -> dict[str, Any]:
        """Write the run's early-stop record."""
        return self.write("early_stop", **fields)

    def run_end(self, **fields: Any) -> dict[str, Any]:
        """Write `run_end`; the run is finished after this."""
        fields.setdefault("ts", utc_now())
        self.ended = True
        return self.write("run_end", **fields)

    # -- lifecycle -------------------------------------------------------------------
    def close(self) -> None:
        """Close the file if this writer opened it."""
        if self._own and not self._fh.closed:
            self._fh.close()

    def __enter__(self) -> "TraceWriter":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        try:
            if exc is not None and self.started and not self.ended:
                self.run_end(
                    status="error",
                    stop_reason="unrecoverable_error",
                    stop_detail=f"{exc_type.__name__}: {exc}"[:2000],
                )
        finally:
            self.close()
