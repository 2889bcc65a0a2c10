"""Issue 15 items 4 and 8: hostile archives and gzip streams are refused while streaming, by
ratio, size, entry count and line length; blank lines cost next to nothing; a crafted zip
loses only its bad entries; temporary files never outlive their ingest."""

from __future__ import annotations

import gzip
import io
import os
import time
import zipfile
from pathlib import Path

import orjson
from fastapi.testclient import TestClient

from qita_board import tempfiles
from qita_board.ingest import Ingestor
from qita_board.main import create_app
from qita_board.settings import Settings

GOOD = orjson.dumps({"type": "run_start", "run_id": "good", "ts": "2025-01-01T00:00:00Z"}) + b"\n"


def _ingest(tmp_path: Path, *paths: Path, **kw):
    from qita_board.db import open_database

    settings = Settings(db=str(tmp_path / "q.db"), **kw)
    engine = open_database(settings)
    try:
        return Ingestor(engine, settings).ingest_paths([str(p) for p in paths])
    finally:
        engine.dispose()


def _rel(label: str, tmp_path: Path) -> str:
    return label.replace(f"{tmp_path}/", "")


def _newlines_zip(path: Path, mib: int) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as zf:
        zf.writestr("a-good.jsonl", GOOD)
        with zf.open("b-newlines.jsonl", "w") as fh:
            block = b"\n" * (1 << 20)
            for _ in range(mib):
                fh.write(block)
    return path


def test_a_zip_of_newlines_is_refused_by_ratio_within_seconds(tmp_path):
    path = _newlines_zip(tmp_path / "nl.zip", 256)
    assert path.stat().st_size < 600_000  # 256 MiB of newlines in a few hundred KB
    started = time.monotonic()
    report = _ingest(tmp_path, path)
    took = time.monotonic() - started
    assert report.records == 1 and report.run_ids == {"good"}
    assert [(_rel(e.file, tmp_path), e.message) for e in report.errors] == [
        ("nl.zip/b-newlines.jsonl", "archive entry declares 268435456 bytes, more than 200 times its compressed "
                                    "size (QITA_MAX_ARCHIVE_RATIO): skipped")]
    assert took < 60, took  # refused before a byte is read; the old reader spent minutes on such a file


def test_a_good_entry_after_a_bomb_is_still_read(tmp_path):
    # the bomb was read until its own ratio stopped it, using up the whole archive's budget,
    # and the good entry after it was refused too: it is now refused on what it declares
    path = tmp_path / "bomb.zip"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as zf:
        zf.writestr("a_good.jsonl", GOOD)
        with zf.open("bomb.jsonl", "w") as fh:
            for _ in range(256):
                fh.write(b"\n" * (1 << 20))
        zf.writestr("z_good.jsonl", orjson.dumps({"type": "run_start", "run_id": "after"}) + b"\n")
    report = _ingest(tmp_path, path)
    assert report.run_ids == {"good", "after"}
    assert [e.message.split(",")[0] for e in report.errors] == ["archive entry declares 268435456 bytes"]


def test_a_gzip_of_newlines_is_refused_by_ratio(tmp_path):
    path = tmp_path / "nl.jsonl.gz"
    with gzip.open(path, "wb", compresslevel=9) as fh:
        fh.write(GOOD)
        block = b"\n" * (1 << 20)
        for _ in range(256):
            fh.write(block)
    report = _ingest(tmp_path, path)
    assert report.records == 1
    assert [(_rel(e.file, tmp_path), e.line, e.message) for e in report.errors] == [
        ("nl.jsonl.gz", None, "cannot decompress: data decompresses to more than 200 times its compressed size "
                              "(QITA_MAX_ARCHIVE_RATIO); the rest was not read")]


def test_the_size_limit_counts_what_is_produced_across_entries(tmp_path):
    # each entry declares less than the limit, so each is read; what they produce together is counted
    path = tmp_path / "two.zip"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("a-good.jsonl", GOOD)
        for name in ("b.jsonl", "c.jsonl"):
            zf.writestr(name, b"\n" * 600_000)
    report = _ingest(tmp_path, path, max_archive_bytes=1_000_000, max_archive_ratio=100_000)
    assert report.run_ids == {"good"}
    assert [e.message for e in report.errors] == [
        "archive decompresses to more than the limit of 1000000 bytes; the rest of it was not read"]


def test_blank_lines_are_skipped_in_bulk_and_line_numbers_stay_right(tmp_path):
    path = tmp_path / "blanks.jsonl"
    with open(path, "wb") as fh:
        fh.write(GOOD)
        fh.write(b"\n" * 3_000_000 + b"\r\n" * 1000)
        fh.write(b"not json\n")
        fh.write(orjson.dumps({"type": "step", "run_id": "good", "step": 0}) + b"\n")
    report = _ingest(tmp_path, path)
    assert report.records == 2
    assert [(e.line, e.message.split(":")[0]) for e in report.errors] == [(3_001_002, "invalid JSON")]


