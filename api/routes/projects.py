"""/api/v1/projects: what the apps of a project may deploy, and where.

Only admins write projects. Members see their own project; viewers and admins see all.
`default` is built in and allows everything, like Argo CD's default project; it can be
narrowed with PUT but not deleted. A project with apps cannot be deleted (409); deleting one
revokes its member tokens. `webhookSecret` is write-only, as git credentials are: stored
encrypted, answered only as `hasWebhookSecret`, kept by a PUT that leaves it out and dropped by
`"webhookSecret": null` (`api.routes.webhooks` says what it opens).
`sourceRepos` globs are parsed on write (`fleet.control.sourcerepos`, 422 naming the bad one).

`/projects/{name}/age-key` holds the project's age private key, which decrypts the
SOPS-encrypted Secrets its apps render (`fleet.control.registry.agekeys`): an admin or a member
of the project PUTs it (`{"ageKey": "AGE-SECRET-KEY-1..."}`), GET and PUT answer only whether
one is stored, its public `keyId` and when it was set, and DELETE drops it. Never returned.
"""

from __future__ import annotations

import logging

from fastapi import APIRouter, Depends, HTTPException, Response
from pydantic import SecretStr

from api.auth import Principal, authorize, can_see, require_admin, require_project, require_writer
from api.deps import StoreDep
from api.schemas import ApiModel, ProjectIn
from fleet.control.registry.agekeys import AgeKeyInfo
from fleet.control.sourcerepos import parse_glob
from fleet.engine.render.sops import check_age_key

log = logging.getLogger("api.projects")
router = APIRouter(prefix="/projects", tags=["projects"], dependencies=[Depends(authorize)])


def check_globs(body: ProjectIn) -> None:
    """422 naming the first `sourceRepos` entry that is not a repository glob."""
    for index, glob in enumerate(body.source_repos):
        try:
            parse_glob(glob)
        except ValueError as e:
            raise HTTPException(422, f"sourceRepos.{index}: {e}") from None


@router.post("", status_code=201, response_model=ProjectIn)
def create_project(body: ProjectIn, store: StoreDep, principal: Principal) -> ProjectIn:
    require_admin(principal, "create projects")
    check_globs(body)
    record = store.put_project(body.record(), webhook_secret=body.secret(), create=True)
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
    check_globs(body)
    keep = (
        "webhook_secret" not in body.model_fields_set and store.get_project(name).has_webhook_secret
    )
    record = body.record(keep_webhook_secret=keep)
    record = store.put_project(record, webhook_secret=body.secret(), create=False)
    log.info("project %s changed by %s", name, principal.name)
    return ProjectIn.of(record)


@router.delete("/{name}", status_code=204)
def delete_project(name: str, store: StoreDep, principal: Principal) -> Response:
    require_admin(principal, "delete projects")
    store.delete_project(name)
    log.info("project %s deleted by %s", name, principal.name)
    return Response(status_code=204)


class AgeKeyIn(ApiModel):
    """An age private key (what `age-keygen` writes; comment lines are dropped)."""

    age_key: SecretStr


class AgeKeyOut(ApiModel):
    """What is shown of a project's age key: never the key itself."""

    project: str
    stored: bool
    key_id: str = ""
    updated: str = ""

    @classmethod
    def of(cls, info: AgeKeyInfo) -> AgeKeyOut:
        return cls(
            project=info.project, stored=info.stored, key_id=info.key_id, updated=info.updated
        )


def _may_manage_key(principal: Principal, name: str) -> None:
    require_project(principal, name)
    require_writer(principal, f"manage the age key of project {name}")


@router.put("/{name}/age-key", response_model=AgeKeyOut)
def put_age_key(name: str, body: AgeKeyIn, store: StoreDep, principal: Principal) -> AgeKeyOut:
    _may_manage_key(principal, name)
    try:
        key = check_age_key(body.age_key.get_secret_value())
    except ValueError as e:
        raise HTTPException(422, f"ageKey: {e}") from None
    info = store.age_keys.put(name, key)
    log.info("age key %s of project %s stored by %s", info.key_id, name, principal.name)
    return AgeKeyOut.of(info)


@router.get("/{name}/age-key", response_model=AgeKeyOut)
def get_age_key(name: str, store: StoreDep, principal: Principal) -> AgeKeyOut:
    require_project(principal, name)
    return AgeKeyOut.of(store.age_keys.info(name))


@router.delete("/{name}/age-key", status_code=204)
def delete_age_key(name: str, store: StoreDep, principal: Principal) -> Response:
    _may_manage_key(principal, name)
    store.age_keys.delete(name)
    log.info("age key of project %s deleted by %s", name, principal.name)
    return Response(status_code=204)
