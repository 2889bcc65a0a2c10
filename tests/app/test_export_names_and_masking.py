"""Exports: Unicode run ids in the download name, deeply nested records, and secrets masked unless revealed."""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any, Iterator
from urllib.parse import unquote

import orjson
import pytest
from fastapi.testclient import TestClient

from qita_board.export import disposition, dumps_deep, dumps_line
from qita_board.ingest import Ingestor
from qita_board.main import create_app
from qita_board.settings import Settings
from qita_board.urls import encode_run_id
from tests.app.test_secrets import ANTHROPIC, AWS_ID, AWS_SECRET, GITHUB, GITHUB_PAT, GOOGLE, JWT, OPENAI, PEM, SLACK
from tests.conftest import write_jsonl


def _client(tmp_path: Path, records: list[dict], **kw: Any) -> TestClient:
    s = Settings(db=str(tmp_path / "q.db"), **kw)
    c = TestClient(create_app(s), base_url="http://127.0.0.1")
    c.__enter__()
    # stdlib json writes the deep records orjson refuses (Python's recursion limit allows ~900 levels).
    lines = [json.dumps(r, ensure_ascii=False).encode() for r in records]
    report = Ingestor(c.app.state.engine, s).ingest_paths([str(write_jsonl(tmp_path / "t.jsonl", lines))])
    assert report.ok, [str(e) for e in report.errors]
    return c


@pytest.fixture
def make_client(tmp_path: Path) -> Iterator[Any]:
    made: list[TestClient] = []

    def make(records: list[dict], **kw: Any) -> TestClient:
        made.append(_client(tmp_path, records, **kw))
        return made[-1]

    yield make
    for c in made:
        c.__exit__(None, None, None)


def _run(rid: str, observation: Any = "obs", objective: str = "goal", final: str = "done") -> list[dict]:
    return [
        {"type": "run_start", "run_id": rid, "objective": objective},
        {"type": "step", "run_id": rid, "step": 0, "observation": observation},
        {"type": "run_end", "run_id": rid, "status": "completed", "stop_reason": "final", "final_result": final},
    ]


# -- download names ------------------------------------------------------------------------------


def test_disposition_is_ascii_with_the_utf8_name_beside_it():
    # 运 is U+8FD0 (UTF-8 E8 BF 90), 行 is U+884C (E8 A1 8C): two non-ASCII letters, two underscores.
    assert disposition("运行-1", "jsonl") == (
        "attachment; filename=\"__-1.jsonl\"; filename*=UTF-8''%E8%BF%90%E8%A1%8C-1.jsonl")
    # Arabic-Indic digits are alphanumeric but not ASCII; the space and slash are not kept either.
    assert disposition("a b/١", "html") == "attachment; filename=\"a_b__.html\"; filename*=UTF-8''a%20b%2F%D9%A1.html"
    # a name of dots (a run id "..") saves under the fallback in both, never as ".html"
    assert disposition("..", "html") == "attachment; filename=\"run.html\"; filename*=UTF-8''run.html"
    assert disposition(" .x. ", "jsonl") == "attachment; filename=\"_.x._.jsonl\"; filename*=UTF-8''x.jsonl"


@pytest.mark.parametrize("rid", ["تشغيل-الوكيل", "运行-試験-三", "run-🚀-😀", "Ünïcode ∑ mix"])
@pytest.mark.parametrize("ext", ["html", "jsonl"])
def test_exports_of_unicode_run_ids_download_under_their_name(make_client, rid: str, ext: str):
    c = make_client(_run(rid))
    resp = c.get(f"/runs/{encode_run_id(rid)}/export.{ext}")
    assert resp.status_code == 200
    header = resp.headers["content-disposition"]
    header.encode("ascii")  # nothing but ASCII travels in the header
    plain = header.split('filename="', 1)[1].split('"', 1)[0]
    assert plain.endswith("." + ext) and all(ch.isascii() for ch in plain)
    assert unquote(header.split("filename*=UTF-8''", 1)[1]) == f"{rid}.{ext}"
    body = resp.text
    assert (html.escape(rid, quote=False) if ext == "html" else json.dumps(rid, ensure_ascii=False)) in body


# -- deep nesting --------------------------------------------------------------------------------


def _nest(levels: int, leaf: Any) -> Any:
    value = leaf
    for i in range(levels):
        value = {"k": value} if i % 2 else [value]
    return value


def _depth(value: Any) -> int:
    depth = 0
    while isinstance(value, (dict, list)):
        value = value["k"] if isinstance(value, dict) else value[0]
        depth += 1
    return depth


