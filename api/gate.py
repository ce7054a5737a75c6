"""What a request must pass before anything reads its body: a bearer token, and a size limit.

FastAPI reads and parses a request's body before it resolves the route's dependencies, the token
check (`api.auth.authorize`) included, so on its own a 50 MB body from anyone is read and parsed
first. `RequestGate` is the outermost application middleware and works on the raw ASGI messages:

1. Token: every path under /api/v1 but the webhook's needs one (`api.auth.authenticate`). A
   missing, unknown, expired or revoked token is a 401, a viewer's write a 403, answered before
   one byte of the body is read; the token goes to `authorize` in the request state, so it is
   looked up once.
2. Size: a declared `Content-Length` over the limit is a 413 at once; a body sent without one is
   counted as it arrives and cut off with a 413 when it passes the limit, before it is parsed
   or routed anywhere. The limit is GITFLEET_BODY_LIMIT (1 MiB) for the API and
   GITFLEET_WEBHOOK_BODY_LIMIT (5 MiB) for webhook deliveries, whose push events list commits,
   and GITFLEET_IMPORT_BODY_LIMIT (256 MiB) for a registry import (`api.routes.registry`) sent
   with an admin token: the whole fleet in one document. The token is checked first, so only
   an admin can make the coordinator read that much.
3. Redis: a token lookup that cannot reach Redis (a restart) is a 503 a retry cures.

The open probes (/healthz, /readyz, /metrics) and the docs need no token; they take no body.
The web UI (/ui/) authenticates by session cookie instead (`api.ui.guard`): same token checks,
a redirect to its sign-in page when there is no session.
"""

from __future__ import annotations

from collections.abc import Collection

from fastapi import HTTPException
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import Headers
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from api.auth import authenticate
from api.errors import REDIS_DOWN
from api.settings import Settings
from api.ui import guard as ui_guard
from fleet.control.registry.records import Role


class BodyTooLarge(HTTPException):
    """Raised from `receive` when a streamed body passes the limit; an HTTPException, so the
    route that was reading it answers 413 (FastAPI re-raises these from body parsing)."""

    def __init__(self, limit: int, setting: str) -> None:
        super().__init__(413, too_large(limit, setting))


def too_large(limit: int, setting: str) -> str:
    size = f"{limit >> 20} MiB" if limit % (1 << 20) == 0 else f"{limit} bytes"
    return f"request body over the {size} limit of this endpoint ({setting})"


class RequestGate:
    """ASGI middleware: the token, then the body size, before the app sees the request."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        settings: Settings,
        protected: str,
        webhooks: Collection[str],
        import_path: str = "",
    ) -> None:
        self.app = app
        self.settings = settings
        self.protected = protected  # paths under this prefix need a token...
        self.webhooks = frozenset(webhooks)  # ...but these, which are signed instead
        self.import_path = import_path  # a registry import: a larger limit, for admins only

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        try:
            scope = await self._authenticated(scope)
            limit, setting = self._limit(scope)
            receive = _bounded(scope, receive, limit, setting)
        except HTTPException as e:
            answer = JSONResponse({"detail": e.detail}, e.status_code, headers=e.headers)
            await answer(scope, receive, send)
            return
        except (RedisConnectionError, RedisTimeoutError):  # a restart: retry shortly
            await JSONResponse(REDIS_DOWN, 503)(scope, receive, send)
            return
        await self.app(scope, receive, send)

    async def _authenticated(self, scope: Scope) -> Scope:
        path: str = scope["path"]
        store = scope["app"].state.store
        if path.startswith(f"{ui_guard.PREFIX}/") and not ui_guard.is_open(path):
            token, session = await run_in_threadpool(ui_guard.principal_of, store, scope)
            state = {**scope.get("state", {}), "principal": token, "ui_session": session}
            return {**scope, "state": state}
        if not path.startswith(self.protected) or path in self.webhooks:
            return scope
        header = Headers(scope=scope).get("authorization")
        token = await run_in_threadpool(authenticate, store, header, scope["method"])
        return {**scope, "state": {**scope.get("state", {}), "principal": token}}

    def _limit(self, scope: Scope) -> tuple[int, str]:
        if scope["path"] in self.webhooks:
            return self.settings.webhook_body_limit, "GITFLEET_WEBHOOK_BODY_LIMIT"
        principal = scope.get("state", {}).get("principal")
        if scope["path"] == self.import_path and getattr(principal, "role", None) == Role.ADMIN:
            return self.settings.import_body_limit, "GITFLEET_IMPORT_BODY_LIMIT"
        return self.settings.body_limit, "GITFLEET_BODY_LIMIT"


def _bounded(scope: Scope, receive: Receive, limit: int, setting: str) -> Receive:
    """`receive`, refusing a body over `limit`: at once when its Content-Length says so, else
    when the bytes counted so far pass it."""
    declared = Headers(scope=scope).get("content-length")
    if declared is not None:
        if not declared.isdigit():
            raise HTTPException(400, "Content-Length: not a number of bytes")
        if int(declared) > limit:
            raise HTTPException(413, too_large(limit, setting))
    seen = 0

    async def counted() -> Message:
        nonlocal seen
        message = await receive()
        if message["type"] == "http.request":
            seen += len(message.get("body", b""))
            if seen > limit:
                raise BodyTooLarge(limit, setting)
        return message

    return counted
