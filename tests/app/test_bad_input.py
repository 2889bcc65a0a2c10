"""The bad-input corpus, ingested by the command line: no crash, good records kept, a clear `FILE:LINE: reason`.

Each case writes one file holding good records around the bad part. The same corpus is
uploaded in test_bad_input_upload.py. Expected messages are the ingest's own texts
(app/ingest/lines.py, archives.py, store.py), written out here by hand.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import random
import subprocess
import sys
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional

import orjson
import pytest
from fastapi.testclient import TestClient

from qita_board.main import create_app
from qita_board.settings import Settings
from tests.conftest import ROOT

MAX_LINE = 300_000  # above the 200 KB deep-nesting line, below the 400 KB long line
MAX_ARCHIVE = 1_000_000
#: The one error for a file whose first bytes are binary (written out here, not imported).
WHOLE_BINARY = "binary data (a NUL byte in its first bytes), not a JSON Lines file: the file was not read"
SURROGATE = ("a lone UTF-16 surrogate escape (such as \\ud800) stands for no character: read as U+FFFD (\ufffd), "
             "the rest of the record kept")
ENV_LIMITS = {"QITA_MAX_LINE_BYTES": str(MAX_LINE), "QITA_MAX_ARCHIVE_BYTES": str(MAX_ARCHIVE)}


def rec(obj: dict) -> bytes:
    return orjson.dumps(obj)


def start(run_id: str, **extra) -> bytes:
    return rec({"type": "run_start", "run_id": run_id, "ts": "2025-01-01T00:00:00Z", "task_id": f"task-{run_id}", **extra})


def step(run_id: str, n: int) -> bytes:
    return rec({"type": "step", "run_id": run_id, "step": n, "ts": "2025-01-01T00:00:01Z",
                "tokens": {"input": 10, "output": 5, "total": 15}})


def end(run_id: str) -> bytes:
    return rec({"type": "run_end", "run_id": run_id, "ts": "2025-01-01T00:01:00Z", "status": "completed",
                "stop_reason": "final", "final_result": "ok"})


def lines(*parts: bytes, eol: bytes = b"\n", last_eol: bool = True) -> bytes:
    body = eol.join(parts)
    return body + eol if last_eol else body


@dataclass
class Case:
    """One bad input: the file to write, what must be rejected, and what must be kept."""

    name: str
    filename: str
    make: Callable[[], bytes]
    #: exact (line, message) pairs reported as errors, in order (file label added by the test)
    errors: list[tuple[Optional[int], str]] = field(default_factory=list)
    #: errors whose file label differs from the file name (archives: "name!entry")
    error_labels: Optional[list[str]] = None
    warnings: list[tuple[Optional[int], str]] = field(default_factory=list)
    #: run id -> step indexes expected present afterwards
    runs: dict[str, list[int]] = field(default_factory=dict)


def _gzip(data: bytes) -> bytes:
    return gzip.compress(data, compresslevel=9)


def _truncated_gzip() -> bytes:
    whole = _gzip(lines(start("gzt"), step("gzt", 0), step("gzt", 1)) + b"x" * 200_000)
    return whole[: len(whole) - 40]


def _gzip_bomb() -> bytes:
    # 20 MB of blank lines after two good records: compresses to ~20 KB, decompresses past the 1 MB cap.
    buf = io.BytesIO()
    with gzip.GzipFile(fileobj=buf, mode="wb", compresslevel=9) as gz:
        gz.write(lines(start("bomb"), step("bomb", 0)))
        for _ in range(20):
            gz.write(b"\n" * 1_000_000)
    return buf.getvalue()


def _zip(entries: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in entries.items():
            zf.writestr(zipfile.ZipInfo(name), data, compress_type=zipfile.ZIP_DEFLATED)
    return buf.getvalue()


def _zip_bomb() -> bytes:
    return _zip({"a-good.jsonl": lines(start("zb"), step("zb", 0)), "b-huge.jsonl": b"\n" * 5_000_000})


DEEP = b'{"type":"step","run_id":"deep","step":1,"observation":' + b"[" * 100_000 + b"]" * 100_000 + b"}"

CASES: list[Case] = [
    Case("truncated_last_line", "trunc.jsonl",
         lambda: lines(start("t"), step("t", 0)) + b'{"type":"step","run_id":"t","st',
         errors=[(3, "truncated last line (no newline at end of file): invalid JSON: unexpected end of data: "
                     "line 1 column 32 (char 31)")],
         runs={"t": [0]}),
    # Classic Mac OS line endings: the whole file is one line to a JSON Lines reader, and the
    # error says why instead of only "truncated" (orjson reads the CR as whitespace and stops
    # at the second record's brace, one byte after the first record).
    Case("cr_only_line_endings", "mac.jsonl",
         lambda: lines(start("cr"), step("cr", 0), eol=b"\r"),
         errors=[(1, "its lines end in a carriage return alone (CR): JSON Lines ends each record with a newline "
                     "(LF or CRLF); invalid JSON: unexpected content after document: "
                     f"line 1 column {len(start('cr')) + 2} (char {len(start('cr')) + 1})")]),
    # A CR inside a line is whitespace to JSON: no hint when the line is read.
    Case("cr_inside_a_good_line", "crin.jsonl",
         lambda: lines(start("ci"), b'{"type":"step",\r"run_id":"ci","step":0}', b'{"type":"step",\r"run_id":"ci"}',
                       b'{"type":"step",\r"run_id":"ci",}'),
         errors=[(3, "missing field 'step'"),
                 (4, "invalid JSON: trailing comma is not allowed: line 1 column 30 (char 29)")], runs={"ci": [0]}),
    Case("invalid_utf8", "utf8.jsonl",
         lambda: lines(start("u"), b'{"type":"step","run_id":"u","step":0,"observation":"\xff\xfe"}', step("u", 1)),
         errors=[(2, "line is not valid UTF-8")], runs={"u": [1]}),
    Case("non_object_line", "nonobj.jsonl",
         lambda: lines(start("n"), b"[1, 2, 3]", b'"just a string"', b"42", b"null", step("n", 0)),
         errors=[(2, "not a JSON object (got an array)"), (3, "not a JSON object (got a string)"),
                 (4, "not a JSON object (got a number)"), (5, "not a JSON object (got null)")],
         runs={"n": [0]}),
    Case("missing_fields", "missing.jsonl",
         lambda: lines(start("m"), rec({"run_id": "m", "step": 1}), rec({"type": "step", "step": 1}),
                       rec({"type": "step", "run_id": "m"}), step("m", 0)),
         errors=[(2, "missing field 'type'"), (3, "missing field 'run_id'"), (4, "missing field 'step'")],
         runs={"m": [0]}),
    Case("wrong_types", "types.jsonl",
         lambda: lines(start("w"), rec({"type": 5, "run_id": "w"}), rec({"type": "step", "run_id": 7, "step": 0}),
                       rec({"type": "step", "run_id": "w", "step": "two"}), rec({"type": "step", "run_id": "", "step": 0}),
                       rec({"type": "step", "run_id": "w", "step": 3, "critic_outputs": "none"}), step("w", 0)),
         errors=[(2, "field 'type': must be a string, got a number"),
                 (3, "field 'run_id': must be a string, got a number"),
                 (4, "field 'step': Input should be a valid integer, got a string"),
                 (5, "field 'run_id': must be 1 to 200 characters, got 0")],
         # a wrongly typed optional field costs only that value: the step is kept, with a warning
         warnings=[(6, "field 'critic_outputs': Input should be a valid list; value ignored, the rest of the record kept")],
         runs={"w": [0, 3]}),
    Case("nan_infinity", "nan.jsonl",
         lambda: lines(start("f"), b'{"type":"step","run_id":"f","step":0,"duration_s":NaN}',
                       b'{"type":"step","run_id":"f","step":1,"cost_usd":Infinity}', step("f", 2)),
         errors=[(2, "invalid JSON (NaN and Infinity are not JSON): unexpected character, expected a JSON value: "
                     "line 1 column 51 (char 50)"),
                 (3, "invalid JSON (NaN and Infinity are not JSON): unexpected character, expected a JSON value: "
                     "line 1 column 49 (char 48)")],
         runs={"f": [2]}),
    Case("line_too_long", "long.jsonl",
         lambda: lines(start("l"), rec({"type": "step", "run_id": "l", "step": 0, "observation": "x" * 400_000}),
                       step("l", 1)),
         errors=[(2, f"line longer than the maximum of {MAX_LINE} bytes")], runs={"l": [1]}),
    Case("nested_100k", "deep.jsonl",
         lambda: lines(start("deep"), DEEP, step("deep", 0)),
         errors=[(2, "invalid JSON: nested too deeply (more than 1024 levels)")], runs={"deep": [0]}),
    Case("empty_file", "empty.jsonl", lambda: b"", warnings=[(None, "empty file: no records")]),
    Case("bom_crlf", "bom.jsonl", lambda: b"\xef\xbb\xbf" + lines(start("b"), step("b", 0), step("b", 1), end("b"), eol=b"\r\n"),
         runs={"b": [0, 1]}),
    # two files that each began with a byte-order mark, joined: the second mark is mid-file
    Case("bom_joined", "joined.jsonl", lambda: b"\xef\xbb\xbf" + lines(start("j1"), step("j1", 0)) + b"\xef\xbb\xbf"
         + lines(start("j2"), step("j2", 0)), runs={"j1": [0], "j2": [0]}),
    Case("gzip", "good.jsonl.gz", lambda: _gzip(lines(start("g"), step("g", 0), step("g", 1), end("g"))), runs={"g": [0, 1]}),
    Case("gzip_truncated", "cut.jsonl.gz", _truncated_gzip,
         errors=[(4, "cannot decompress: Compressed file ended before the end-of-stream marker was reached")],
         runs={"gzt": [0, 1]}),
    Case("gzip_bomb", "bomb.jsonl.gz", _gzip_bomb,
         errors=[(None, f"cannot decompress: decompressed data exceeds the limit of {MAX_ARCHIVE} bytes")],
         runs={"bomb": [0]}),
    Case("zip_dotdot", "slip.zip",
         lambda: _zip({"../evil.jsonl": lines(start("evil")), "/abs.jsonl": lines(start("abs")),
                       "ok/good.jsonl": lines(start("z"), step("z", 0))}),
         errors=[(None, "archive entry skipped: its name points outside the archive")] * 2,
         error_labels=["slip.zip/../evil.jsonl", "slip.zip//abs.jsonl"], runs={"z": [0]}),
    Case("zip_bomb", "zbomb.zip", _zip_bomb,
         errors=[(None, f"archive entry declares 5000000 bytes, more than the limit of {MAX_ARCHIVE} bytes: skipped")],
         error_labels=["zbomb.zip/b-huge.jsonl"], runs={"zb": [0]}),
    # A file that is no text at all is one error, not one per newline byte in it (1 MB of
    # random bytes was 1,001 "bad lines")
    Case("binary_named_jsonl", "binary.jsonl", lambda: bytes(range(256)) * 40, errors=[(1, WHOLE_BINARY)]),
    Case("random_bytes", "random.jsonl", lambda: random.Random(16).randbytes(1_000_000), errors=[(1, WHOLE_BINARY)]),
    Case("png_named_jsonl", "image.jsonl", lambda: b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)) * 8,
         errors=[(1, WHOLE_BINARY)]),
    # Windows' "Unicode" is UTF-16: every other byte NUL, said as such (it read "binary data"),
    # once for the file (every line carried it)
    Case("utf16", "utf16.jsonl", lambda: lines(start("u"), step("u", 0)).decode().encode("utf-16"),
         errors=[(1, "UTF-16 text (a NUL byte between characters), not UTF-8 JSON Lines: the file was not read; "
                     "save it as UTF-8")]),
    # ... but records before the first NUL are read, and so are those after a bad line
    Case("records_then_binary", "tail.jsonl",
         lambda: lines(start("rb"), step("rb", 0)) + b"\x00\x01junk\n" + lines(step("rb", 1)),
         errors=[(3, "binary data (NUL byte), not a JSON line")], runs={"rb": [0, 1]}),
    Case("raw_nul_in_first_record", "rawnul.jsonl",
         lambda: b'{"type":"run_start","run_id":"x\x00"}\n' + lines(start("rn"), step("rn", 0)),
         errors=[(1, "binary data (NUL byte), not a JSON line")], runs={"rn": [0]}),
    # Python's json.dumps of a string holding surrogate-escaped bytes (a tool's raw output):
    # valid JSON orjson refuses; the records were lost as "line is not valid UTF-8"
    Case("lone_surrogates", "surrogates.jsonl",
         lambda: lines(b'{"type": "run_start", "run_id": "ls", "objective": "fix \\udcff it"}',
                       b'{"type": "step", "run_id": "ls", "step": 0, "observation": {"k\\ud800": "a\\udc80b"}}',
                       b'{"type": "step", "run_id": "ls", "step": 1, "observation": "pair \\ud83d\\ude00 kept"}',
                       b'{"type": "step", "run_id": "ls", "step": 2, "note": "\\ud800", "duration_s": NaN}'),
         errors=[(4, "invalid JSON (NaN and Infinity are not JSON): NaN is not JSON")],
         warnings=[(1, SURROGATE), (2, SURROGATE)], runs={"ls": [0, 1]}),
    Case("two_run_starts", "twostarts.jsonl",
         lambda: lines(start("d", objective="first"), step("d", 0), start("d", objective="second")),
         warnings=[(3, "second run_start for this run with different content: ignored, the first one received is kept")],
         runs={"d": [0]}),
    Case("nul_characters", "nul.jsonl",
         lambda: lines(start("nul", objective="a\u0000b"), b'{"type":"step","run_id":"x\\u0000y","step":0}',
                       rec({"type": "step", "run_id": "nul", "step": 0, "observation": {"k\u0000": "v\u0000"}})),
         errors=[(2, "field 'run_id': must not contain the NUL character (\\u0000)")], runs={"nul": [0]}),
    # Integers past what the database columns hold (32 bits for steps and counts; tokens up
    # to 2**53 - 1, so that a run's sum fits 64): the SQLite write failed on them and lost
    # the file's good lines with it. A
    # step index out of range rejects its line; any other such field is dropped, with a
    # warning. orjson reads an integer past 64 bits as a float: an integral one, so it is
    # that integer, out of range like the others.
    Case("integers_out_of_range", "bigint.jsonl",
         lambda: lines(start("big", replicate=2**31), step("big", 0),
                       rec({"type": "step", "run_id": "big", "step": 2**63}),
                       b'{"type":"step","run_id":"big","step":18446744073709551616}',
                       rec({"type": "step", "run_id": "big", "step": 1, "tokens": {"input": 2**63, "output": 1}}),
                       rec({"type": "event", "run_id": "big", "step": 2**31, "phase": "ACT"}),
                       json.dumps({"type": "run_end", "run_id": "big", "status": "completed", "steps": 2**63 - 1,
                                   "tokens": {"total": -(2**63) - 1}}).encode(),  # past what orjson writes
                       step("big", 2)),
         errors=[(3, "field 'step': Input should be less than or equal to 2147483647"),
                 (4, "field 'step': Input should be less than or equal to 2147483647")],
         warnings=[(1, "field 'replicate': Input should be less than or equal to 2147483647; value ignored, "
                       "the rest of the record kept"),
                   (5, "field 'tokens.input': Input should be less than or equal to 9007199254740991; value "
                       "ignored, the rest of the record kept"),
                   (6, "field 'step': Input should be less than or equal to 2147483647; value ignored, the rest "
                       "of the record kept"),
                   (7, "field 'steps': Input should be less than or equal to 2147483647; value ignored, the rest "
                       "of the record kept"),
                   (7, "field 'tokens.total': Input should be greater than or equal to -9007199254740991; value "
                       "ignored, the rest of the record kept")],
         runs={"big": [0, 1, 2]}),
    Case("records_before_run_start", "early.jsonl",
         lambda: lines(step("e", 0), step("e", 1), end("e"), start("e", objective="late start")),
         runs={"e": [0, 1]}),
]

#: gzip-bomb line numbers depend on where the cap trips; the message is what matters there.
LINE_FREE = {"gzip_bomb"}


def write_case(case: Case, folder: Path) -> Path:
    path = folder / case.filename
    path.write_bytes(case.make())
    return path


def check_issues(case: Case, got: list[dict], label: str) -> None:
    """Errors equal the case's (file, line, message) list, exactly."""
    labels = case.error_labels or [label] * len(case.errors)
    want = [{"file": lab, "line": ln, "message": msg} for lab, (ln, msg) in zip(labels, case.errors)]
    if case.name in LINE_FREE:
        got = [{**g, "line": None} for g in got]
    assert got == want


