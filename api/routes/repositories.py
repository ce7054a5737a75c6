"""/api/v1/repositories: git credentials an admin registers once for many apps (admin only).

An entry names a URL prefix (`https://github.com/team-a`, or a whole host) and the projects it
serves (`*` for every project), as Argo CD's credential templates do. A worker sends them for
an app with no credentials of its own whose project is in scope and whose URL lies under the
prefix (`fleet.control.registry.gitcreds`). The URL follows the fleet's rules for repository
URLs (`fleet.engine.source.remotes`). Credentials go in and never come out: responses carry the
name, the prefix, the projects and the creation time.
"""

from __future__ import annotations

import logging
from typing import Annotated

from fastapi import APIRouter, Depends, HTTPException, Response
from pydantic import AfterValidator, Field, SecretStr

from api.auth import Principal, authorize, require_admin
from api.deps import SettingsDep, StoreDep
from api.schemas import DNS1123, ApiModel, Name
from fleet.control.registry.gitcreds import ALL_PROJECTS, RepositoryRecord
from fleet.engine.source.cache import GitCredentials
from fleet.engine.source.remotes import RemotePolicy, RepoUrlError

log = logging.getLogger("api.repositories")
router = APIRouter(prefix="/repositories", tags=["repositories"], dependencies=[Depends(authorize)])


def _project(value: str) -> str:
    if value != ALL_PROJECTS and not DNS1123.match(value):
        raise ValueError(f"{value!r} is neither a project name nor * (every project)")
    return value


class RepositoryIn(ApiModel):
    """Credentials for every repository under `url`, for the apps of `projects`."""

    name: Name
    url: str = Field(min_length=1, max_length=2048)
    projects: list[Annotated[str, AfterValidator(_project)]] = Field(min_length=1)
    username: str = ""
    password: SecretStr = Field(
        description="a password or token (with no username, x-access-token is sent)"
    )


class RepositoryOut(ApiModel):
    name: str
    url: str
    projects: list[str]
    created: str

    @classmethod
    def of(cls, record: RepositoryRecord) -> RepositoryOut:
        return cls(
            name=record.name, url=record.url, projects=list(record.projects), created=record.created
        )


@router.post("", status_code=201, response_model=RepositoryOut)
def add_repository(
    body: RepositoryIn, store: StoreDep, principal: Principal, settings: SettingsDep
) -> RepositoryOut:
    require_admin(principal, "register repository credentials")
    try:
        url = RemotePolicy.from_setting(settings.insecure_git_hosts).check(body.url, prefix=True)
    except RepoUrlError as e:
        raise HTTPException(422, f"url: {e}") from None
    projects = tuple(dict.fromkeys(body.projects))
    credentials = GitCredentials(body.username, body.password.get_secret_value())
    record = store.repositories.create(RepositoryRecord(body.name, url.name, projects), credentials)
    scope = "every project" if ALL_PROJECTS in projects else ", ".join(projects)
    log.info("repository credentials %s for %s (%s) by %s", body.name, url, scope, principal.name)
    return RepositoryOut.of(record)


@router.get("", response_model=list[RepositoryOut])
def list_repositories(store: StoreDep, principal: Principal) -> list[RepositoryOut]:
    require_admin(principal, "list repository credentials")
    return [RepositoryOut.of(r) for r in store.repositories.list()]


@router.delete("/{name}", status_code=204)
def remove_repository(name: str, store: StoreDep, principal: Principal) -> Response:
    require_admin(principal, "remove repository credentials")
    store.repositories.delete(name)
    log.info("repository credentials %s removed by %s", name, principal.name)
    return Response(status_code=204)
