"""/ui/ and /ui/apps/...: the apps table, one app's page, its objects, their manifests and diffs.

Reads go through the REST routes' own functions (`api.routes.apps.visible_app`, `api.views
.app_view`), so a member sees only their project's apps (403 otherwise, as on the REST API).
`/ui/api/...` answers the small JSON the page script polls every few seconds to update the
statuses in place (no full reload).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Annotated

from fastapi import APIRouter, Depends, HTTPException, Query, Request
from fastapi.responses import JSONResponse, Response

from api.auth import Principal, require_writer
from api.deps import SettingsDep, StoreDep
from api.routes.apps import visible_app
from api.settings import Settings
from api.ui import live
from api.ui.listing import Filters, rows, select
from api.ui.web import page, refused
from api.views import InstanceView, app_view
from fleet.control.registry.records import AppRecord, TokenRecord
from fleet.control.registry.store import Store
from fleet.control.registry.syncrecords import ResourceRecord
from fleet.engine.caches import SyncCaches, default_cache_dir
from fleet.engine.source.remotes import RemotePolicy, RepoUrlError
from fleet.errors import FleetError
from fleet.model import Health, ObjectRef, SyncStatus

router = APIRouter(prefix="/ui", include_in_schema=False)


def filters_of(
    project: str = "",
    cluster: str = "",
    sync: str = "",
    health: str = "",
    q: str = "",
    page_number: Annotated[int, Query(alias="page", ge=1)] = 1,
) -> Filters:
    """The table's filters from the query string (the page's form and the polled JSON)."""
    return Filters(project, cluster, sync, health, q.strip(), page_number)


FiltersDep = Annotated[Filters, Depends(filters_of)]


@router.get("/")
def apps_page(
    request: Request, store: StoreDep, principal: Principal, filters: FiltersDep
) -> Response:
    clusters = store.list_clusters()
    found = rows(store, principal, clusters=clusters)
    return page(
        request,
        "apps.html",
        principal,
        listing=select(found, filters),
        filters=filters,
        projects=sorted({r.project for r in found}),
        clusters=sorted(c.name for c in clusters),
        sync_states=list(SyncStatus),
        health_states=list(Health),
    )


@router.get("/api/apps")
def apps_json(store: StoreDep, principal: Principal, filters: FiltersDep) -> JSONResponse:
    listing = select(rows(store, principal), filters)
    shown = [{**asdict(r), "short_revision": r.short_revision} for r in listing.rows]
    body = {"rows": shown, "total": listing.total, "counts": listing.counts}
    return JSONResponse({**body, "page": listing.page, "pages": listing.pages})


@router.get("/apps/{name}")
def app_page(request: Request, name: str, store: StoreDep, principal: Principal) -> Response:
    view = app_view(store, visible_app(store, principal, name))
    prober = live.prober_of(request)
    probes = {i.cluster: prober.probe(store, i.cluster) for i in view.instances}
    unreachable = {c: p.detail for c, p in probes.items() if not p.reachable}
    return page(
        request,
        "app.html",
        principal,
        app=view,
        tree=_tree(view.instances),
        unreachable=unreachable,
    )


@router.get("/api/apps/{name}")
def app_json(name: str, store: StoreDep, principal: Principal) -> JSONResponse:
    view = app_view(store, visible_app(store, principal, name))
    instances = [
        {
            "cluster": i.cluster,
            "sync_status": i.sync_status,
            "health": i.health,
            "revision": i.revision,
            "message": i.message,
            "resources": [
                {"ref": str(r.ref), "health": r.health, "action": r.action, "message": r.message}
                for r in i.resources
            ],
        }
        for i in view.instances
    ]
    return JSONResponse(
        {
            "sync_status": view.sync_status,
            "health": view.health,
            "revision": view.revision,
            "operation": view.last_operation.kind if view.last_operation else "",
            "instances": instances,
        }
    )


@dataclass(frozen=True)
class TreeNode:
    """An object of an instance's tree; `owns`: it has children to read from the cluster."""

    ref: ObjectRef
    record: ResourceRecord
    owns: bool


def _tree(instances: list[InstanceView]) -> dict[str, list[TreeNode]]:
    """Each instance's objects, sorted by wave, then kind, namespace and name."""
    return {
        i.cluster: sorted(
            (TreeNode(r.ref, r, (r.group, r.kind) in live.OWNED_KINDS) for r in i.resources),
            key=lambda o: (o.record.wave, o.ref.kind, o.ref.namespace, o.ref.name),
        )
        for i in instances
    }


def object_of(
    kind: str,
    version: str,
    name_: Annotated[str, Query(alias="name")],
    group: str = "",
    namespace: str = "",
) -> ObjectRef:
    """The object a page is about, from its query string."""
    return ObjectRef(group, version, kind, namespace, name_)


