"""Sign-in with the board's token: a form that sets a session cookie, and sign-out.

The cookie holds a signed session value (`security.make_session`), never the token: a
stolen cookie does not give the token away, and it expires after `session_hours`.
Wrong tokens count against the client's address (`security.FailureLimiter`).
"""

from __future__ import annotations

from typing import Annotated, Any, Optional

from fastapi import APIRouter, Form, Request
from fastapi.responses import RedirectResponse

from ..render import respond
from ..security import SESSION_COOKIE, is_https, make_session, request_authorised, safe_next, security_of, session_cookie, token_matches

router = APIRouter(tags=["auth"])


def _page(request: Request, next_url: str, error: Optional[str] = None, status_code: int = 200) -> Any:
    settings = request.app.state.settings
    data = {"next": next_url, "error": error, "token_configured": bool(settings.token),
            "signed_in": bool(settings.token) and request_authorised(request)}
    return respond(request, "login.html", data, status_code=status_code)


@router.get("/login", include_in_schema=False)
def login_form(request: Request, next: Optional[str] = None) -> Any:
    """The sign-in form."""
    return _page(request, safe_next(next))


@router.post("/login", include_in_schema=False)
def login(request: Request, token: Annotated[str, Form(max_length=4096)] = "",
          next: Annotated[Optional[str], Form(max_length=4096)] = None) -> Any:
    """Check the token; on success keep a session in a strict same-site cookie and go back."""
    settings = request.app.state.settings
    target = safe_next(next)
    if not settings.token or not token_matches(settings, token):
        if settings.token:
            security_of(request).limiter.failed(request.scope.get("state", {}).get("qita_peer", ""))
        return _page(request, target, "wrong token" if settings.token else "this board has no token to sign in with",
                     status_code=401 if settings.token else 400)
    response = RedirectResponse(target, status_code=303)
    response.set_cookie(SESSION_COOKIE, make_session(settings), max_age=int(settings.session_hours * 3600),
                        httponly=True, samesite="strict", secure=is_https(request.scope, settings), path="/")
    return response


@router.post("/logout", include_in_schema=False)
def logout(request: Request) -> Any:
    """End this session (here and in the browser)."""
    value = session_cookie(dict(request.scope.get("headers") or []))
    if value:
        security_of(request).revoked.add(value)
    response = RedirectResponse("/login", status_code=303)
    response.delete_cookie(SESSION_COOKIE, path="/", httponly=True, samesite="strict",
                           secure=is_https(request.scope, request.app.state.settings))
    return response
