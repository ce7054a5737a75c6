"""Workers against the real testbed, Redis and git over HTTP: sharding, failover, one sync at once.

Figures (syncs per second, failover time) are printed, never asserted: run with `-s` to see them.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections import Counter

from fleet.control.registry.instances import instance_key
from fleet.control.routing import membership
from fleet.control.routing.owners import OwnerMap
from fleet.control.scheduler import Scheduler
from fleet.model import ObjectRef, Trigger
from tests.support.fleet import FleetEnv, settings_ref, wait_until
from worker.journal import overlaps


def _deploy(namespace: str) -> ObjectRef:
    return ObjectRef("apps", "v1", "Deployment", namespace, "web")


def _synced_healthy(env: FleetEnv, instances: list[tuple[str, str]], revision: str = "") -> bool:
    for app, cluster in instances:
        status = env.status(app, cluster)
        if (status.sync_status, status.health) != ("Synced", "Healthy"):
            return False
        if revision and status.revision != revision:
            return False
    return True


def _spread(env: FleetEnv, count: int) -> list[tuple[str, str]]:
    clusters = sorted(env.clusters)
    return [(env.app_name(i), clusters[i % len(clusters)]) for i in range(count)]


def test_twenty_apps_over_two_workers_all_become_synced_and_healthy(fleet: FleetEnv) -> None:
    instances = _spread(fleet, 20)
    revision = fleet.commit_apps([app for app, _ in instances])
    for app, cluster in instances:
        fleet.add_app(app, cluster, automated=True)
    fleet.worker_thread("alpha")
    fleet.worker_thread("beta")
    scheduler = Scheduler(fleet.store, fleet.dispatcher)
    start = time.monotonic()
    report = scheduler.tick()
    assert sorted(report.dispatched) == sorted(instance_key(a, c) for a, c in instances)
    took = wait_until(
        lambda: _synced_healthy(fleet, instances, revision), timeout=240, what="20 apps synced"
    )
    print(f"\n20 apps on 2 workers: {took:.1f}s, {20 / took:.2f} syncs/s")
    assert time.monotonic() - start >= took
    for app, cluster in instances:
        assert fleet.live(cluster, settings_ref(app))["data"] == {"k": "v1"}
        assert fleet.live(cluster, _deploy(app))["spec"]["replicas"] == 1
        seen = {r.kind: r for r in fleet.status(app, cluster).resources}
        assert seen["Deployment"].message == "1 of 1 replicas available"
    owners = OwnerMap(fleet.redis, prefix=fleet.prefix).current()
    entries = fleet.entries()
    assert Counter(e.worker for e in entries) == Counter(owners.values())
    assert all(owners[e.instance] == e.worker for e in entries)
    assert set(owners.values()) == {"alpha", "beta"}


def test_a_killed_workers_apps_move_to_the_survivor_and_sync(fleet: FleetEnv) -> None:
    instances = _spread(fleet, 8)
    names = [app for app, _ in instances]
    first = fleet.commit_apps(names)
    for app, cluster in instances:
        fleet.add_app(app, cluster, automated=True)
    victim = fleet.worker_process("victim")
    fleet.worker_process("survivor")
    wait_until(
        lambda: len(membership.live_workers(fleet.redis, prefix=fleet.prefix)) == 2,
        timeout=30,
        what="two workers registered",
    )
    scheduler = Scheduler(fleet.store, fleet.dispatcher, period=0.5, recover_grace=2.0)
    scheduler.start()
    try:
        wait_until(lambda: _synced_healthy(fleet, instances, first), timeout=180, what="synced")
        owners = OwnerMap(fleet.redis, prefix=fleet.prefix).current()
        moved = sorted(i for i, w in owners.items() if w == "victim")
        assert moved, "the hash ring gave the victim no instance"
        second = fleet.commit_apps(names, data="k: v2")
        for app, cluster in instances:
            fleet.dispatcher.request_sync(app, cluster, trigger=Trigger.MANUAL)
        os.kill(victim.pid, signal.SIGKILL)
        killed = time.monotonic()
        victim.wait(timeout=10)
        states = Counter(_state(fleet, instance) for instance in moved)
        took = wait_until(
            lambda: _synced_healthy(fleet, instances, second), timeout=180, what="failover"
        )
    finally:
        scheduler.stop()
    print(f"\nkilled worker: {len(moved)} instances ({dict(states)}) converged in {took:.1f}s")
    assert time.monotonic() - killed >= took
    assert membership.live_workers(fleet.redis, prefix=fleet.prefix) == ["survivor"]
    for instance in moved:
        app, cluster = instance.split("@")
        assert fleet.live(cluster, settings_ref(app))["data"] == {"k": "v2"}
        last = fleet.status(app, cluster).last_sync
        assert last is not None and last.worker == "survivor", fleet.worker_log("survivor")


def test_one_app_never_syncs_concurrently_and_its_triggers_merge(fleet: FleetEnv) -> None:
    app, cluster = _spread(fleet, 1)[0]
    fleet.commit_apps([app])
    fleet.add_app(app, cluster)
    fleet.worker_thread("alpha")
    fleet.worker_thread("beta")
    instance = instance_key(app, cluster)
    refs = []
    lock = threading.Lock()

    def trigger(count: int) -> None:
        for _ in range(count):
            ref = fleet.dispatcher.request_sync(app, cluster, trigger=Trigger.MANUAL)
            with lock:
                refs.append(ref)
            time.sleep(0.05)

    threads = [threading.Thread(target=trigger, args=(10,)) for _ in range(6)]
    for t in threads:
        t.start()
    time.sleep(0.5)
    joined = fleet.worker_thread("gamma")  # the shard map changes while syncs run
    for t in threads:
        t.join()
    wait_until(fleet.idle, timeout=120, what="every pending sync to finish")
    entries = fleet.entries(instance)
    assert overlaps(entries) == []
    assert len(refs) == 60
    assert sum(r.merged for r in refs) > 0
    assert len(entries) < len(refs)
    assert sum(e.requests for e in entries) == len(refs)
    assert _synced_healthy(fleet, [(app, cluster)])
    assert joined.process.runtime.name == "gamma"


def _state(fleet: FleetEnv, instance: str) -> str:
    pending = fleet.dispatcher.pending.get(instance)
    return pending.state if pending else "done"


LOAD_BALANCER = """apiVersion: v1
kind: Service
metadata:
  name: front