ObjectDep = Annotated[ObjectRef, Depends(object_of)]


def _declared(
    store: Store, principal: TokenRecord, app: str, cluster: str, ref: ObjectRef
) -> AppRecord:
    """The app, if `ref` is one of its objects on `cluster` (its last sync recorded it); the UI
    reads no other object of a cluster (404)."""
    record = visible_app(store, principal, app)
    view = InstanceView.of(cluster, store.get_status(app, cluster))
    if cluster not in store.instances(record) or not live.allowed_ref(view.resources, ref):
        raise HTTPException(404, f"{ref} is not an object of app {app} on cluster {cluster}")
    return record


@router.get("/apps/{name}/object")
def object_page(
    request: Request,
    name: str,
    store: StoreDep,
    settings: SettingsDep,
    principal: Principal,
    cluster: str,
    ref: ObjectDep,
) -> Response:
    record = _declared(store, principal, name, cluster, ref)
    error = ""
    manifest = None
    try:
        with live.client_for(store, cluster, live.account_for(store, record, cluster)) as kube:
            manifest = live.live_object(kube, ref)
    except FleetError as e:
        error = str(e)
    diff = _diff_of(request, store, settings, principal, record, cluster, ref)
    return page(
        request,
        "object.html",
        principal,
        app=record,
        cluster=cluster,
        ref=ref,
        manifest=live.to_yaml(manifest) if manifest is not None else "",
        error=error,
        diff=diff,
    )


@dataclass(frozen=True)
class ObjectDiffShown:
    """What the object page says of its diff: the text, or why there is none (`refused`: the
    role may not ask; `error`: the preview failed, in words)."""

    apply: bool = False
    text: str = ""
    refused: str = ""
    error: str = ""


def _diff_of(
    request: Request,
    store: Store,
    settings: Settings,
    principal: TokenRecord,
    record: AppRecord,
    cluster: str,
    ref: ObjectRef,
) -> ObjectDiffShown:
    """The object's diff against git, or why there is none to show."""
    try:
        require_writer(principal, "ask for a diff (it runs a dry run on the cluster)")
    except HTTPException as e:
        return ObjectDiffShown(refused=str(e.detail))
    try:
        found = _preview(request, store, settings, record, cluster)
    except (FleetError, RepoUrlError) as e:
        return ObjectDiffShown(error=str(e))
    for d in found:
        if d.ref == ref:
            return ObjectDiffShown(apply=d.apply, text=d.text)
    gone = f"{ref} is no longer declared in git: a sync with prune would delete it"
    return ObjectDiffShown(error=gone)


def _preview(
    request: Request, store: Store, settings: Settings, record: AppRecord, cluster: str
) -> list[live.ObjectDiff]:
    caches = getattr(request.app.state, "ui_caches", None)
    if caches is None:
        remotes = RemotePolicy.from_setting(settings.insecure_git_hosts)
        caches = SyncCaches.at(default_cache_dir() / "coordinator", remotes=remotes)
        request.app.state.ui_remotes = remotes  # before the caches: a request seeing those
        request.app.state.ui_caches = caches  # in another thread reads these next
    return live.preview(
        store,
        record,
        cluster,
        caches=caches,
        remotes=request.app.state.ui_remotes,
        require_impersonation=settings.require_impersonation,
    )


@router.get("/apps/{name}/diff")
def diff_page(
    request: Request,
    name: str,
    store: StoreDep,
    settings: SettingsDep,
    principal: Principal,
    cluster: str,
) -> Response:
    record = visible_app(store, principal, name)
    if cluster not in store.instances(record):
        raise HTTPException(404, f"app {name} has no instance on cluster {cluster}")
    try:
        require_writer(principal, "ask for a diff (it runs a dry run on the cluster)")
    except HTTPException as e:
        return refused(request, principal, e.status_code, str(e.detail))
    error = ""
    found: list[live.ObjectDiff] = []
    try:
        found = _preview(request, store, settings, record, cluster)
    except (FleetError, RepoUrlError) as e:
        error = str(e)
    return page(
        request, "diff.html", principal, app=record, cluster=cluster, diffs=found, error=error
    )


@router.get("/api/apps/{name}/children")
def children_json(
    name: str,
    store: StoreDep,
    principal: Principal,
    cluster: str,
    ref: ObjectDep,
) -> JSONResponse:
    record = _declared(store, principal, name, cluster, ref)
    try:
        with live.client_for(store, cluster, live.account_for(store, record, cluster)) as kube:
            found = live.children(kube, ref)
    except FleetError as e:
        return JSONResponse({"error": str(e), "children": []})
    return JSONResponse({"children": [asdict(c) for c in found]})
