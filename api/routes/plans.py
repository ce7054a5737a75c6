"""Sync plans, suspend and resume (`fleet.control.plans`).

    POST /api/v1/apps/{name}/plans           compute and store a plan (dry runs on the workers)
    GET  /api/v1/plans/{id}                  a stored plan
    POST /api/v1/plans/{id}/approve          approve it (a writer of the app's project other
                                             than the token that made it: four eyes)
    POST /api/v1/apps/{name}/suspend         no automated sync until resumed
    POST /api/v1/apps/{name}/resume

Making a plan waits for the dry runs like a diff does (the settings' `diff_timeout_s`, 504 for
clusters that did not answer). `sync_gate` is what POST /apps/{name}/sync asks before it
enqueues: a plan to run (queued per instance and app uid for the worker), a one-time prune
allowance (likewise), and the project's rule requiring an approved plan for chosen clusters. A
plan is refused for an app other than the one it was made for: another name, or an earlier app
of the same name (another uid), or the same app since moved to another project.
"""

from __future__ import annotations

import logging
import time
from dataclasses import replace
from typing import Annotated, Any

from fastapi import APIRouter, Body, Depends, HTTPException
from pydantic import Field

from api.auth import Principal, authorize, require_project, require_writer
from api.deps import DispatcherDep, SettingsDep, StoreDep
from api.routes.apps import not_deleting, not_generated, targets, visible_app
from api.schemas import ApiModel
from api.syncs import request_syncs
from fleet.control import plans
from fleet.control.policy import suspended_reason
from fleet.control.registry.records import AppRecord, TokenRecord
from fleet.control.registry.store import Store
from fleet.control.registry.syncrecords import InstanceStatus
from fleet.model import Trigger

log = logging.getLogger("api.plans")
router = APIRouter(tags=["plans"], dependencies=[Depends(authorize)])


class PlanIn(ApiModel):
    revision: str | None = Field(default=None, min_length=1)
    cluster: str | None = None


class PlannedChangeView(ApiModel):
    group: str = ""
    version: str = ""
    kind: str
    namespace: str = ""
    name: str
    wave: int = 0
    action: str
    fields: list[str] = Field(default_factory=list)
    message: str = ""


class ClusterPlanView(ApiModel):
    cluster: str
    revision: str
    digest: str
    error: str = ""
    message: str = ""
    changes: list[PlannedChangeView]


class PlanView(ApiModel):
    id: str
    app: str
    project: str
    requested_revision: str
    created: str
    by: str
    created_by: str
    app_uid: str
    approved: bool
    approved_by: str = ""
    approved_at: str = ""
    clusters: list[ClusterPlanView]

    @classmethod
    def of(cls, plan: plans.StoredPlan) -> PlanView:
        return cls(
            id=plan.id,
            app=plan.app,
            project=plan.project,
            requested_revision=plan.requested_revision,
            created=plan.created,
            by=plan.by,
            created_by=plan.maker,
            app_uid=plan.app_uid,
            approved=plan.approved,
            approved_by=plan.approved_by,
            approved_at=plan.approved_at,
            clusters=[
                ClusterPlanView(
                    cluster=c.cluster,
                    revision=c.revision,
                    digest=c.digest,
                    error=c.error,
                    message=c.message,
                    changes=[PlannedChangeView.model_validate(x) for x in c.changes],
                )
                for c in plan.clusters
            ],
        )


def plan_store(store: Store) -> plans.PlanStore:
    return plans.PlanStore(store.redis, prefix=store.keys.p)


def _get_plan(store: Store, plan_id: str) -> plans.StoredPlan:
    try:
        return plan_store(store).get(plan_id)
    except plans.PlanNotFound as e:
        raise HTTPException(404, str(e)) from None


@router.post("/apps/{name}/plans", status_code=201)
def make_plan(
    name: str,
    store: StoreDep,
    dispatcher: DispatcherDep,
    settings: SettingsDep,
    principal: Principal,
    body: Annotated[PlanIn | None, Body()] = None,
) -> PlanView:
    body = body or PlanIn()
    require_writer(principal, "make a plan (it enqueues dry runs)")
    record = visible_app(store, principal, name)
    not_deleting(record)
    clusters = targets(store, record, body.cluster)
    # judged as the person's sync that will run it (`Trigger.by_person`: hooks run, objects
    # with self-heal paused are applied), so an unchanged cluster gives the same digest
    enqueued = request_syncs(
        dispatcher, record, clusters, trigger=Trigger.MANUAL, revision=body.revision, dry_run=True
    )
    deadline = time.monotonic() + settings.diff_timeout_s
    found = []
    for cluster, ref in enqueued.refs:
        answer = dispatcher.wait(ref, max(deadline - time.monotonic(), 0.0))
        if answer is None:
            raise HTTPException(
                504, f"no plan from cluster {cluster} within {settings.diff_timeout_s:g}s"
            )
        found.append(_cluster_plan(cluster, answer))
    plan = plans.StoredPlan(
        id=plans.new_id(),
        app=record.name,
        project=record.project,
        requested_revision=body.revision or "",
        clusters=tuple(found),
        created=plans.now(),
        by=principal.name,
        created_by=principal.name,
        app_uid=record.owner_uid,
    )
    plan_store(store).save(plan)
    log.info("app %s plan %s made by %s", name, plan.id, principal.name)
    return PlanView.of(plan)


