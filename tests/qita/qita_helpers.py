"""Helpers shared by the run-side tests: tiny tools, script entries and trace readers.

A uniquely named module (not conftest) so it cannot collide with the board's test helpers.
"""

from __future__ import annotations

import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def read_records(path):
    return [json.loads(line) for line in Path(path).read_text(encoding="utf-8").splitlines() if line.strip()]


def of_type(records, kind):
    return [r for r in records if r["type"] == kind]


def echo_tools():
    """Tools with fixed outputs: `bash` returns whatever returncode the args ask for."""
    def bash(command, returncode=0):
        return {"command": command, "returncode": returncode, "stdout": f"ran {command}"}

    def skill(name):
        return {"skill": name, "loaded": True}

    def note(text=""):
        return {"noted": text}

    return {"bash": bash, "skill": skill, "note": note}


def step(*actions, final=None, tokens=(10, 5), **extra):
    """One script entry: actions given as (name, args) pairs."""
    entry = {"actions": [{"name": n, "args": a} for n, a in actions], "tokens": list(tokens), **extra}
    if final is not None:
        entry["final"] = final
    return entry
