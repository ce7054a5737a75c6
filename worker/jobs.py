"""The job functions a worker runs: one sync of one instance, and a read-only preview (diff).

`sync_job` is the whole life of one pending sync (`fleet.control.routing.pending`), in order:

1. claim it: a stale job (superseded, or moved to another worker) does nothing;
2. join the trace of the request that caused it: the W3C context travels in the pending sync,
   so the engine's `gitfleet.sync` span is a child of the API's (or scheduler's) span;
3. hold the instance's lease for everything that follows, so one instance never syncs twice at
   once, also while the shard map changes; a busy lease defers the sync by a second;
4. load app, project and cluster; a sync window that blocks this trigger records a skip with
   the window's reason; a dependency not Healthy on every cluster defers with backoff;
5. run the engine, write status and history; a failed sync is retried with exponential
   backoff (`fleet.control.backoff.delay`) up to the app's retry limit, keeping its trigger;
6. finish the pending sync, which enqueues exactly one follow-up if triggers came meanwhile.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from datetime import UTC, datetime
from typing import Any

from opentelemetry import context, propagate
from redis import Redis
from redis.client import Pipeline
from rq import get_current_job

from fleet.control import backoff, plans
from fleet.control.policy import blocked_reason, check_source, request_for
from fleet.control.pushes import SyncedAt, spec_of
from fleet.control.registry.errors import NotFound
from fleet.control.registry.instances import instance_key, split_instance
from fleet.control.registry.records import AppRecord, ProjectRecord
from fleet.control.registry.repos import normalize_repo
from fleet.control.registry.syncrecords import SyncRecord
from fleet.control.rollouts.state import RolloutStore
from fleet.control.routing.leases import HeldLease, LeaseBusy
from fleet.control.routing.pending import Intent, Pending
from fleet.engine import sync
from fleet.engine.contract import SyncRequest, SyncResult
from fleet.engine.source.cache import GitCredentials
from fleet.engine.sync import Desired
from fleet.errors import FleetError, LeaseLost
from fleet.kube.client import KubeClient
from fleet.model import Health, Outcome, SyncStatus, Trigger
from fleet.telemetry import spans as telemetry
from worker import quiet, status, supersede, teardown
from worker.journal import Entry
from worker.runtime import HandBack, Runtime, current
from worker.status import Answer

log = logging.getLogger("gitfleet.worker")

LEASE_BUSY_DELAY = 1.0
DEPENDENCY_BASE, DEPENDENCY_MAX = 2.0, 30.0
# A stored plan that moved, a prune over budget: a retry would fail the same way (or, for a
# plan taken once, sync without it), so they wait for a person.
WAITS_FOR_A_PERSON = frozenset({"plan", "prune-budget"})

JobAnswer = dict[str, Any]
"""What a job returns to rq, JSON-ready (the API's diff and the tests read it through
`Dispatcher.wait`): a sync job its `Answer.body`; a preview the engine's `SyncResult.to_json()`,
or the error that stopped it, which the API reads as a `PreviewRecord`."""


def sync_job(instance: str) -> JobAnswer:
    """Run the pending sync of `instance` (rq job function)."""
    runtime, job_id = current(), _job_id()
    claim = runtime.dispatcher.claim(instance, job_id, worker=runtime.name)
    if claim is None:
        return Answer.of(Outcome.SUPERSEDED, instance=instance).body
    token = context.attach(propagate.extract(claim.intent.carrier))
    handed = False
    try:
        return _leased(runtime, instance, job_id, claim).body
    except HandBack:  # the worker is draining and its time is up: another worker runs it
        handed = True
        moved = runtime.dispatcher.hand_back(instance, job_id)
        log.warning("instance=%s sync handed back (worker stopping): requeued=%s", instance, moved)
        return Answer.of(Outcome.DEFERRED, instance=instance, message="handed back").body
    except (SystemExit, KeyboardInterrupt):  # a cold shutdown mid-sync: hand it back too
        handed = True
        runtime.dispatcher.hand_back(instance, job_id)
        raise
    finally:
        context.detach(token)
        if not handed:
            runtime.dispatcher.finish(instance, job_id, fallback_queue=claim.queue)


def preview_job(instance: str, intent_json: str) -> JobAnswer:
    """What a sync of `instance` would change, without writing anything (rq job function)."""
    runtime, intent = current(), Intent.from_json(intent_json)
    app_name, cluster = split_instance(instance)
    token = context.attach(propagate.extract(intent.carrier))
    try:
        runtime.reads.refresh()
        app, project = _load(runtime, app_name, cluster)
        request = _request(runtime, app, project, cluster, intent, dry_run=True)
        kube, own = _clients(runtime, cluster, request)
        result = sync.run(request, kube=kube, caches=runtime.caches, own=own)
        return {**result.to_json(), "cluster": cluster}
    except FleetError as e:
        return {"app": app_name, "cluster": cluster, "error": str(e), "resources": []}
    finally:
        context.detach(token)


def _job_id() -> str:
    job = get_current_job()
    if job is None:
        raise RuntimeError("sync_job runs inside an rq job")
    return str(job.id)


def _leased(runtime: Runtime, instance: str, job_id: str, claim: Pending) -> Answer:
    try:
        with runtime.leases.held(instance, runtime.holder, ttl=runtime.settings.lease_ttl) as held:
            return _journaled(runtime, instance, job_id, claim, held)
    except LeaseBusy:
        runtime.dispatcher.defer(instance, claim.intent, delay=LEASE_BUSY_DELAY)
        return Answer.of(Outcome.DEFERRED, instance=instance, message="lease busy")
    except LeaseLost as e:
        log.error("instance=%s lease lost during the sync: %s", instance, e)
        return Answer.of(Outcome.FAILED, instance=instance, error=str(e))


def _journaled(
    runtime: Runtime, instance: str, job_id: str, claim: Pending, lease: HeldLease
) -> Answer:
    start = time.time()
    answer = attempt(
        runtime,
        instance,
        claim.intent,
        requests=claim.requests,
        lease=lease,
        deferred=claim.deferred,
    )
    entry = Entry(
        instance=instance,
        job_id=job_id,
        worker=runtime.name,
        start=start,
        end=time.time(),
        trigger=claim.intent.trigger,
        outcome=answer.outcome,
        requests=claim.requests,
    )
    runtime.journal.record(entry)
    return answer


def attempt(
    runtime: Runtime,
    instance: str,
    intent: Intent,
    *,
    requests: int = 1,
    lease: HeldLease | None = None,
    deferred: bool = True,
) -> Answer:
    """Steps 4 and 5 for one instance, with its lease (`lease`, fencing the engine, the
    teardown and every status write) held by the caller. `deferred`: a deferred sync of the
    instance may wait (False: none did when the sync was claimed, so none is cancelled)."""
    app_name, cluster = split_instance(instance)
    runtime.reads.refresh(cluster)  # this sync reads the registry as of now, or newer
    try:
        return _attempt(runtime, instance, app_name, cluster, intent, requests, lease, deferred)
    finally:
        runtime.reads.done()


def _attempt(
    runtime: Runtime,
    instance: str,
    app_name: str,
    cluster: str,
    intent: Intent,
    requests: int,
    lease: HeldLease | None,
    deferred: bool,
) -> Answer:
    try:
        app, project = _load(runtime, app_name, cluster)
    except NotFound as e:
        return Answer.of(Outcome.SKIPPED, instance=instance, message=str(e))
    if intent.trigger == Trigger.DELETE or app.deleting:
        return teardown.delete_instance(runtime, app, cluster, intent=intent, lease=lease)
    stale = _stale(runtime, app, cluster, intent)
    if stale:
        attrs = {"app": app.name, "cluster": cluster, "trigger": intent.trigger}
        with telemetry.stage("sync", **attrs, outcome=Outcome.SUPERSEDED, reason=stale):
            log.info("instance=%s %s sync dropped: %s", instance, intent.trigger, stale)
        return Answer.of(Outcome.SUPERSEDED, instance=instance, message=stale)
    reason = blocked_reason(app, intent.trigger, datetime.now(UTC)) or _plan_gate(
        runtime, app, project, cluster
    )
    if reason:
        return _skip(runtime, app, cluster, intent, reason, lease)
    waiting = waiting_for(runtime, app)
    if waiting:
        return _wait(runtime, instance, intent, waiting, lease)
    return _sync(runtime, app, project, cluster, intent, requests, lease, deferred)


def _stale(runtime: Runtime, app: AppRecord, cluster: str, intent: Intent) -> str:
    """Why this sync must not run any more ("" when it may): an automated trigger (or its
    retry) for an app whose automated sync is off, which would undo what a person pinned (a
    rollback turns automated sync off); self-heal for an app that no longer heals; a retry of
    a sync older than the instance's last one, which served it."""
    policy = app.sync_policy
    if intent.trigger.automated and not policy.automated:
        return f"automated sync of {app.name} is off"
    if intent.trigger == Trigger.SELF_HEAL and not policy.self_heal:
        return f"self-heal of {app.name} is off"
    if intent.is_retry and intent.since:
        found = runtime.store.get_status(app.name, cluster)
        last = found.last_sync if found is not None else None
        started = last.started if last is not None else None
        if started is not None and started.timestamp() > intent.since + 0.001:
            return "a newer sync already ran"
    return ""


