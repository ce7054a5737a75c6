"""/api/v1/appsets: app sets, one app per parameter set of a generator (Argo CD's
ApplicationSets): create, read, list, replace and delete.

The body is a name, a project, one generator (`list`, `clusters` or `git`), a `template` in the
shape of an app's body (POST /apps) whose strings may hold `{{param}}`
(`fleet.control.appsets.template`), a `deletionPolicy` (`cascade`, the default, or `keep`) and
a `refresh` period for the git generator. Creation and replacement check the body (422 naming
the field; a template field may hold parameters wherever a string goes), the caller's project
(403), then render every app the set generates now: an unknown parameter or an unreachable
repository is a 422 naming it, and each app goes through the same checks as POST /apps
(`api.routes.apps.check_allowed`: 403 listing what the project refuses), and the set itself
must be one its writer may deploy through (`default_refusal`: with
GITFLEET_REQUIRE_IMPERSONATION, only admins use `default`, even for a set that generates no
app yet; the writer's role is stored with the set and every reconcile applies it). Only then
is the set stored and reconciled at once; the coordinator keeps reconciling it in its own
thread. `refresh` is at least 30 s. A new set whose name apps of an earlier set still carry
(a cascading delete not finished yet) is a 409 naming them. Generated apps carry `ownerSet`;
PUT and DELETE on them answer 409 naming their set.
"""

from __future__ import annotations

import collections.abc
import functools
import logging
import re
import tempfile
from pathlib import Path
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, HTTPException
from pydantic import Field, ValidationError

from api.appschemas import AppIn
from api.auth import Principal, authorize, can_see, require_project, require_writer
from api.deps import DispatcherDep, SettingsDep, StoreDep
from api.routes.apps import check_allowed
from api.schemas import ApiModel, Labels, Name, Seconds
from api.settings import Settings
from fleet.control.appsets.generators import GeneratorError
from fleet.control.appsets.reconcile import AppSets
from fleet.control.appsets.records import (
    MIN_REFRESH_S,
    AppSetRecord,
    AppSetStatus,
    ClustersGenerator,
    DeletionPolicy,
    Generator,
    GitDirectory,
    GitGenerator,
    ListGenerator,
)
from fleet.control.appsets.template import PARAMETER, TemplateError, walk
from fleet.control.policy import default_refusal
from fleet.control.registry.records import to_data
from fleet.control.registry.store import Store
from fleet.control.routing.dispatch import Dispatcher
from fleet.engine.caches import default_cache_dir
from fleet.engine.source.cache import SourceCache
from fleet.engine.source.remotes import RemotePolicy

log = logging.getLogger("api.appsets")
router = APIRouter(prefix="/appsets", tags=["app sets"], dependencies=[Depends(authorize)])
_TOKEN = re.compile(r"gfparam(\d+)x")


class ListIn(ApiModel):
    elements: list[dict[str, str]] = Field(min_length=1)


class ClustersIn(ApiModel):
    selector: Labels = Field(default_factory=dict)


class DirectoryIn(ApiModel):
    path: str = Field(min_length=1)
    exclude: bool = False


class GitIn(ApiModel):
    repo: str = Field(min_length=1)
    revision: str = "HEAD"
    directories: list[DirectoryIn] = Field(min_length=1)


class GeneratorIn(ApiModel):
    list: ListIn | None = None
    clusters: ClustersIn | None = None
    git: GitIn | None = None

    def generator(self) -> Generator:
        given = [g for g in (self.list, self.clusters, self.git) if g is not None]
        if len(given) != 1:
            raise HTTPException(422, "generator: give exactly one of list, clusters, git")
        git = self.git
        return Generator(
            list=ListGenerator(tuple(self.list.elements)) if self.list else None,
            clusters=ClustersGenerator(dict(self.clusters.selector)) if self.clusters else None,
            git=GitGenerator(
                git.repo,
                git.revision,
                tuple(GitDirectory(d.path, d.exclude) for d in git.directories),
            )
            if git
            else None,
        )


