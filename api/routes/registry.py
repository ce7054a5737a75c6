"""/api/v1/registry: the whole registry as one document, out and back in (admin only).

GET /export answers the versioned document of `fleet.control.registry.backup` (secrets as the
ciphertext Redis holds, tokens as digests). POST /import merges one into the registry by name
and answers what it changed, per kind: `{"created": [...], "updated": [...], "unchanged":
[...]}`, with `counts`; then it reads the inventories in every registered cluster and lists
those no registered app owns (`orphans`: an app the file lacked, or restored with another
uid) and the clusters it could not read (`unreachable`), never failing for them
(`fleet.control.orphans`). A document of a newer version is refused (422) before anything is
written. The body of /import may be far larger than any other request's: `api.gate` allows it
GITFLEET_IMPORT_BODY_LIMIT (256 MiB) for an admin token, and GITFLEET_BODY_LIMIT otherwise.
"""

from __future__ import annotations

import logging
from typing import Any

from fastapi import APIRouter, Depends, Request, Response
from starlette.concurrency import run_in_threadpool

from api.auth import Principal, authorize, require_admin
from api.deps import StoreDep
from fleet.control.orphans import orphaned
from fleet.control.registry.backup import Backup, dumps, loads

log = logging.getLogger("api.registry")
router = APIRouter(prefix="/registry", tags=["registry"], dependencies=[Depends(authorize)])
IMPORT_PATH = "/registry/import"


@router.get("/export")
def export_registry(store: StoreDep, principal: Principal) -> Response:
    require_admin(principal, "export the registry")
    document = Backup(store.redis, store.box, store.keys).export()
    log.info("registry exported by %s", principal.name)
    return Response(dumps(document), media_type="application/json")


@router.post("/import")
async def import_registry(
    request: Request, store: StoreDep, principal: Principal
) -> dict[str, Any]:
    require_admin(principal, "import a registry")
    body = await request.body()
    document = loads(body)  # BackupError: a 422 (`api.errors`)
    backup = Backup(store.redis, store.box, store.keys)
    report = await run_in_threadpool(backup.restore, document)
    log.info("registry imported by %s: %s", principal.name, report.counts())
    left = await run_in_threadpool(orphaned, store)
    return {
        "changes": report.changes,
        "counts": report.counts(),
        "orphans": [{"cluster": o.cluster, "app": o.app, "reason": o.reason} for o in left.orphans],
        "unreachable": left.unreachable or {},
    }
