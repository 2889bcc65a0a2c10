"""Cross-site refusal from the headers browsers really send: the board's own posts pass, other sites' do not."""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from qita_board.main import create_app
from qita_board.security import cross_site
from qita_board.settings import Settings

TOKEN = "origin-test-token-0123456789"
OWN = "http://127.0.0.1"


def _client(tmp_path: Path, **kw) -> TestClient:
    return TestClient(create_app(Settings(db=str(tmp_path / "q.db"), **kw)), base_url=OWN)


@pytest.mark.parametrize("headers", [
    {"origin": "null", "sec-fetch-site": "same-origin"},  # Chromium's own form post under a no-referrer policy
    {"origin": "null", "sec-fetch-site": "none"},         # a post the user started (no page involved)
    {"origin": OWN, "sec-fetch-site": "same-origin"},
    {"origin": OWN},                                       # a browser without Sec-Fetch-*
    {"sec-fetch-site": "same-origin"},
    {},                                                    # curl, scripts
])
def test_the_boards_own_sign_in_post_is_accepted(tmp_path, headers):
    with _client(tmp_path, token=TOKEN) as c:
        r = c.post("/login", data={"token": TOKEN, "next": "/upload"}, headers=headers, follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"] == "/upload"
    assert "qita_session=" in r.headers["set-cookie"]


@pytest.mark.parametrize("headers", [
    {"origin": "null"},                                          # sandboxed frame, no Sec-Fetch-Site
    {"origin": "null", "sec-fetch-site": "cross-site"},          # sandboxed frame on another site
    {"origin": "null", "sec-fetch-site": "same-site"},
    {"origin": "http://evil.example", "sec-fetch-site": "cross-site"},
    {"origin": "http://evil.example", "sec-fetch-site": "same-origin"},  # contradicting headers: refused
    {"origin": "http://evil.example"},
    {"origin": "http://127.0.0.1:9999", "sec-fetch-site": "same-site"},  # another port of this host
    {"sec-fetch-site": "cross-site"},
    {"sec-fetch-site": "same-site"},
])
def test_posts_from_other_sites_are_refused_even_with_the_token(tmp_path, headers):
    with _client(tmp_path, token=TOKEN) as c:
        login = c.post("/login", data={"token": TOKEN}, headers=headers, follow_redirects=False)
        upload = c.post("/api/traces", files={"files": ("a.jsonl", b"{}\n")},
                        headers={**headers, "authorization": f"Bearer {TOKEN}"})
    assert login.status_code == 403 and "cross-site request refused" in login.text
    assert "set-cookie" not in login.headers
    assert upload.status_code == 403 and upload.json()["error"] == "cross-site request refused"


def test_the_no_script_upload_form_post_is_accepted_without_a_token(tmp_path):
    trace = b'{"type": "run_start", "run_id": "nojs"}\n'
    with _client(tmp_path) as c:
        r = c.post("/upload", files={"files": ("n.jsonl", trace)}, headers={"origin": "null", "sec-fetch-site": "same-origin"})
        assert r.status_code == 200 and "nojs" in r.text
        assert c.get("/api/runs/nojs").status_code == 200


def test_referrer_policy_keeps_the_origin_on_same_origin_posts(tmp_path):
    # no-referrer made Chromium send `Origin: null` on the board's own form posts.
    with _client(tmp_path) as c:
        assert c.get("/login").headers["referrer-policy"] == "same-origin"


@pytest.mark.parametrize("headers,refused", [
    ({b"host": b"127.0.0.1:8765", b"origin": b"http://127.0.0.1:8765"}, False),
    ({b"host": b"127.0.0.1:8765", b"origin": b"http://127.0.0.1:8766"}, True),
    ({b"host": b"127.0.0.1:8765", b"origin": b"http://localhost:8765"}, True),  # another origin, even if same machine
    ({b"host": b"127.0.0.1:8765", b"origin": b"null", b"sec-fetch-site": b"Same-Origin"}, False),
])
def test_cross_site_rule(headers, refused):
    assert cross_site(headers) is refused
