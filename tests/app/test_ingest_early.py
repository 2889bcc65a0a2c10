"""Reading the first large file while the command starts (app/ingest/early.py): the reader
process is forked before the database layer is imported, the writer takes it over only
when it would have started the same one, and what is stored is what an ingest without it
stores, whatever happened in between."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.engine import make_url

from qita_board.cli import run_ingest
from qita_board.db import open_database
from qita_board.errors import BoardError
from qita_board.ingest import early, reader
from qita_board.ingest.sources import discover
from tests.app.test_ingest_reader import _ingest, _no_children, _settings, dump, records
from tests.conftest import write_jsonl

ROOT = Path(__file__).resolve().parents[2]


class Spy(reader.ReaderProcess):
    """The reader process, with how each was started."""

    started: list[dict[str, Any]] = []

    def __init__(self, src: Any, prev: Any, **k: Any):
        super().__init__(src, prev, **k)
        # Only early.start says how far ahead its reader may read; the writer's take the default.
        Spy.started.append({"early": k.get("ahead") is not None, "ahead": k.get("ahead"), "prev": prev,
                            "pid": self.pid})


@pytest.fixture
def spy(monkeypatch):
    Spy.started = []
    monkeypatch.setattr(reader, "ReaderProcess", Spy)
    return Spy


def _run(settings, *paths: Path) -> tuple[Any, dict[str, list[str]]]:
    report = run_ingest(settings, [str(p) for p in paths], progress=False)
    engine = open_database(settings)
    try:
        return report, dump(engine)
    finally:
        engine.dispose()


def test_the_command_reads_its_large_file_in_the_process_it_started_early(tmp_path, migrated_sqlite, spy):
    path = write_jsonl(tmp_path / "t.jsonl", records())
    small_records = [{**r, "run_id": "small-" + r["run_id"]} if isinstance(r, dict) else r
                     for r in records(runs=1, steps=2)]
    small = write_jsonl(tmp_path / "small.jsonl", small_records)
    settings = _settings(migrated_sqlite, tmp_path / "a", reader_process_bytes=64 * 1024, batch_lines=37)
    report, rows = _run(settings, small, path)
    # one reader process for the one large file, started early and taken over: not a second one
    assert [(s["early"], s["prev"]) for s in spy.started] == [(True, None)]
    _, alone = _ingest(_settings(migrated_sqlite, tmp_path / "b", reader_process_bytes=0, batch_lines=37), small, path)
    assert rows == alone
    assert report.records == sum(isinstance(r, dict) for r in records() + small_records)
    assert _no_children()


def test_the_early_reader_starts_before_the_database_layer_is_imported(tmp_path, migrated_sqlite):
    path = write_jsonl(tmp_path / "t.jsonl", records(runs=2, steps=20))
    db = tmp_path / "fresh.db"
    script = (
        "import sys\n"
        "from qita_board.cli import run_ingest\n"
        "from qita_board.ingest import reader\n"
        "from qita_board.settings import Settings\n"
        "seen = []\n"
        "class Spy(reader.ReaderProcess):\n"
        "    def __init__(self, *a, **k):\n"
        "        seen.append(sorted(m for m in ('sqlalchemy', 'sqlmodel', 'qita_board.models', 'qita_board.db')"
        " if m in sys.modules))\n"
        "        super().__init__(*a, **k)\n"
        "reader.ReaderProcess = Spy\n"
        f"report = run_ingest(Settings(db={str(db)!r}, reader_process_bytes=1), [{str(path)!r}], progress=False)\n"
        "print(seen, report.records, len(report.created))\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("QITA_")}
    out = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    expected = sum(isinstance(r, dict) for r in records(runs=2, steps=20))
    assert out.stdout.split() == ["[[]]", str(expected), "2"]


def test_a_file_read_before_is_read_on_from_its_saved_offset_by_the_early_reader(tmp_path, migrated_sqlite, spy):
    lines = records(runs=4)
    path = tmp_path / "t.jsonl"
    write_jsonl(path, lines[:300])
    settings = _settings(migrated_sqlite, tmp_path / "db", reader_process_bytes=1, batch_lines=50)
    first, _ = _run(settings, path)
    write_jsonl(path, lines)
    again, rows = _run(settings, path)
    assert [s["early"] for s in spy.started] == [True, True]
    saved = spy.started[1]["prev"]
    assert saved["offset"] > 0 and saved["lines"] == 300  # read from the store by the standard library
    # From the top, texts stay in the file and chunks are small: the long lead. Resumed, the
    # texts travel in the chunks (up to 8 MB each): the usual lead.
    assert [s["ahead"] for s in spy.started] == [early.EARLY_AHEAD, reader.AHEAD]
    assert first.records + again.records == sum(isinstance(r, dict) for r in lines)
    _, whole = _ingest(_settings(migrated_sqlite, tmp_path / "whole", reader_process_bytes=0), path)
    for table in ("runs", "steps", "critic_outputs", "events", "criteria"):
        assert rows[table] == whole[table], table
    # read a third time, unchanged: no reader is started at all
    third, _ = _run(settings, path)
    assert len(spy.started) == 2 and third.records == 0
    assert _no_children()


def test_an_early_reader_started_on_a_state_that_changed_is_stopped_and_not_used(tmp_path, migrated_sqlite, spy):
    lines = records(runs=4)
    path = tmp_path / "t.jsonl"
    write_jsonl(path, lines[:300])
    settings = _settings(migrated_sqlite, tmp_path / "db", reader_process_bytes=1, batch_lines=50)
    os.utime(path, (1_000_000_000, 1_000_000_000))
    found = discover([str(path)], settings=settings)
    started = early.start(found, settings)  # on an empty store: from the first byte
    assert [s["prev"] for s in spy.started] == [None]
    write_jsonl(path, lines[:100])
    _ingest(settings, path)  # meanwhile another ingest reads a shorter version of the file
    write_jsonl(path, lines[:300])
    engine = open_database(settings)
    try:
        from qita_board.ingest import Ingestor

        again = Ingestor(engine, settings).ingest_discovery(found, early=started)
        rows = dump(engine)
    finally:
        engine.dispose()
    # the early one was stopped, and the writer started its own from the saved offset
    assert [(s["early"], (s["prev"] or {}).get("lines")) for s in spy.started] == [(True, None), (False, None),
                                                                                   (False, 100)]
    assert started.by_key == {}
    assert again.records == sum(isinstance(r, dict) for r in lines[100:300])
    # what is saved is the file as the writer found it, not as it was when the early one began
    db = early.sqlite_path(settings.db_url)
    assert db is not None
    saved = early.saved_states(db, [found.sources[0].key])[found.sources[0].key]
    assert (saved["size"], saved["mtime"]) == (path.stat().st_size, path.stat().st_mtime) != (None, 1_000_000_000)
    _, whole = _ingest(_settings(migrated_sqlite, tmp_path / "whole", reader_process_bytes=0), path)
    for table in ("runs", "steps", "critic_outputs", "events", "criteria"):
        assert rows[table] == whole[table], table
    assert _no_children()


def test_lines_added_after_the_early_reader_read_to_the_end_are_read_by_the_next_pass(tmp_path, migrated_sqlite,
                                                                                      spy):
    """The pass saves the file's size and time from before the early reader began: a later
    stat would name lines it never saw, and the next pass would take the file as unchanged."""
    lines = records(runs=4)
    path = tmp_path / "t.jsonl"
    write_jsonl(path, lines[:300])
    settings = _settings(migrated_sqlite, tmp_path / "db", reader_process_bytes=1, batch_lines=50)
    found = discover([str(path)], settings=settings)
    started = early.start(found, settings)
    time.sleep(1.0)  # the child has read all 300 lines and waits for the writer
    write_jsonl(path, lines)
    engine = open_database(settings)
    try:
        from qita_board.ingest import Ingestor

        first = Ingestor(engine, settings).ingest_discovery(found, early=started)
    finally:
        engine.dispose()
    assert first.records == sum(isinstance(r, dict) for r in lines[:300])
    again, rows = _ingest(settings, path)
    assert again.records == sum(isinstance(r, dict) for r in lines[300:])
    _, whole = _ingest(_settings(migrated_sqlite, tmp_path / "whole", reader_process_bytes=0), path)
    for table in ("runs", "steps", "critic_outputs", "events", "criteria"):
        assert rows[table] == whole[table], table


def test_an_early_reader_is_stopped_when_the_database_cannot_be_opened(tmp_path, migrated_sqlite, spy):
    path = write_jsonl(tmp_path / "t.jsonl", records(runs=2))
    settings = _settings(migrated_sqlite, tmp_path / "db", reader_process_bytes=1)
    Path(settings.db).write_bytes(b"this is not a database" * 100)
    with pytest.raises(BoardError, match="cannot open database"):
        run_ingest(settings, [str(path)], progress=False)
    assert _no_children()


@pytest.mark.parametrize("url, path", [
    ("sqlite:///qita.db", "qita.db"),
    ("sqlite:////tmp/x/qita.db", "/tmp/x/qita.db"),
    ("sqlite+pysqlite:///./a b.db", "./a b.db"),
    ("sqlite:///a%20b%25c #ü.db", "a b%c #ü.db"),
    ("sqlite://", ":memory:"),
    ("sqlite:///:memory:", ":memory:"),
    ("sqlite:///qita.db?mode=ro&uri=true", None),
    ("postgresql+psycopg://postgres@127.0.0.1:5432/test", None),
    ("mysql:///x", None),
])
def test_only_a_plain_sqlite_url_names_a_file_to_read_saved_offsets_from(url, path):
    assert early.sqlite_path(url) == path
    if path is not None and url.startswith("sqlite"):
        assert path == (make_url(url).database or ":memory:")  # the file SQLAlchemy opens


def test_a_store_that_cannot_be_read_starts_nothing_early(tmp_path, migrated_sqlite, spy):
    path = write_jsonl(tmp_path / "t.jsonl", records(runs=2))
    settings = _settings(migrated_sqlite, tmp_path / "db", reader_process_bytes=1)
    Path(settings.db).write_bytes(b"this is not a database" * 100)
    started = early.start(discover([str(path)], settings=settings), settings)
    assert started.by_key == {} and spy.started == []


def test_saved_offsets_are_read_from_a_database_whose_name_needs_escaping(tmp_path, migrated_sqlite):
    path = write_jsonl(tmp_path / "t.jsonl", records(runs=1, steps=5))
    folder = tmp_path / "a b%c #ü"
    settings = _settings(migrated_sqlite, folder, reader_process_bytes=0)
    report, _ = _ingest(settings, path)
    assert report.records > 0
    db = early.sqlite_path(settings.db_url)
    assert db is not None and db.endswith("a b%c #ü/" + Path(settings.db).name)
    key = discover([str(path)], settings=settings).sources[0].key
    state = early.saved_states(db, [key, "no-such-source"])
    assert list(state) == [key]
    assert state[key]["offset"] == path.stat().st_size and state[key]["lines"] == len(records(runs=1, steps=5))


def test_saved_offsets_are_read_from_a_database_whose_name_is_not_utf8(tmp_path, migrated_sqlite):
    path = write_jsonl(tmp_path / "t.jsonl", records(runs=1, steps=5))
    settings = _settings(migrated_sqlite, tmp_path / "db", reader_process_bytes=0)
    name = os.fsdecode(b"x\xff.db")  # the bytes a Latin-1 name leaves on a UTF-8 system
    settings = settings.model_copy(update={"db": str(tmp_path / name)})
    report, _ = _ingest(settings, path)
    assert report.records > 0
    db = early.sqlite_path(settings.db_url)
    assert db is not None and os.fsencode(db).endswith(b"/x\xff.db")
    key = discover([str(path)], settings=settings).sources[0].key
    state = early.saved_states(db, [key])
    assert state is not None and state[key]["offset"] == path.stat().st_size
    again, _ = _ingest(settings, path)  # the command's whole path, early start included
    assert again.records == 0 and not again.errors


def test_a_store_that_is_a_pipe_starts_nothing_early_and_does_not_block(tmp_path):
    fifo = tmp_path / "store.db"
    os.mkfifo(fifo)
    out: list[Any] = []
    # Opening a FIFO read-only waits for a writer, with no signal reaching Python meanwhile.
    t = threading.Thread(target=lambda: out.append(early.saved_states(str(fifo), ["k"])), daemon=True)
    t.start()
    t.join(10)
    assert out == [None]
