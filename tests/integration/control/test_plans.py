"""Reviewable sync plans against the real fleet: the API, a worker, Redis and a testbed cluster.

A plan lists what a sync would do and writes nothing; a sync told to run it applies exactly it
when nothing moved, and refuses (writing nothing) when the revision or the cluster moved since;
a project may require an approved plan for a cluster, automated syncs included, approved by a
token other than the one that made it; a recreated app of the same name inherits no queued run."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest
from fastapi.testclient import TestClient

from fleet.control import plans
from fleet.control.registry.records import DEFAULT_PROJECT, Role
from fleet.control.routing.dispatch import JobRef
from fleet.model import ObjectRef, Trigger
from tests.support import manifests as m
from tests.support.fleet import FleetEnv

TOKEN = "test-admin-token"


@pytest.fixture
def api(fleet_api: Callable[..., TestClient]) -> TestClient:
    return fleet_api(TOKEN)


def _settings(app: str) -> ObjectRef:
    return ObjectRef("", "v1", "ConfigMap", app, "settings")


def _commit(fleet: FleetEnv, app: str, value: str) -> str:
    return fleet.repo.commit({f"apps/{app}/cm.yaml": m.configmap("settings", f"k: {value}")})


def _value(fleet: FleetEnv, cluster: str, app: str) -> str | None:
    live = fleet.live(cluster, _settings(app))
    return None if live is None else str(live["data"]["k"])


def _plan(api: TestClient, app: str, **body: Any) -> dict[str, Any]:
    response = api.post(f"/api/v1/apps/{app}/plans", json=body)
    assert response.status_code == 201, response.text
    plan: dict[str, Any] = response.json()
    return plan


def _approve(fleet: FleetEnv, api: TestClient, plan_id: str) -> dict[str, Any]:
    """Approve as a second person: the admin token that made the plan may not."""
    reviewer = fleet.store.create_token(f"{fleet.prefix}-reviewer-{plan_id}", Role.ADMIN)
    path = f"/api/v1/plans/{plan_id}/approve"
    response = api.post(path, headers={"Authorization": f"Bearer {reviewer}"})
    assert response.status_code == 200, response.text
    approved: dict[str, Any] = response.json()
    return approved


def _changes(plan: dict[str, Any]) -> list[tuple[str, str, str, list[str]]]:
    found = plan["clusters"][0]["changes"]
    return [(c["action"], c["kind"], c["name"], c["fields"]) for c in found]


def _sync(fleet: FleetEnv, api: TestClient, app: str, **body: Any) -> dict[str, Any]:
    response = api.post(f"/api/v1/apps/{app}/sync", json=body)
    assert response.status_code == 202, response.text
    job = response.json()["jobs"][0]
    answer = fleet.dispatcher.wait(JobRef(job["job_id"], job["queue"], job["merged"]), 120)
    assert answer is not None, f"no answer for the sync of {app}"
    return answer


def test_a_plan_writes_nothing_and_runs_exactly_when_nothing_moved(
    fleet: FleetEnv, api: TestClient
) -> None:
    app, cluster = fleet.app_name(0), sorted(fleet.clusters)[0]
    commit = _commit(fleet, app, "v1")
    fleet.add_app(app, cluster)
    fleet.worker_thread("alpha")

    plan = _plan(api, app)
    assert plan["clusters"][0]["revision"] == commit
    assert ("create", "ConfigMap", "settings", []) in _changes(plan)
    assert _value(fleet, cluster, app) is None  # planning wrote nothing
    assert plan["approved"] is False

    answer = _sync(fleet, api, app, plan=plan["id"])
    assert answer["result"] == "succeeded", answer
    assert answer["revision"] == commit
    assert _value(fleet, cluster, app) == "v1"

    _commit(fleet, app, "v2")
    update = _plan(api, app)
    assert ("update", "ConfigMap", "settings", ["/data/k"]) in _changes(update)
    assert _value(fleet, cluster, app) == "v1"
    assert _sync(fleet, api, app, plan=update["id"])["result"] == "succeeded"
    assert _value(fleet, cluster, app) == "v2"
    shown = api.get(f"/api/v1/plans/{update['id']}")
    assert shown.status_code == 200 and shown.json()["id"] == update["id"]


def test_a_stored_plan_is_refused_after_the_revision_or_the_cluster_moved(
    fleet: FleetEnv, api: TestClient
) -> None:
    app, cluster = fleet.app_name(0), sorted(fleet.clusters)[0]
    _commit(fleet, app, "v1")
    fleet.add_app(app, cluster)
    fleet.worker_thread("alpha")
    assert fleet.sync_and_wait(app, cluster)["result"] == "succeeded"

    _commit(fleet, app, "v2")
    plan = _plan(api, app)
    _commit(fleet, app, "v3")  # the branch moved after the plan was made
    refused = _sync(fleet, api, app, plan=plan["id"])
    assert refused["result"] == "failed"
    assert f"plan {plan['id']} refused: the revision moved" in refused["error"]
    assert "nothing was written" in refused["error"]
    assert _value(fleet, cluster, app) == "v1"
    assert "the revision moved" in fleet.status(app, cluster).error

    fresh = _plan(api, app)  # at v3: update settings
    kube = fleet.clusters[cluster].client()
    try:
        kube.delete(_settings(app))  # the cluster moved: the sync would now create it
    finally:
        kube.close()
    moved = _sync(fleet, api, app, plan=fresh["id"])
    assert moved["result"] == "failed"
    assert "the cluster moved" in moved["error"]
    assert _value(fleet, cluster, app) is None


def test_a_project_requires_an_approved_plan_for_chosen_clusters(
    fleet: FleetEnv, api: TestClient
) -> None:
    app, cluster = fleet.app_name(0), sorted(fleet.clusters)[0]
    project = {
        "name": f"{fleet.prefix}-gated",
        "sourceRepos": ["*"],
        "destinations": [{"cluster": "*", "namespace": "*"}],
        "requirePlanFor": [cluster],
    }
    created = api.post("/api/v1/projects", json=project)
    assert created.status_code == 201, created.text
    assert created.json()["requirePlanFor"] == [cluster]
    _commit(fleet, app, "v1")
    record = fleet.add_app(app, cluster, automated=True)
    fleet.store.put_app(replace(record, project=project["name"]), create=False)
    fleet.worker_thread("alpha")

    refused = api.post(f"/api/v1/apps/{app}/sync", json={})
    assert refused.status_code == 409
    assert "requires one for syncs to cluster" in refused.json()["detail"]
    automated = fleet.sync_and_wait(app, cluster, Trigger.INTERVAL)
    assert automated["result"] == "skipped"
    assert automated["message"].startswith("waiting for an approved plan")
    assert "waiting for an approved plan" in fleet.status(app, cluster).message
    assert _value(fleet, cluster, app) is None

    plan = _plan(api, app)
    unapproved = api.post(f"/api/v1/apps/{app}/sync", json={"plan": plan["id"]})
    assert unapproved.status_code == 409
    assert "is not approved" in unapproved.json()["detail"]

    own = api.post(f"/api/v1/plans/{plan['id']}/approve")
    assert own.status_code == 403 and "a second person must approve it" in own.text
    assert _approve(fleet, api, plan["id"])["approvedBy"]
    answer = _sync(fleet, api, app, plan=plan["id"])
    assert answer["result"] == "succeeded", answer
    assert _value(fleet, cluster, app) == "v1"


def test_only_the_chosen_clusters_wait_for_an_approved_plan(
    fleet: FleetEnv, api: TestClient
) -> None:
    app = fleet.app_name(0)
    gated, free = sorted(fleet.clusters)[:2]
    fleet.store.put_project(
        replace(DEFAULT_PROJECT, name=f"{fleet.prefix}-gated", require_plan_for=(gated,))
    )
    _commit(fleet, app, "v1")
    record = fleet.add_app(app, gated, automated=True)
    everywhere = replace(record.destination, cluster="", selector={})
    fleet.store.put_app(
        replace(record, project=f"{fleet.prefix}-gated", destination=everywhere), create=False
    )
    fleet.created.append((app, free, app))
    fleet.worker_thread("alpha")

    assert fleet.sync_and_wait(app, free, Trigger.INTERVAL)["result"] == "succeeded"
    assert fleet.sync_and_wait(app, gated, Trigger.INTERVAL)["result"] == "skipped"
    assert (_value(fleet, free, app), _value(fleet, gated, app)) == ("v1", None)
    both = api.post(f"/api/v1/apps/{app}/sync", json={})
    assert both.status_code == 409 and f"cluster {gated}" in both.json()["detail"]
    assert api.post(f"/api/v1/apps/{app}/sync", json={"cluster": free}).status_code == 202

    plan = _plan(api, app, cluster=gated)
    assert [c["cluster"] for c in plan["clusters"]] == [gated]
    assert _approve(fleet, api, plan["id"])["approved"] is True
    answer = _sync(fleet, api, app, plan=plan["id"], cluster=gated)
    assert answer["result"] == "succeeded", answer
    assert _value(fleet, gated, app) == "v1"


def test_a_recreated_app_of_the_same_name_inherits_no_queued_plan_run(
    fleet: FleetEnv, api: TestClient
) -> None:
    app, cluster = fleet.app_name(0), sorted(fleet.clusters)[0]
    gated = f"{fleet.prefix}-gated"
    fleet.store.put_project(replace(DEFAULT_PROJECT, name=gated, require_plan_for=(cluster,)))
    _commit(fleet, app, "v1")
    record = fleet.add_app(app, cluster, automated=True)
    fleet.store.put_app(replace(record, project=gated), create=False)
    fleet.worker_thread("alpha")
    plan = _plan(api, app)
    _approve(fleet, api, plan["id"])
    old = fleet.store.get_app(app).owner_uid
    store = plans.PlanStore(fleet.redis, prefix=fleet.prefix)
    store.queue_run(f"{app}@{cluster}", plan["id"], app_uid=old)  # queued, not yet run

    fleet.store.delete_app(app, force=True)
    again = fleet.add_app(app, cluster, automated=True)
    fleet.store.put_app(replace(again, project=gated), create=False)
    assert fleet.store.get_app(app).owner_uid != old
    automated = fleet.sync_and_wait(app, cluster, Trigger.INTERVAL)
    assert automated["result"] == "skipped", automated
    assert automated["message"].startswith("waiting for an approved plan")
    assert _value(fleet, cluster, app) is None
    refused = api.post(f"/api/v1/apps/{app}/sync", json={"plan": plan["id"]})
    assert refused.status_code == 409 and "an earlier app named" in refused.text
