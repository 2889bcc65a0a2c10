"""Issue 15 item 7: a very long value is shown cut, with a link to its field view, which
streams it whole and masked; step blocks read previews, never the whole large record."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import text

from qita_board.cli import run_ingest
from qita_board.main import create_app
from qita_board.previews import PREVIEW_STRING_CHARS
from qita_board.settings import Settings
from tests.app.parsed_html import one
from tests.app.parsed_html import text as shown

SIZE = 3 * 1024 * 1024
KEY = "AKIAIOSFODNN7EXAMPLE"
TOKEN = "tok-large-values-0123"


def _value() -> str:
    # Words, a key near the end, and a key where the preview's 16 KB cut would fall if it cut blindly.
    head = "w" * ((PREVIEW_STRING_CHARS - 10) % 5) + "word " * ((PREVIEW_STRING_CHARS - 10) // 5)
    assert len(head) == PREVIEW_STRING_CHARS - 10  # the key straddles the 16 KB mark
    head += KEY + " "
    tail = f" key {KEY} the end"
    return head + ("lorem ipsum " * (SIZE // 12))[: SIZE - len(head) - len(tail)] + tail


@pytest.fixture
def client(tmp_path: Path):
    value = _value()
    path = tmp_path / "big.jsonl"
    path.write_bytes(b"\n".join(orjson.dumps(r) for r in [
        {"type": "run_start", "run_id": "big", "ts": "2025-01-01T00:00:00Z"},
        {"type": "step", "run_id": "big", "step": 0, "observation": value, "decision": {"rationale": "short"}},
        {"type": "step", "run_id": "big", "step": 1, "observation": "small"},
    ]) + b"\n")
    settings = Settings(db=str(tmp_path / "q.db"), token=TOKEN)
    assert run_ingest(settings, [str(path)], progress=False).ok
    with TestClient(create_app(settings), base_url="http://127.0.0.1") as c:
        c.value = value  # type: ignore[attr-defined]
        yield c


def test_step_blocks_read_the_preview_with_the_long_value_cut(client):
    with client.app.state.engine.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM steps WHERE preview IS NOT NULL")).scalar() == 1
    r = client.get("/api/runs/big/steps")
    obs = r.json()["data"][0]["record"]["observation"]
    assert len(client.value) == SIZE
    assert obs.endswith(f"… [cut: {SIZE:,} characters in all; the field view and the JSONL export have it whole]")
    assert len(obs) < PREVIEW_STRING_CHARS + 200
    assert len(r.content) < 64 * 1024
    assert KEY not in r.text and "AKIAIOSFOD" not in r.text  # no part of a key at the cut either
    assert r.json()["data"][1]["record"]["observation"] == "small"


def test_show_all_gives_the_first_part_and_a_link_to_the_whole_value(client):
    r = client.get("/runs/big/steps/0/field", params={"path": "/observation"}, headers={"hx-request": "true"})
    assert r.status_code == 200
    assert len(r.text) < 300 * 1024
    more = one(r.text, "p.field-more")
    assert f"of {SIZE:,} characters" in shown(more)
    assert one(more, "a")["href"] == "/runs/big/steps/0/field?path=%2Fobservation"


def test_the_field_page_streams_the_whole_value_masked(client):
    r = client.get("/runs/big/steps/0/field", params={"path": "/observation"})
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    assert "transfer-encoding" in r.headers or "content-length" not in r.headers
    assert KEY not in r.text
    assert r.text.count("[secret masked: aws-access-key …MPLE]") == 2
    assert "the end</pre>" in r.text and len(r.text) > SIZE - 1000


def test_the_field_api_streams_json_masked_and_reveals_to_the_token(client):
    masked = client.get("/api/runs/big/steps/0/field", params={"path": "/observation"}).json()
    assert masked["path"] == "/observation" and masked["step"] == 0
    expected = client.value.replace(KEY, "[secret masked: aws-access-key …MPLE]")
    assert masked["value"] == expected
    raw = client.get("/api/runs/big/steps/0/field", params={"path": "/observation", "reveal": "secrets"},
                     headers={"authorization": f"Bearer {TOKEN}"}).json()
    assert raw["value"] == client.value


def test_the_html_export_shows_the_preview_and_the_jsonl_export_the_whole_record(client):
    page = client.get("/runs/big/export.html").text
    assert len(page) < 1024 * 1024 and f"cut: {SIZE:,} characters" in page
    lines = client.get("/runs/big/export.jsonl").text.splitlines()
    step0 = orjson.loads(lines[1])
    assert len(step0["observation"]) == len(client.value) - 2 * (len(KEY) - len("[secret masked: aws-access-key …MPLE]"))


def test_a_short_field_of_a_large_record_gives_the_gate_back(client, monkeypatch):
    # A large record is read one lookup at a time; a value short enough to answer whole
    # (here the step's decision, a dict) used to keep the gate, and the next lookup of any
    # large record then waited forever. The wait is bounded too, so a regression is a 503.
    from qita_board import fields

    monkeypatch.setattr(fields, "GATE_WAIT_S", 0.5)
    for _ in range(3):
        r = client.get("/api/runs/big/steps/0/field", params={"path": "/decision"})
        assert (r.status_code, r.json()["value"]) == (200, {"rationale": "short"})
        r = client.get("/runs/big/steps/0/field", params={"path": "/decision/rationale"},
                       headers={"hx-request": "true"})
        assert r.status_code == 200 and "short" in shown(one(r.text, "pre"))
    for path in ("/nothing", "~bad"):  # a lookup that fails gives it back as well
        assert client.get("/api/runs/big/steps/0/field", params={"path": path}).status_code in (400, 404)
    assert client.get("/api/runs/big/steps/0/field", params={"path": "/observation"}).json()["value"] != ""
    assert fields._BIG_RECORDS.acquire(timeout=0)  # nothing holds it now
    fields._BIG_RECORDS.release()


def test_a_lookup_that_waits_too_long_for_the_gate_is_told_to_try_again(client, monkeypatch):
    from qita_board import fields

    monkeypatch.setattr(fields, "GATE_WAIT_S", 0.05)
    assert fields._BIG_RECORDS.acquire(timeout=0)
    try:
        r = client.get("/api/runs/big/steps/0/field", params={"path": "/decision"})
    finally:
        fields._BIG_RECORDS.release()
    assert r.status_code == 503
    assert r.json()["error"] == "another large step record is being read: try again in a moment"


def test_the_gate_is_given_back_once_even_when_the_stream_never_starts():
    # a client gone before the first byte: the server never starts the body's generator,
    # so its own `finally` never runs; the response gives the gate back instead, once
    import asyncio

    from qita_board import fields

    calls: list[int] = []
    release = fields.once(lambda: calls.append(1))
    started: list[bool] = []

    def body():
        started.append(True)
        try:
            yield "x"
        finally:
            release()

    async def receive():
        return {"type": "http.disconnect"}

    async def send(message):
        raise OSError("client gone")

    response = fields._ReleasingResponse(body(), media_type="text/plain", release=release)
    from starlette.requests import ClientDisconnect

    with pytest.raises((OSError, ClientDisconnect)):
        asyncio.run(response({"type": "http", "asgi": {"spec_version": "2.4"}}, receive, send))
    release()  # every path may call it: still once
    assert (started, calls) == ([], [1])
