"""The reader process (app/ingest/reader.py): a large file read beside the writer gives
exactly what the writer reading it itself gives, survives a reader that dies, and stops
when told, leaving whole batches and no process behind."""

from __future__ import annotations

import gzip
import os
from pathlib import Path
from typing import Any

import orjson
import pytest
from sqlalchemy import text

from qita_board.db import open_database
from qita_board.ingest import Ingestor, Stopped, reader
from qita_board.ingest import ingestor as ingest_module
from qita_board.settings import Settings
from tests.conftest import fresh_sqlite, write_jsonl

#: Rows of every table that an ingest fills, without surrogate keys and clocks.
TABLES = ("runs", "steps", "critic_outputs", "events", "criteria", "early_stops", "run_tags", "ingest_sources")
SKIP = {"id", "updated_at", "last_seen_at", "mtime", "path"}


def records(runs: int = 6, steps: int = 40) -> list[Any]:
    """Runs with critics, events, criteria, early stops and ends; bad lines and odd values among them."""
    out: list[Any] = []
    for r in range(runs):
        rid = f"run-{r}"
        out.append({"type": "run_start", "run_id": rid, "ts": "2026-01-05T09:00:00Z", "experiment": "x",
                    "variant": "smoke" if r % 2 else "e2e", "task_id": f"t{r // 2}",
                    "criteria": [{"id": "tests", "stop_when": "decided"}, {"id": "style", "gating": False}],
                    "early_stop": {"enabled": bool(r % 2)}, "tags": ["a", f"r{r}"]})
        for s in range(steps):
            out.append({"type": "step", "run_id": rid, "step": s, "ts": f"2026-01-05T09:{s // 60:02d}:{s % 60:02d}Z",
                        "tokens": {"input": 10 + s, "output": 3}, "cost_usd": 0.001, "duration_s": 1.5,
                        "critic_outputs": [{"critic": "progress", "action": "retry" if s % 7 == 0 else "continue",
                                            "score": 0.5, "reason": f"reason {r} {s} password=hunter{s}"}],
                        "actions": [{"name": "bash", "args": {"cmd": f"pytest -k {s}"}}],
                        "action_results": [{"exit_code": s % 3, "error": "boom" if s % 3 else None}],
                        "observation": "o" * (50 + s)})
            out.append({"type": "event", "run_id": rid, "step": s, "phase": "ACT", "ok": True,
                        "ts": f"2026-01-05T09:{s // 60:02d}:{s % 60:02d}.5Z", "payload": {"n": s}})
            if s == 5:
                out.append(b'{"type": "step", "run_id": "' + rid.encode() + b'", "step": "five"}')  # rejected
                out.append(b"not json")
                out.append({"type": "step", "run_id": rid, "step": 10_000 + s, "tokens": {"input": 1.5}})  # repaired
        out.append({"type": "criterion", "run_id": rid, "id": "tests", "passed": r % 3 != 0, "decided_at_step": 3})
        if r % 2:
            out.append({"type": "early_stop", "run_id": rid, "reason": "decided", "armed_criteria": ["tests"],
                        "step": steps - 1})
        out.append({"type": "run_end", "run_id": rid, "ts": "2026-01-05T10:00:00Z", "status": "completed",
                    "stop_reason": "final" if r % 2 else "early_stop"})
    return out


def dump(engine) -> dict[str, list[str]]:
    """Every table's rows, run keys as run ids, sorted."""
    out: dict[str, list[str]] = {}
    with engine.connect() as conn:
        runs = {pk: rid for pk, rid in conn.execute(text("select id, run_id from runs"))}
        for table in TABLES:
            rows = []
            for row in conn.execute(text(f"select * from {table}")).mappings():
                values = {k: v for k, v in row.items() if k not in SKIP}
                if "run_pk" in values:
                    values["run_pk"] = runs[values["run_pk"]]
                rows.append(orjson.dumps(values, option=orjson.OPT_SORT_KEYS, default=str).decode())
            out[table] = sorted(rows)
        out["search"] = sorted({line for (t,) in conn.execute(text("select text from run_search"))
                                for line in t.split("\n")})
    return out


