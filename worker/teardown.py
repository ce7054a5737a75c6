"""Cascading delete of one instance: prune everything the app owns on one cluster.

`DELETE /apps/{name}` (cascade, the default) marks the app `deleting` and asks every instance's
worker for a sync with trigger `delete`. For that trigger the worker renders nothing: it plans a
prune with nothing desired (`fleet.engine.prune.plan`, so the same ownership rules hold: only
objects whose tracking annotation names this app by uid, never opted-out ones, never Namespaces
or CRDs), checks every candidate against the project's boundaries on that cluster (one outside
them fails the delete, deleting nothing: `fleet.engine.prune.check_boundaries`), executes it,
then removes the app's inventory (never another app's of the same name). The instance's status
says `deleted`; the worker that finds every instance deleted removes the app's record (status
and history go with it). Like a sync's prune, the reads that decide and the deletes act as the
project's ServiceAccount on the cluster, if it names one (`fleet.control.policy.acting_as`); the
inventory is read and removed with the cluster's own credentials.

A prune that fails is retried with the app's retry policy, like a failed sync.

Fenced like a sync (`fleet.control.routing.leases`): under the instance's lease the guard is
asked before the prune and before each of its batches, the inventory is removed only at the
version read, with a token no newer than ours (`InventoryStore.remove`: the API server refuses
it otherwise), and the status is written only while the token is current. A holder that lost
its lease stops with `LeaseLost` and writes nothing more; the newer holder's state stays.
"""

from __future__ import annotations

import contextlib
import dataclasses

from fleet.control import backoff
from fleet.control.policy import acting_as, boundaries_for
from fleet.control.registry.errors import NotFound
from fleet.control.registry.instances import instance_key
from fleet.control.registry.records import AppRecord
from fleet.control.registry.syncrecords import InstanceStatus
from fleet.control.routing.leases import HeldLease
from fleet.control.routing.pending import Intent
from fleet.engine import prune
from fleet.engine.inventory import Inventory, InventoryStore
from fleet.engine.plan.tracking import Owner, Ownership
from fleet.errors import FleetError, LeaseLost
from fleet.kube.client import KubeClient
from fleet.kube.kubeconfig import ServiceAccount
from fleet.model import Health, ObjectRef, Outcome, SyncStatus, Trigger
from fleet.telemetry import spans as telemetry
from worker import status
from worker.runtime import Runtime
from worker.status import Answer

PRUNE_TIMEOUT = 120.0


def delete_instance(
    runtime: Runtime,
    app: AppRecord,
    cluster: str,
    *,
    intent: Intent,
    lease: HeldLease | None = None,
) -> Answer:
    """Prune everything `app` owns on `cluster`; with `lease`, fenced (LeaseLost, raised, when
    the lease is no longer ours: nothing more is written)."""
    attrs = {"app": app.name, "cluster": cluster, "trigger": intent.trigger}
    with telemetry.stage("delete", **attrs) as span:
        try:
            account = _acting_as(runtime, app, cluster)
            kube, own = runtime.kube_for(cluster, account), runtime.kube_for(cluster)
            pruned = _prune_all(runtime, (kube, own), app, cluster, lease)
        except LeaseLost:
            raise
        except FleetError as e:
            telemetry.mark_failed(span, str(e))
            return _failed(runtime, app, cluster, intent, e, lease)
        trace_id = telemetry.trace_id_of(span)
    message = f"deleted: pruned {len(pruned)} object(s)"
    deleted = InstanceStatus(
        sync_status=SyncStatus.UNKNOWN, health=Health.MISSING, deleted=True, message=message
    )
    status.put(runtime.store, app.name, cluster, deleted, lease)
    _remove_when_done(runtime, app)
    instance = instance_key(app.name, cluster)
    return Answer.of(Outcome.DELETED, instance=instance, trace_id=trace_id)


def _acting_as(runtime: Runtime, app: AppRecord, cluster: str) -> ServiceAccount | None:
    project = runtime.store.get_project(app.project)
    return acting_as(app, project, cluster, required=runtime.settings.require_impersonation)


