"""Issue 15 item 1: field endpoints (page and API) mask a value by the keys it was stored under."""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from qita_board.cli import run_ingest
from qita_board.main import create_app
from qita_board.settings import Settings
from tests.conftest import write_jsonl

TOKEN = "board-token-0123456789"
SECRETS = {"meta": "meta-pw-1", "args": "args-pw-2", "event": "evt-tok-3", "criterion": "crit-key-4"}
URLS = [
    "/api/runs/r1/field?path=/run/meta/password",
    "/runs/r1/field?path=/run/meta/password",
    "/api/runs/r1/field?path=/run/meta",
    "/api/runs/r1/field?path=/run/start_record/metadata/password",
    "/api/runs/r1/steps/0/field?path=/decision/actions/0/args/password",
    "/runs/r1/steps/0/field?path=/decision/actions/0/args/password",
    "/api/runs/r1/steps/0/field?path=/decision/actions/0/args",
    "/api/runs/r1/steps/0/field?event=0&path=/payload/token",
    "/runs/r1/steps/0/field?event=0&path=/payload/token",
    "/api/runs/r1/field?path=/criteria/c1/details/api_key",
    "/api/runs/r1/field?path=/criteria/c1/result/details/api_key",
]


def _client(tmp_path: Path, **kw) -> TestClient:
    trace = write_jsonl(tmp_path / "t.jsonl", [
        {"type": "run_start", "run_id": "r1", "ts": "2025-01-01T00:00:00Z", "metadata": {"password": SECRETS["meta"]}},
        {"type": "step", "run_id": "r1", "step": 0,
         "decision": {"actions": [{"name": "login", "args": {"user": "bob", "password": SECRETS["args"]}}]}},
        {"type": "event", "run_id": "r1", "step": 0, "phase": "ACT", "payload": {"token": SECRETS["event"]}},
        {"type": "criterion", "run_id": "r1", "id": "c1", "score": 1.0, "details": {"api_key": SECRETS["criterion"]}},
    ])
    settings = Settings(db=str(tmp_path / "q.db"), **kw)
    assert run_ingest(settings, [str(trace)], progress=False).ok
    return TestClient(create_app(settings), base_url="http://127.0.0.1")


@pytest.mark.parametrize("url", URLS)
@pytest.mark.parametrize("token", [None, TOKEN])
def test_field_endpoints_never_show_a_masked_value_without_the_right_to_see_it(tmp_path, url, token):
    with _client(tmp_path, token=token) as c:
        plain = c.get(url)
        asked = c.get(url + "&reveal=secrets") if token else None
    assert plain.status_code == 200, plain.text
    assert "[secret masked: " in plain.text
    for raw in SECRETS.values():
        assert raw not in plain.text
        if asked is not None:
            assert raw not in asked.text  # asking without the token changes nothing


@pytest.mark.parametrize("url", URLS)
def test_the_token_holder_sees_the_value_when_asking(tmp_path, url):
    with _client(tmp_path, token=TOKEN) as c:
        body = c.get(url + "&reveal=secrets", headers={"authorization": f"Bearer {TOKEN}"}).text
    assert any(raw in body for raw in SECRETS.values())
    assert "[secret masked: " not in body
