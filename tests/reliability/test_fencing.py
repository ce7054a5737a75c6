"""Fenced syncs (issue 12, item 1, and item 3's killed worker), with real worker processes.

Each sync holds its instance's lease with a fencing token. The scenario of the issue: worker A
starts revision 1, whose wave 0 waits on a gate (a LoadBalancer Service, Progressing until the
test, playing the cloud controller, sets its ingress); A is paused (SIGSTOP) past its lease;
revision 2 (which drops one ConfigMap and adds another) is pushed and synced by worker B; then A
resumes. A must stop at its next guard (LeaseLost) and write nothing: the cluster keeps revision
2's objects, the inventory B's token, the status revision 2.

And a worker killed with SIGKILL mid-sync: another worker finishes the sync within the lease TTL
plus ten seconds, and the two never run it at once (the journal, and a newer token).
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Iterator

import pytest

from fleet.control.registry.instances import instance_key
from fleet.control.routing import membership
from fleet.control.scheduler import Scheduler
from fleet.engine.inventory import InventoryStore
from fleet.model import ObjectRef, Trigger
from tests.support import manifests as m
from tests.support.fleet import FAST, FleetEnv, wait_until
from worker.journal import overlaps

GATE = """apiVersion: v1
kind: Service
metadata:
  name: gate
  annotations:
    gitfleet.io/sync-wave: "0"
spec:
  type: LoadBalancer
  selector: {app: none}
  ports:
    - port: 80
"""


def _wave1(name: str) -> str:
    return m.configmap(name, extra_meta='  annotations:\n    gitfleet.io/sync-wave: "1"\n')


def _configmap(namespace: str, name: str) -> ObjectRef:
    return ObjectRef("", "v1", "ConfigMap", namespace, name)


def _gate(namespace: str) -> ObjectRef:
    return ObjectRef("", "v1", "Service", namespace, "gate")


def _commit(fleet: FleetEnv, app: str, *, keep: str, drop: str = "") -> str:
    files: dict[str, str | bytes | None] = {
        f"apps/{app}/gate.yaml": GATE,
        f"apps/{app}/{keep}.yaml": _wave1(keep),
    }
    if drop:
        files[f"apps/{app}/{drop}.yaml"] = None
    return fleet.repo.commit(files)


def _open_gate(fleet: FleetEnv, cluster: str, namespace: str) -> None:
    kube = fleet.clusters[cluster].client()
    try:
        live = kube.get(_gate(namespace))
        assert live is not None
        kube.patch_status(live, {"loadBalancer": {"ingress": [{"ip": "192.0.2.10"}]}})
    finally:
        kube.close()


def _inventory_fence(fleet: FleetEnv, cluster: str, app: str) -> int:
    kube = fleet.clusters[cluster].client()
    try:
        stored = InventoryStore(kube).read(app)
        return stored.fence if stored is not None else 0
    finally:
        kube.close()


def _live_workers(fleet: FleetEnv) -> list[str]:
    return membership.live_workers(fleet.redis, prefix=fleet.prefix)


def _waiting_on_gate(fleet: FleetEnv, app: str, cluster: str, worker: str) -> bool:
    holder = fleet.dispatcher.leases.holder(instance_key(app, cluster)) or ""
    return holder.startswith(f"{worker}/") and fleet.live(cluster, _gate(app)) is not None


@pytest.fixture
def scheduler(fleet: FleetEnv) -> Iterator[Scheduler]:
    """The coordinator's loop, recovering stranded syncs quickly."""
    running = Scheduler(fleet.store, fleet.dispatcher, period=0.5, recover_grace=1.0)
    running.start()
    yield running
    running.stop()


