"""Request guards and response headers: Host check, token, cross-site writes, CSP.

- Host: on a loopback bind only loopback Host headers are served (DNS rebinding); on
  another address too once `allowed_hosts` lists the names the board is reached by.
- Token: with a token set, every write needs it (Bearer header, `X-Qita-Token`, or the
  cookie set by /login), and with `read_auth` every read too.
- Cross-site writes: an unsafe request whose Origin or Sec-Fetch-Site shows another
  site is refused (`cross_site`), and the token cookie is SameSite=Strict (CSRF).
- Every response carries a CSP with no inline script and no other origin, nosniff and
  frame-ancestors 'none'.
"""

from __future__ import annotations

import hmac
from http.cookies import SimpleCookie
from typing import Optional
from urllib.parse import urlsplit

import orjson

from .settings import LOOPBACK_HOSTS, Settings

CSP = ("default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
       "font-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'")
HEADERS = [
    (b"content-security-policy", CSP.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    # same-origin, not no-referrer: under no-referrer Chromium sends `Origin: null` on the
    # board's own form posts (sign-in, upload), which then look like a sandboxed other site.
    (b"referrer-policy", b"same-origin"),
    (b"cross-origin-opener-policy", b"same-origin"),
]
UNSAFE = {"POST", "PUT", "PATCH", "DELETE"}
TOKEN_COOKIE = "qita_token"
OPEN_PATHS = frozenset({"/login", "/logout", "/api/health"})
OPEN_PREFIXES = ("/static/",)


def _host_only(value: str) -> str:
    value = value.strip().lower()
    if value.startswith("["):
        return value[: value.find("]") + 1] if "]" in value else value
    return value.rsplit(":", 1)[0] if value.count(":") == 1 else value


def request_token(headers: dict[bytes, bytes]) -> Optional[str]:
    auth = headers.get(b"authorization", b"").decode("latin-1")
    if auth.lower().startswith("bearer "):
        return auth[7:].strip()
    if b"x-qita-token" in headers:
        return headers[b"x-qita-token"].decode("latin-1").strip()
    cookie = headers.get(b"cookie")
    if cookie:
        jar = SimpleCookie()
        try:
            jar.load(cookie.decode("latin-1"))
        except Exception:
            return None
        if TOKEN_COOKIE in jar:
            return jar[TOKEN_COOKIE].value
    return None


class SecurityMiddleware:
    """Pure ASGI, so it costs next to nothing per request."""

    def __init__(self, app, settings: Settings):
        self.app = app
        self.settings = settings
        self.loopback = settings.host in LOOPBACK_HOSTS or settings.host.strip("[]") in LOOPBACK_HOSTS
        self.allowed = {_host_only(h) for h in (*LOOPBACK_HOSTS, "testserver", *settings.allowed_hosts)}
        # On a loopback bind, or when the operator listed the names it is served under,
        # any other Host is refused: that is what defeats DNS rebinding.
        self.check_host = self.loopback or bool(settings.allowed_hosts)

    def authorised(self, headers: dict[bytes, bytes]) -> bool:
        return token_matches(self.settings, request_token(headers))

    async def _deny(self, send, status: int, message: str, *, json: bool) -> None:
        if json:
            body = orjson.dumps({"error": message, "status": status})
            ctype = b"application/json"
        else:
            from html import escape

            body = (f"<!doctype html><meta charset=utf-8><title>{status}</title>"
                    f"<link rel=stylesheet href=/static/app.css><main class=page><h1>{status}</h1>"
                    f"<p class=error-message>{escape(message)}</p><p><a href=/login>Sign in with the board's token</a></p></main>").encode()
            ctype = b"text/html; charset=utf-8"
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", ctype), (b"content-length", str(len(body)).encode()), *HEADERS]})
        await send({"type": "http.response.body", "body": body})

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        path: str = scope.get("path", "")
        method: str = scope.get("method", "GET")
        is_api = path.startswith("/api/")
        host = _host_only(headers.get(b"host", b"").decode("latin-1"))
        if self.check_host and host not in self.allowed:
            await self._deny(send, 421 if host else 400, "this board answers only to its own address (Host header refused)", json=is_api)
            return
        if method in UNSAFE and cross_site(headers):
            await self._deny(send, 403, "cross-site request refused", json=is_api)
            return
        needs_token = method in UNSAFE or self.settings.read_auth
        if needs_token and self.settings.token and path not in OPEN_PATHS and not path.startswith(OPEN_PREFIXES) and not self.authorised(headers):
            await self._deny(send, 401, "this board needs its token for that: sign in at /login or send "
                                        "'Authorization: Bearer TOKEN'", json=is_api or method in UNSAFE)
            return

        async def send_with_headers(message):
            if message["type"] == "http.response.start":
                existing = {k.lower() for k, _ in message.get("headers", [])}
                message.setdefault("headers", [])
                message["headers"] = list(message["headers"]) + [h for h in HEADERS if h[0] not in existing]
            await send(message)

        await self.app(scope, receive, send_with_headers)


def cross_site(headers: dict[bytes, bytes]) -> bool:
    """Whether an unsafe request comes from another site (CSRF), from Sec-Fetch-Site and Origin.

    Sec-Fetch-Site is set by the browser and cannot be forged by a page: `same-origin` (the
    board's own pages) and `none` (typed by the user) are trusted even with `Origin: null`,
    which Chromium sends under some referrer policies; `same-site` (another port of this
    host) and `cross-site` are refused. A real Origin must name this host, whatever
    Sec-Fetch-Site says. `Origin: null` with no Sec-Fetch-Site (an older browser, or
    plain HTTP to a non-local address, where Sec-Fetch-* is not sent) is refused: it is
    what a sandboxed frame on another site sends. Clients with neither header (curl,
    scripts) are not browsers acting for a visitor and pass to the token check.
    """
    origin = headers.get(b"origin", b"").decode("latin-1").strip()
    site = headers.get(b"sec-fetch-site", b"").decode("latin-1").strip().lower()
    own = headers.get(b"host", b"").decode("latin-1").strip().lower()
    if site and site not in ("same-origin", "none"):
        return True
    if origin == "null":
        return not site
    return bool(origin) and urlsplit(origin).netloc.lower() != own


def token_matches(settings: Settings, given: Optional[str]) -> bool:
    """Whether `given` is the board's token (constant-time)."""
    if not settings.token:
        return True
    return given is not None and hmac.compare_digest(given.encode(), settings.token.encode())


def request_authorised(request) -> bool:
    """A request may do what the token guards: no token configured, or it carries the token."""
    settings: Settings = request.app.state.settings
    return token_matches(settings, request_token(dict(request.scope.get("headers") or [])))


def safe_next(value: Optional[str]) -> str:
    """A redirect target after sign-in: a path on this board only (never another site)."""
    if not value or not value.startswith("/") or value.startswith(("//", "/\\")) or any(c in value for c in "\r\n\\"):
        return "/"
    return value


class RevealState:
    """Whether this response shows secrets raw, and the links to switch."""

    __slots__ = ("shown", "forced", "reveal_url", "hide_url")

    def __init__(self, shown: bool, forced: bool, reveal_url: str, hide_url: str):
        self.shown, self.forced, self.reveal_url, self.hide_url = shown, forced, reveal_url, hide_url


def reveal_state(request) -> RevealState:
    """Secrets are shown raw only on `?reveal=secrets` from an authorised request (or show_secrets)."""
    from urllib.parse import parse_qsl, urlencode

    settings: Settings = request.app.state.settings
    params = [(k, v) for k, v in request.query_params.multi_items() if k != "reveal"]
    wanted = request.query_params.get("reveal") == "secrets"
    if not wanted and request.headers.get("hx-request") == "true":
        # A fragment loaded into a revealed page keeps the page's choice.
        current = urlsplit(request.headers.get("hx-current-url", ""))
        wanted = ("reveal", "secrets") in parse_qsl(current.query)
    path = request.url.path
    hide_url = path + ("?" + urlencode(params) if params else "")
    reveal_url = path + "?" + urlencode([*params, ("reveal", "secrets")])
    authorised = request_authorised(request)
    if not authorised:
        reveal_url = "/login?" + urlencode({"next": reveal_url})
    if settings.show_secrets:
        return RevealState(True, True, reveal_url, hide_url)
    return RevealState(wanted and authorised, False, reveal_url, hide_url)