def test_too_many_entries_are_refused_and_the_first_ones_read(tmp_path):
    path = tmp_path / "many.zip"
    with zipfile.ZipFile(path, "w") as zf:
        for i in range(30):
            zf.writestr(f"r{i:02d}.jsonl", orjson.dumps({"type": "run_start", "run_id": f"r{i:02d}"}) + b"\n")
    report = _ingest(tmp_path, path, max_archive_entries=10)
    assert report.run_ids == {f"r{i:02d}" for i in range(10)}
    assert [e.message for e in report.errors] == [
        "archive has more than 10 entries (QITA_MAX_ARCHIVE_ENTRIES); the rest of it was not read"]


def test_a_too_long_line_inside_a_zip_is_skipped_and_the_rest_read(tmp_path):
    path = tmp_path / "long.zip"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("t.jsonl", GOOD + b'{"type":"step","run_id":"good","step":0,"x":"' + b"y" * 200_000 + b'"}\n'
                    + orjson.dumps({"type": "step", "run_id": "good", "step": 1}) + b"\n")
    report = _ingest(tmp_path, path, max_line_bytes=100_000)
    assert report.records == 2
    assert [(_rel(e.file, tmp_path), e.line, e.message) for e in report.errors] == [
        ("long.zip/t.jsonl", 2, "line longer than the maximum of 100000 bytes")]


def _crafted_zip() -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("d" * 300 + "/deep.jsonl", orjson.dumps({"type": "run_start", "run_id": "longdir"}) + b"\n")
        zf.writestr("a.jsonl", orjson.dumps({"type": "run_start", "run_id": "file-a"}) + b"\n")
        zf.writestr("a.jsonl/b.jsonl", orjson.dumps({"type": "run_start", "run_id": "file-b"}) + b"\n")
        # a QitOS folder must be unpacked: one of its entries cannot be (name too long), the rest is read
        zf.writestr("q/manifest.json", orjson.dumps({"run_id": "qitos-1", "status": "running"}))
        zf.writestr("q/steps.jsonl", b"")
        zf.writestr("q/" + "e" * 300 + "/x.json", b"{}")
    return buf.getvalue()


def test_a_crafted_zip_loses_only_what_cannot_be_read_and_the_rest_of_the_upload_is_kept(tmp_path):
    settings = Settings(db=str(tmp_path / "q.db"))
    with TestClient(create_app(settings), base_url="http://127.0.0.1") as c:
        r = c.post("/api/traces", files=[("files", ("crafted.zip", _crafted_zip())),
                                         ("files", ("plain.jsonl", orjson.dumps({"type": "run_start", "run_id": "plain"}) + b"\n"))])
        assert r.status_code in (200, 202), r.text
        result = _result(c, r)
        runs = {row["run_id"] for row in c.get("/api/runs").json()["data"]}
        leftovers = list(tempfiles.own_folder().iterdir())
    assert {"longdir", "file-a", "file-b", "plain", "qitos-1"} <= runs
    assert [e["file"] for e in result["errors"]] == ["crafted.zip/q/" + "e" * 300 + "/x.json"]
    assert result["errors"][0]["message"] == "archive entry skipped: cannot unpack it: File name too long"
    assert leftovers == []


def _result(c: TestClient, r) -> dict:
    body = r.json()
    if r.status_code == 200:
        return body
    for _ in range(600):
        job = c.get(body["poll"]).json()
        if job["state"] in ("done", "failed", "cancelled"):
            return job["result"]
        time.sleep(0.05)
    raise AssertionError("upload never finished")


def test_stale_temporary_folders_are_removed_at_start(tmp_path):
    stale = tempfiles.base() / "99999999"
    (stale / "upload-x").mkdir(parents=True, exist_ok=True)
    (stale / "upload-x" / "0.jsonl").write_bytes(b"x" * 1000)
    alive = tempfiles.base() / str(os.getppid())
    alive.mkdir(parents=True, exist_ok=True)
    with TestClient(create_app(Settings(db=str(tmp_path / "q.db"))), base_url="http://127.0.0.1"):
        pass
    assert not stale.exists()
    assert alive.exists()  # a running process's folder is left alone


def test_an_archive_inside_an_archive_is_named_as_skipped_and_other_files_pass_quietly(tmp_path):
    # A zip of zips read nothing and said nothing: the upload looked empty (browser audit).
    inner = io.BytesIO()
    with zipfile.ZipFile(inner, "w") as zf:
        zf.writestr("run.jsonl", orjson.dumps({"type": "run_start", "run_id": "inner"}) + b"\n")
    outer = io.BytesIO()
    with zipfile.ZipFile(outer, "w") as zf:
        zf.writestr("night/inner.zip", inner.getvalue())
        zf.writestr("notes.txt", b"what we ran")
        zf.writestr("run.jsonl", orjson.dumps({"type": "run_start", "run_id": "outer"}) + b"\n")
    with TestClient(create_app(Settings(db=str(tmp_path / "q.db"))), base_url="http://127.0.0.1") as c:
        r = c.post("/api/traces", params={"wait": "true"}, files=[("files", ("zips.zip", outer.getvalue()))])
        assert r.status_code == 200, r.text
        result = r.json()
        assert [row["run_id"] for row in c.get("/api/runs").json()["data"]] == ["outer"]
    assert result["errors"] == [{"file": "zips.zip/night/inner.zip", "line": None, "message":
                                 "archive entry skipped: an archive inside an archive is not read; upload it on its own"}]