def _resume(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        os.kill(proc.pid, signal.SIGCONT)


def test_a_paused_worker_that_resumes_writes_nothing_and_the_newer_revision_stays(
    fleet: FleetEnv, scheduler: Scheduler
) -> None:
    app = fleet.app_name(0)
    cluster = sorted(fleet.clusters)[0]
    instance = instance_key(app, cluster)
    first = _commit(fleet, app, keep="first")
    fleet.add_app(app, cluster, prune=True)
    paused = fleet.worker_process("w-a")
    wait_until(lambda: _live_workers(fleet) == ["w-a"], timeout=30, what="worker A registered")
    fleet.dispatcher.request_sync(app, cluster, trigger=Trigger.MANUAL)
    wait_until(
        lambda: _waiting_on_gate(fleet, app, cluster, "w-a"), timeout=60, what="A on the gate"
    )
    token_a = fleet.dispatcher.leases.token(instance)
    os.kill(paused.pid, signal.SIGSTOP)
    try:
        second = _commit(fleet, app, keep="second", drop="first")
        fleet.worker_process("w-b")
        fleet.dispatcher.request_sync(app, cluster, trigger=Trigger.MANUAL)
        _open_gate(fleet, cluster, app)  # B's wave 0 passes; A, paused, sees nothing
        wait_until(
            lambda: fleet.status(app, cluster).revision == second,
            timeout=FAST["lease_ttl"] + 60,
            what="B synced revision 2",
        )
        last = fleet.status(app, cluster).last_sync
        assert last is not None and last.worker == "w-b", fleet.worker_log("w-b")
        token_b = _inventory_fence(fleet, cluster, app)
        assert token_b > token_a
        assert fleet.live(cluster, _configmap(app, "second")) is not None
        assert fleet.live(cluster, _configmap(app, "first")) is None
    finally:
        _resume(paused)
    # A resumes inside its health wait: its guard stops it before wave 1, prune and record.
    wait_until(
        lambda: "lease lost during the sync" in fleet.worker_log("w-a"),
        timeout=30,
        what="A noticed its lost lease",
    )
    assert fleet.live(cluster, _configmap(app, "second")) is not None, "A pruned B's object"
    assert fleet.live(cluster, _configmap(app, "first")) is None, "A applied its old revision"
    assert _inventory_fence(fleet, cluster, app) >= token_b
    status = fleet.status(app, cluster)
    assert status.revision == second and status.sync_status == "Synced"
    history = fleet.store.history(app, cluster)
    assert all(getattr(r, "revision", "") != first for r in history), "A recorded revision 1"
    assert overlaps(fleet.entries(instance)) == []


def test_a_killed_workers_sync_is_finished_by_another_within_the_lease_ttl_plus_ten_seconds(
    fleet: FleetEnv, scheduler: Scheduler
) -> None:
    app = fleet.app_name(0)
    cluster = sorted(fleet.clusters)[0]
    instance = instance_key(app, cluster)
    revision = _commit(fleet, app, keep="first")
    fleet.add_app(app, cluster, prune=True)
    victim = fleet.worker_process("w-victim")
    wait_until(lambda: _live_workers(fleet) == ["w-victim"], timeout=30, what="victim live")
    fleet.dispatcher.request_sync(app, cluster, trigger=Trigger.MANUAL)
    wait_until(
        lambda: _waiting_on_gate(fleet, app, cluster, "w-victim"), timeout=60, what="on the gate"
    )
    token_victim = fleet.dispatcher.leases.token(instance)
    fleet.worker_process("w-rescuer")
    wait_until(lambda: len(_live_workers(fleet)) == 2, timeout=30, what="rescuer live")
    os.kill(victim.pid, signal.SIGKILL)
    killed = time.monotonic()
    victim.wait(timeout=10)
    _open_gate(fleet, cluster, app)

    def finished() -> bool:
        status = fleet.status(app, cluster)
        return status.revision == revision and status.sync_status == "Synced"

    took = wait_until(finished, timeout=FAST["lease_ttl"] + 10, what="the rescuer finished")
    print(f"\nSIGKILL mid-sync: finished by another worker {took:.1f}s after the kill")
    assert time.monotonic() - killed <= FAST["lease_ttl"] + 10
    last = fleet.status(app, cluster).last_sync
    assert last is not None and last.worker == "w-rescuer"
    assert _inventory_fence(fleet, cluster, app) > token_victim
    assert fleet.live(cluster, _configmap(app, "first")) is not None
    assert overlaps(fleet.entries(instance)) == []
