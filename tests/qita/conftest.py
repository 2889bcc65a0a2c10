"""Fixtures for the run-side tests; makes the repository root importable (qita is not installed)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
for p in (str(ROOT), str(HERE)):
    if p not in sys.path:
        sys.path.insert(0, p)


@pytest.fixture
def trace_file(tmp_path):
    return tmp_path / "trace.jsonl"