def _plan_gate(runtime: Runtime, app: AppRecord, project: ProjectRecord, cluster: str) -> str:
    """Why the project's plan rule holds this sync back ("" when it does not): a cluster that
    requires an approved plan, and no approved plan queued for the instance."""
    if not plans.requires_plan(project, cluster):
        return ""
    store = plans.PlanStore(runtime.redis, prefix=runtime.settings.prefix)
    plan_id = store.queued_run(instance_key(app.name, cluster), app_uid=app.owner_uid)
    if not plan_id:
        return plans.required_reason(app.name, project, cluster)
    try:
        plan = store.get(plan_id)
    except plans.PlanNotFound as e:
        return f"{plans.required_reason(app.name, project, cluster)} ({e})"
    if not plan.approved:
        return f"waiting for an approved plan: plan {plan_id} is not approved yet"
    return ""


def _planned(runtime: Runtime, app: AppRecord, cluster: str, request: SyncRequest) -> SyncRequest:
    """`request` with the plan queued for the instance and a one-time prune allowance, each
    taken once (`fleet.control.plans`)."""
    store = plans.PlanStore(runtime.redis, prefix=runtime.settings.prefix)
    instance = instance_key(app.name, cluster)
    plan_id, prune_allowed = store.take_both(instance, app_uid=app.owner_uid)
    if plan_id:
        check = plans.check_for(store.get(plan_id), cluster)
        request = dataclasses.replace(request, plan_check=check)
    if prune_allowed:
        request = dataclasses.replace(request, allow_prune_over_budget=True)
    return request


