"""/api/v1/clusters: register clusters (kubeconfig, or server + token + CA) and their labels.

Credentials go in and never come out: responses carry name, server, labels and creation time.
A cluster that apps target cannot be deleted unless `force=true` (409 names the apps).
"""

from __future__ import annotations

import logging
from dataclasses import replace

from fastapi import APIRouter, Depends, HTTPException, Response

from api.auth import Principal, authorize, require_admin
from api.deps import StoreDep
from api.schemas import ClusterIn, ClusterOut

log = logging.getLogger("api.clusters")
router = APIRouter(prefix="/clusters", tags=["clusters"], dependencies=[Depends(authorize)])


@router.post("", status_code=201, response_model=ClusterOut)
def add_cluster(body: ClusterIn, store: StoreDep, principal: Principal) -> ClusterOut:
    require_admin(principal, "register clusters")
    server, credentials = body.credentials()
    record = store.put_cluster(body.record(server), credentials, create=True)
    log.info("cluster %s registered at %s by %s", record.name, record.server, principal.name)
    return ClusterOut.of(record)


@router.get("", response_model=list[ClusterOut])
def list_clusters(store: StoreDep) -> list[ClusterOut]:
    return [ClusterOut.of(c) for c in store.list_clusters()]


@router.get("/{name}", response_model=ClusterOut)
def get_cluster(name: str, store: StoreDep) -> ClusterOut:
    return ClusterOut.of(store.get_cluster(name))


@router.put("/{name}", response_model=ClusterOut)
def replace_cluster(
    name: str, body: ClusterIn, store: StoreDep, principal: Principal
) -> ClusterOut:
    """Change the labels and credentials of a registered cluster."""
    require_admin(principal, "change clusters")
    if body.name != name:
        raise HTTPException(422, f"name: {body.name} does not match the URL's {name}")
    server, credentials = body.credentials()
    created = store.get_cluster(name).created
    record = replace(body.record(server), created=created)
    record = store.put_cluster(record, credentials, create=False)
    log.info("cluster %s changed by %s", name, principal.name)
    return ClusterOut.of(record)


@router.delete("/{name}", status_code=204)
def delete_cluster(
    name: str, store: StoreDep, principal: Principal, force: bool = False
) -> Response:
    require_admin(principal, "unregister clusters")
    store.delete_cluster(name, force=force)
    log.info("cluster %s unregistered by %s (force=%s)", name, principal.name, force)
    return Response(status_code=204)
