"""Stop signals for the command line's long work (`qita ingest`, the ingest before `qita board` serves).

The first SIGINT or SIGTERM asks the ingest to stop (`StopSignals.requested`, polled
between lines by `Ingestor.stop`): the batch being built is dropped, every committed
batch stays with its file offset, temporary files are removed, and the command exits
with 128 + the signal's number. Running the same command again resumes from the saved
offsets. If the work has not ended `GRACE_S` seconds after the signal (a single huge
line being parsed, a slow database), or on a second signal, the process removes its
temporary folder and exits at once: the open transaction, never committed, is rolled
back by the database, so nothing is left half-written either way.

`qita board` itself is stopped by uvicorn's handlers (see `cli.board`).
"""

from __future__ import annotations

import os
import shutil
import signal
import sys
import threading
from typing import Optional

#: Seconds between the first signal and a forced exit: under the 5 s a stop may take.
GRACE_S = 3.5


class StopSignals:
    """Installs SIGINT/SIGTERM handlers for a block (`with StopSignals() as stop:`), restoring the old ones."""

    def __init__(self, grace_s: float = GRACE_S):
        self.grace_s = grace_s
        self.signum: Optional[int] = None
        self._old: dict[int, object] = {}
        self._timer: Optional[threading.Timer] = None

    def requested(self) -> bool:
        return self.signum is not None

    def _handle(self, signum, _frame) -> None:
        if self.signum is not None:
            self._force()
        self.signum = signum
        sys.stderr.write(f"\nstopping ({signal.Signals(signum).name}): the current batch is dropped, "
                         "everything before it is kept\n")
        self._timer = threading.Timer(self.grace_s, self._force)
        self._timer.daemon = True
        self._timer.start()

    def _force(self) -> None:
        from . import tempfiles

        shutil.rmtree(tempfiles.base() / str(os.getpid()), ignore_errors=True)
        os._exit(128 + (self.signum or signal.SIGTERM))

    def __enter__(self) -> "StopSignals":
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                self._old[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(self, *exc) -> None:
        if self._timer is not None:
            self._timer.cancel()
        for sig, old in self._old.items():
            signal.signal(sig, old)  # type: ignore[arg-type]
        self._old.clear()

    @property
    def exit_code(self) -> int:
        return 128 + (self.signum or 0)