def _load(runtime: Runtime, app_name: str, cluster: str) -> tuple[AppRecord, ProjectRecord]:
    reads = runtime.reads
    app = reads.get_app(app_name)
    if cluster not in reads.instances(app):
        raise NotFound(f"app {app_name} no longer deploys to cluster {cluster}")
    return app, reads.get_project(app.project)


def waiting_for(runtime: Runtime, app: AppRecord) -> str:
    """What blocks `app` on its dependencies: every instance of each must be Healthy."""
    for name in app.depends_on:
        try:
            dependency = runtime.reads.get_app(name)
        except NotFound:
            return f"waiting for app {name}: it is not registered"
        clusters = runtime.reads.instances(dependency)
        if not clusters:
            return f"waiting for app {name}: it targets no registered cluster"
        for cluster in clusters:
            found = runtime.store.get_status(name, cluster)
            health = found.health if found is not None else Health.UNKNOWN
            if health != Health.HEALTHY:
                return f"waiting for app {name}: {name}@{cluster} is {health}"
    return ""


def _skip(
    runtime: Runtime,
    app: AppRecord,
    cluster: str,
    intent: Intent,
    reason: str,
    lease: HeldLease | None = None,
) -> Answer:
    attrs = {"app": app.name, "cluster": cluster, "trigger": intent.trigger}
    with telemetry.stage("sync", **attrs, outcome=Outcome.SKIPPED) as span:
        trace_id = telemetry.trace_id_of(span)
    log.info("app=%s cluster=%s trace_id=%s sync skipped: %s", app.name, cluster, trace_id, reason)
    record = status.write_skipped(
        runtime.store,
        app.name,
        cluster,
        trigger=intent.trigger,
        reason=reason,
        trace_id=trace_id,
        worker=runtime.name,
        lease=lease,
    )
    return Answer.of_record(record)