class AppSetIn(ApiModel):
    name: Name
    project: Name = "default"
    generator: GeneratorIn
    template: dict[str, Any]
    deletion_policy: Literal["cascade", "keep"] = "cascade"
    refresh: Seconds = Field(default=180.0, ge=MIN_REFRESH_S)  # a git fetch at most this often


class AppSetView(AppSetIn):
    apps: list[str] = Field(default_factory=list)
    errors: list[str] = Field(default_factory=list)
    reconciled: str = ""
    created: str = ""
    updated: str = ""


@functools.cache
def cache_root(cache_dir: str, prefix: str) -> Path:
    """GITFLEET_CACHE_DIR/appsets/<prefix>, or, when that cannot be written (a read-only root
    file system), a private temporary folder made once per process (it is only a cache)."""
    root = Path(cache_dir) / "appsets"
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        root = Path(tempfile.mkdtemp(prefix="gitfleet-appsets-"))
        log.warning("app set git cache in %s: %s is not writable (%s)", root, cache_dir, e)
    return root / prefix  # made at the first fetch


def appsets_for(store: Store, dispatcher: object, settings: Settings) -> AppSets:
    """The app sets over the fleet's registry, reading repositories through a source cache
    that fetches only what the fleet's `RemotePolicy` allows (as the workers' does)."""
    remotes = RemotePolicy.from_setting(settings.insecure_git_hosts)
    root = cache_root(str(default_cache_dir()), settings.prefix)
    if not isinstance(dispatcher, Dispatcher):
        dispatcher = Dispatcher(store.redis, prefix=settings.prefix)
    return AppSets(
        store,
        dispatcher,
        SourceCache(root, remotes=remotes),
        remotes,
        require_impersonation=settings.require_impersonation,
    )


def _appsets(
    store: StoreDep, settings: SettingsDep, dispatcher: DispatcherDep
) -> collections.abc.Generator[AppSets, None, None]:
    """The app sets for one request; its source cache's open repositories close after it."""
    sets = appsets_for(store, dispatcher, settings)
    try:
        yield sets
    finally:
        sets.generators.source.close()


AppSetsDep = Annotated[AppSets, Depends(_appsets)]


def stored_template(body: AppSetIn) -> dict[str, Any]:
    """The template as app record data: checked as a POST /apps body (each `{{param}}` stood
    in for by a placeholder that any string field accepts), then given its parameters back."""
    params: list[str] = []

    def hide(text: str, _: str) -> str:
        def token(match: re.Match[str]) -> str:
            params.append(match.group(0))
            return f"gfparam{len(params) - 1}x"

        return PARAMETER.sub(token, text)

    def show(text: str, _: str = "") -> str:
        return _TOKEN.sub(lambda m: params[int(m.group(1))], text)

    masked = walk(body.template, hide, "template")
    if masked.setdefault("project", body.project) != body.project:
        raise HTTPException(422, f"template.project: must be the set's project {body.project}")
    if "credentials" in masked:
        raise HTTPException(
            422, "template.credentials: not taken; register repository credentials instead"
        )
    try:
        app = AppIn.model_validate(masked)
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(p) for p in ("template", *first["loc"]))
        raise HTTPException(422, show(f"{where}: {first['msg']}")) from None
    data: dict[str, Any] = walk(to_data(app.record()), show, "template")
    return data


def record_of(body: AppSetIn, principal: Principal) -> AppSetRecord:
    return AppSetRecord(
        name=body.name,
        generator=body.generator.generator(),
        template=stored_template(body),
        project=body.project,
        deletion=DeletionPolicy(body.deletion_policy),
        refresh_s=body.refresh,
        given=dict(body.template),
        author=principal.name,
        author_role=str(principal.role),
    )


def view(record: AppSetRecord, status: AppSetStatus) -> AppSetView:
    return AppSetView.model_validate(
        {
            "name": record.name,
            "project": record.project,
            "generator": _generator_body(record.generator),
            "template": record.given,
            "deletionPolicy": record.deletion.value,
            "refresh": record.refresh_s,
            "apps": list(status.apps),
            "errors": list(status.errors),
            "reconciled": status.reconciled,
            "created": record.created,
            "updated": record.updated,
        }
    )