class Spy(reader.ReaderProcess):
    """The reader process, counted."""

    started: list[int] = []

    def __init__(self, *a: Any, **k: Any):
        super().__init__(*a, **k)
        Spy.started.append(self.pid or 0)


@pytest.fixture
def spy(monkeypatch):
    Spy.started = []
    monkeypatch.setattr(reader, "ReaderProcess", Spy)
    return Spy


def _ingest(settings: Settings, *paths: Path, stop=None) -> tuple[Any, dict[str, list[str]]]:
    engine = open_database(settings)
    try:
        report = Ingestor(engine, settings, stop=stop).ingest_paths([str(p) for p in paths])
        return report, dump(engine)
    finally:
        engine.dispose()


def _settings(migrated_sqlite: Path, folder: Path, **kw: Any) -> Settings:
    folder.mkdir(parents=True, exist_ok=True)
    return fresh_sqlite(migrated_sqlite, folder).model_copy(update=kw)


def _no_children() -> bool:
    try:
        os.waitpid(-1, os.WNOHANG)
    except ChildProcessError:
        return True
    return False


@pytest.mark.parametrize("gz", [False, True])
def test_a_file_read_in_a_process_of_its_own_gives_what_the_writer_reading_it_gives(tmp_path, migrated_sqlite, spy,
                                                                                    gz):
    lines = records()
    path = write_jsonl(tmp_path / "t.jsonl", lines)
    if gz:
        gz_path = tmp_path / "t.jsonl.gz"
        gz_path.write_bytes(gzip.compress(path.read_bytes()))
        path.unlink()
        path = gz_path
    inline, rows_inline = _ingest(_settings(migrated_sqlite, tmp_path / "a", reader_process_bytes=0, batch_lines=37),
                                  path)
    assert spy.started == []
    apart, rows_apart = _ingest(_settings(migrated_sqlite, tmp_path / "b", reader_process_bytes=1, batch_lines=37),
                                path)
    assert len(spy.started) == 1
    assert rows_apart == rows_inline
    assert apart.to_json() == inline.to_json()
    # and what both hold is what the file holds: 6 runs x (40 steps + 1 repaired), 40 events each
    assert len(rows_apart["runs"]) == 6 and len(rows_apart["steps"]) == 6 * 41 and len(rows_apart["events"]) == 240
    bad = [i + 1 for i, rec in enumerate(lines) if isinstance(rec, bytes)]  # 1-based line numbers
    assert sorted(e["line"] for e in apart.to_json()["errors"]) == bad and len(bad) == 12
    assert not any("hunter" in line for line in rows_apart["search"])  # masked before it was indexed
    assert _no_children()


def test_a_file_that_grew_is_read_on_from_its_offset_by_the_reader_process(tmp_path, migrated_sqlite, spy):
    lines = records(runs=4)
    path = tmp_path / "t.jsonl"
    write_jsonl(path, lines[:300])
    settings = _settings(migrated_sqlite, tmp_path / "db", reader_process_bytes=1, batch_lines=50)
    first, _ = _ingest(settings, path)
    write_jsonl(path, lines)
    again, rows = _ingest(settings, path)
    assert first.records + again.records == sum(isinstance(r, dict) for r in lines)  # the rest, from the offset
    _, whole = _ingest(_settings(migrated_sqlite, tmp_path / "whole", reader_process_bytes=0), path)
    for table in ("runs", "steps", "critic_outputs", "events", "criteria"):
        assert rows[table] == whole[table], table
    assert len(spy.started) == 2


def _fail_in_the_child(monkeypatch, after: int, how: str) -> None:
    """Make the reader process fail after `after` chunks (the writer's own reading is left alone)."""
    parent = os.getpid()
    real = reader.read_chunks

    def failing(*a: Any, **k: Any):
        for i, chunk in enumerate(real(*a, **k)):
            if os.getpid() != parent and i == after:
                if how == "killed":
                    os._exit(9)
                raise RuntimeError("a bug in the reader")
            yield chunk

    monkeypatch.setattr(reader, "read_chunks", failing)


