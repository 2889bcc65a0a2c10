"""Secrets in trace text are masked in pages and JSON, kept raw in the database, revealed on request."""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import text

from qita_board.main import create_app
from qita_board.secrets import mask_data, mask_text
from qita_board.settings import Settings
from tests.conftest import write_jsonl

OPENAI = "sk-proj-Abc123Def456Ghi789Jkl0"
ANTHROPIC = "sk-ant-api03-ZZZZyyyyXXXXwwww1234"
AWS_ID = "AKIAIOSFODNN7EXAMPLE"
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
GITHUB = "ghp_" + "aB3" * 12
GITHUB_PAT = "github_pat_11ABCDEFG0123456789_abcdefghij"
SLACK = "xoxb-123456789012-abcdefABCDEF"
GOOGLE = "AIzaSyA1234567890abcdefghijklmnopqrstuv"  # AIza + 35
JWT = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.sig_Part-0123456789"
PEM = "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAx1y2z3\nq9w8e7r6t5\n-----END RSA PRIVATE KEY-----"


@pytest.mark.parametrize("raw,expected", [
    (f"key={OPENAI}!", "key=[secret masked: openai-key …Jkl0]!"),
    (f"use {ANTHROPIC} now", "use [secret masked: anthropic-key …1234] now"),
    (f"id {AWS_ID}.", "id [secret masked: aws-access-key …MPLE]."),
    (f"aws_secret_access_key = {AWS_SECRET}", "aws_secret_access_key = [secret masked: aws-secret-key …EKEY]"),
    (f"{GITHUB_PAT}", "[secret masked: github-token …ghij]"),
    (f"slack {SLACK}", "slack [secret masked: slack-token …CDEF]"),
    (f"g={GOOGLE}", "g=[secret masked: google-api-key …stuv]"),
    (f"auth {JWT} x", "auth [secret masked: jwt …6789] x"),
    ("Authorization: Bearer abcDEF123456ghiJKL", "Authorization: Bearer [secret masked: bearer-token …iJKL]"),
    (f"before\n{PEM}\nafter", "before\n[secret masked: private-key]\nafter"),
    ("password=hunter22 ok", "password=[secret masked: password] ok"),
    ('{"api_key": "abcd1234efgh"}', '{"api_key": "[secret masked: secret]"}'),
    ("secret: topsecretvalue", "secret: [secret masked: secret]"),
])
def test_each_kind_of_secret_is_masked(raw, expected):
    assert mask_text(raw) == expected


def test_github_token_keeps_its_last_four_characters():
    assert mask_text(GITHUB) == "[secret masked: github-token …" + GITHUB[-4:] + "]"


@pytest.mark.parametrize("harmless", ["max_tokens=4096", "tokens: 120", "the task-abcdefghijklmnopqrstuvwxyz ran",
                                      "password: null", "risk-assessment-of-the-whole-project", "eyJ alone",
                                      "Bearer", "AKIA short"])
def test_ordinary_text_is_left_alone(harmless):
    assert mask_text(harmless) == harmless


def test_mask_data_walks_keys_values_and_lists_and_masks_values_under_secret_keys():
    data = {"env": {"OPENAI_API_KEY": OPENAI, "password": "pw", f"k-{AWS_ID}": [f"Bearer {'x' * 20}", 3, None]},
            "n": 5}
    assert mask_data(data) == {
        "env": {"OPENAI_API_KEY": "[secret masked: openai-key …Jkl0]", "password": "[secret masked: password]",
                "k-[secret masked: aws-access-key …MPLE]": ["Bearer [secret masked: bearer-token …xxxx]", 3, None]},
        "n": 5,
    }
    # the input is not changed (the database keeps raw values)
    assert data["env"]["password"] == "pw"


def test_masking_is_idempotent():
    once = mask_text(f"{OPENAI} and password=hunter22 and {JWT}")
    assert mask_text(once) == once


# -- pages and JSON -------------------------------------------------------------------------------


def _trace(path: Path) -> Path:
    return write_jsonl(path, [
        {"type": "run_start", "run_id": "leaky", "ts": "2025-01-01T00:00:00Z", "objective": f"deploy with {AWS_ID}"},
        {"type": "step", "run_id": "leaky", "step": 0, "observation": {"env": {"password": "hunter22", "k": OPENAI}},
         "action_results": [f"Authorization: Bearer {'Q' * 24}", PEM]},
        {"type": "run_end", "run_id": "leaky", "ts": "2025-01-01T00:01:00Z", "status": "completed",
         "stop_reason": "final", "final_result": f"token is {GITHUB}"},
    ])


