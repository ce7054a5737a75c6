"""/api/v1/tokens: API tokens for people and automation (admin only).

POST answers the token's text once; only its SHA-256 digest is kept, so a lost token is
revoked and replaced, never recovered. A token may expire (`expiresAt`, or `ttl` from now) and
is refused after; a member token is revoked with its project.
"""

from __future__ import annotations

import logging
from datetime import UTC
from typing import Any

from fastapi import APIRouter, Depends, Response

from api.auth import Principal, authorize, require_admin
from api.deps import StoreDep
from api.schemas import TokenIn

log = logging.getLogger("api.tokens")
router = APIRouter(prefix="/tokens", tags=["tokens"], dependencies=[Depends(authorize)])


@router.post("", status_code=201)
def create_token(body: TokenIn, store: StoreDep, principal: Principal) -> dict[str, Any]:
    require_admin(principal, "create tokens")
    if body.project is not None:
        store.get_project(body.project)
    expires = body.expires()
    text = store.create_token(body.name, body.role, body.project, expires=expires)
    log.info("token %s (%s) created by %s", body.name, body.role, principal.name)
    return {
        "name": body.name,
        "role": str(body.role),
        "project": body.project,
        "expiresAt": expires.astimezone(UTC).isoformat() if expires else None,
        "token": text,
    }


@router.get("")
def list_tokens(store: StoreDep, principal: Principal) -> list[dict[str, Any]]:
    require_admin(principal, "list tokens")
    return [
        {
            "name": t.name,
            "role": str(t.role),
            "project": t.project,
            "created": t.created,
            "expiresAt": t.expires or None,
        }
        for t in store.tokens.list()
    ]


@router.delete("/{name}", status_code=204)
def revoke_token(name: str, store: StoreDep, principal: Principal) -> Response:
    require_admin(principal, "revoke tokens")
    store.tokens.revoke(name)
    log.info("token %s revoked by %s", name, principal.name)
    return Response(status_code=204)
