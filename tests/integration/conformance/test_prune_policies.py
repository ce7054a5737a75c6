"""Suspend and prune policies against the real fleet: a worker, Redis, the API and a testbed
cluster. A prune budget stops a mass delete (everything stays, the status says why, a person
allows it once); a suspended app gets no interval, webhook or self-heal sync while a person's
sync still runs; an app's propagation policy and PruneLast reach the delete calls."""

from __future__ import annotations

import hashlib
import hmac
import json
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from fastapi.testclient import TestClient

from fleet.control.registry.records import RetryPolicy
from fleet.control.routing.dispatch import JobRef
from fleet.control.scheduler import Scheduler
from fleet.model import ObjectRef, Outcome, Trigger
from tests.support import manifests as m
from tests.support.fleet import FleetEnv, WorkerThread, wait_until

TOKEN = "test-admin-token"


SECRET = "push-hmac-secret"


@pytest.fixture
def api(fleet_api: Callable[..., TestClient]) -> TestClient:
    return fleet_api(TOKEN, webhook_secret=SECRET)


def _push(fleet: FleetEnv, api: TestClient, after: str) -> dict[str, Any]:
    """A signed GitHub push of `after` to the fleet's repository, through the real route."""
    payload = {
        "ref": "refs/heads/main",
        "after": after,
        "repository": {"clone_url": fleet.repo_url, "default_branch": "main"},
    }
    body = json.dumps(payload).encode()
    digest = hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
    headers = {
        "X-Hub-Signature-256": f"sha256={digest}",
        "X-GitHub-Event": "push",
        "X-GitHub-Delivery": str(uuid.uuid4()),
    }
    answer = api.post("/api/v1/webhooks/git", content=body, headers=headers)
    assert answer.status_code == 200, answer.text
    found: dict[str, Any] = answer.json()
    return found


def _configmaps(app: str, names: list[str]) -> dict[str, str | bytes | None]:
    return {f"apps/{app}/{name}.yaml": m.configmap(name, "k: v1") for name in names}


def _cm(app: str, name: str) -> ObjectRef:
    return ObjectRef("", "v1", "ConfigMap", app, name)


def _edit(fleet: FleetEnv, cluster: str, ref: ObjectRef, patch: dict[str, Any]) -> None:
    kube = fleet.clusters[cluster].client()
    try:
        kube.request(
            "PATCH",
            kube.object_path(ref),
            body=patch,
            params={"fieldManager": "kubectl-edit"},
            content_type="application/merge-patch+json",
        )
    finally:
        kube.close()


def _watching(worker: WorkerThread, cluster: str, app: str) -> bool:
    selfheal = worker.process.selfheal
    assert selfheal is not None
    watch = selfheal.watch_cache(cluster, "v1", "ConfigMap")
    return watch is not None and watch.get(app, "settings") is not None


def _api_sync(fleet: FleetEnv, api: TestClient, app: str, **body: Any) -> dict[str, Any]:
    response = api.post(f"/api/v1/apps/{app}/sync", json=body)
    assert response.status_code == 202, response.text
    job = response.json()["jobs"][0]
    answer = fleet.dispatcher.wait(JobRef(job["job_id"], job["queue"], job["merged"]), 120)
    assert answer is not None, f"no answer for the sync of {app}"
    return answer


def test_a_prune_budget_stops_a_mass_delete_until_a_person_allows_it(
    fleet: FleetEnv, api: TestClient
) -> None:
    app, cluster = fleet.app_name(0), sorted(fleet.clusters)[0]
    names = [f"cm-{i}" for i in range(4)]
    fleet.repo.commit(_configmaps(app, names))
    fleet.add_app(app, cluster, prune=True, prune_budget_percent=50.0)
    fleet.worker_thread("alpha")
    assert fleet.sync_and_wait(app, cluster)["result"] == "succeeded"

    fleet.repo.commit({f"apps/{app}/{name}.yaml": None for name in names[1:]})
    answer = fleet.sync_and_wait(app, cluster)
    assert answer["result"] == "failed"
    assert "prune over budget" in answer["error"] and "3 of 4" in answer["error"]
    assert "--allow-prune-over-budget" in answer["error"]
    status = fleet.status(app, cluster)
    assert "prune over budget" in status.error
    assert all(fleet.live(cluster, _cm(app, n)) is not None for n in names)

    allowed = _api_sync(fleet, api, app, allowPruneOverBudget=True)
    assert allowed["result"] == "succeeded", allowed
    assert [n for n in names if fleet.live(cluster, _cm(app, n)) is not None] == names[:1]


