"""Who a web UI request comes from: its session cookie, resolved before the app sees it.

`api.gate.RequestGate` calls `principal_of` for every path under /ui/ but the sign-in page and
the static files. The session names a token (`api.ui.session`); that token passes exactly the
checks a bearer token passes (`api.auth.admit`), so the UI has the token's role and project and
nothing more: a viewer's POST is a 403 here, before the body is read, as on the REST API.
Signing out is the one POST a viewer makes.

Without a valid session a page request is sent to the sign-in page (303, with `next` so the
user lands where they were going) and anything else (the live-update JSON, a form POST) is a
401.
"""

from __future__ import annotations

from urllib.parse import quote

from fastapi import HTTPException
from starlette.datastructures import Headers
from starlette.requests import cookie_parser
from starlette.types import Scope

from api.auth import admit
from api.ui.session import COOKIE, Session, Sessions
from fleet.control.registry.records import TokenRecord
from fleet.control.registry.store import Store

PREFIX = "/ui"
OPEN_PATHS = frozenset({f"{PREFIX}/login"})
STATIC = f"{PREFIX}/static/"
LOGOUT = f"{PREFIX}/logout"


def is_open(path: str) -> bool:
    """The sign-in page and the static files need no session."""
    return path in OPEN_PATHS or path.startswith(STATIC)


def session_id(scope: Scope) -> str | None:
    """The session cookie's value; Starlette's lenient parser, so another site's odd cookie on
    the same host (127.0.0.1 in a demo) does not hide ours."""
    return cookie_parser(Headers(scope=scope).get("cookie", "")).get(COOKIE)


def principal_of(store: Store, scope: Scope) -> tuple[TokenRecord, Session]:
    """The token and session of a UI request; HTTPException 303/401/403 otherwise."""
    sessions = Sessions(store.redis, store.keys)
    session = sessions.get(session_id(scope))
    if session is None:
        raise _login_required(scope, "sign in first: no session, or it expired")
    method = "GET" if scope["path"] == LOGOUT else scope["method"]
    try:
        token = admit(store, store.tokens.lookup_digest(session.token_digest), method)
    except HTTPException as e:
        if e.status_code != 401:
            raise
        sessions.delete(session.id)
        raise _login_required(scope, str(e.detail)) from None
    return token, session


def _login_required(scope: Scope, why: str) -> HTTPException:
    if scope["method"] != "GET" or scope["path"].startswith(f"{PREFIX}/api/"):
        return HTTPException(401, why)
    target = scope["path"] + (f"?{scope['query_string'].decode()}" if scope["query_string"] else "")
    location = f"{PREFIX}/login?next={quote(target, safe='')}"
    return HTTPException(303, why, headers={"Location": location})