def _prune_all(
    runtime: Runtime,
    clients: tuple[KubeClient, KubeClient],
    app: AppRecord,
    cluster: str,
    lease: HeldLease | None = None,
) -> list[ObjectRef]:
    """Prune with `clients` (acting for the app, and the cluster's own for the inventory): what
    this app owns by uid, within its project's boundaries on `cluster` (as a sync's prune),
    asking `lease` before each batch and removing the inventory at the version read."""
    kube, own = clients
    owner = Owner(app.name, app.owner_uid, app.project)
    inventories = InventoryStore(own)
    stored = inventories.read(app.name)
    mine = stored is not None and stored.belongs_to(owner, adopt_legacy=not app.uid)
    inventory = stored.entries if stored is not None and mine else []
    kinds = {(e.ref.api_version, e.ref.kind) for e in inventory} | _status_kinds(
        runtime, app.name, cluster
    )
    labelled = prune.find_labelled(kube, app.name, sorted(kinds), lister=own)
    live = prune.read_live(kube, inventory=inventory, labelled=labelled, desired=[])
    ownership = Ownership.of(owner, [e.ref for e in inventory])
    planned = prune.plan(
        ownership=ownership, inventory=inventory, labelled=labelled, desired=[], live=live
    )
    bounds = boundaries_for(runtime.store.get_project(app.project), cluster)
    fence = _fence(lease, stored)
    outcomes = prune.execute(
        kube,
        planned,
        timeout=app.sync_policy.deletion_timeout_s or PRUNE_TIMEOUT,  # the app's deadline
        boundaries=bounds,
        guard=lease,
        propagation=prune.PROPAGATIONS.get(app.sync_policy.prune_propagation, "Background"),
    )
    if mine and stored is not None:  # another app's inventory of the same name is not ours
        inventories.remove(app.name, stored=stored, fence=fence)
    return [o.ref for o in outcomes]


def _fence(lease: HeldLease | None, stored: Inventory | None) -> int:
    """The token to remove the inventory with (0: unfenced), once the guard has passed. As in a
    sync, a stored token newer than any Redis handed out (a registry restored into a new Redis)
    moves ours past it while we are the current holder (LeaseLost otherwise)."""
    if lease is None:
        return 0
    lease("prune")
    if stored is not None and stored.fence > lease.token:
        lease.advance(stored.fence)
    return lease.token


def _status_kinds(runtime: Runtime, app: str, cluster: str) -> set[tuple[str, str]]:
    """(apiVersion, kind) of the objects the last sync reported, for a lost inventory."""
    found = runtime.store.get_status(app, cluster)
    resources = found.resources if found is not None else ()
    kinds = {(r.ref.api_version, r.kind) for r in resources}
    return {k for k in kinds if k[0] and k[1]}


def _failed(
    runtime: Runtime,
    app: AppRecord,
    cluster: str,
    intent: Intent,
    error: FleetError,
    lease: HeldLease | None = None,
) -> Answer:
    message, instance = f"delete failed: {error}", instance_key(app.name, cluster)
    failed = InstanceStatus(sync_status=SyncStatus.UNKNOWN, health=Health.UNKNOWN, message=message)
    status.put(runtime.store, app.name, cluster, failed, lease)
    policy = app.sync_policy.retry
    if intent.attempt < policy.limit:
        wait = backoff.delay(
            intent.attempt, base=policy.backoff_s, max_delay=policy.max_backoff_s, jitter=0.1
        )
        again = dataclasses.replace(intent, trigger=Trigger.DELETE, attempt=intent.attempt + 1)
        runtime.dispatcher.defer(instance, again, delay=wait)
    return Answer.of(Outcome.FAILED, instance=instance, error=message)


def _remove_when_done(runtime: Runtime, app: AppRecord) -> None:
    statuses = runtime.store.log.statuses(app.name)
    clusters = runtime.store.instances(app)
    if all((found := statuses.get(c)) is not None and found.deleted for c in clusters):
        with contextlib.suppress(NotFound):  # another instance's worker removed it first
            runtime.store.delete_app(app.name, force=True)
