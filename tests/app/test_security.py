"""Access rules: response headers, Host check, cross-site refusal, token for writes/reads, sign-in, CLI bind rule."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from qita_board.main import create_app
from qita_board.settings import Settings
from tests.conftest import ROOT, write_jsonl

TOKEN = "s3cret-board-token-0123456789"


def _client(tmp_path: Path, **kw) -> TestClient:
    return TestClient(create_app(Settings(db=str(tmp_path / "q.db"), **kw)), base_url="http://127.0.0.1")


def _run(path: Path, run_id: str = "r1") -> Path:
    return write_jsonl(path, [{"type": "run_start", "run_id": run_id, "ts": "2025-01-01T00:00:00Z"}])


# -- headers -----------------------------------------------------------------------------------


@pytest.mark.parametrize("url", ["/", "/api/runs", "/static/app.css", "/no-such-page", "/api/runs/nope", "/login"])
def test_every_response_carries_the_security_headers(tmp_path, url):
    with _client(tmp_path) as c:
        r = c.get(url)
    csp = r.headers["content-security-policy"]
    directives = dict(d.strip().split(" ", 1) for d in csp.split(";"))
    assert directives["script-src"] == "'self'"
    assert directives["frame-ancestors"] == "'none'"
    assert directives["object-src"] == "'none'"
    assert "unsafe-inline" not in csp and "unsafe-eval" not in csp
    assert "http:" not in csp and "https:" not in csp and "*" not in csp
    assert r.headers["x-content-type-options"] == "nosniff"
    assert r.headers["x-frame-options"] == "DENY"
    # pages and twins are never kept (Back after a delete showed the deleted run); static files are
    assert r.headers.get("cache-control") == (None if url.startswith("/static/") else "no-store")


# -- Host header (DNS rebinding) --------------------------------------------------------------


@pytest.mark.parametrize("host,status", [("127.0.0.1:8765", 200), ("localhost", 200), ("[::1]:8765", 200),
                                         ("evil.example", 421), ("evil.example:8765", 421),
                                         ("127.0.0.1.evil.example", 421)])
def test_loopback_board_answers_only_to_loopback_host_names(tmp_path, host, status):
    with _client(tmp_path) as c:
        r = c.get("/api/runs", headers={"host": host})
    assert r.status_code == status
    if status == 421:
        assert r.json()["error"] == "this board answers only to its own address (Host header refused)"


def test_allowed_hosts_are_enforced_on_a_public_bind(tmp_path):
    with _client(tmp_path, host="10.0.0.5", token=TOKEN, allowed_hosts=["board.example"]) as c:
        assert c.get("/api/runs", headers={"host": "board.example"}).status_code == 200
        assert c.get("/api/runs", headers={"host": "rebound.example"}).status_code == 421


# -- cross-site writes (CSRF) -----------------------------------------------------------------


@pytest.mark.parametrize("headers", [{"origin": "http://evil.example"}, {"origin": "null"},
                                     {"sec-fetch-site": "cross-site"}, {"sec-fetch-site": "same-site"},
                                     {"origin": "http://127.0.0.1:9999"}])
def test_cross_site_form_posts_are_refused(tmp_path, headers):
    with _client(tmp_path) as c:
        r = c.post("/login", data={"token": "x"}, headers=headers)
        r2 = c.post("/api/traces", files={"files": ("a.jsonl", b"{}\n")}, headers=headers)
    assert r.status_code == 403
    assert "cross-site request refused" in r.text
    assert r2.status_code == 403
    assert r2.json()["error"] == "cross-site request refused"


def test_same_origin_post_is_not_refused(tmp_path):
    with _client(tmp_path, token=TOKEN) as c:
        r = c.post("/login", data={"token": TOKEN}, headers={"origin": "http://127.0.0.1", "sec-fetch-site": "same-origin"},
                   follow_redirects=False)
    assert r.status_code == 303


# -- token ------------------------------------------------------------------------------------


@pytest.mark.parametrize("method,url", [("POST", "/api/traces"), ("DELETE", "/api/runs/r1"), ("POST", "/upload"),
                                        ("PUT", "/api/runs/r1"), ("PATCH", "/api/runs/r1")])
def test_with_a_token_every_write_needs_it(tmp_path, method, url):
    with _client(tmp_path, token=TOKEN) as c:
        denied = c.request(method, url)
        wrong = c.request(method, url, headers={"authorization": "Bearer wrong-token"})
        allowed = c.request(method, url, headers={"authorization": f"Bearer {TOKEN}"})
        via_header = c.request(method, url, headers={"x-qita-token": TOKEN})
    assert denied.status_code == 401
    assert wrong.status_code == 401
    assert denied.json()["error"].startswith("this board needs its token for that")
    assert allowed.status_code != 401
    assert via_header.status_code != 401


def test_reads_are_open_with_a_token_unless_read_auth(tmp_path):
    with _client(tmp_path, token=TOKEN) as c:
        assert c.get("/api/runs").status_code == 200
        assert c.get("/").status_code == 200


def test_read_auth_makes_every_read_need_the_token(tmp_path):
    with _client(tmp_path, token=TOKEN, read_auth=True) as c:
        page = c.get("/")
        api = c.get("/api/runs")
        run = c.get("/runs/r1")
        assert page.status_code == 401 and "/login" in page.text
        assert api.status_code == 401
        assert run.status_code == 401
        # open: the sign-in page, health, static files
        assert c.get("/login").status_code == 200
        assert c.get("/api/health").json() == {"status": "ok"}
        assert c.get("/static/app.css").status_code == 200
        icon = c.get("/favicon.ico")  # asked by the browser on a JSON twin, with no link to follow
        assert (icon.headers["content-type"], icon.content) == (
            "image/svg+xml", (Path(__file__).resolve().parents[2] / "static" / "favicon.svg").read_bytes())
        assert c.get("/loginx").status_code == 401  # exact paths only, not prefixes
        assert c.get("/api/runs", headers={"authorization": f"Bearer {TOKEN}"}).status_code == 200


def test_sign_in_sets_a_strict_httponly_cookie_that_opens_reads(tmp_path):
    with _client(tmp_path, token=TOKEN, read_auth=True) as c:
        bad = c.post("/login", data={"token": "nope", "next": "/"}, follow_redirects=False)
        assert bad.status_code == 401
        assert "wrong token" in bad.text
        assert "qita_session" not in bad.headers.get("set-cookie", "")
        ok = c.post("/login", data={"token": TOKEN, "next": "/api/runs"}, follow_redirects=False)
        assert ok.status_code == 303
        assert ok.headers["location"] == "/api/runs"
        cookie = ok.headers["set-cookie"].lower()
        assert "httponly" in cookie and "samesite=strict" in cookie and "path=/" in cookie
        assert c.get("/api/runs").status_code == 200  # the cookie jar now carries the token
        out = c.post("/logout", follow_redirects=False)
        assert out.status_code == 303
        c.cookies.clear()
        assert c.get("/api/runs").status_code == 401


@pytest.mark.parametrize("target", ["//evil.example/x", "https://evil.example/", "/\\evil.example", "javascript:alert(1)",
                                    "/ok\r\nSet-Cookie: x=1"])
def test_sign_in_never_redirects_to_another_site(tmp_path, target):
    with _client(tmp_path, token=TOKEN) as c:
        r = c.post("/login", data={"token": TOKEN, "next": target}, follow_redirects=False)
    assert r.status_code == 303
    assert r.headers["location"] == "/"


# -- request parameters never become paths -----------------------------------------------------


@pytest.mark.parametrize("url", ["/static/../app/settings.py", "/static/%2e%2e/app/settings.py",
                                 "/static/..%2fapp%2fsettings.py", "/runs/..%2F..%2Fetc%2Fpasswd",
                                 "/api/runs/%2Fetc%2Fpasswd", "/runs/~~Li4vLi4vZXRjL3Bhc3N3ZA"])
def test_no_request_parameter_reads_a_server_file(tmp_path, url):
    with _client(tmp_path) as c:
        r = c.get(url)
    assert r.status_code in (400, 404)
    assert "root:" not in r.text and "class Settings" not in r.text
    assert str(tmp_path) not in r.text and str(ROOT) not in r.text


def test_error_pages_show_no_server_paths(tmp_path):
    with _client(tmp_path) as c:
        bodies = [c.get("/runs/nope").text, c.get("/api/runs/nope").text, c.get("/api/runs?limit=-1").text,
                  c.get("/nowhere").text, c.get("/api/runs/x/steps?offset=abc").text]
    for body in bodies:
        assert str(tmp_path) not in body
        assert "/work" not in body and "/root" not in body and "Traceback" not in body


# -- the command line's bind rule ----------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _board(tmp_path: Path, *args: str) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("QITA_TOKEN", None)
    return subprocess.Popen([sys.executable, "-m", "qita_board.cli", "board", "--db", str(tmp_path / "q.db"), *args],
                            cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_board_refuses_a_non_loopback_address_without_a_token(tmp_path):
    # 127.0.0.2 is not one of the board's own loopback names, so it counts as "another address".
    proc = _board(tmp_path, "--host", "127.0.0.2", "--port", str(_free_port()))
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 2
    assert err.strip() == ("error: refusing to listen on 127.0.0.2 without a token: pass --token (or set QITA_TOKEN), "
                           "or --insecure to serve without one")


@pytest.mark.parametrize("flags", [["--token", TOKEN], ["--insecure"]])
def test_board_starts_on_another_address_with_a_token_or_insecure(tmp_path, flags):
    import httpx

    port = _free_port()
    proc = _board(tmp_path, "--host", "127.0.0.2", "--port", str(port), *flags)
    try:
        status = None
        for _ in range(300):
            if proc.poll() is not None:
                break
            try:
                status = httpx.get(f"http://127.0.0.2:{port}/api/health", timeout=2).status_code
                break
            except httpx.TransportError:
                time.sleep(0.1)
        assert status == 200, proc.stderr.read() if proc.poll() is not None else "no answer"
        if flags[0] == "--token":
            write = httpx.post(f"http://127.0.0.2:{port}/api/traces", timeout=5)
            assert write.status_code == 401
    finally:
        proc.kill()
        proc.wait(10)


def test_login_page_offers_sign_out_only_when_signed_in(tmp_path):
    from fastapi.testclient import TestClient

    from qita_board.main import create_app
    from qita_board.settings import Settings

    with TestClient(create_app(Settings(db=str(tmp_path / "t.db"), token="tok-123")), base_url="http://127.0.0.1") as c:
        assert "Sign out" not in c.get("/login").text
        assert "Sign out" in c.get("/login", headers={"Authorization": "Bearer tok-123"}).text
