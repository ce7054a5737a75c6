"""Cascading delete of one instance: prune everything the app owns on one cluster.

`DELETE /apps/{name}` (cascade, the default) marks the app `deleting` and asks every instance's
worker for a sync with trigger `delete`. For that trigger the worker renders nothing: it plans a
prune with nothing desired (`fleet.engine.prune.plan`, so the same ownership rules hold: only
objects whose tracking annotation names this app, never opted-out ones, never Namespaces or CRDs),
executes it, then removes the app's inventory. The instance's status says `deleted`; the worker that
finds every instance deleted removes the app's record (status and history go with it).

A prune that fails is retried with the app's retry policy, like a failed sync.
"""

from __future__ import annotations

import contextlib
import dataclasses
from typing import Any

from fleet.control import backoff
from fleet.control.registry.errors import NotFound
from fleet.control.registry.instances import instance_key
from fleet.control.registry.records import AppRecord
from fleet.control.registry.syncrecords import InstanceStatus
from fleet.control.routing.pending import Intent
from fleet.engine import prune
from fleet.engine.inventory import InventoryStore
from fleet.errors import FleetError
from fleet.kube.client import KubeClient
from fleet.model import Health, ObjectRef, Outcome, SyncStatus, Trigger
from fleet.telemetry import spans as telemetry
from worker.runtime import Runtime

PRUNE_TIMEOUT = 120.0


def delete_instance(
    runtime: Runtime, app: AppRecord, cluster: str, *, intent: Intent
) -> dict[str, Any]:
    attrs = {"app": app.name, "cluster": cluster, "trigger": intent.trigger}
    with telemetry.stage("delete", **attrs) as span:
        try:
            pruned = _prune_all(runtime, runtime.kube_for(cluster), app.name, cluster)
        except FleetError as e:
            telemetry.mark_failed(span, str(e))
            return _failed(runtime, app, cluster, intent, e)
        trace_id = telemetry.trace_id_of(span)
    message = f"deleted: pruned {len(pruned)} object(s)"
    runtime.store.set_status(
        app.name,
        cluster,
        InstanceStatus(
            sync_status=SyncStatus.UNKNOWN, health=Health.MISSING, deleted=True, message=message
        ),
    )
    _remove_when_done(runtime, app)
    instance = instance_key(app.name, cluster)
    return {"instance": instance, "result": Outcome.DELETED.value, "trace_id": trace_id}


def _prune_all(runtime: Runtime, kube: KubeClient, app: str, cluster: str) -> list[ObjectRef]:
    inventories = InventoryStore(kube)
    inventory = inventories.load(app) or []
    kinds = {(e.ref.api_version, e.ref.kind) for e in inventory} | _status_kinds(
        runtime, app, cluster
    )
    labelled = prune.find_labelled(kube, app, sorted(kinds))
    live = prune.read_live(kube, inventory=inventory, labelled=labelled, desired=[])
    planned = prune.plan(app=app, inventory=inventory, labelled=labelled, desired=[], live=live)
    outcomes = prune.execute(kube, planned, timeout=PRUNE_TIMEOUT)
    inventories.delete(app)
    return [o.ref for o in outcomes]


def _status_kinds(runtime: Runtime, app: str, cluster: str) -> set[tuple[str, str]]:
    """(apiVersion, kind) of the objects the last sync reported, for a lost inventory."""
    status = runtime.store.get_status(app, cluster)
    resources = status.resources if status is not None else ()
    kinds = {(r.ref.api_version, r.kind) for r in resources}
    return {k for k in kinds if k[0] and k[1]}


def _failed(
    runtime: Runtime, app: AppRecord, cluster: str, intent: Intent, error: FleetError
) -> dict[str, Any]:
    message, instance = f"delete failed: {error}", instance_key(app.name, cluster)
    runtime.store.set_status(
        app.name,
        cluster,
        InstanceStatus(sync_status=SyncStatus.UNKNOWN, health=Health.UNKNOWN, message=message),
    )
    policy = app.sync_policy.retry
    if intent.attempt < policy.limit:
        wait = backoff.delay(
            intent.attempt, base=policy.backoff_s, max_delay=policy.max_backoff_s, jitter=0.1
        )
        again = dataclasses.replace(intent, trigger=Trigger.DELETE, attempt=intent.attempt + 1)
        runtime.dispatcher.defer(instance, again, delay=wait)
    return {"instance": instance, "result": Outcome.FAILED.value, "error": message}


def _remove_when_done(runtime: Runtime, app: AppRecord) -> None:
    statuses = runtime.store.log.statuses(app.name)
    clusters = runtime.store.instances(app)
    if all((found := statuses.get(c)) is not None and found.deleted for c in clusters):
        with contextlib.suppress(NotFound):  # another instance's worker removed it first
            runtime.store.delete_app(app.name, force=True)