def test_a_suspended_app_gets_no_automated_sync_but_a_manual_one_runs(
    fleet: FleetEnv, api: TestClient
) -> None:
    app, cluster = fleet.app_name(0), sorted(fleet.clusters)[0]
    fleet.repo.commit(_configmaps(app, ["settings"]))
    fleet.add_app(app, cluster, automated=True, self_heal=True)
    worker = fleet.worker_thread("alpha")
    assert fleet.sync_and_wait(app, cluster)["result"] == "succeeded"

    response = api.post(f"/api/v1/apps/{app}/suspend")
    assert response.status_code == 200, response.text
    assert "suspended" in fleet.status(app, cluster).message
    assert api.get(f"/api/v1/apps/{app}").json()["suspended"] is True

    # interval: the scheduler blocks it and says why
    report = Scheduler(fleet.store, fleet.dispatcher, holder="t").tick(10.0)
    assert report.dispatched == []
    assert "is suspended" in report.blocked[f"{app}@{cluster}"]
    # webhook: a push is not turned into a sync, and the answer says why
    pushed = _push(fleet, api, fleet.repo.commit(_configmaps(app, ["settings"]) | {"x.txt": "x"}))
    assert pushed["triggered"] == []
    assert [s["app"] for s in pushed["skipped"]] == [app]
    assert "is suspended" in pushed["skipped"][0]["reason"]
    # any automated trigger that still reaches a worker is skipped with the reason
    for trigger in (Trigger.WEBHOOK, Trigger.INTERVAL):
        answer = fleet.sync_and_wait(app, cluster, trigger)
        assert answer["result"] == Outcome.SKIPPED, answer
        assert "is suspended" in answer["message"]
        assert "is suspended" in fleet.status(app, cluster).message
    # self-heal: the drift is reported, not reverted
    wait_until(lambda: _watching(worker, cluster, app), timeout=30, what="the watch")
    _edit(fleet, cluster, _cm(app, "settings"), {"data": {"k": "by-hand"}})
    wait_until(
        lambda: any(not d.self_heal for d in fleet.status(app, cluster).drift),
        timeout=60,
        what="the drift reported without self-heal",
    )
    assert fleet.live(cluster, _cm(app, "settings"))["data"] == {"k": "by-hand"}  # type: ignore[index]

    manual = _api_sync(fleet, api, app)  # a person's sync still runs
    assert manual["result"] == "succeeded", manual
    assert fleet.live(cluster, _cm(app, "settings"))["data"] == {"k": "v1"}  # type: ignore[index]

    assert api.post(f"/api/v1/apps/{app}/resume").status_code == 200
    assert "suspended" not in fleet.status(app, cluster).message
    resumed = fleet.sync_and_wait(app, cluster, Trigger.WEBHOOK)  # runs (quietly: in sync)
    assert resumed["result"] in (Outcome.SUCCEEDED, Outcome.UNCHANGED), resumed


def _replica_sets(fleet: FleetEnv, cluster: str, namespace: str) -> list[dict[str, Any]]:
    kube = fleet.clusters[cluster].client()
    try:
        return kube.list("apps/v1", "ReplicaSet", namespace=namespace)
    finally:
        kube.close()


def test_an_orphan_propagation_leaves_what_the_pruned_object_made(fleet: FleetEnv) -> None:
    app, cluster = fleet.app_name(0), sorted(fleet.clusters)[0]
    fleet.commit_apps([app])
    fleet.add_app(app, cluster, prune=True, prune_propagation="orphan")
    fleet.worker_thread("alpha")
    assert fleet.sync_and_wait(app, cluster)["result"] == "succeeded"
    wait_until(
        lambda: _replica_sets(fleet, cluster, app), timeout=60, what="the Deployment's ReplicaSet"
    )

    fleet.repo.commit({f"apps/{app}/deploy.yaml": None})
    assert fleet.sync_and_wait(app, cluster)["result"] == "succeeded"
    assert fleet.live(cluster, ObjectRef("apps", "v1", "Deployment", app, "web")) is None
    wait_until(
        lambda: all(
            not rs["metadata"].get("ownerReferences") for rs in _replica_sets(fleet, cluster, app)
        ),
        timeout=60,
        what="the garbage collector to orphan the ReplicaSet",
    )
    assert _replica_sets(fleet, cluster, app)  # orphaned, not deleted


def test_a_cascading_delete_past_its_deadline_fails_naming_what_is_left(
    fleet: FleetEnv,
) -> None:
    app, cluster = fleet.app_name(0), sorted(fleet.clusters)[0]
    fleet.repo.commit(_configmaps(app, ["settings"]))
    fleet.add_app(app, cluster, deletion_timeout_s=1.0, retry=RetryPolicy(limit=0))
    fleet.worker_thread("alpha")
    assert fleet.sync_and_wait(app, cluster)["result"] == "succeeded"
    _edit(
        fleet,
        cluster,
        _cm(app, "settings"),
        {"metadata": {"finalizers": ["test.gitfleet.io/hold"]}},
    )
    try:
        fleet.store.mark_deleting(app)
        result = fleet.sync_and_wait(app, cluster, trigger=Trigger.DELETE)
        assert result["result"] == "failed", result
        assert "not pruned within 1s" in result["error"]
        assert "settings" in result["error"]
        assert "test.gitfleet.io/hold" in result["error"]
        assert "delete failed" in fleet.status(app, cluster).message
    finally:
        _edit(fleet, cluster, _cm(app, "settings"), {"metadata": {"finalizers": None}})
