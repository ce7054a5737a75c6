"""/api/v1/projects: what the apps of a project may deploy, and where.

Only admins write projects. Members see their own project; viewers and admins see all.
`default` is built in and allows everything, like Argo CD's default project; it can be
narrowed with PUT but not deleted. A project with apps cannot be deleted (409).
"""

from __future__ import annotations

import logging

from fastapi import APIRouter, Depends, HTTPException, Response

from api.auth import Principal, authorize, can_see, require_admin, require_project
from api.deps import StoreDep
from api.schemas import ProjectIn

log = logging.getLogger("api.projects")
router = APIRouter(prefix="/projects", tags=["projects"], dependencies=[Depends(authorize)])


@router.post("", status_code=201, response_model=ProjectIn)
def create_project(body: ProjectIn, store: StoreDep, principal: Principal) -> ProjectIn:
    require_admin(principal, "create projects")
    record = store.put_project(body.record(), create=True)
    log.info("project %s created by %s", record.name, principal.name)
    return ProjectIn.of(record)


@router.get("", response_model=list[ProjectIn])
def list_projects(store: StoreDep, principal: Principal) -> list[ProjectIn]:
    return [ProjectIn.of(p) for p in store.list_projects() if can_see(principal, p.name)]


@router.get("/{name}", response_model=ProjectIn)
def get_project(name: str, store: StoreDep, principal: Principal) -> ProjectIn:
    require_project(principal, name)
    return ProjectIn.of(store.get_project(name))


@router.put("/{name}", response_model=ProjectIn)
def replace_project(name: str, body: ProjectIn, store: StoreDep, principal: Principal) -> ProjectIn:
    require_admin(principal, "change projects")
    if body.name != name:
        raise HTTPException(422, f"name: {body.name} does not match the URL's {name}")
    record = store.put_project(body.record(), create=False)
    log.info("project %s changed by %s", name, principal.name)
    return ProjectIn.of(record)


@router.delete("/{name}", status_code=204)
def delete_project(name: str, store: StoreDep, principal: Principal) -> Response:
    require_admin(principal, "delete projects")
    store.delete_project(name)
    log.info("project %s deleted by %s", name, principal.name)
    return Response(status_code=204)