def _wait(
    runtime: Runtime, instance: str, intent: Intent, waiting: str, lease: HeldLease | None
) -> Answer:
    app, cluster = split_instance(instance)
    status.note(runtime.store, app, cluster, waiting, lease)
    step = min(intent.attempt, 16)
    delay = backoff.delay(step, base=DEPENDENCY_BASE, max_delay=DEPENDENCY_MAX, jitter=0.2)
    runtime.dispatcher.defer(instance, dataclasses.replace(intent, attempt=step + 1), delay=delay)
    return Answer.of(Outcome.WAITING, instance=instance, message=waiting, retry_in_s=delay)


def _sync(
    runtime: Runtime,
    app: AppRecord,
    project: ProjectRecord,
    cluster: str,
    intent: Intent,
    requests: int,
    lease: HeldLease | None = None,
    deferred: bool = True,
) -> Answer:
    checked = None  # when the quiet check began: its fetch serves the sync (`_run_engine`)
    if intent.trigger in quiet.QUIET_TRIGGERS:
        checked = time.monotonic()
        desired = _quiet(runtime, app, project, cluster, intent)
        if desired is not None:
            synced_at = SyncedAt(desired.revision, desired.inputs, spec_of(app))
            _note_synced(runtime, app, cluster, synced_at)
            return quiet.write_checked(runtime, app.name, cluster, lease)
    instance = instance_key(app.name, cluster)
    served_by = telemetry.current_trace_id()
    if deferred:  # this sync serves them
        runtime.dispatcher.cancel_deferred(instance, served_by=served_by)
    watcher = runtime.watcher
    if watcher is not None:
        watcher.begin(instance)  # what the watches see until `declare` may be our own doing
    try:
        result = _run_engine(runtime, app, project, cluster, intent, lease, checked=checked)
        record = SyncRecord.of(
            result,
            cluster=cluster,
            trigger=intent.trigger,
            attempt=intent.attempt,
            requests=requests,
            worker=runtime.name,
        )
        synced = (
            SyncedAt(result.revision, result.inputs, spec_of(app)) if result.succeeded else None
        )

        def note(pipe: Pipeline) -> None:  # in the fenced write
            _note_synced(runtime, app, cluster, synced, pipe)

        status.write_sync(runtime.store, record, lease, app=app, also=note)
        if watcher is not None:
            watcher.declare(instance, record.resources)
    finally:
        if watcher is not None:
            watcher.end(instance)
    if result.succeeded or not deferred:  # nor any since (or, unchecked at the start, at all)
        runtime.dispatcher.cancel_deferred(instance, served_by=served_by)
    since = dataclasses.replace(intent, since=result.started.timestamp())
    retried = result.error and result.error_stage not in WAITS_FOR_A_PERSON
    retry = {"retry_in_s": _retry(runtime, app, cluster, since)} if retried else {}
    outcome = record.outcome + (f": {result.error}" if result.error else "")
    log.info(
        "app=%s cluster=%s revision=%s trace_id=%s sync %s",
        *(app.name, cluster, result.revision, result.trace_id, outcome),
    )
    return Answer.of_record(record, **retry)


def _quiet(
    runtime: Runtime, app: AppRecord, project: ProjectRecord, cluster: str, intent: Intent
) -> Desired | None:
    """The desired state when this periodic sync can be answered without the cluster."""
    instance = instance_key(app.name, cluster)
    return quiet.unchanged(
        runtime,
        instance,
        intent.trigger,
        lambda: _request(runtime, app, project, cluster, intent),
        pinned=app.rollout is not None and not intent.revision,
    )


def _note_synced(
    runtime: Runtime,
    app: AppRecord,
    cluster: str,
    at: SyncedAt | None,
    on: Redis | Pipeline | None = None,
) -> None:
    """Tell the webhook handler what this instance matches (`fleet.control.pushes`); `on`: a
    pipeline to stage it on (a sync's fenced write) instead of writing it now."""
    repo, instance = normalize_repo(app.source.repo), instance_key(app.name, cluster)
    runtime.pushes.stage_synced(on if on is not None else runtime.redis, repo, instance, at)


def _request(
    runtime: Runtime,
    app: AppRecord,
    project: ProjectRecord,
    cluster: str,
    intent: Intent,
    *,
    dry_run: bool = False,
) -> SyncRequest:
    request = request_for(
        app,
        project,
        cluster,
        trigger=intent.trigger,
        revision=intent.revision
        or pinned_revision(runtime, app, cluster, claim=not dry_run)
        or None,
        dry_run=dry_run,
        credentials=_git_credentials(runtime, app, project),
        require_impersonation=runtime.settings.require_impersonation,
        cluster_labels=runtime.reads.get_cluster(cluster).labels if app.post_build else None,
        age_key=runtime.reads.age_key_for(project.name),
        prune=intent.prune,
    )
    return dataclasses.replace(request, retry=intent.is_retry)  # a retry runs its hooks again


