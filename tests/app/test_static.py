"""Vendored front-end files are the ones their README names: same bytes (sha256), and every
file of static/vendor is in the table."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

VENDOR = Path(__file__).resolve().parents[2] / "static" / "vendor"


def test_vendored_files_match_the_hashes_their_readme_gives():
    rows = re.findall(r"^\| `([^`]+)` \|.*\| `([0-9a-f]{64})` \|$", (VENDOR / "README.md").read_text(), re.M)
    assert rows
    for name, digest in rows:
        assert hashlib.sha256((VENDOR / name).read_bytes()).hexdigest() == digest, name
    served = {p.name for p in VENDOR.iterdir() if p.suffix in (".js", ".css")}
    assert served == {name for name, _ in rows}
