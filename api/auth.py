"""Bearer tokens and roles: who may call what.

- admin: everything.
- member of a project: read clusters and its own project; create, change, sync and delete the
  apps of that project only; no cluster, project or token writes.
- viewer: every GET, nothing else.

`authenticate` resolves the token (stored as a SHA-256 digest, `fleet.control.registry.tokens`):
missing, unknown, revoked or expired tokens, and member tokens whose project is gone, are a 401,
and a viewer's write a 403. `api.gate` runs it before the request body is read, and hands the
token to `authorize`, the dependency of every router but the open probes and the webhook.
Per-resource checks (`require_admin`, `require_project`, `require_writer`) run in the handlers
that know the resource. Viewers enqueue nothing: not even the dry runs a diff waits for.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

from fastapi import Depends, HTTPException, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from api.deps import StoreDep
from fleet.control.registry.errors import NotFound
from fleet.control.registry.records import Role, TokenRecord
from fleet.control.registry.store import Store

READ_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
bearer = HTTPBearer(auto_error=False, description="an API token: Authorization: Bearer <token>")


def _unauthorized(message: str) -> HTTPException:
    return HTTPException(401, message, headers={"WWW-Authenticate": "Bearer"})


def authenticate(store: Store, authorization: str | None, method: str) -> TokenRecord:
    """The token of an `Authorization` header, if it may make a `method` request."""
    scheme, _, text = (authorization or "").strip().partition(" ")
    if scheme.lower() != "bearer" or not text.strip():
        raise _unauthorized("missing bearer token: send 'Authorization: Bearer <token>'")
    return admit(store, store.lookup_token(text.strip()), method)


def admit(store: Store, token: TokenRecord | None, method: str) -> TokenRecord:
    """`token` (None: unknown), if it may still make a `method` request: the checks every
    caller passes, by bearer header here or by a web UI session (`api.ui.session`)."""
    if token is None:
        raise _unauthorized("invalid or revoked token")
    if token.expired(datetime.now(UTC)):
        raise _unauthorized(f"token {token.name} expired at {token.expires}; ask for a new one")
    if token.role == Role.MEMBER and not _project_exists(store, token.project or ""):
        raise _unauthorized(f"token {token.name}: its project {token.project} was deleted")
    if token.role == Role.VIEWER and method not in READ_METHODS:
        raise HTTPException(403, f"token {token.name} is a viewer: read only")
    return token


def _project_exists(store: Store, name: str) -> bool:
    try:
        store.get_project(name)
    except NotFound:
        return False
    return True


def authorize(
    request: Request,
    store: StoreDep,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
) -> TokenRecord:
    token = getattr(request.state, "principal", None)  # `api.gate` resolved it already
    if not isinstance(token, TokenRecord):
        header = f"{credentials.scheme} {credentials.credentials}" if credentials else None
        token = authenticate(store, header, request.method)
        request.state.principal = token
    return token


Principal = Annotated[TokenRecord, Depends(authorize)]


def require_admin(principal: TokenRecord, action: str) -> None:
    if principal.role != Role.ADMIN:
        raise HTTPException(403, f"token {principal.name} is not an admin: cannot {action}")


def require_writer(principal: TokenRecord, action: str) -> None:
    """Viewers read; whatever enqueues work for a worker is a write, whatever its method."""
    if principal.role == Role.VIEWER:
        raise HTTPException(403, f"token {principal.name} is a viewer: read only, cannot {action}")


def can_see(principal: TokenRecord, project: str) -> bool:
    return principal.role != Role.MEMBER or principal.project == project


def require_project(principal: TokenRecord, project: str) -> None:
    """Members may only touch the apps of their own project."""
    if not can_see(principal, project):
        raise HTTPException(
            403,
            f"token {principal.name} is a member of project {principal.project}, "
            f"not of project {project}",
        )
