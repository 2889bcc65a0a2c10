"""Shared fixtures: every test builds its own temporary database and app."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any, Callable, Iterable

import orjson
import pytest

from qita_board.settings import Settings

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared"
QITOS_RUNS = SHARED / "traces" / "qitos-runs"


def pytest_report_header(config):
    pg = os.environ.get("QITA_TEST_POSTGRES_URL")
    return [f"qita: PostgreSQL tests {'ON (' + pg.split('@')[-1] + ')' if pg else 'off (QITA_TEST_POSTGRES_URL not set)'}"]


def pytest_generate_tests(metafunc):
    # Storage and API tests marked `both_backends` run on SQLite and on PostgreSQL (the
    # latter skipped unless QITA_TEST_POSTGRES_URL is set).
    if "settings" in metafunc.fixturenames and metafunc.definition.get_closest_marker("both_backends"):
        metafunc.parametrize("backend", ["sqlite", "postgresql"], indirect=True)


@pytest.fixture
def backend(request) -> str:
    return getattr(request, "param", "sqlite")


@pytest.fixture(scope="session")
def migrated_sqlite(tmp_path_factory) -> Path:
    """One SQLite file migrated to head, once per session. Migrating a fresh file takes
    0.2-0.3 s against ~0.05 s to open one already at head (measured), and most tests need
    an empty database: each gets a copy of this one instead of running the migrations."""
    from qita_board.db import open_database

    path = tmp_path_factory.mktemp("migrated") / "qita.db"
    eng = open_database(Settings(db=str(path)))
    with eng.connect() as conn:
        # fold the WAL into the main file so that copying the file alone is a whole database
        conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
    eng.dispose()
    return path


def fresh_sqlite(template: Path, folder: Path) -> Settings:
    """Settings for an empty SQLite database at head in `folder` (a copy of the template)."""
    path = folder / "qita.db"
    shutil.copyfile(template, path)
    return Settings(db=str(path), batch_lines=50)


@pytest.fixture
def settings(tmp_path: Path, backend: str, request) -> Settings:
    """Settings for a fresh database: a SQLite file in the test's temporary folder, or a
    fresh PostgreSQL database for `both_backends` tests."""
    if backend == "postgresql":
        return request.getfixturevalue("pg_settings")
    return fresh_sqlite(request.getfixturevalue("migrated_sqlite"), tmp_path)


@pytest.fixture
def engine(settings: Settings):
    from qita_board.db import open_database

    eng = open_database(settings)
    yield eng
    eng.dispose()


@pytest.fixture
def ingest(engine, settings: Settings) -> Callable[..., Any]:
    """ingest(*paths, **kw) -> IngestReport, through the one ingest path."""
    from qita_board.ingest import Ingestor

    def run(*paths: Any, **kw: Any):
        return Ingestor(engine, settings).ingest_paths([str(p) for p in paths], **kw)

    return run


@pytest.fixture
def client(settings: Settings):
    from fastapi.testclient import TestClient

    from qita_board.main import create_app

    with TestClient(create_app(settings), base_url="http://127.0.0.1") as c:
        yield c


def write_jsonl(path: Path, records: Iterable[Any], *, newline: bytes = b"\n") -> Path:
    """Write records (dicts are JSON-encoded, bytes written as they are) one per line."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as fh:
        for rec in records:
            fh.write((rec if isinstance(rec, bytes) else orjson.dumps(rec)) + newline)
    return path


@pytest.fixture
def qitos_runs() -> Path:
    """The real QitOS traces in ../shared (skipped with a clear message when absent)."""
    if not QITOS_RUNS.is_dir():
        pytest.skip(f"../shared/traces/qitos-runs not found at {QITOS_RUNS}: QitOS trace tests skipped")
    return QITOS_RUNS


# -- PostgreSQL (security/scale-out branch) -------------------------------------------------------
# QITA_TEST_POSTGRES_URL points at a server where the user may CREATE DATABASE; each test
# that asks for `pg_url` gets a database of its own, dropped afterwards.

PG_ENV = "QITA_TEST_POSTGRES_URL"


def _pg_admin_conninfo(url: str) -> str:
    from sqlalchemy.engine import make_url

    u = make_url(url)
    return u.set(drivername="postgresql").render_as_string(hide_password=False)


@pytest.fixture
def pg_url() -> Iterable[str]:
    """A fresh, empty PostgreSQL database URL for this test; skipped when QITA_TEST_POSTGRES_URL is unset."""
    base = os.environ.get(PG_ENV)
    if not base:
        pytest.skip(f"{PG_ENV} not set: PostgreSQL tests skipped")
    import uuid

    import psycopg
    from sqlalchemy.engine import make_url

    name = f"qita_test_{uuid.uuid4().hex[:12]}"
    admin = _pg_admin_conninfo(base)
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield make_url(base).set(database=name).render_as_string(hide_password=False)
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def pg_settings(pg_url: str) -> Settings:
    """Settings for a fresh PostgreSQL database (see pg_url)."""
    return Settings(db=pg_url, batch_lines=50)


@pytest.fixture(params=["sqlite", "postgresql"])
def any_settings(request, tmp_path: Path) -> Settings:
    """The same test on SQLite and on PostgreSQL (the latter skipped without QITA_TEST_POSTGRES_URL)."""
    if request.param == "sqlite":
        return fresh_sqlite(request.getfixturevalue("migrated_sqlite"), tmp_path)
    return request.getfixturevalue("pg_settings")
