"""Bearer tokens and roles: who may call what.

- admin: everything.
- member of a project: read clusters and its own project; create, change, sync and delete the
  apps of that project only; no cluster, project or token writes.
- viewer: every GET, nothing else.

`authorize` runs on every router but the open probes; it resolves the token (stored as a
SHA-256 digest, `fleet.control.registry.tokens`) and refuses writes to viewers. Per-resource checks
(`require_admin`, `require_project`) run in the handlers that know the resource.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, HTTPException, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from api.deps import StoreDep
from fleet.control.registry.records import Role, TokenRecord

READ_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
bearer = HTTPBearer(auto_error=False, description="an API token: Authorization: Bearer <token>")


def _unauthorized(message: str) -> HTTPException:
    return HTTPException(401, message, headers={"WWW-Authenticate": "Bearer"})


def authorize(
    request: Request,
    store: StoreDep,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
) -> TokenRecord:
    if credentials is None or credentials.scheme.lower() != "bearer":
        raise _unauthorized("missing bearer token: send 'Authorization: Bearer <token>'")
    token = store.lookup_token(credentials.credentials)
    if token is None:
        raise _unauthorized("invalid or revoked token")
    if token.role == Role.VIEWER and request.method not in READ_METHODS:
        raise HTTPException(403, f"token {token.name} is a viewer: read only")
    request.state.principal = token
    return token


Principal = Annotated[TokenRecord, Depends(authorize)]


def require_admin(principal: TokenRecord, action: str) -> None:
    if principal.role != Role.ADMIN:
        raise HTTPException(403, f"token {principal.name} is not an admin: cannot {action}")


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
