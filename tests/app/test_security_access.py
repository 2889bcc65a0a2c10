"""Issue 15 item 10: Host check on every bind, sessions instead of the token in the cookie,
Secure cookie only behind a trusted https proxy, sign-in rate limit, slow request bodies cut off."""

from __future__ import annotations

import socket
import time
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from qita_board.main import create_app
from qita_board.security import make_session, session_valid
from qita_board.settings import Settings

TOKEN = "s3cret-board-token-0123456789"


def _client(tmp_path: Path, **kw) -> TestClient:
    return TestClient(create_app(Settings(db=str(tmp_path / "q.db"), **kw)), base_url="http://127.0.0.1")


@pytest.mark.parametrize("host,status", [("evil.example", 421), ("evil.example:8765", 421), ("10.0.0.5:8765", 200),
                                         ("10.0.0.5", 200), ("localhost:8765", 200), ("127.0.0.1", 200),
                                         ("192.168.1.20", 200), ("", 400)])
def test_a_non_loopback_bind_checks_the_host_without_allowed_hosts(tmp_path, host, status):
    with _client(tmp_path, host="10.0.0.5", token=TOKEN) as c:
        r = c.get("/api/runs", headers={"host": host})
    assert r.status_code == status


def test_a_wildcard_bind_answers_to_ip_addresses_and_listed_names_only(tmp_path):
    with _client(tmp_path, host="0.0.0.0", token=TOKEN, allowed_hosts=["board.example"]) as c:
        assert c.get("/api/health", headers={"host": "board.example"}).status_code == 200
        assert c.get("/api/health", headers={"host": "172.17.0.3:8765"}).status_code == 200
        assert c.get("/api/health", headers={"host": "rebind.attacker.example"}).status_code == 421


def test_the_cookie_holds_a_session_not_the_token(tmp_path):
    with _client(tmp_path, token=TOKEN, read_auth=True) as c:
        ok = c.post("/login", data={"token": TOKEN}, follow_redirects=False)
        cookie = ok.headers["set-cookie"]
        assert TOKEN not in cookie and "qita_session=" in cookie
        assert "max-age=43200" in cookie.lower()  # session_hours=12 by default
        assert c.get("/api/runs").status_code == 200
        value = c.cookies.get("qita_session")
        c.cookies.clear()
        forged = value[:-1] + ("0" if value[-1] != "0" else "1")
        c.cookies.set("qita_session", forged)
        assert c.get("/api/runs").status_code == 401
        c.cookies.set("qita_session", TOKEN)
        assert c.get("/api/runs").status_code == 401  # the token is not a session


def test_sessions_expire_and_end_with_a_new_token(tmp_path):
    s = Settings(db=str(tmp_path / "q.db"), token=TOKEN, session_hours=1)
    value = make_session(s, now=1_000_000)
    assert session_valid(s, value, now=1_000_000 + 3599)
    assert not session_valid(s, value, now=1_000_000 + 3601)
    assert not session_valid(Settings(db=s.db, token="another-token"), value, now=1_000_001)


def test_sign_out_ends_the_session_on_the_board(tmp_path):
    with _client(tmp_path, token=TOKEN, read_auth=True) as c:
        c.post("/login", data={"token": TOKEN}, follow_redirects=False)
        value = c.cookies.get("qita_session")
        c.post("/logout", follow_redirects=False)
        c.cookies.set("qita_session", value)
        assert c.get("/api/runs").status_code == 401


@pytest.mark.parametrize("peer_trusted,proto,secure", [(True, "https", True), (True, "http", False),
                                                       (False, "https", False)])
def test_cookie_is_secure_only_behind_a_trusted_https_proxy(tmp_path, peer_trusted, proto, secure):
    # TestClient's connections come from the address "testclient".
    proxies = ["testclient"] if peer_trusted else ["10.9.9.9"]
    with _client(tmp_path, token=TOKEN, trusted_proxies=proxies) as c:
        r = c.post("/login", data={"token": TOKEN}, headers={"x-forwarded-proto": proto}, follow_redirects=False)
    assert r.status_code == 303
    assert ("secure" in r.headers["set-cookie"].lower().split("; ")) is secure


def test_wrong_tokens_are_rate_limited_per_address(tmp_path):
    with _client(tmp_path, token=TOKEN, login_failures=5) as c:
        for _ in range(3):
            assert c.post("/login", data={"token": "guess"}).status_code == 401
        for _ in range(2):
            assert c.post("/api/traces", headers={"authorization": "Bearer guess"}).status_code == 401
        blocked = c.post("/login", data={"token": TOKEN}, follow_redirects=False)
        assert blocked.status_code == 429
        assert 1 <= int(blocked.headers["retry-after"]) <= 61
        assert c.get("/api/runs", headers={"authorization": f"Bearer {TOKEN}"}).status_code == 429
        # reads without a token are not guesses
        assert c.get("/api/runs").status_code == 200
    with _client(tmp_path, token=TOKEN, login_failures=5, trusted_proxies=["testclient"]) as c:
        for _ in range(5):
            c.post("/login", data={"token": "guess"}, headers={"x-forwarded-for": "203.0.113.7"})
        assert c.post("/login", data={"token": TOKEN}, headers={"x-forwarded-for": "203.0.113.7"},
                      follow_redirects=False).status_code == 429
        # another client behind the same proxy is not held back
        assert c.post("/login", data={"token": TOKEN}, headers={"x-forwarded-for": "203.0.113.8"},
                      follow_redirects=False).status_code == 303


def test_a_wrong_token_on_a_read_that_needs_none_is_counted_too(tmp_path):
    # without --read-auth a read needs no token, yet answers differently to the right one
    # (?reveal=secrets shows raw values; /login says "signed in"): guessing there is limited too
    with _client(tmp_path, token=TOKEN, login_failures=5) as c:
        for i in range(5):
            assert c.get("/api/runs", params={"reveal": "secrets"}, headers={"authorization": f"Bearer wrong{i}"}
                         ).status_code in (200, 401)
        assert c.get("/login", headers={"x-qita-token": TOKEN}).status_code == 429
        assert c.get("/api/runs", params={"reveal": "secrets"}, headers={"authorization": f"Bearer {TOKEN}"}
                     ).status_code == 429
        assert c.get("/api/runs").status_code == 200   # a read without a token is no guess


def test_a_slow_request_body_is_cut_off(tmp_path):
    from tests.browser.conftest import LiveServer

    server = LiveServer(Settings(db=str(tmp_path / "q.db"), body_idle_s=1.0)).start()
    try:
        body_start = b"--b\r\nContent-Disposition: form-data; name=\"files\"; filename=\"a.jsonl\"\r\n\r\n{"
        with socket.create_connection(("127.0.0.1", server.port), timeout=20) as sock:
            sock.sendall(b"POST /api/traces HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: multipart/form-data; boundary=b\r\n"
                         b"Content-Length: 100000\r\n\r\n" + body_start)
            started = time.monotonic()
            answer = b""
            while b"sent nothing" not in answer:
                chunk = sock.recv(4096)
                if not chunk:
                    break
                answer += chunk
            waited = time.monotonic() - started
        assert answer.startswith(b"HTTP/1.1 408"), answer[:200]
        assert b"sent nothing for 1 s" in answer
        assert waited < 15  # 1 s idle limit; generous for a loaded machine
        # the board still answers
        import httpx

        assert httpx.get(server.url + "/api/health", timeout=10).status_code == 200
    finally:
        server.stop()
