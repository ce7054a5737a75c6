"""/api/v1/apps: create, read, replace and delete applications.

Creation and replacement check, in this order: the body (422 naming the field), the caller's
project (403), references (unknown project, cluster or dependency: 422), then the project's
bounds on repo and destination for every cluster the app targets (403 listing each
violation; with GITFLEET_REQUIRE_IMPERSONATION, a destination without a ServiceAccount is one,
and members may not use the exempt `default` project). Only then is anything written, in one
transaction. The repository URL must be one the fleet fetches
(`fleet.engine.source.remotes`: https or ssh, http only for GITFLEET_INSECURE_GIT_HOSTS, no
user-info, no local path or dot segment: 422 naming the rule). Git credentials are bound to the
URL they were given for: a PUT that changes the URL without giving them again drops them, and
its answer says so in `warnings`.

DELETE `cascade=true` (the default, as in Argo CD) marks the app `deleting` and asks each
instance's worker to prune everything the app owns (trigger `delete`); the worker removes the
record when every instance is pruned. `cascade=false` removes the record at once and leaves the
objects in the clusters, with their inventories: both are bound to the deleted app's uid, so a
later app of the same name owns and prunes none of them (SECURITY.md, "Scope and ownership").
An app other apps depend on is kept unless `force=true`.
"""

from __future__ import annotations

import logging
from dataclasses import replace

from fastapi import APIRouter, Depends, HTTPException
from fastapi.responses import JSONResponse

from api.appschemas import AppIn
from api.auth import Principal, authorize, can_see, require_project
from api.deps import DispatcherDep, SettingsDep, StoreDep
from api.settings import Settings
from api.syncs import request_syncs
from api.views import AppSummary, AppView, Deleted, app_view, summary
from fleet.control.policy import REQUIRE_IMPERSONATION_ENV, check_app_allowed
from fleet.control.registry.records import DEFAULT_PROJECT, AppRecord, Role, TokenRecord
from fleet.control.registry.store import InUse, InvalidReference, NotFound, Store
from fleet.control.registry.syncrecords import DeleteOperation
from fleet.engine.source.remotes import RemotePolicy, RepoUrlError, identity
from fleet.model import Trigger

log = logging.getLogger("api.apps")
router = APIRouter(prefix="/apps", tags=["applications"], dependencies=[Depends(authorize)])


def visible_app(store: Store, principal: Principal, name: str) -> AppRecord:
    record = store.get_app(name)
    require_project(principal, record.project)
    return record


def not_deleting(record: AppRecord) -> None:
    if record.deleting:
        raise HTTPException(409, f"app {record.name} is being deleted")


def check_allowed(
    store: Store, record: AppRecord, *, principal: TokenRecord, settings: Settings
) -> None:
    """422 for a refused URL or unknown references, 403 listing what the project does not
    allow."""
    try:
        RemotePolicy.from_setting(settings.insecure_git_hosts).check(record.source.repo)
    except RepoUrlError as e:
        raise HTTPException(422, f"source.repo: {e}") from None
    try:
        project = store.get_project(record.project)
    except NotFound:
        raise InvalidReference("project", f"no project named {record.project}") from None
    cluster = record.destination.cluster
    if cluster and cluster not in {c.name for c in store.list_clusters()}:
        raise InvalidReference("destination.cluster", f"no cluster named {cluster}")
    required = settings.require_impersonation
    if required and project.name == DEFAULT_PROJECT.name and principal.role != Role.ADMIN:
        raise HTTPException(
            403,
            f"project {project.name} is exempt from {REQUIRE_IMPERSONATION_ENV} (it may act "
            "with the clusters' own credentials), so only admins deploy through it while that "
            "is on: use a project that names a ServiceAccount",
        )
    instances = store.instances(record)
    violations = check_app_allowed(record, project, instances, require_impersonation=required)
    if violations:
        raise HTTPException(403, "; ".join(violations))


@router.post("", status_code=201)
def create_app(
    body: AppIn, store: StoreDep, principal: Principal, settings: SettingsDep
) -> AppView:
    require_project(principal, body.project)
    record = body.record()
    check_allowed(store, record, principal=principal, settings=settings)
    record = store.put_app(record, credentials=body.git_credentials(), create=True)
    log.info("app %s created in project %s by %s", record.name, record.project, principal.name)
    return app_view(store, record)


@router.get("")
def list_apps(
    store: StoreDep, principal: Principal, project: str | None = None
) -> list[AppSummary]:
    apps = [a for a in store.list_apps() if can_see(principal, a.project)]
    clusters = store.list_clusters()
    return [summary(store, a, clusters) for a in apps if project in (None, a.project)]


@router.get("/{name}")
def get_app(name: str, store: StoreDep, principal: Principal) -> AppView:
    return app_view(store, visible_app(store, principal, name))


@router.put("/{name}")
def replace_app(
    name: str, body: AppIn, store: StoreDep, principal: Principal, settings: SettingsDep
) -> AppView:
    """Replace the spec. Credentials left out are kept; `"credentials": null` removes them."""
    if body.name != name:
        raise HTTPException(422, f"name: {body.name} does not match the URL's {name}")
    old = visible_app(store, principal, name)
    require_project(principal, body.project)
    not_deleting(old)
    keep = "credentials" not in body.model_fields_set and old.has_credentials
    record = replace(body.record(keep_credentials=keep), created=old.created)
    check_allowed(store, record, principal=principal, settings=settings)
    record = store.put_app(record, credentials=body.git_credentials(), create=False)
    log.info("app %s changed by %s", name, principal.name)
    view = app_view(store, record)
    if keep and not record.has_credentials:
        view = view.model_copy(update={"warnings": [_dropped(old, record)]})
    return view


def _dropped(old: AppRecord, new: AppRecord) -> str:
    before, after = identity(old.source.repo), identity(new.source.repo)
    if before != after:
        return (
            f"git credentials dropped: they were given for {before}, and the app now names "
            f"{after}; send `credentials` again to use them with the new URL"
        )
    return (
        "git credentials dropped: they were stored before gitfleet bound credentials to a "
        "repository URL; send `credentials` again"
    )


@router.delete("/{name}")
def delete_app(
    name: str,
    store: StoreDep,
    principal: Principal,
    dispatcher: DispatcherDep,
    cascade: bool = True,
    force: bool = False,
) -> JSONResponse:
    record = visible_app(store, principal, name)
    users = store.dependents(name)
    if users and not force:
        raise InUse(f"app(s) {', '.join(users)} depend on app {name}; pass force=true")
    clusters = store.instances(record)
    if not cascade or not clusters:
        store.delete_app(name, force=True)
        log.info("app %s deleted by %s (objects left in place)", name, principal.name)
        return JSONResponse(Deleted(app=name, deleted=True).model_dump(mode="json"))
    record = store.mark_deleting(name)
    enqueued = request_syncs(dispatcher, record, clusters, trigger=Trigger.DELETE)
    operation = DeleteOperation(by=principal.name, trace_id=enqueued.trace_id)
    store.log.set_operation(name, operation)
    log.info("app %s deleting with cascade by %s", name, principal.name)
    deleting = Deleted(
        app=name, deleted=False, deleting=True, trace_id=enqueued.trace_id, jobs=enqueued.jobs()
    )
    return JSONResponse(deleting.model_dump(mode="json"), status_code=202)
