"""Request guards and response headers: Host check, token and sessions, sign-in limits, body timeout, CSP.

- Host: every bind answers only to its own names: the loopback names, the bound
  address, IP addresses, and the names listed in `allowed_hosts`. A DNS-rebinding page
  reaches the board under its own domain name, which is refused (421).
- Token: with a token set, every write needs it, and with `read_auth` every read too:
  as a Bearer header or `X-Qita-Token`, or the session cookie that `/login` sets. The
  cookie holds a signed session value (`make_session`), never the token, and expires.
- Sign-in limits: wrong tokens (sign-in form, Bearer, X-Qita-Token) are counted per
  client address; past `login_failures` a minute, further tries get 429.
- Request bodies that stop sending for `body_idle_s` are cut off with 408.
- Forwarded headers (`X-Forwarded-Proto`, `X-Forwarded-For`) are believed only from the
  addresses in `trusted_proxies`; that is what makes the cookie Secure behind a TLS proxy.
- Cross-site writes: an unsafe request whose Origin or Sec-Fetch-Site shows another
  site is refused (`cross_site`), and the session cookie is SameSite=Strict (CSRF).
- Every response carries a CSP with no inline script and no other origin, nosniff and
  frame-ancestors 'none'.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import ipaddress
import secrets as _random
import threading
import time
from collections import deque
from http.cookies import SimpleCookie
from typing import Optional
from urllib.parse import urlsplit

import orjson

from .errors import BoardError
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
#: Pages and their twins are never kept by the browser: a run deleted, re-ingested or
#: set aside came back on Back (and on a reload from the back-forward cache) as it was
#: before (seen in an audit). Static files keep their validators and are not sent it.
NO_STORE = (b"cache-control", b"no-store")
UNSAFE = {"POST", "PUT", "PATCH", "DELETE"}
SESSION_COOKIE = "qita_session"
OPEN_PATHS = frozenset({"/login", "/logout", "/api/health", "/favicon.ico"})
OPEN_PREFIXES = ("/static/",)
#: The window failed sign-ins are counted over.
FAILURE_WINDOW_S = 60.0


def _host_only(value: str) -> str:
    value = value.strip().lower()
    if value.startswith("["):
        return value[: value.find("]") + 1] if "]" in value else value
    return value.rsplit(":", 1)[0] if value.count(":") == 1 else value


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return False
    return True


def _header(headers: dict[bytes, bytes], name: bytes) -> str:
    return headers.get(name, b"").decode("latin-1").strip()


def presented_token(headers: dict[bytes, bytes]) -> Optional[str]:
    """The token a request carries itself (Bearer or X-Qita-Token), not the session cookie."""
    auth = _header(headers, b"authorization")
    if auth.lower().startswith("bearer "):
        return auth[7:].strip()
    if b"x-qita-token" in headers:
        return _header(headers, b"x-qita-token")
    return None


def session_cookie(headers: dict[bytes, bytes]) -> Optional[str]:
    cookie = headers.get(b"cookie")
    if not cookie:
        return None
    jar = SimpleCookie()
    try:
        jar.load(cookie.decode("latin-1"))
    except Exception:
        return None
    return jar[SESSION_COOKIE].value if SESSION_COOKIE in jar else None


def _session_key(token: str) -> bytes:
    # Derived from the token: every instance sharing the token accepts the others'
    # sessions, and changing the token ends every session.
    return hashlib.sha256(b"qita-session\x00" + token.encode()).digest()


def make_session(settings: Settings, now: Optional[float] = None) -> str:
    """A new signed session value: issue time, a random nonce, and their HMAC."""
    issued = int(now if now is not None else time.time())
    body = f"{issued}.{_random.token_urlsafe(18)}"
    sig = hmac.new(_session_key(settings.token or ""), body.encode(), hashlib.sha256).hexdigest()
    return f"{body}.{sig}"


def session_valid(settings: Settings, value: Optional[str], *, revoked: frozenset | set = frozenset(),
                  now: Optional[float] = None) -> bool:
    """Whether `value` is a session this board issued, not expired and not signed out."""
    if not settings.token or not value or value in revoked or len(value) > 200:
        return False
    body, _, sig = value.rpartition(".")
    issued_text = body.split(".", 1)[0]
    if not issued_text.isdigit():
        return False
    want = hmac.new(_session_key(settings.token), body.encode(), hashlib.sha256).hexdigest()
    if not hmac.compare_digest(want, sig):
        return False
    age = (now if now is not None else time.time()) - int(issued_text)
    return 0 <= age <= settings.session_hours * 3600


def peer_address(scope, settings: Settings) -> str:
    """The client's address: the connection's peer, or, behind a trusted proxy, the last
    address in X-Forwarded-For that is not itself a trusted proxy."""
    client = scope.get("client")
    peer = client[0] if client else ""
    if peer in settings.trusted_proxies:
        headers = dict(scope.get("headers") or [])
        forwarded = [a.strip() for a in _header(headers, b"x-forwarded-for").split(",") if a.strip()]
        for addr in reversed(forwarded):
            if addr not in settings.trusted_proxies:
                return addr
    return peer


def is_https(scope, settings: Settings) -> bool:
    """Whether the visitor's connection is https: served so, or so says a trusted proxy."""
    if scope.get("scheme") == "https":
        return True
    client = scope.get("client")
    if client and client[0] in settings.trusted_proxies:
        headers = dict(scope.get("headers") or [])
        return _header(headers, b"x-forwarded-proto").split(",")[0].strip().lower() == "https"
    return False


