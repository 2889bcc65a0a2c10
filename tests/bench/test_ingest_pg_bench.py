"""bench/ingest_pg.py: loopback servers only, and a small side-by-side round that prints its figures.

No timing is asserted (speed belongs in bench/ and docs/performance.md).
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import pytest
from sqlalchemy.engine import make_url

from bench import gen, ingest_pg


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "[::1]", "127.0.0.2"])
def test_loopback_servers_are_accepted(host: str) -> None:
    url = f"postgresql+psycopg://postgres@{host}:5432/qita_pg_bench"
    assert ingest_pg.check_loopback(url) == url


@pytest.mark.parametrize("url", ["postgresql+psycopg://postgres@10.0.0.5/qita_pg_bench",
                                 "postgresql+psycopg://postgres@db.example.com/qita_pg_bench",
                                 "postgresql+psycopg://postgres@127.0.0.1/", "sqlite:///x.db"])
def test_other_servers_are_refused(url: str) -> None:
    with pytest.raises(SystemExit):
        ingest_pg.check_loopback(url)


@pytest.mark.postgres
def test_side_by_side_on_a_small_trace(tmp_path: Path, monkeypatch, capsys) -> None:
    base = os.environ.get("QITA_TEST_POSTGRES_URL")
    if not base:
        pytest.skip("QITA_TEST_POSTGRES_URL not set: PostgreSQL tests skipped")
    url = make_url(base).set(database=f"qita_bench_{uuid.uuid4().hex[:10]}").render_as_string(hide_password=False)
    monkeypatch.setenv("QITA_BENCH_POSTGRES_URL", url)
    monkeypatch.setattr(ingest_pg, "WORK", tmp_path)
    monkeypatch.setattr("bench.ingest.WORK", tmp_path)
    trace = tmp_path / "t.jsonl"
    gen.generate(trace, runs=2, steps=5, experiments=1, obs_bytes=300)
    monkeypatch.setattr(ingest_pg, "ensure_trace", lambda mb, steps: trace)
    result = ingest_pg.main(["--rounds", "2"])
    r = result["side_by_side"]
    assert r["rounds"] == 2 and len(r["ratios"]) == 2 and r["records"] > 0 and r["ratio"] > 0
    out = capsys.readouterr().out
    assert "ratio SQLite time / PostgreSQL time (median)" in out