def check_kept(client: TestClient, case: Case) -> None:
    """Every good record is there: the runs with their step counts."""
    listing = client.get("/api/runs", params={"limit": 500}).json()
    assert sorted(r["run_id"] for r in listing["data"]) == sorted(case.runs)
    for run_id, steps in case.runs.items():
        body = client.get(f"/api/runs/{run_id}/steps", params={"limit": 200}).json()
        assert body["count"] == len(steps)
        assert [s["step"] for s in body["data"]] == steps


def _cli_ingest(path: Path, db: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT), **ENV_LIMITS}
    return subprocess.run([sys.executable, "-m", "qita_board.cli", "ingest", path.name, "--db", str(db), "--json"],
                          cwd=path.parent, env=env, capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_bad_input_by_cli(tmp_path: Path, case: Case):
    path = write_case(case, tmp_path)
    db = tmp_path / "q.db"
    proc = _cli_ingest(path, db)
    assert "Traceback" not in proc.stderr
    report = orjson.loads(proc.stdout)
    assert proc.returncode == (1 if case.errors else 0), proc.stderr
    check_issues(case, report["errors"], case.filename)
    assert [(w["line"], w["message"]) for w in report["warnings"]] == case.warnings
    assert all(w["file"] == case.filename for w in report["warnings"])
    for issue in report["errors"] + report["warnings"]:
        assert str(tmp_path) not in issue["file"] and str(tmp_path) not in issue["message"]
    with TestClient(create_app(Settings(db=str(db))), base_url="http://127.0.0.1") as c:
        check_kept(c, case)
        if case.name == "two_run_starts":
            run = c.get("/api/runs/d").json()["run"]
            assert run["objective"] == "first"
            page = c.get("/runs/d").text
            assert "second run_start for this run with different content" in page
        if case.name == "records_before_run_start":
            run = c.get("/api/runs/e").json()["run"]
            assert run["objective"] == "late start" and run["task_id"] == "task-e"
    # A second pass adds nothing and reports the same bad lines again only if the file changed.
    again = _cli_ingest(path, db)
    assert "Traceback" not in again.stderr


def test_zip_slip_writes_nothing_outside(tmp_path: Path):
    case = next(c for c in CASES if c.name == "zip_dotdot")
    inner = tmp_path / "inner"
    inner.mkdir()
    path = write_case(case, inner)
    proc = _cli_ingest(path, tmp_path / "q.db")
    assert proc.returncode == 1
    assert not (tmp_path / "evil.jsonl").exists()
    assert not Path("/abs.jsonl").exists()


def test_cli_text_output_names_file_and_line(tmp_path: Path):
    case = next(c for c in CASES if c.name == "missing_fields")
    path = write_case(case, tmp_path)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-m", "qita_board.cli", "ingest", path.name, "--db", str(tmp_path / "q.db")],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1
    assert proc.stderr.splitlines()[:3] == ["missing.jsonl:2: missing field 'type'",
                                            "missing.jsonl:3: missing field 'run_id'",
                                            "missing.jsonl:4: missing field 'step'"]
    assert proc.stdout.strip() == "2 records from 1 file: 1 run (1 new), 3 rejected"


def _nested(depth: int) -> bytes:
    """JSON text of an object nested `depth` levels, "bottom" at the end (written as text:
    the standard library's encoder runs out of stack long before 1,000 levels)."""
    return b'{"k":' * (depth - 1) + b'"bottom"' + b"}" * (depth - 1)


@pytest.mark.parametrize("depth", [300, 1000])
def test_values_nested_as_deep_as_ingest_reads_are_stored_in_every_record_type(tmp_path: Path, depth: int):
    # orjson writes at most 254 levels and Python's stack ends near 1,000, while ingest reads
    # 1,024: an event at 255 levels crashed the ingest (its good neighbours lost), metadata
    # at 600 refused its whole file. Every record type here carries one deep value.
    deep = _nested(depth)
    recs = [b'{"type":"run_start","run_id":"deep","criteria":[{"id":"c"}],"metadata":' + deep + b"}",
            b'{"type":"step","run_id":"deep","step":0,"observation":' + deep + b',"critic_outputs":[{"critic":"x",'
            b'"action":"continue","reason":"r","score":0.5,"details":' + deep + b"}]}",
            b'{"type":"event","run_id":"deep","step":0,"phase":"ACT","ok":true,"payload":' + deep + b"}",
            b'{"type":"mystery","run_id":"deep","x":' + deep + b"}",
            b'{"type":"criterion","run_id":"deep","id":"c","score":1.0,"passed":true,"details":' + deep + b"}",
            b'{"type":"run_end","run_id":"deep","status":"completed","stop_reason":"final","failure_report":' + deep + b"}",
            b'{"type":"run_start","run_id":"good"}',
            b'{"type":"run_end","run_id":"good","status":"completed","stop_reason":"final"}']
    path = tmp_path / "deep.jsonl"
    path.write_bytes(b"\n".join(recs) + b"\n")
    db = tmp_path / "deep.db"
    result = subprocess.run([sys.executable, "-m", "qita_board.cli", "ingest", str(path), "--db", str(db)],
                            capture_output=True, text=True, cwd=ROOT)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "8 records from 1 file: 2 runs (2 new), 0 rejected" in result.stdout + result.stderr
    with TestClient(create_app(Settings(db=str(db))), base_url="http://127.0.0.1") as client:
        run = orjson.loads(client.get("/api/runs/deep").content)   # json.loads runs out of stack
        assert run["run"]["verdict"] == "pass"
        exported = client.get("/runs/deep/export.jsonl").content.splitlines()
        # seven deep values, each whole: metadata, observation, critic details, event,
        # the unknown record, criterion details, failure report
        assert len(exported) == 6 and sum(line.count(b'{"k":') for line in exported) == 7 * (depth - 1)
        assert client.get("/runs/deep").status_code == 200


def test_a_line_of_nul_bytes_alone_is_binary_not_utf16():
    # a log's NUL-filled tail after an unclean shutdown is no UTF-16 text (found in review)
    from qita_board.ingest.lines import parse_line

    assert parse_line(b"\x00" * 4096) == (None, "binary data (NUL byte), not a JSON line")
    assert parse_line('{"a": 1}'.encode("utf-16-le"))[1].startswith("UTF-16 text")
    # text that is not all Latin letters has fewer NULs, all on one side of the pairs
    assert parse_line('{"objective": "修复测试 — résumé ok"}'.encode("utf-16-le"))[1].startswith("UTF-16 text")
    assert parse_line(bytes(range(256)) * 40) == (None, "binary data (NUL byte), not a JSON line")


def test_utf16_appended_to_a_utf8_trace_keeps_the_records_before_it(tmp_path: Path):
    # Windows PowerShell 5's `>>` appends UTF-16 to a UTF-8 file: the first lines are records
    # and stay read; only the appended lines are reported, never the whole file.
    path = tmp_path / "appended.jsonl"
    path.write_bytes(lines(start("ap"), step("ap", 0)) + lines(step("ap", 1)).decode().encode("utf-16-le"))
    proc = _cli_ingest(path, tmp_path / "q.db")
    report = orjson.loads(proc.stdout)
    assert report["errors"] and all(e["line"] >= 3 for e in report["errors"])
    assert all("the file was not read" not in e["message"] for e in report["errors"])
    with TestClient(create_app(Settings(db=str(tmp_path / "q.db"))), base_url="http://127.0.0.1") as c:
        body = c.get("/api/runs/ap/steps").json()
        assert [s["step"] for s in body["data"]] == [0]
