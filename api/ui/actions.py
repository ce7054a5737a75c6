"""The UI's buttons: Sync, Refresh, Rollback and Delete of an app; each one a REST handler call.

Each POST checks the CSRF token and Origin (`api.ui.web.check_csrf`), then calls the very
function its REST route runs (`api.routes.appops.sync_app`, `rollback_app`,
`api.routes.apps.delete_app`) with the session's token, so the same checks refuse the same
things with the same words: another project's app (403), a viewer (403, in the gate already),
a sync window (409), an app being deleted (409). Refresh is the REST diff
(`api.routes.appops.diff_app`): each instance's worker compares the app with git in a dry run,
and the answer says what a sync would change, writing nothing (Argo CD's refresh).
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Form, HTTPException, Request
from fastapi.responses import Response

from api.appschemas import RollbackIn, SyncIn
from api.auth import Principal
from api.deps import DispatcherDep, SettingsDep, StoreDep
from api.routes import appops, apps
from api.ui.web import CsrfChecked, done, refusal
from api.views import DiffView
from fleet.errors import FleetError

router = APIRouter(prefix="/ui/apps", include_in_schema=False)
Flag = Annotated[bool, Form()]
Text = Annotated[str, Form()]


def _back(name: str) -> str:
    return f"/ui/apps/{name}"


def _requested(request: Request, name: str, asked: str, trace_id: str) -> Response:
    """A sync or rollback handed to the workers: what was asked, and its trace."""
    return done(request, f"{asked}; trace {trace_id}", _back(name), trace_id=trace_id)


@router.post("/{name}/sync")
def sync(
    request: Request,
    name: str,
    store: StoreDep,
    dispatcher: DispatcherDep,
    principal: Principal,
    _: CsrfChecked,
    dry_run: Flag = False,
    cluster: Text = "",
    prune: Flag = False,
    prune_offered: Flag = False,
) -> Response:
    """A manual sync (or its dry run), of every instance or of one cluster. The form's Prune
    box starts at the app's syncPolicy.prune; what it says when sent is this sync's choice
    (`prune_offered` tells an unticked box from a form without one: then the policy)."""
    try:
        choice = prune if prune_offered else None
        body = SyncIn(dry_run=dry_run, cluster=cluster or None, prune=choice)
        accepted = appops.sync_app(name, store, dispatcher, principal, body)
    except (HTTPException, FleetError) as e:
        return refusal(request, principal, e)
    what = "dry run" if dry_run else "sync"
    pruning = "" if choice is None else f", prune {'on' if choice else 'off'}"
    clusters = f"{len(accepted.jobs)} cluster(s){pruning}"
    return _requested(request, name, f"{what} requested on {clusters}", accepted.trace_id)


@router.post("/{name}/refresh")
def refresh(
    request: Request,
    name: str,
    store: StoreDep,
    dispatcher: DispatcherDep,
    settings: SettingsDep,
    principal: Principal,
    _: CsrfChecked,
) -> Response:
    """Compare the app with git now (the REST diff: a dry run on each instance's worker) and
    say what a sync would change; nothing is written."""
    try:
        diff = appops.diff_app(name, store, dispatcher, settings, principal)
    except (HTTPException, FleetError) as e:
        return refusal(request, principal, e)
    return done(request, compared(diff), _back(name), trace_id=diff.trace_id)


def compared(diff: DiffView) -> str:
    """What a refresh found, in one sentence per cluster."""
    if diff.in_sync:
        return f"refreshed: {diff.app} matches git on every cluster"
    found = []
    for cluster in diff.clusters:
        if cluster.error:
            found.append(f"{cluster.cluster}: {cluster.error}")
        elif cluster.changes:
            objects = ", ".join(f"{c.ref} ({c.action})" for c in cluster.changes[:10])
            more = f" and {len(cluster.changes) - 10} more" if len(cluster.changes) > 10 else ""
            found.append(f"{cluster.cluster}: a sync would change {objects}{more}")
    return "refreshed: " + "; ".join(found)


@router.post("/{name}/rollback")
def rollback(
    request: Request,
    name: str,
    store: StoreDep,
    dispatcher: DispatcherDep,
    principal: Principal,
    _: CsrfChecked,
    revision: Text = "",
    cluster: Text = "",
) -> Response:
    try:
        body = RollbackIn(revision=revision, cluster=cluster or None)
        accepted = appops.rollback_app(name, body, store, dispatcher, principal)
    except (HTTPException, FleetError, ValueError) as e:
        return refusal(request, principal, e)
    paused = " (automated sync turned off, as Argo CD does)" if accepted.automated_paused else ""
    return _requested(
        request, name, f"rollback to {revision[:8]} requested{paused}", accepted.trace_id
    )


@router.post("/{name}/delete")
def delete(
    request: Request,
    name: str,
    store: StoreDep,
    dispatcher: DispatcherDep,
    principal: Principal,
    _: CsrfChecked,
    cascade: Flag = False,
) -> Response:
    try:
        apps.delete_app(name, store, principal, dispatcher, cascade=cascade, force=False)
    except (HTTPException, FleetError) as e:
        return refusal(request, principal, e)
    message = (
        f"app {name} is being deleted: its objects are pruned from every cluster"
        if cascade
        else f"app {name} deleted; its objects were left in the clusters"
    )
    return done(request, message, "/ui/")
