"""The writes a worker makes under a lease besides a sync's are fenced too (issue 12, item 1).

A cascading delete (`worker.teardown`) prunes, removes the inventory and writes the status; a
dependency wait (`worker.jobs`) writes the status message. A holder whose lease was taken over
(its fencing token is no longer the newest) must do none of these: the guard refuses the prune,
the status write is refused in Redis (`HeldLease.fenced`), and the inventory removal is refused
by the API server itself when the inventory changed since it was read (a DELETE with a
`resourceVersion` precondition). Each case has its positive twin: the current holder's write
goes through, so the refusal is the fence's and not a broken path.

Real Redis, a real cluster, a real worker (a thread) for the first sync; the stale holder is a
`Runtime` driven directly, with a lease taken over by hand as a newer worker would.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from fleet.control.registry.instances import instance_key
from fleet.control.registry.records import AppRecord
from fleet.control.registry.syncrecords import InstanceStatus
from fleet.control.routing.pending import Intent
from fleet.engine.inventory import InventoryStore
from fleet.engine.plan.tracking import Owner
from fleet.errors import LeaseLost
from fleet.model import ObjectRef, Outcome, Trigger
from tests.support.fleet import FleetEnv, settings_ref
from worker import jobs, status, teardown
from worker.runtime import Runtime

TTL = 30.0


def _take_over(fleet: FleetEnv, instance: str) -> int:
    """What a newer worker does once the old lease expired: take it with the next token."""
    fleet.redis.delete(fleet.dispatcher.leases.key(instance))
    token = fleet.dispatcher.leases.take(instance, "newer/1/x", TTL)
    assert token is not None
    return token


def _synced_app(fleet: FleetEnv, cluster: str) -> AppRecord:
    app = fleet.app_name(0)
    fleet.commit_apps([app])
    record = fleet.add_app(app, cluster, prune=True)
    fleet.worker_thread("w1")
    assert fleet.sync_and_wait(app, cluster)["result"] == "succeeded"
    return record


def _deployment(app: str) -> ObjectRef:
    return ObjectRef("apps", "v1", "Deployment", app, "web")


def test_a_stale_holders_teardown_prunes_nothing_and_writes_no_status(fleet: FleetEnv) -> None:
    cluster = sorted(fleet.clusters)[0]
    record = _synced_app(fleet, cluster)
    app, instance = record.name, instance_key(record.name, cluster)
    before = fleet.status(app, cluster)
    runtime = Runtime(fleet.settings("stale"), fleet.redis)
    delete = Intent(trigger=Trigger.DELETE)
    try:
        with (
            pytest.raises(LeaseLost),
            fleet.dispatcher.leases.held(instance, "stale/1/x", TTL) as held,
        ):
            newer = _take_over(fleet, instance)
            assert newer > held.token
            teardown.delete_instance(runtime, record, cluster, intent=delete, lease=held)
        assert fleet.live(cluster, settings_ref(app)) is not None, "the stale holder pruned"
        assert fleet.live(cluster, _deployment(app)) is not None, "the stale holder pruned"
        kube = fleet.clusters[cluster].client()
        try:
            assert InventoryStore(kube).read(app) is not None, "the stale holder removed it"
        finally:
            kube.close()
        after = fleet.status(app, cluster)
        assert not after.deleted and after.revision == before.revision
        assert fleet.store.get_app(app).name == app

        fleet.dispatcher.leases.release(instance, "newer/1/x")
        with fleet.dispatcher.leases.held(instance, "current/1/x", TTL) as current:
            answer = teardown.delete_instance(
                runtime, record, cluster, intent=delete, lease=current
            )
        assert answer.outcome == Outcome.DELETED, answer.body
        assert fleet.live(cluster, _deployment(app)) is None
    finally:
        runtime.close()


def test_the_api_server_refuses_removing_an_inventory_written_since_it_was_read(
    fleet: FleetEnv,
) -> None:
    cluster = sorted(fleet.clusters)[0]
    record = _synced_app(fleet, cluster)
    app = record.name
    kube = fleet.clusters[cluster].client()
    try:
        inventories = InventoryStore(kube)
        read = inventories.read(app)
        assert read is not None and read.fence > 0
        owner = Owner(app, record.owner_uid, record.project)
        inventories.save(owner, read.entries, fence=read.fence + 1, stored=read)  # a newer sync
        with pytest.raises(LeaseLost, match="409"):
            inventories.remove(app, stored=read, fence=read.fence)
        newest = inventories.read(app)
        assert newest is not None and newest.fence == read.fence + 1, "the newer one was removed"
        with pytest.raises(LeaseLost, match="newer"):
            inventories.remove(app, stored=newest, fence=read.fence)  # a stale token
        assert inventories.remove(app, stored=newest, fence=newest.fence)
        assert inventories.read(app) is None
    finally:
        kube.close()


def test_a_stale_holders_dependency_wait_writes_no_status(fleet: FleetEnv) -> None:
    cluster = sorted(fleet.clusters)[0]
    dependency = fleet.app_name(1)
    fleet.add_app(dependency, cluster)  # never synced: not Healthy, so the app waits
    app = fleet.app_name(2)
    fleet.store.put_app(replace(fleet.add_app(app, cluster), depends_on=(dependency,)))
    instance = instance_key(app, cluster)
    status.put(fleet.store, app, cluster, InstanceStatus(message="before"))
    runtime = Runtime(fleet.settings("stale"), fleet.redis)
    manual = Intent(trigger=Trigger.MANUAL)
    try:
        with (
            pytest.raises(LeaseLost),
            fleet.dispatcher.leases.held(instance, "stale/1/x", TTL) as held,
        ):
            _take_over(fleet, instance)
            jobs.attempt(runtime, instance, manual, lease=held)
        assert fleet.status(app, cluster).message == "before"

        fleet.dispatcher.leases.release(instance, "newer/1/x")
        with fleet.dispatcher.leases.held(instance, "current/1/x", TTL) as current:
            answer = jobs.attempt(runtime, instance, manual, lease=current)
        assert answer.outcome == Outcome.WAITING, answer.body
        assert fleet.status(app, cluster).message.startswith(f"waiting for app {dependency}")
    finally:
        runtime.close()