def pinned_revision(runtime: Runtime, app: AppRecord, cluster: str, *, claim: bool = True) -> str:
    """The revision a progressive rollout pins this instance to ("" none): a sync asked for
    without a revision syncs it, so a push reaches the cluster only with its rollout step. A
    newcomer is pinned to the stable revision (`RolloutStore.pin_for`; not by a preview, which
    `claim` False keeps from writing)."""
    if app.rollout is None:
        return ""
    store = RolloutStore(runtime.store.redis, runtime.dispatcher.prefix)
    return store.pin_for(app.name, app.uid, cluster, claim=claim)


def _git_credentials(
    runtime: Runtime, app: AppRecord, project: ProjectRecord
) -> GitCredentials | None:
    """Check the app's URL again (a record may predate a rule), then pick its credentials:
    its own, bound to that URL, or the admin's repository credentials that cover it."""
    check_source(app, project, runtime.remotes)
    return runtime.reads.git_credentials_for(app)


def _clients(runtime: Runtime, cluster: str, request: SyncRequest) -> tuple[KubeClient, KubeClient]:
    """The client acting as the request's ServiceAccount (if any), and the cluster's own (the
    same client, from one read of the cluster's settings, when it acts as nobody)."""
    own = runtime.kube_for(cluster)
    account = request.service_account
    return (own if account is None else runtime.kube_for(cluster, account)), own


def _run_engine(
    runtime: Runtime,
    app: AppRecord,
    project: ProjectRecord,
    cluster: str,
    intent: Intent,
    lease: HeldLease | None = None,
    *,
    checked: float | None = None,
) -> SyncResult:
    """`checked`: when this sync's quiet check began (monotonic), if it had one. A fetch of
    the repository begun since then (the check's own) is as fresh as one the sync would make:
    both began after the sync was requested, so a webhook's sync fetches once, not twice."""
    started = datetime.now(UTC)
    try:
        planned = _planned(runtime, app, cluster, _request(runtime, app, project, cluster, intent))
        request = dataclasses.replace(
            planned,
            guard=lease,
            # the instance's first lease: no sync ran before, so no inventory is presumed
            first_sync=lease is not None and lease.token == 1,
            # a stored plan runs its own revision to the end: no re-plan at a newer one
            newer=None if planned.plan_check else supersede.newer_requests(runtime, app, cluster),
        )
        kube, own = _clients(runtime, cluster, request)
    except FleetError as e:
        return _failed_before_engine(app, cluster, intent, e, started)
    request = dataclasses.replace(quiet.periodic(request), fetched_since=checked)
    return sync.run(request, kube=kube, caches=runtime.caches, own=own)


def _failed_before_engine(
    app: AppRecord, cluster: str, intent: Intent, error: FleetError, started: datetime
) -> SyncResult:
    """A result for a sync that could not start (credentials, cluster settings), in a span."""
    with telemetry.stage("sync", app=app.name, cluster=cluster, trigger=intent.trigger) as span:
        telemetry.mark_failed(span, str(error))
        trace_id = telemetry.trace_id_of(span)
    return SyncResult(
        app=app.name,
        revision="",
        sync_status=SyncStatus.UNKNOWN,
        health=Health.UNKNOWN,
        started=started,
        finished=datetime.now(UTC),
        trace_id=trace_id,
        error=str(error),
        error_stage=error.stage,
    )


def _retry(runtime: Runtime, app: AppRecord, cluster: str, intent: Intent) -> float | None:
    """Defer the next attempt with exponential backoff; None once the retry limit is reached."""
    policy = app.sync_policy.retry
    if intent.attempt >= policy.limit:
        return None
    wait = backoff.delay(
        intent.attempt,
        base=policy.backoff_s,
        factor=policy.factor,
        max_delay=policy.max_backoff_s,
        jitter=0.1,
    )
    again = dataclasses.replace(intent, attempt=intent.attempt + 1)
    runtime.dispatcher.defer(instance_key(app.name, cluster), again, delay=wait)
    return wait