spec:
  type: LoadBalancer
  selector: {app: front}
  ports: [{port: 80}]
"""
AFTER_IT = """apiVersion: v1
kind: ConfigMap
metadata:
  name: after
  annotations: {gitfleet.io/sync-wave: "1"}
data: {k: v}
"""


def test_a_worker_runs_another_sync_while_one_waits_on_a_wave_gate(fleet: FleetEnv) -> None:
    cluster = sorted(fleet.clusters)[0]
    slow, quick = fleet.app_name(0), fleet.app_name(1)
    fleet.commit_apps([quick])
    fleet.repo.commit({f"apps/{slow}/svc.yaml": LOAD_BALANCER, f"apps/{slow}/cm.yaml": AFTER_IT})
    fleet.add_app(slow, cluster)
    fleet.add_app(quick, cluster)
    fleet.worker_thread("alpha", concurrency=2)
    waiting = fleet.dispatcher.request_sync(slow, cluster, trigger=Trigger.MANUAL)
    service = ObjectRef("", "v1", "Service", slow, "front")
    wait_until(lambda: fleet.live(cluster, service), timeout=60, what="the load balancer")

    # the slow sync now waits for a load-balancer address that only this test can give
    done = fleet.dispatcher.wait(
        fleet.dispatcher.request_sync(quick, cluster, trigger=Trigger.MANUAL), 60
    )
    assert done is not None and done["result"] == "succeeded"
    assert fleet.store.get_status(slow, cluster) is None  # still in its wave gate: no status yet

    kube = fleet.clusters[cluster].client()
    live = fleet.live(cluster, service)
    assert live is not None
    kube.patch_status(live, {"loadBalancer": {"ingress": [{"ip": "203.0.113.7"}]}})
    finished = fleet.dispatcher.wait(waiting, 60)
    assert finished is not None and finished["result"] == "succeeded"
    assert fleet.live(cluster, ObjectRef("", "v1", "ConfigMap", slow, "after")) is not None
    kube.close()
