"""The `qita` entry point (app/program.py): Ctrl-C before a command takes the stop signals
over ends the program with status 130 and one line, no traceback."""

from __future__ import annotations

import os
import subprocess
import sys
from importlib.metadata import entry_points

from tests.conftest import ROOT

# The command "runs" by interrupting itself: the signal arrives while the program is inside
# app.cli, before any command installed its own handler (as a Ctrl-C during imports does).
_INTERRUPTED_COMMAND = """
import os, signal
import qita_board.cli as cli
def command():
    os.kill(os.getpid(), signal.SIGINT)
    for _ in range(10_000_000):  # the handler runs at the next bytecode boundary
        pass
    raise AssertionError("not interrupted")
cli.run = command
from qita_board import program
program.run()
"""


def test_ctrl_c_before_a_command_handles_it_exits_130_quietly():
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", _INTERRUPTED_COMMAND], env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 130
    assert done.stderr == "\ninterrupted\n"
    assert "Traceback" not in done.stdout


def test_a_sigint_the_parent_ignored_stays_ignored():
    # a background job of a script starts with SIGINT ignored; Python keeps that, and so do we
    code = _INTERRUPTED_COMMAND.replace("raise AssertionError(\"not interrupted\")", "print(\"went on\")")
    code = "import signal; signal.signal(signal.SIGINT, signal.SIG_IGN)\n" + code
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout, done.stderr) == (0, "went on\n", "")


def test_the_installed_qita_program_is_this_entry_point():
    (qita,) = [ep for ep in entry_points(group="console_scripts") if ep.name == "qita"]
    assert qita.value == "qita_board.program:run"