@pytest.mark.parametrize("value", [
    {"a": [1, -2, 3.5, 1e-7, 1e300, True, False, None], "é": "ü \" \\ \n \u2028 😀", "": {}, "l": []},
    [], {}, "x", 0, None, [[[]]], {"1": {"2": [{"3": "deep"}]}},
])
def test_deep_encoder_writes_the_same_json_as_orjson(value):
    assert json.loads(dumps_deep(value)) == orjson.loads(orjson.dumps(value)) == value


def test_deep_encoder_has_no_depth_limit():
    value = _nest(3000, "bottom")  # far past orjson (~254) and Python's recursion limit (1000)
    text = dumps_deep(value)
    assert text.count("[") == 1500 and text.count("{") == 1500 and '"bottom"' in text
    assert dumps_line({"v": _nest(300, 1)}).endswith(b"\n")


def test_a_500_level_observation_exports_whole_and_ingests_back_the_same(make_client, tmp_path: Path):
    deep = _nest(500, "the bottom")
    records = _run("deep", observation=deep)
    records.insert(2, {"type": "step", "run_id": "deep", "step": 1, "observation": "after the deep one"})
    c = make_client(records)
    resp = c.get("/runs/deep/export.jsonl")
    assert resp.status_code == 200
    lines = resp.content.splitlines()
    assert len(lines) == 4  # run_start, two steps, run_end: nothing cut off after the deep step
    got = [orjson.loads(x) if i != 1 else json.loads(x) for i, x in enumerate(lines)]
    assert _depth(got[1]["observation"]) == 500
    assert got[3]["type"] == "run_end" and got[3]["final_result"] == "done"

    out = tmp_path / "again" / "deep.jsonl"
    out.parent.mkdir()
    out.write_bytes(resp.content)
    fresh = Settings(db=str(tmp_path / "fresh.db"))
    with TestClient(create_app(fresh), base_url="http://127.0.0.1") as other:
        assert Ingestor(other.app.state.engine, fresh).ingest_paths([str(out)]).ok
        a, b = c.get("/api/runs/deep").json(), other.get("/api/runs/deep").json()
        assert a["run"]["stop_reason"] == b["run"]["stop_reason"] == "final"
        assert a["run"]["final_result"] == b["run"]["final_result"] == "done"
        assert a["run"]["steps"] == b["run"]["steps"] == 2
        # The step records as stored (the JSON API cannot encode a 500-level value: see the report).
        assert _stored_steps(other) == _stored_steps(c) == [(0, records[1]), (1, records[2])]
        assert other.get("/runs/deep/export.jsonl").content == resp.content


def _stored_steps(c: TestClient) -> list[tuple[int, Any]]:
    from sqlalchemy import text

    with c.app.state.engine.connect() as conn:
        rows = conn.execute(text("SELECT step, record FROM steps ORDER BY step")).all()
    return [(step, json.loads(record)) for step, record in rows]


def test_a_secret_at_the_bottom_of_deep_data_is_masked_in_the_export(make_client):
    c = make_client(_run("deep", observation=_nest(700, "password=hunter22")))
    body = c.get("/runs/deep/export.jsonl").text
    assert "hunter22" not in body and "password=[secret masked: password]" in body
    assert "hunter22" not in c.get("/runs/deep/export.html").text


# -- secrets -------------------------------------------------------------------------------------

#: (kind, text holding the secret, the part that must not appear): one of every detector.
SECRETS = [
    ("openai-key", f"key={OPENAI}!", OPENAI),
    ("anthropic-key", f"use {ANTHROPIC} now", ANTHROPIC),
    ("aws-access-key", f"id {AWS_ID}.", AWS_ID),
    ("aws-secret-key", f"aws_secret_access_key = {AWS_SECRET}", AWS_SECRET),
    ("github-token", f"token {GITHUB}", GITHUB),
    ("github-pat", GITHUB_PAT, GITHUB_PAT),
    ("slack-token", f"slack {SLACK}", SLACK),
    ("google-api-key", f"g={GOOGLE}", GOOGLE),
    ("jwt", f"auth {JWT} x", JWT),
    ("bearer-token", "Authorization: Bearer abcDEF123456ghiJKL", "abcDEF123456ghiJKL"),
    ("private-key", f"before\n{PEM}\nafter", "MIIEowIBAAKCAQEAx1y2z3"),
    ("password", "password=hunter22 ok", "hunter22"),
    ("secret", "secret: topsecretvalue", "topsecretvalue"),
    ("value-under-secret-key", {"api_key": "plainvalue99"}, "plainvalue99"),
]
TOKEN = "tok-0123456789abcdef"


