"""Sign-in with the board's token: a form that sets the token cookie, and sign-out."""

from __future__ import annotations

from typing import Annotated, Any, Optional

from fastapi import APIRouter, Form, Request
from fastapi.responses import RedirectResponse

from ..render import respond
from ..security import TOKEN_COOKIE, request_authorised, safe_next, token_matches

router = APIRouter(tags=["auth"])

COOKIE_MAX_AGE = 30 * 24 * 3600


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
    """Check the token; on success keep it in a strict same-site cookie and go back."""
    settings = request.app.state.settings
    target = safe_next(next)
    if not settings.token or not token_matches(settings, token):
        return _page(request, target, "wrong token" if settings.token else "this board has no token to sign in with",
                     status_code=401 if settings.token else 400)
    response = RedirectResponse(target, status_code=303)
    response.set_cookie(TOKEN_COOKIE, token, max_age=COOKIE_MAX_AGE, httponly=True, samesite="strict",
                        secure=request.url.scheme == "https", path="/")
    return response


@router.post("/logout", include_in_schema=False)
def logout() -> Any:
    """Forget the token cookie."""
    response = RedirectResponse("/login", status_code=303)
    response.delete_cookie(TOKEN_COOKIE, path="/", httponly=True, samesite="strict")
    return response
