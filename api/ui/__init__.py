"""The web UI, served by the coordinator at /ui/: apps, each app's objects and diffs, history
with each sync's waterfall, clusters.

Server-rendered Jinja2 templates (`templates/`) and one small script of our own
(`static/ui.js`, no third-party JavaScript or CSS, so nothing to pin or fetch) that polls a
cheap JSON endpoint to update statuses in place and sends the buttons' forms. Every page and
action goes through the REST routes' own functions and the same token checks (`api.auth`):
the UI has no permission model of its own. Who is signed in comes from a server-side session
(`session`, resolved in `api.gate` by `guard`); state-changing requests carry a CSRF token
(`web.check_csrf`).

Modules: `signin` (login, logout), `apps` (table, app page, objects, diffs), `actions` (sync,
refresh, rollback, delete), `history` (history, waterfall), `clusters`, `listing` (filter,
count, page), `live` (what is read from the clusters), `web` (templates, CSRF, answers).
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exception_handlers import http_exception_handler
from fastapi.responses import RedirectResponse, Response
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException

from fleet.errors import FleetError

STATIC_DIR = Path(__file__).parent / "static"


def is_page(request: Request) -> bool:
    """A UI page (HTML), not its JSON or static files."""
    path = request.url.path
    return path.startswith("/ui/") and not path.startswith(("/ui/api/", "/ui/static/"))


def install(app: FastAPI) -> None:
    """Mount the UI's routes and static files; show a UI page's errors as a page, in words."""
    from api.ui import actions, apps, clusters, history, signin

    for module in (signin, apps, actions, history, clusters):
        app.include_router(module.router)
    app.mount("/ui/static", StaticFiles(directory=STATIC_DIR), name="ui-static")

    @app.get("/ui", include_in_schema=False)
    def ui_root() -> Response:
        return RedirectResponse("/ui/", status_code=307)

    for kind in (FleetError, HTTPException):
        handler = app.exception_handlers.get(kind, http_exception_handler)
        app.add_exception_handler(kind, _shown_as_page(handler))


Handler = Callable[[Request, Any], Response | Awaitable[Response]]


def _shown_as_page(handler: Handler) -> Callable[[Request, Exception], Awaitable[Response]]:
    """`handler`, but a UI page's error (4xx, 5xx) is a page in words, not JSON."""

    async def shown(request: Request, exc: Exception) -> Response:
        answer = handler(request, exc)
        if inspect.isawaitable(answer):
            answer = await answer
        status = answer.status_code
        message = getattr(exc, "detail", None) if isinstance(exc, HTTPException) else str(exc)
        return (_as_page(request, status, message) if status >= 400 else None) or answer

    return shown


def _as_page(request: Request, status: int, message: object) -> Response | None:
    from api.ui.web import render

    if not is_page(request):
        return None
    context = {"message": str(message), "principal": getattr(request.state, "principal", None)}
    return render(request, "error.html", context, status)