def _leaky(text: Any) -> list[dict]:
    # The secret in the objective (run header), a step, an event and the final result.
    objective = text if isinstance(text, str) else json.dumps(text)
    recs = _run("leaky", observation={"seen": text}, objective=objective, final=objective)
    recs.insert(2, {"type": "event", "run_id": "leaky", "step": 0, "phase": "ACT", "payload": text})
    return recs


def _text_of(resp, ext: str) -> str:
    """The export's content as plain text: HTML unescaped, JSONL lines decoded."""
    assert resp.status_code == 200, resp.text[:300]
    if ext == "html":
        return html.unescape(resp.text)
    return "\n".join(json.dumps(json.loads(line), ensure_ascii=False) for line in resp.text.splitlines())


def _plain_text(resp, ext: str) -> str:
    text = _text_of(resp, ext)
    # In JSONL the PEM's newlines are escaped; compare on decoded strings.
    return text.replace("\\n", "\n")


@pytest.mark.parametrize("ext", ["html", "jsonl"])
@pytest.mark.parametrize("kind,text,raw", SECRETS, ids=[k for k, _t, _r in SECRETS])
def test_exports_mask_every_kind_of_secret_by_default(make_client, ext: str, kind: str, text: Any, raw: str):
    c = make_client(_leaky(text))
    body = _plain_text(c.get(f"/runs/leaky/export.{ext}"), ext)
    assert raw not in body
    assert "[secret masked: " in body


@pytest.mark.parametrize("ext", ["html", "jsonl"])
@pytest.mark.parametrize("kind,text,raw", SECRETS, ids=[k for k, _t, _r in SECRETS])
def test_exports_show_secrets_raw_when_revealed_on_a_board_without_token(make_client, ext, kind, text, raw):
    c = make_client(_leaky(text))
    body = _plain_text(c.get(f"/runs/leaky/export.{ext}?reveal=secrets"), ext)
    assert raw in body and "[secret masked: " not in body


@pytest.mark.parametrize("ext", ["html", "jsonl"])
def test_export_reveal_needs_the_token_when_one_is_configured(make_client, ext: str):
    text = "password=hunter22 and " + AWS_ID
    c = make_client(_leaky(text), token=TOKEN)
    refused = c.get(f"/runs/leaky/export.{ext}?reveal=secrets")
    assert refused.status_code == 401 and "hunter22" not in refused.text and AWS_ID not in refused.text
    auth = {"authorization": f"Bearer {TOKEN}"}
    masked = _plain_text(c.get(f"/runs/leaky/export.{ext}", headers=auth), ext)
    assert "hunter22" not in masked and AWS_ID not in masked and "[secret masked: password]" in masked
    shown = _plain_text(c.get(f"/runs/leaky/export.{ext}?reveal=secrets", headers=auth), ext)
    assert "password=hunter22" in shown and AWS_ID in shown


def test_jsonl_export_masked_keeps_the_records_ingestible(make_client, tmp_path: Path):
    c = make_client(_leaky({"api_key": "plainvalue99"}))
    lines = [orjson.loads(x) for x in c.get("/runs/leaky/export.jsonl").content.splitlines()]
    assert [r["type"] for r in lines] == ["run_start", "step", "event", "run_end"]
    assert lines[1]["observation"] == {"seen": {"api_key": "[secret masked: secret]"}}


def test_an_error_while_streaming_breaks_the_transfer_instead_of_ending_it_cleanly(tmp_path: Path, monkeypatch):
    # Over real HTTP: the client must see a broken download, never a complete-looking short file.
    import httpx

    from qita_board.queries import run_export
    from tests.browser.conftest import LiveServer

    s = Settings(db=str(tmp_path / "q.db"))
    server = LiveServer(s).start()
    try:
        assert Ingestor(server.app.state.engine, s).ingest_paths([str(write_jsonl(tmp_path / "a.jsonl", _run("a")))]).ok
        real = run_export.export_records

        def failing(session, *, run_pk, batch=500):
            records = real(session, run_pk=run_pk)
            yield next(records)
            raise RuntimeError("the database went away")

        monkeypatch.setattr(run_export, "export_records", failing)
        with pytest.raises(httpx.RemoteProtocolError):
            with httpx.stream("GET", server.url + "/runs/a/export.jsonl") as resp:
                assert resp.status_code == 200
                resp.read()
    finally:
        server.stop()