RAW_VALUES = [AWS_ID, "hunter22", OPENAI, "Q" * 24, "MIIEowIBAAKCAQEAx1y2z3", GITHUB]


def _app(tmp_path: Path, **kw):
    s = Settings(db=str(tmp_path / "q.db"), **kw)
    from qita_board.cli import run_ingest

    report = run_ingest(s, [str(_trace(tmp_path / "t.jsonl"))], progress=False)
    assert report.ok
    return TestClient(create_app(s), base_url="http://127.0.0.1")


@pytest.mark.parametrize("url", ["/", "/?q=leaky", "/runs/leaky", "/runs/leaky/steps", "/api/runs", "/api/runs/leaky",
                                 "/api/runs/leaky/steps", "/runs/leaky?format=json"])
def test_pages_and_json_show_no_raw_secret(tmp_path, url):
    with _app(tmp_path) as c:
        body = c.get(url).text
    for raw in RAW_VALUES:
        assert raw not in body, raw


def test_run_page_marks_masked_secrets_and_offers_to_show_them(tmp_path):
    with _app(tmp_path) as c:
        body = c.get("/runs/leaky").text
    assert "[secret masked: aws-access-key …MPLE]" in body
    assert "[secret masked: password]" in body
    assert 'href="/runs/leaky?reveal=secrets"' in body
    assert "Show secrets" in body


def test_database_keeps_the_raw_values(tmp_path):
    with _app(tmp_path) as c:
        with c.app.state.engine.connect() as conn:
            record = conn.execute(text("SELECT record FROM steps")).scalar()
            final = conn.execute(text("SELECT final_result FROM runs")).scalar()
    assert "hunter22" in record and OPENAI in record
    assert final == f"token is {GITHUB}"


def test_local_board_without_token_reveals_on_request_with_a_banner(tmp_path):
    with _app(tmp_path) as c:
        page = c.get("/runs/leaky?reveal=secrets").text
        api = c.get("/api/runs/leaky/steps?reveal=secrets").text
    assert "hunter22" in page and AWS_ID in page
    assert "Secrets shown" in page
    assert 'href="/runs/leaky"' in page and "Mask secrets again" in page
    assert "hunter22" in api


def test_reveal_needs_the_token_when_one_is_configured(tmp_path):
    token = "tok-0123456789abcdef"
    with _app(tmp_path, token=token) as c:
        anon = c.get("/runs/leaky?reveal=secrets").text
        anon_api = c.get("/api/runs/leaky/steps?reveal=secrets").text
        authed = c.get("/runs/leaky?reveal=secrets", headers={"authorization": f"Bearer {token}"}).text
        plain = c.get("/runs/leaky", headers={"authorization": f"Bearer {token}"}).text
    for body in (anon, anon_api, plain):
        assert "hunter22" not in body and OPENAI not in body
    assert "Secrets shown" not in anon
    assert 'href="/login?next=%2Fruns%2Fleaky%3Freveal%3Dsecrets"' in anon
    assert "hunter22" in authed and "Secrets shown" in authed


def test_htmx_fragment_follows_the_revealed_page(tmp_path):
    with _app(tmp_path) as c:
        frag = c.get("/runs/leaky/steps", headers={"hx-request": "true",
                                                   "hx-current-url": "http://127.0.0.1/runs/leaky?reveal=secrets"}).text
        masked = c.get("/runs/leaky/steps", headers={"hx-request": "true",
                                                     "hx-current-url": "http://127.0.0.1/runs/leaky"}).text
    assert "hunter22" in frag
    assert "hunter22" not in masked


def test_show_secrets_setting_never_masks(tmp_path):
    with _app(tmp_path, show_secrets=True) as c:
        body = c.get("/runs/leaky").text
    assert "hunter22" in body and "Secrets shown" in body


def test_remembered_masking_of_long_values_still_counts_and_masks_every_time():
    from qita_board.secrets import CACHE_MIN_CHARS, Masker

    key = "AKIA" + "Q" * 16
    long_text = ("filler text " * (CACHE_MIN_CHARS // 12 + 1)) + f" aws key {key} end"
    clean = "nothing to see here " * (CACHE_MIN_CHARS // 20 + 1)
    for _ in range(2):  # the second round is served from the cache
        m = Masker()
        out = m.text(long_text)
        assert key not in out and "[secret masked: aws-access-key" in out
        assert (m.count, m.kinds) == (1, {"aws-access-key"})
        m2 = Masker()
        assert m2.text(clean) is clean and m2.count == 0
