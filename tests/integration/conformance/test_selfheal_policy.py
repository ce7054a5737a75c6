"""Self-heal only for automated apps, as Argo CD's `automated.selfHeal`; a rollback stays pinned.

An app with self-heal on but automated sync off has its drift reported (the status names the
field and the manager, and says OutOfSync) and left in place. A rollback turns automated sync
off, so neither self-heal nor a stale automated trigger moves the instance off the rolled-back
revision; a person turning automated sync back on makes it track the branch again.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from fastapi.testclient import TestClient

from fleet.kube.client import KubeClient
from fleet.model import Trigger
from tests.integration.conformance.test_drift import kubectl_scale, web_ref
from tests.support.fleet import FleetEnv, WorkerThread, settings_ref, wait_until

TOKEN = "test-admin-token"


@pytest.fixture
def api(fleet_api: Callable[..., TestClient]) -> TestClient:
    return fleet_api(TOKEN)


def _watching(worker: WorkerThread, cluster: str, app: str) -> bool:
    selfheal = worker.process.selfheal
    assert selfheal is not None
    watch = selfheal.watch_cache(cluster, "apps/v1", "Deployment")
    return watch is not None and watch.get(app, "web") is not None


def _replicas(kube: KubeClient, namespace: str) -> Any:
    return (kube.get(web_ref(namespace)) or {}).get("spec", {}).get("replicas")


def test_drift_of_an_app_without_automated_sync_is_reported_not_reverted(
    fleet: FleetEnv,
) -> None:
    app, cluster = fleet.app_name(0), sorted(fleet.clusters)[0]
    fleet.commit_apps([app])
    fleet.add_app(app, cluster, automated=False, self_heal=True)
    worker = fleet.worker_thread("alpha")
    assert fleet.sync_and_wait(app, cluster)["result"] == "succeeded"
    wait_until(lambda: _watching(worker, cluster, app), timeout=30, what="the watch")
    kube: KubeClient = fleet.clusters[cluster].client()
    try:
        kubectl_scale(kube, web_ref(app), 4)
        wait_until(
            lambda: fleet.status(app, cluster).drift != (), timeout=30, what="drift reported"
        )
        status = fleet.status(app, cluster)
        [drift] = status.drift
        assert (drift.field, drift.manager, drift.subresource) == (
            "spec.replicas",
            "kubectl",
            "scale",
        )
        assert drift.self_heal is False
        assert status.sync_status == "OutOfSync"
        assert "not reverted: self-heal is off" in status.message
        selfheal = worker.process.selfheal
        assert selfheal is not None
        assert selfheal.flush(now=float("inf")) == []  # no self-heal waiting
        assert fleet.idle()
        assert _replicas(kube, app) == 4
    finally:
        kube.close()
    assert [h.trigger for h in fleet.store.history(app, cluster)] == ["manual"]


def test_a_rollback_stays_pinned_until_a_person_turns_automated_sync_back_on(
    fleet: FleetEnv, api: TestClient
) -> None:
    app, cluster = fleet.app_name(0), sorted(fleet.clusters)[0]
    first = fleet.commit_apps([app], data="k: v1")
    second = fleet.commit_apps([app], data="k: v2")
    fleet.add_app(app, cluster, automated=True, self_heal=True)
    worker = fleet.worker_thread("alpha")
    assert fleet.sync_and_wait(app, cluster, Trigger.WEBHOOK)["revision"] == second

    response = api.post(f"/api/v1/apps/{app}/rollback", json={"revision": first})
    assert response.status_code == 202, response.text
    assert response.json()["automated_paused"] is True
    wait_until(
        lambda: fleet.status(app, cluster).revision == first, timeout=60, what="the rollback"
    )
    assert fleet.live(cluster, settings_ref(app))["data"] == {"k": "v1"}
    wait_until(lambda: _watching(worker, cluster, app), timeout=30, what="the watch")

    # drift after the rollback is reported, not healed back to the branch
    kube: KubeClient = fleet.clusters[cluster].client()
    try:
        kubectl_scale(kube, web_ref(app), 3)
        wait_until(lambda: fleet.status(app, cluster).drift != (), timeout=30, what="drift")
        assert fleet.status(app, cluster).drift[0].self_heal is False
        # an automated trigger that was already on its way does not undo the rollback
        stale = fleet.sync_and_wait(app, cluster, Trigger.WEBHOOK)
        assert stale["result"] == "superseded", stale
        assert stale["message"] == f"automated sync of {app} is off"
        assert fleet.status(app, cluster).revision == first
        assert fleet.live(cluster, settings_ref(app))["data"] == {"k": "v1"}
        assert _replicas(kube, app) == 3

        # a person turns automated sync back on: the app tracks the branch again
        spec = api.get(f"/api/v1/apps/{app}").json()["spec"]
        spec["syncPolicy"]["automated"] = True
        updated = api.put(f"/api/v1/apps/{app}", json={**spec, "name": app})
        assert updated.status_code == 200, updated.text
        resumed = fleet.sync_and_wait(app, cluster, Trigger.WEBHOOK)
        assert (resumed["result"], resumed["revision"]) == ("succeeded", second), resumed
        assert fleet.live(cluster, settings_ref(app))["data"] == {"k": "v2"}
        assert _replicas(kube, app) == 1
    finally:
        kube.close()
    triggers = [h.trigger for h in reversed(fleet.store.history(app, cluster))]
    assert triggers == ["webhook", "rollback", "webhook"]
