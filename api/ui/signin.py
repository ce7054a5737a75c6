"""/ui/login and /ui/logout: a token in, a session cookie out; and the way back.

The token is checked by the very function the REST API uses for a bearer header
(`api.auth.authenticate`); a refusal shows its words (unknown, revoked, expired, project gone)
on the form again with its 401. The cookie holds only the session id (`api.ui.session`):
HttpOnly, SameSite=Strict, Path=/ui, Secure when the page came over https (run uvicorn with
`--proxy-headers` behind a TLS-terminating proxy so the scheme is seen).
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Form, HTTPException, Request
from fastapi.responses import RedirectResponse, Response

from api.auth import authenticate
from api.deps import StoreDep
from api.ui.session import COOKIE, SESSION_TTL, Sessions
from api.ui.web import CsrfChecked, render, same_origin, session_of

router = APIRouter(prefix="/ui", include_in_schema=False)
HOME = "/ui/"


def _next(target: str | None) -> str:
    """Where to go after signing in: a UI path of ours only (never another site)."""
    if target and target.startswith("/ui/") and not target.startswith("//"):
        return target
    return HOME


@router.get("/login")
def login_form(request: Request, next: str = "") -> Response:
    return render(request, "login.html", {"next": _next(next), "error": ""})


@router.post("/login")
def login(
    request: Request, store: StoreDep, token: Annotated[str, Form()] = "", next: str = ""
) -> Response:
    target = _next(next)
    if not same_origin(request):
        raise HTTPException(403, "cross-site sign-in refused (Origin does not match)")
    try:
        authenticate(store, f"Bearer {token.strip()}", "GET")
    except HTTPException as e:
        context = {"next": target, "error": str(e.detail)}
        return render(request, "login.html", context, e.status_code)
    session = Sessions(store.redis, store.keys).create(token.strip())
    answer = RedirectResponse(target, status_code=303)
    answer.set_cookie(
        COOKIE,
        session.id,
        max_age=int(SESSION_TTL.total_seconds()),
        path="/ui",
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
    )
    return answer


@router.post("/logout")
def logout(request: Request, store: StoreDep, _: CsrfChecked) -> Response:
    Sessions(store.redis, store.keys).delete(session_of(request).id)
    answer = RedirectResponse("/ui/login", status_code=303)
    answer.delete_cookie(COOKIE, path="/ui", httponly=True, samesite="strict")
    return answer