@pytest.mark.parametrize("how", ["raised", "killed"])
def test_a_reader_process_that_fails_leaves_the_rest_to_the_writer(tmp_path, migrated_sqlite, spy, monkeypatch,
                                                                   caplog, how):
    path = write_jsonl(tmp_path / "t.jsonl", records())
    _, expected = _ingest(_settings(migrated_sqlite, tmp_path / "a", reader_process_bytes=0, batch_lines=40), path)
    _fail_in_the_child(monkeypatch, 3, how)
    report, rows = _ingest(_settings(migrated_sqlite, tmp_path / "b", reader_process_bytes=1, batch_lines=40), path)
    assert rows == expected  # nothing lost, nothing twice
    assert report.ok is False and len(report.errors) == 12  # the 12 bad lines, each once
    assert f"reading {path} in a process of its own failed; reading it here" in caplog.text
    assert len(spy.started) == 1 and _no_children()


def test_a_stop_while_the_reader_process_reads_stops_at_once_and_the_next_pass_finishes(tmp_path, migrated_sqlite,
                                                                                        spy, monkeypatch):
    monkeypatch.setattr(ingest_module, "GROUP_CHUNKS", 1)  # a transaction per chunk: several to stop between
    lines = records(runs=6, steps=400)
    path = write_jsonl(tmp_path / "t.jsonl", lines)
    settings = _settings(migrated_sqlite, tmp_path / "db", reader_process_bytes=1, batch_lines=100)
    engine = open_database(settings)
    try:
        committed: list[float] = []
        ingestor = Ingestor(engine, settings, stop=lambda: bool(committed))
        real = ingestor._settle

        def settle_then_stop(*a: Any, **k: Any) -> None:
            real(*a, **k)
            committed.append(1.0)

        ingestor._settle = settle_then_stop  # type: ignore[method-assign]
        with pytest.raises(Stopped) as stopped:
            ingestor.ingest_paths([str(path)])
        # stopped at the next transaction: one committed, then none, and the reader gone
        assert len(committed) == 1 and _no_children()
        with engine.connect() as conn:
            stored = conn.execute(text("select count(*) from steps")).scalar()
            saved = conn.execute(text("select lines from ingest_sources")).scalar()
        assert 0 < stored < 6 * 401 and saved > 0  # whole transactions, with their offset
        report = Ingestor(engine, settings).ingest_paths([str(path)])
        # read on from the saved offset: every record once over the two passes
        assert stopped.value.report.records + report.records == sum(isinstance(r, dict) for r in lines)
        rows = dump(engine)
    finally:
        engine.dispose()
    _, whole = _ingest(_settings(migrated_sqlite, tmp_path / "whole", reader_process_bytes=0), path)
    for table in ("runs", "steps", "critic_outputs", "events", "criteria", "early_stops"):
        assert rows[table] == whole[table], table


def test_a_file_the_reader_process_cannot_read_is_reported_by_name(tmp_path, migrated_sqlite, spy, monkeypatch):
    path = write_jsonl(tmp_path / "t.jsonl", records(runs=1))

    def unreadable(*a: Any, **k: Any):
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(reader, "open_stream", unreadable)
    report, rows = _ingest(_settings(migrated_sqlite, tmp_path / "db", reader_process_bytes=1), path)
    assert [str(e) for e in report.errors] == [f"{path}: cannot read file: Input/output error"]
    assert rows["runs"] == [] and _no_children()


def test_small_files_and_other_readers_stay_in_the_writer(tmp_path, migrated_sqlite, spy, qitos_runs):
    path = write_jsonl(tmp_path / "t.jsonl", records(runs=1, steps=3))
    _ingest(_settings(migrated_sqlite, tmp_path / "db", reader_process_bytes=path.stat().st_size + 1), path)
    assert spy.started == []
    # QitOS folders keep state from line to line (their run_end comes from the END event)
    _ingest(_settings(migrated_sqlite, tmp_path / "q", reader_process_bytes=1), qitos_runs)
    assert spy.started == []