def _generator_body(generator: Generator) -> dict[str, Any]:
    data = to_data(generator)
    return {k: v for k, v in data.items() if v is not None}


def admit(
    appsets: AppSets, record: AppSetRecord, *, principal: Principal, settings: Settings
) -> None:
    """The writer may deploy through the set's project, and every app the set generates now
    passes the checks of POST /apps."""
    refusal = default_refusal(
        record.project, principal.role, require_impersonation=settings.require_impersonation
    )
    if refusal:
        raise HTTPException(403, f"appset {record.name}: {refusal}")
    try:
        generated = appsets.generate(record)
    except (TemplateError, GeneratorError) as e:
        raise HTTPException(422, str(e)) from None
    for app in generated.apps.values():
        try:
            check_allowed(appsets.store, app, principal=principal, settings=settings)
        except HTTPException as e:
            raise HTTPException(e.status_code, f"app {app.name}: {e.detail}") from None


def _visible(appsets: AppSets, principal: Principal, name: str) -> AppSetRecord:
    record = appsets.get(name)
    require_project(principal, record.project)
    return record


@router.post("", status_code=201, response_model_exclude_none=True)
def create_appset(
    body: AppSetIn, principal: Principal, settings: SettingsDep, appsets: AppSetsDep
) -> AppSetView:
    require_project(principal, body.project)
    require_writer(principal, "create app sets")
    record = record_of(body, principal)
    admit(appsets, record, principal=principal, settings=settings)
    carried = sorted(a.name for a in appsets.carriers(record.name))
    if carried:
        raise HTTPException(
            409,
            f"appset {record.name}: apps {', '.join(carried)} still carry this name (made by an "
            "earlier app set of that name, being deleted); wait until they are gone, or choose "
            "another name",
        )
    record = appsets.put(record, create=True)
    status = appsets.reconcile(record)
    log.info("appset %s created in project %s by %s", record.name, record.project, principal.name)
    return view(record, status)


@router.put("/{name}", response_model_exclude_none=True)
def replace_appset(
    name: str, body: AppSetIn, principal: Principal, settings: SettingsDep, appsets: AppSetsDep
) -> AppSetView:
    if body.name != name:
        raise HTTPException(422, f"name: {body.name} does not match the URL's {name}")
    old = _visible(appsets, principal, name)
    require_project(principal, body.project)
    require_writer(principal, "change app sets")
    if body.project != old.project:
        raise HTTPException(422, f"project: an app set keeps its project ({old.project})")
    record = record_of(body, principal)
    admit(appsets, record, principal=principal, settings=settings)
    record = appsets.put(record, create=False)
    status = appsets.reconcile(record)
    log.info("appset %s changed by %s", name, principal.name)
    return view(record, status)


@router.get("", response_model_exclude_none=True)
def list_appsets(principal: Principal, appsets: AppSetsDep) -> list[AppSetView]:
    return [
        view(r, appsets.status(r.name))
        for r in appsets.list_sets()
        if can_see(principal, r.project)
    ]


@router.get("/{name}", response_model_exclude_none=True)
def get_appset(name: str, principal: Principal, appsets: AppSetsDep) -> AppSetView:
    record = _visible(appsets, principal, name)
    return view(record, appsets.status(name))


@router.delete("/{name}")
def delete_appset(name: str, principal: Principal, appsets: AppSetsDep) -> dict[str, Any]:
    """Remove the set and its apps, following its deletion policy (cascade prunes their
    objects; keep leaves them in the clusters)."""
    record = _visible(appsets, principal, name)
    require_writer(principal, "delete app sets")
    apps = appsets.delete(name)
    log.info("appset %s deleted by %s (%s)", name, principal.name, record.deletion)
    return {"appset": name, "deleted": True, "deletionPolicy": record.deletion, "apps": apps}
