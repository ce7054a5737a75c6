"""What every UI page shares: the templates, the page context, CSRF and Origin checks, answers.

CSRF: every state-changing request (POST) must send the session's CSRF token, in the form
field `csrf` or the `X-CSRF-Token` header, and, when the browser sends an Origin (or, without
one, a Referer), come from this very site. The session cookie is SameSite=Strict as well, so a
cross-site form never carries it; the token covers browsers and proxies that drop SameSite.

A form posted by our script asks for JSON (`Accept: application/json`) and gets the message to
show in place; a form posted without script gets a 303 back to the page (post/redirect/get).
Refusals are shown in words (`error.html`), never as a stack trace.
"""

from __future__ import annotations

import secrets
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import urlsplit

from fastapi import Depends, HTTPException, Request
from fastapi.responses import JSONResponse, RedirectResponse, Response
from fastapi.templating import Jinja2Templates

from api.errors import status_of
from api.ui.session import Session
from fleet.control.registry.records import Role, TokenRecord
from fleet.errors import FleetError

HERE = Path(__file__).parent
templates = Jinja2Templates(directory=HERE / "templates")
CSRF_FIELD = "csrf"
CSRF_HEADER = "x-csrf-token"


# Our pages load only our own script and stylesheet, are never framed, and post only to us;
# inline style attributes are allowed for the waterfall's bar widths.
SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
        "img-src 'self' data:; frame-ancestors 'none'; form-action 'self'; base-uri 'none'"
    ),
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
}


def render(request: Request, name: str, context: dict[str, Any], status: int = 200) -> Response:
    """A template as a response, with the UI's security headers."""
    answer = templates.TemplateResponse(request, name, context, status_code=status)
    answer.headers.update(SECURITY_HEADERS)
    return answer


def session_of(request: Request) -> Session:
    session = getattr(request.state, "ui_session", None)
    if not isinstance(session, Session):  # the gate sets it for every page but the login
        raise HTTPException(401, "sign in first")
    return session


def page(
    request: Request, name: str, principal: TokenRecord, status: int = 200, **values: Any
) -> Response:
    context = {
        "principal": principal,
        "can_write": principal.role != Role.VIEWER,
        "is_admin": principal.role == Role.ADMIN,
        "csrf": session_of(request).csrf,
        **values,
    }
    return render(request, name, context, status)


def wants_json(request: Request) -> bool:
    return "application/json" in request.headers.get("accept", "")


def done(request: Request, message: str, back: str, **extra: Any) -> Response:
    """The answer to an action that worked: JSON for our script, else back to the page."""
    if wants_json(request):
        return JSONResponse({"message": message, **extra})
    return RedirectResponse(back, status_code=303)


def refused(request: Request, principal: TokenRecord, status: int, message: str) -> Response:
    """An action refused (403, 409, 422, ...), in words, with the status the REST route has."""
    if wants_json(request):
        return JSONResponse({"detail": message}, status_code=status)
    return page(request, "error.html", principal, status=status, message=message)


def refusal(request: Request, principal: TokenRecord, error: Exception) -> Response:
    """`refused` for what a REST handler raised: its HTTP status, a registry error's
    (`api.errors.status_of`, else 409), or 422 for a value the form got wrong."""
    if isinstance(error, HTTPException):
        return refused(request, principal, error.status_code, str(error.detail))
    if isinstance(error, FleetError):
        return refused(request, principal, status_of(error, 409), str(error))
    return refused(request, principal, 422, str(error))


def same_origin(request: Request) -> bool:
    """The request's Origin (or Referer) names this site, or the browser sent neither."""
    claimed = request.headers.get("origin") or request.headers.get("referer")
    if not claimed or claimed == "null":
        return claimed is None
    parts = urlsplit(claimed)
    return (parts.scheme, parts.netloc) == (request.url.scheme, request.url.netloc)


async def check_csrf(request: Request) -> None:
    """Refuse (403) a state-changing UI request without this session's token or from
    another site."""
    if not same_origin(request):
        raise HTTPException(403, "cross-site request refused (Origin does not match)")
    sent = request.headers.get(CSRF_HEADER)
    if sent is None:
        form = await request.form()
        value = form.get(CSRF_FIELD)
        sent = value if isinstance(value, str) else None
    expected = session_of(request).csrf
    if not sent or not secrets.compare_digest(sent.encode(), expected.encode()):
        raise HTTPException(403, "missing or wrong CSRF token: reload the page and try again")


CsrfChecked = Annotated[None, Depends(check_csrf)]