def test_no_fork_means_the_writer_reads_the_file_itself(tmp_path, migrated_sqlite, spy, monkeypatch, caplog):
    path = write_jsonl(tmp_path / "t.jsonl", records(runs=2))
    _, expected = _ingest(_settings(migrated_sqlite, tmp_path / "a", reader_process_bytes=0), path)

    def no_fork() -> int:
        raise OSError(11, "Resource temporarily unavailable")

    monkeypatch.setattr(os, "fork", no_fork)
    fds = len(os.listdir("/proc/self/fd"))
    report, rows = _ingest(_settings(migrated_sqlite, tmp_path / "b", reader_process_bytes=1), path)
    assert rows == expected and len(report.errors) == 4  # the two runs' bad lines, read here
    assert "cannot start a reader process" in caplog.text
    assert len(os.listdir("/proc/self/fd")) == fds  # the pipe was closed


def test_a_message_torn_or_unreadable_is_a_failed_reader_not_a_crash(tmp_path, migrated_sqlite, spy, monkeypatch,
                                                                     caplog):
    path = write_jsonl(tmp_path / "t.jsonl", records(runs=2))
    _, expected = _ingest(_settings(migrated_sqlite, tmp_path / "a", reader_process_bytes=0), path)
    parent = os.getpid()
    real_dumps = reader.pickle.dumps

    def garbled(obj: Any, *a: Any, **k: Any) -> bytes:
        data = real_dumps(obj, *a, **k)
        return data[: len(data) // 2] if os.getpid() != parent else data

    monkeypatch.setattr(reader.pickle, "dumps", garbled)
    report, rows = _ingest(_settings(migrated_sqlite, tmp_path / "b", reader_process_bytes=1), path)
    assert rows == expected
    assert "sent what cannot be read" in caplog.text and _no_children()


@pytest.mark.parametrize("window", [reader.WINDOW_BYTES, 64], ids=["window", "text-by-text"])
def test_texts_sent_by_position_are_the_lines_as_written(tmp_path, migrated_sqlite, spy, monkeypatch, window):
    """A plain file read from its first byte: the reader sends where each line's text lies
    and the writer reads it from the file (app.ingest.reader.FileText): a chunk's bytes at
    once (sliced from their text decoded once when they are ASCII, decoded text by text
    when not), or each text on its own past WINDOW_BYTES. A byte-order mark, CRLF endings,
    multi-byte characters, blank lines, a step written twice and bad lines all land as the
    writer reading the file itself stores them."""
    monkeypatch.setattr(reader, "WINDOW_BYTES", window)
    lines = records(runs=3, steps=30)
    lines.insert(20, {"type": "step", "run_id": "run-0", "step": 3, "observation": "rewritten: é — 漢字 🙂"})
    lines.insert(40, {"type": "event", "run_id": "run-1", "phase": "ACT", "note": "ünïcödé " * 40})
    lines.insert(0, {"type": "step", "run_id": "run-2", "step": 99, "observation": "the first line, after the mark"})
    body = b"".join((r if isinstance(r, bytes) else orjson.dumps(r)) + b"\r\n" + (b"\r\n" if i % 17 == 0 else b"")
                    for i, r in enumerate(lines))
    path = tmp_path / "t.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + body)
    inline, rows_inline = _ingest(_settings(migrated_sqlite, tmp_path / "a", reader_process_bytes=0, batch_lines=23),
                                  path)
    apart, rows_apart = _ingest(_settings(migrated_sqlite, tmp_path / "b", reader_process_bytes=1, batch_lines=23),
                                path)
    assert len(spy.started) == 1
    assert rows_apart == rows_inline and apart.to_json() == inline.to_json()
    # the texts are the lines themselves: the first without its mark, the multi-byte ones whole
    stored = [orjson.loads(row)["record"] for row in rows_apart["steps"]]
    assert orjson.dumps(lines[0]).decode() in stored
    assert orjson.dumps(lines[21]).decode() in stored and "漢字 🙂" in orjson.dumps(lines[21]).decode()
    assert orjson.dumps(lines[41]).decode() in [orjson.loads(row)["record"] for row in rows_apart["events"]]


def test_a_file_rewritten_while_the_writer_reads_its_texts_is_read_again_by_the_writer(tmp_path, migrated_sqlite,
                                                                                      spy, monkeypatch, caplog):
    """The reader parsed one version of a chunk, the file holds another when the writer reads
    the texts: the digest check refuses the chunk (rows of one version with texts of
    another) and the writer reads on itself from the last chunk committed."""
    path = write_jsonl(tmp_path / "t.jsonl", records(runs=4))
    data = path.read_bytes()
    half = len(data) // 2
    changed = data[:half] + data[half:].replace(b'"ooooo', b'"xxxxx')  # same length, other content
    assert changed != data and len(changed) == len(data)
    real = reader.FileText.fill
    calls: list[int] = []

    def rewrite_then_fill(self: Any, chunk: Any) -> None:
        calls.append(chunk.offset)
        if chunk.offset > half and path.read_bytes() == data:
            path.write_bytes(changed)  # in place, after the reader read it
        real(self, chunk)

    monkeypatch.setattr(reader.FileText, "fill", rewrite_then_fill)
    report, rows = _ingest(_settings(migrated_sqlite, tmp_path / "b", reader_process_bytes=1, batch_lines=40), path)
    assert "the file changed while it was read" in caplog.text and _no_children()
    _, expected = _ingest(_settings(migrated_sqlite, tmp_path / "a", reader_process_bytes=0, batch_lines=40), path)
    for table in ("runs", "steps", "critic_outputs", "events", "criteria", "early_stops"):
        assert rows[table] == expected[table], table  # the new version, whole, nothing of the old one
    assert any("xxxxx" in row for row in rows["steps"]) and len(calls) >= 2


def test_a_resumed_pass_and_a_gzip_send_texts_inline(tmp_path, migrated_sqlite):
    """Only a plain file read from its first byte is sent by position: a pass resumed at an
    offset (whose bytes before it the writer has not hashed) and a gzip stream (which the
    writer cannot read at an offset) travel with their texts."""
    src = type("Src", (), {"kind": "jsonl", "open": None, "transform": None})()
    assert reader.by_position(src, None) and reader.by_position(src, {"offset": 0})
    assert not reader.by_position(src, {"offset": 120})
    src.kind = "gz"
    assert not reader.by_position(src, None)


def test_a_transaction_groups_ready_chunks_up_to_a_byte_span(tmp_path, migrated_sqlite, spy, monkeypatch):
    """Chunks the reader has ready are applied together, but never past GROUP_BYTES of the
    file: a group is held whole in the writer's memory."""
    lines = records(runs=3, steps=60)
    path = write_jsonl(tmp_path / "t.jsonl", lines)
    # a chunk closes at 25 records (bad lines count none), and the last at the end of the file
    chunks = sum(isinstance(r, dict) for r in lines) // 25 + 1
    counted: list[int] = []
    real = Ingestor._settle

    def settle(self: Any, *a: Any, **k: Any) -> None:
        counted.append(1)
        real(self, *a, **k)

    monkeypatch.setattr(Ingestor, "_settle", settle)
    monkeypatch.setattr(ingest_module, "GROUP_BYTES", 1)  # any group already spans a byte
    _, rows = _ingest(_settings(migrated_sqlite, tmp_path / "a", reader_process_bytes=1, batch_lines=25), path)
    assert len(counted) == chunks and len(spy.started) == 1
    _, whole = _ingest(_settings(migrated_sqlite, tmp_path / "b", reader_process_bytes=0), path)
    assert rows["steps"] == whole["steps"] and rows["events"] == whole["events"]


@pytest.mark.parametrize("apart", [False, True])
def test_progress_counts_every_byte_of_a_pass_once(tmp_path, migrated_sqlite, spy, apart):
    """The progress a pass reports (the CLI's bar, an upload's done bytes) adds up to the
    bytes it read, its first chunk's included; a pass that resumes counts from its offset."""
    lines = records(runs=2, steps=30)
    path = write_jsonl(tmp_path / "t.jsonl", lines[:100])
    settings = _settings(migrated_sqlite, tmp_path / "db", reader_process_bytes=1 if apart else 0, batch_lines=20)
    engine = open_database(settings)
    try:
        told: list[int] = []
        Ingestor(engine, settings, progress=told.append).ingest_paths([str(path)])
        assert sum(told) == path.stat().st_size and len(told) >= (1 if apart else 3)  # grouped when apart
        first = path.stat().st_size
        write_jsonl(path, lines)  # the file grew: the next pass reads on from its offset
        told.clear()
        Ingestor(engine, settings, progress=told.append).ingest_paths([str(path)])
        assert sum(told) == path.stat().st_size - first
    finally:
        engine.dispose()


def test_a_file_whose_texts_cannot_be_read_is_read_by_the_writer_itself(tmp_path, migrated_sqlite, spy, monkeypatch,
                                                                        caplog):
    """An I/O error while the writer reads the texts of a chunk sent by position is a
    failed reader: the writer reads on itself from the last batch written, nothing lost."""
    path = write_jsonl(tmp_path / "t.jsonl", records(runs=3))
    _, expected = _ingest(_settings(migrated_sqlite, tmp_path / "a", reader_process_bytes=0, batch_lines=40), path)
    real = os.pread
    calls: list[int] = []

    def failing_pread(fd: int, n: int, at: int) -> bytes:
        calls.append(at)
        if len(calls) == 3:
            raise OSError(5, "Input/output error")
        return real(fd, n, at)

    monkeypatch.setattr(reader.os, "pread", failing_pread)
    report, rows = _ingest(_settings(migrated_sqlite, tmp_path / "b", reader_process_bytes=1, batch_lines=40), path)
    assert rows == expected and len(calls) >= 3
    assert "cannot read the file's texts: Input/output error" in caplog.text and _no_children()


@pytest.mark.parametrize("apart", [False, True])
def test_a_batch_of_long_lines_ends_at_a_byte_cap(tmp_path, migrated_sqlite, spy, monkeypatch, apart):
    """A batch ends after BATCH_BYTES of the file as well as after batch_lines lines: the
    writer holds a batch whole, and 2,000 lines of 1 MB observations are 2 GB. What is
    stored is what batches of whole lines store."""
    monkeypatch.setattr(reader, "BATCH_BYTES", 4096)
    lines = [{"type": "run_start", "run_id": "long"}]
    lines += [{"type": "step", "run_id": "long", "step": i, "observation": f"{i} " + "o" * 1500} for i in range(12)]
    path = write_jsonl(tmp_path / "t.jsonl", lines)
    sizes: list[int] = []
    real = Ingestor._settle

    def settle(self: Any, conn: Any, src: Any, done: Any, *a: Any, **k: Any) -> None:
        sizes.append(done.records)
        real(self, conn, src, done, *a, **k)

    monkeypatch.setattr(Ingestor, "_settle", settle)
    monkeypatch.setattr(ingest_module, "GROUP_CHUNKS", 1)
    report, rows = _ingest(_settings(migrated_sqlite, tmp_path / "a", reader_process_bytes=1 if apart else 0,
                                     batch_lines=2000), path)
    # ~1.5 KB a step: a batch closes on the line that takes it past 4 KB (the run_start and
    # three steps, then three steps each), and the pass ends with an empty last batch
    assert sizes == [4, 3, 3, 3, 0] and report.records == 13
    monkeypatch.setattr(reader, "BATCH_BYTES", 1 << 30)
    sizes.clear()
    _, whole = _ingest(_settings(migrated_sqlite, tmp_path / "b", reader_process_bytes=0, batch_lines=2000), path)
    assert sizes == [13] and rows == whole