def _cluster_plan(cluster: str, answer: dict[str, Any]) -> plans.ClusterPlan:
    error = str(answer.get("error") or "")
    return plans.ClusterPlan(
        cluster=cluster,
        revision=str(answer.get("revision") or ""),
        digest="" if error else str(answer.get("plan_digest") or ""),
        changes=tuple(answer.get("plan") or ()),
        error=error,
        message=str(answer.get("message") or ""),
    )


@router.get("/plans/{plan_id}")
def get_plan(plan_id: str, store: StoreDep, principal: Principal) -> PlanView:
    plan = _get_plan(store, plan_id)
    require_project(principal, plan.project)
    return PlanView.of(plan)


@router.post("/plans/{plan_id}/approve")
def approve_plan(plan_id: str, store: StoreDep, principal: Principal) -> PlanView:
    plan = _get_plan(store, plan_id)
    require_project(principal, plan.project)
    require_writer(principal, "approve a plan")
    failed = [c.cluster for c in plan.clusters if c.error or not c.digest]
    if failed:
        raise HTTPException(
            409, f"plan {plan_id} failed on cluster(s) {', '.join(failed)}: cannot approve it"
        )
    try:
        approved = plan_store(store).approve(plan_id, principal.name)
    except plans.SelfApproval as e:
        raise HTTPException(403, str(e)) from None
    log.info("plan %s of app %s approved by %s", plan_id, plan.app, principal.name)
    return PlanView.of(approved)


def sync_gate(
    store: Store,
    principal: TokenRecord,
    record: AppRecord,
    clusters: list[str],
    *,
    plan_id: str | None,
    allow_prune_over_budget: bool,
) -> str | None:
    """Before a manual sync is enqueued: check and queue the plan it runs (returning the
    revision to sync at), allow one prune over budget, and refuse a cluster that requires an
    approved plan when none is given (409)."""
    store_plans = plan_store(store)
    project = store.get_project(record.project)
    revision: str | None = None
    if plan_id:
        plan = _get_plan(store, plan_id)
        if plan.app != record.name:
            raise HTTPException(
                409, f"plan {plan_id} is a plan of app {plan.app}, not {record.name}"
            )
        if plan.app_uid != record.owner_uid:
            raise HTTPException(
                409,
                f"plan {plan_id} was made for an earlier app named {record.name} (deleted and "
                f"created again since, or the plan predates app uids): make a new plan with "
                f"`gitfleet app plan {record.name}`",
            )
        if plan.project != record.project:
            raise HTTPException(
                409,
                f"plan {plan_id} was made in project {plan.project}, and app {record.name} is "
                f"in project {record.project} now: make a new plan with `gitfleet app plan "
                f"{record.name}`",
            )
        missing = [c for c in clusters if plan.on(c) is None]
        if missing:
            raise HTTPException(
                409, f"plan {plan_id} has no plan for cluster(s) {', '.join(missing)}"
            )
        broken = [c for c in clusters if (plan.on(c) or plans.ClusterPlan(c)).error]
        if broken:
            raise HTTPException(409, f"plan {plan_id} failed on cluster(s) {', '.join(broken)}")
        needs = [c for c in clusters if plans.requires_plan(project, c)]
        if needs and not plan.approved:
            raise HTTPException(
                409,
                f"plan {plan_id} is not approved and project {project.name} requires an "
                f"approved plan for cluster(s) {', '.join(needs)}: `gitfleet app plan approve "
                f"{plan_id}`",
            )
        revision = plan.requested_revision or None
    else:
        needs = [c for c in clusters if plans.requires_plan(project, c)]
        if needs:
            raise HTTPException(409, plans.required_reason(record.name, project, needs[0]))
    for cluster in clusters:
        instance = f"{record.name}@{cluster}"
        if plan_id:
            store_plans.queue_run(instance, plan_id, app_uid=record.owner_uid)
        if allow_prune_over_budget:
            require_writer(principal, "allow a prune over budget")
            store_plans.allow_prune(instance, app_uid=record.owner_uid)
    return revision


class SuspendView(ApiModel):
    app: str
    suspended: bool
    message: str


@router.post("/apps/{name}/suspend")
def suspend_app(name: str, store: StoreDep, principal: Principal) -> SuspendView:
    return _set_suspended(store, principal, name, suspended=True)


@router.post("/apps/{name}/resume")
def resume_app(name: str, store: StoreDep, principal: Principal) -> SuspendView:
    return _set_suspended(store, principal, name, suspended=False)


def _set_suspended(
    store: Store, principal: TokenRecord, name: str, *, suspended: bool
) -> SuspendView:
    require_writer(principal, "suspend or resume an app")
    record = visible_app(store, principal, name)
    not_generated(store, record, "suspend or resume")  # its set would undo it: suspend its template
    if record.sync_policy.suspended != suspended:
        policy = replace(record.sync_policy, suspended=suspended)
        record = store.put_app(replace(record, sync_policy=policy), create=False)
    reason = suspended_reason(name)
    for cluster in store.instances(record):  # the status says so at once
        status = store.get_status(name, cluster) or InstanceStatus()
        message = reason if suspended else ("" if status.message == reason else status.message)
        if status.message != message:
            store.set_status(name, cluster, replace(status, message=message))
    verb = "suspended" if suspended else "resumed"
    log.info("app %s %s by %s", name, verb, principal.name)
    text = reason if suspended else f"app {name} resumed: automated syncs run again"
    return SuspendView(app=name, suspended=suspended, message=text)
