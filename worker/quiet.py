"""Quiet periodic checks: a periodic sync of an instance nothing has touched costs no API call.

An interval or webhook sync is skipped, with the status saying when it was checked, when all
hold: the last sync succeeded Synced and Healthy; the worker's watches of every kind that sync
declared have run without a gap since before it started and no event touched the instance's
objects after its start; and the desired state's fingerprint (git tree id of the app path,
renderer, parameters, request knobs: stages 1 and 2, which talk only to git) is the one that
sync recorded. Anything else runs the full sync, which then re-establishes the baseline. This
is how Argo CD answers a reconcile from its watch cache, and how a push to a monorepo costs one
full sync (the app whose path changed) instead of one per app on the repository. A manual,
rollback or self-heal sync always runs in full.

Interval requests are judged with these same conditions (`loud`, `same`) in batches, without
an rq job each (`worker.quietbatch`); this module's `unchanged` answers the others that reach
a sync job (webhooks, and the interval requests a batch handed to the normal path).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from datetime import UTC, datetime

from fleet.control.registry.instances import split_instance
from fleet.control.registry.syncrecords import InstanceStatus, SyncRecord
from fleet.control.routing.leases import HeldLease
from fleet.engine import sync
from fleet.engine.contract import SyncRequest
from fleet.errors import FleetError
from fleet.model import Health, Outcome, SyncStatus, Trigger
from fleet.telemetry import spans as telemetry
from worker.runtime import Runtime
from worker.status import Answer

log = logging.getLogger("gitfleet.quiet")

QUIET_TRIGGERS = frozenset(t for t in Trigger if t.may_be_quiet)
PERIODIC_TRIGGERS = frozenset({Trigger.INTERVAL})
FETCH_MAX_AGE = 10.0  # seconds: one git fetch per repository per period, not one per app


def periodic(request: SyncRequest) -> SyncRequest:
    """A periodic sync may reuse a recent fetch of its repository."""
    if request.trigger in PERIODIC_TRIGGERS:
        return dataclasses.replace(request, fetch_max_age=FETCH_MAX_AGE)
    return request


def unchanged(
    runtime: Runtime,
    instance: str,
    trigger: Trigger,
    request: Callable[[], SyncRequest],
    *,
    pinned: bool = False,
) -> sync.Desired | None:
    """The desired state when the periodic sync of `instance` would find nothing to do (see
    module doc); None when it must run (the reason is logged at debug level). `request` builds
    the sync's request (FleetError: not quiet); it is called only once the status and the
    watches leave the desired state as the one thing to compare, so the first sync of an
    instance, which has no status yet, builds none here. `pinned`: the request's revision is
    a rollout's pin, which the last sync must have run (`same`)."""
    desired, reason = _check(runtime, instance, trigger, request, pinned)
    if desired is None:
        log.debug("instance=%s full sync: %s", instance, reason)
    return desired


def _check(
    runtime: Runtime,
    instance: str,
    trigger: Trigger,
    request: Callable[[], SyncRequest],
    pinned: bool,
) -> tuple[sync.Desired | None, str]:
    if trigger not in QUIET_TRIGGERS:
        return None, "not a periodic trigger"
    app, cluster = split_instance(instance)
    status = runtime.store.get_status(app, cluster)
    why = loud(runtime, instance, status)
    if why or status is None or status.last_sync is None:
        return None, why
    try:
        built = periodic(request())
        desired = sync.desired_state(built, caches=runtime.caches)
    except FleetError as e:
        return None, f"the desired state cannot be read: {e}"
    return same(desired, status.last_sync, pinned=built.revision if pinned else "")


def loud(runtime: Runtime, instance: str, status: InstanceStatus | None) -> str:
    """Why `instance`, with `status`, is not quiet as far as its last sync and the worker's
    watches tell ("" when it is: the desired state is the one thing left to compare)."""
    if runtime.watcher is None:
        return "no watches"
    last = status.last_sync if status is not None else None
    if last is None or last.started is None or not _was_clean(last):
        return "the last sync was not a clean Synced and Healthy one"
    return runtime.watcher.not_quiet_since(instance, _kinds(last), last.started.timestamp())


def same(
    desired: sync.Desired, last: SyncRecord, *, pinned: str = ""
) -> tuple[sync.Desired | None, str]:
    """`desired` when it is what `last` synced; else None and why. `pinned` is the revision a
    rollout pins the instance to ("" none; a branch while the rollout has pinned nothing yet,
    which is not a commit and does not count): when the last sync did not run it, the sync runs in
    full even if the app's files are the same at both, so the instance's status and history
    say it runs that commit (a rollout step judges exactly that). Any other revision, a branch
    or a pushed commit, is quiet when the app's files did not change: a push to a monorepo
    costs one full sync, of the app it touched."""
    if desired.fingerprint != last.fingerprint:
        return None, "the desired state changed"
    if pinned and pinned == desired.revision and pinned != last.revision:
        return None, f"pinned to {pinned[:12]}; the last sync ran {last.revision[:12]}"
    return desired, ""


def _was_clean(last: SyncRecord) -> bool:
    return (
        last.result == Outcome.SUCCEEDED
        and last.sync_status == SyncStatus.SYNCED
        and last.health == Health.HEALTHY
        and bool(last.fingerprint)
    )


def _kinds(last: SyncRecord) -> set[tuple[str, str]]:
    return {(r.ref.api_version, r.kind) for r in last.resources if r.declared}


def write_checked(
    runtime: Runtime, app: str, cluster: str, lease: HeldLease | None = None
) -> Answer:
    """Note the quiet check in the status (no history entry: nothing happened); with `lease`,
    only while its fencing token is current (`HeldLease.fenced`: LeaseLost otherwise). The
    check is the request's `gitfleet.sync` span (outcome unchanged), so its trace ends too."""
    with telemetry.stage("sync", app=app, cluster=cluster, outcome=Outcome.UNCHANGED, quiet=True):
        status = runtime.store.get_status(app, cluster) or InstanceStatus()
        stamp = datetime.now(UTC)
        checked = dataclasses.replace(status, checked=stamp)
        if lease is None:
            runtime.store.set_status(app, cluster, checked)
        else:
            lease.fenced(lambda pipe: runtime.store.log.stage_status(pipe, app, cluster, checked))
    return Answer.of(Outcome.UNCHANGED, app=app, cluster=cluster, checked=stamp.isoformat())
