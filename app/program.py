"""The `qita` program's entry point.

Until a command takes the stop signals over (an ingest's `signals.StopSignals`, uvicorn's
handlers under `qita board`), Ctrl-C ends the program quietly with status 130, as a shell
expects of an interrupted command: Python's default printed a traceback from whatever
module was being imported in the first ~0.2 s, and click's a bare "Aborted!" with status 1.
A SIGINT the parent set to be ignored (a background job of a script) stays ignored.
"""

from __future__ import annotations

import signal
import sys
from typing import Any


def _interrupted(signum: int, _frame: Any) -> None:
    sys.stderr.write("\ninterrupted\n")
    raise SystemExit(128 + signum)


def _stopped(signum: int, _frame: Any) -> None:
    raise SystemExit(128 + signum)


def stop_quietly() -> None:
    """For a command that says itself how it stopped (`qita board`: uvicorn sends the SIGINT
    it caught again once it has shut down): end with 130 without the "interrupted" line."""
    if signal.getsignal(signal.SIGINT) is _interrupted:
        signal.signal(signal.SIGINT, _stopped)


def run() -> None:
    """`qita`: the command line (app.cli), with Ctrl-C ending it quietly until a command handles it."""
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        signal.signal(signal.SIGINT, _interrupted)
    from .cli import run as program

    program()