class FailureLimiter:
    """Wrong tokens per client address over the last minute; past the limit, tries are refused."""

    def __init__(self, limit: int, window_s: float = FAILURE_WINDOW_S):
        self.limit = limit
        self.window_s = window_s
        self._seen: dict[str, deque] = {}
        self._lock = threading.Lock()

    def _recent(self, addr: str, now: float) -> deque:
        times = self._seen.get(addr)
        if times is None:
            if len(self._seen) > 10_000:  # many addresses: forget the quiet ones
                self._seen = {a: t for a, t in self._seen.items() if t and now - t[-1] < self.window_s}
            times = self._seen[addr] = deque()
        while times and now - times[0] > self.window_s:
            times.popleft()
        return times

    def retry_after(self, addr: str, now: Optional[float] = None) -> int:
        """Seconds until this address may try again (0: now)."""
        now = time.monotonic() if now is None else now
        with self._lock:
            times = self._recent(addr, now)
            if len(times) < self.limit:
                return 0
            return max(1, int(self.window_s - (now - times[0])) + 1)

    def failed(self, addr: str, now: Optional[float] = None) -> None:
        now = time.monotonic() if now is None else now
        with self._lock:
            self._recent(addr, now).append(now)


class Guard:
    """One app's access state: the Host names it answers to, the sign-in limiter, signed-out sessions."""

    def __init__(self, settings: Settings):
        self.settings = settings
        self.allowed = {_host_only(h) for h in (*LOOPBACK_HOSTS, settings.host, *settings.allowed_hosts)}
        self.limiter = FailureLimiter(settings.login_failures)
        #: sessions signed out on this instance (the value is signed, so it stays valid elsewhere until it expires)
        self.revoked: set[str] = set()

    def host_allowed(self, host: str) -> bool:
        # An IP address cannot be rebound: a page reaches the board by IP only from that IP's origin.
        return bool(host) and (host in self.allowed or _is_ip(host))

    def authorised(self, headers: dict[bytes, bytes]) -> bool:
        if not self.settings.token:
            return True
        given = presented_token(headers)
        if given is not None:
            return token_matches(self.settings, given)
        return session_valid(self.settings, session_cookie(headers), revoked=self.revoked)


class SecurityMiddleware:
    """Pure ASGI, so it costs next to nothing per request."""

    def __init__(self, app, settings: Settings, guard: Guard):
        self.app = app
        self.settings = settings
        self.guard = guard

    async def _deny(self, send, status: int, message: str, *, json: bool, extra: Optional[list] = None) -> None:
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
                    "headers": [(b"content-type", ctype), (b"content-length", str(len(body)).encode()), *HEADERS, NO_STORE,
                                *(extra or [])]})
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
        guard = self.guard
        if not guard.host_allowed(host):
            await self._deny(send, 421 if host else 400, "this board answers only to its own address (Host header refused)", json=is_api)
            return
        if method in UNSAFE and cross_site(headers):
            await self._deny(send, 403, "cross-site request refused", json=is_api)
            return
        scope.setdefault("state", {})["qita_peer"] = peer = peer_address(scope, self.settings)
        guessing = presented_token(headers) is not None or (method == "POST" and path == "/login")
        if self.settings.token and guessing:
            wait = guard.limiter.retry_after(peer)
            if wait:
                await self._deny(send, 429, f"too many wrong tokens from this address: try again in {wait} s",
                                 json=is_api or method in UNSAFE, extra=[(b"retry-after", str(wait).encode())])
                return
        authorised = guard.authorised(headers)
        if self.settings.token and presented_token(headers) is not None and not authorised:
            # A wrong token counts wherever it is sent: a read that does not need one still
            # answers differently to the right one (?reveal=secrets, /login's "signed in").
            guard.limiter.failed(peer)
        needs_token = method in UNSAFE or self.settings.read_auth
        if needs_token and self.settings.token and path not in OPEN_PATHS and not path.startswith(OPEN_PREFIXES) \
                and not authorised:
            await self._deny(send, 401, "this board needs its token for that: sign in at /login or send "
                                        "'Authorization: Bearer TOKEN'", json=is_api or method in UNSAFE)
            return

        extra = HEADERS if path.startswith(OPEN_PREFIXES) else [*HEADERS, NO_STORE]

        async def send_with_headers(message):
            if message["type"] == "http.response.start":
                existing = {k.lower() for k, _ in message.get("headers", [])}
                message.setdefault("headers", [])
                message["headers"] = list(message["headers"]) + [h for h in extra if h[0] not in existing]
            await send(message)

        await self.app(scope, self._timed_receive(receive), send_with_headers)

    def _timed_receive(self, receive):
        """`receive`, cut off with 408 when the request body stops arriving for body_idle_s.

        Only while the body is incomplete: afterwards `receive` waits for the client to
        go away (a streaming response listens for that), which is no fault of the body.
        """
        idle = self.settings.body_idle_s
        done = False

        async def timed():
            nonlocal done
            if done:
                return await receive()
            try:
                message = await asyncio.wait_for(receive(), idle)
            except asyncio.TimeoutError:
                done = True
                raise BoardError(f"the request body sent nothing for {idle:g} s: cut off", status=408) from None
            if message.get("type") != "http.request" or not message.get("more_body", False):
                done = True
            return message

        return timed


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


def security_of(request) -> Guard:
    """The app's access state (its limiter and signed-out sessions)."""
    return request.app.state.security


def request_authorised(request) -> bool:
    """A request may do what the token guards: no token configured, or it carries the token or a session."""
    return security_of(request).authorised(dict(request.scope.get("headers") or []))


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
