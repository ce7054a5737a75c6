"""/api/v1/apps/{name}/...: sync, diff, history and rollback.

Handlers validate and enqueue; they never run the pipeline inline (the workers do). `diff`
is the one that waits: it enqueues a dry-run per instance and waits for the results, up to
the settings' `diff_timeout_s` (30 s) in all, answering 504 for instances still pending. Since it
enqueues work for the workers, a viewer may not ask for one (403), though it is a GET.

Rollback syncs at an older revision and then turns automated sync off, as Argo CD requires
(Argo refuses a rollback while auto-sync is on; we switch it off for the caller and say so in
the answer and the app's last operation). Turning `automated` back on with PUT resumes
tracking the app's own revision.
"""

from __future__ import annotations

import logging
import time
from dataclasses import replace
from datetime import UTC, datetime
from typing import Annotated, Any

from fastapi import APIRouter, Body, Depends, HTTPException, Query

from api.appschemas import RollbackIn, SyncIn
from api.auth import Principal, authorize, require_writer
from api.deps import DispatcherDep, SettingsDep, StoreDep
from api.routes import plans
from api.routes.apps import not_deleting, targets, visible_app
from api.syncs import request_syncs
from api.views import (
    Accepted,
    ClusterDiff,
    DiffView,
    HistoryView,
    RollbackAccepted,
    history_view,
)
from fleet.control.policy import blocked_reason
from fleet.control.registry.syncrecords import PREVIEW, RollbackOperation, SyncOperation
from fleet.model import Trigger

log = logging.getLogger("api.apps")
router = APIRouter(prefix="/apps", tags=["applications"], dependencies=[Depends(authorize)])


@router.post("/{name}/sync", status_code=202)
def sync_app(
    name: str,
    store: StoreDep,
    dispatcher: DispatcherDep,
    principal: Principal,
    body: Annotated[SyncIn | None, Body()] = None,
) -> Accepted:
    body = body or SyncIn()
    record = visible_app(store, principal, name)
    not_deleting(record)
    clusters = targets(store, record, body.cluster)
    reason = "" if body.dry_run else blocked_reason(record, Trigger.MANUAL, datetime.now(UTC))
    if reason:
        raise HTTPException(409, reason)
    revision = body.revision
    if not body.dry_run:  # a stored plan, a prune allowance, a project requiring a plan
        if body.plan and body.revision:
            raise HTTPException(422, "give a plan or a revision, not both: a plan has its own")
        if body.plan and body.prune is not None:
            raise HTTPException(
                422, "give a plan or prune, not both: a plan was made with the app's syncPolicy"
            )
        planned = plans.sync_gate(
            store,
            principal,
            record,
            clusters,
            plan_id=body.plan,
            allow_prune_over_budget=body.allow_prune_over_budget,
        )
        revision = planned if body.plan else body.revision
    enqueued = request_syncs(
        dispatcher,
        record,
        clusters,
        trigger=Trigger.MANUAL,
        revision=revision,
        dry_run=body.dry_run,
        prune=body.prune,
    )
    jobs = enqueued.jobs()
    store.log.set_operation(
        name,
        SyncOperation(
            revision=body.revision,
            dry_run=body.dry_run,
            by=principal.name,
            trace_id=enqueued.trace_id,
            jobs=jobs,
        ),
    )
    pruning = "" if body.prune is None else f" (prune {'on' if body.prune else 'off'})"
    log.info(
        "app %s sync%s requested by %s on %s", name, pruning, principal.name, ", ".join(clusters)
    )
    return Accepted(app=record.name, trace_id=enqueued.trace_id, jobs=jobs)


@router.get("/{name}/diff")
def diff_app(
    name: str,
    store: StoreDep,
    dispatcher: DispatcherDep,
    settings: SettingsDep,
    principal: Principal,
    cluster: str | None = None,
) -> DiffView:
    require_writer(principal, "enqueue the dry runs of a diff")
    record = visible_app(store, principal, name)
    clusters = targets(store, record, cluster)
    enqueued = request_syncs(dispatcher, record, clusters, trigger=Trigger.DIFF, dry_run=True)
    deadline = time.monotonic() + settings.diff_timeout_s
    found = []
    for target, ref in enqueued.refs:
        result = dispatcher.wait(ref, max(deadline - time.monotonic(), 0.0))
        found.append(_diff_view(target, result))
    pending = [d.cluster for d in found if d.pending]
    if pending:
        raise HTTPException(
            504, f"no diff from cluster(s) {', '.join(pending)} within {settings.diff_timeout_s:g}s"
        )
    in_sync = all(not d.changes and not d.error for d in found)
    return DiffView(app=name, trace_id=enqueued.trace_id, in_sync=in_sync, clusters=found)


def _diff_view(cluster: str, answer: dict[str, Any] | None) -> ClusterDiff:
    """One cluster's diff from its preview job's answer (None: not finished yet)."""
    return ClusterDiff.of(cluster, None if answer is None else PREVIEW.validate_python(answer))


@router.get("/{name}/history")
def app_history(
    name: str,
    store: StoreDep,
    principal: Principal,
    cluster: str | None = None,
    limit: Annotated[int, Query(ge=1, le=50)] = 50,
) -> HistoryView:
    record = visible_app(store, principal, name)
    clusters = [cluster] if cluster else store.instances(record)
    return history_view(store, name, clusters, limit)


@router.post("/{name}/rollback", status_code=202)
def rollback_app(
    name: str, body: RollbackIn, store: StoreDep, dispatcher: DispatcherDep, principal: Principal
) -> RollbackAccepted:
    record = visible_app(store, principal, name)
    not_deleting(record)
    clusters = targets(store, record, body.cluster)
    reason = blocked_reason(record, Trigger.MANUAL, datetime.now(UTC))
    if reason:
        raise HTTPException(409, reason)
    paused = record.sync_policy.automated
    if paused:
        policy = replace(record.sync_policy, automated=False)
        record = store.put_app(replace(record, sync_policy=policy), create=False)
    enqueued = request_syncs(
        dispatcher, record, clusters, trigger=Trigger.ROLLBACK, revision=body.revision
    )
    jobs = enqueued.jobs()
    store.log.set_operation(
        name,
        RollbackOperation(
            revision=body.revision,
            automated_paused=paused,
            by=principal.name,
            trace_id=enqueued.trace_id,
            jobs=jobs,
        ),
    )
    log.info("app %s rolled back to %s by %s", name, body.revision, principal.name)
    return RollbackAccepted(
        app=record.name,
        trace_id=enqueued.trace_id,
        jobs=jobs,
        revision=body.revision,
        automated_paused=paused,
    )
