"""Suspend, resume, plans and prune allowances at the API boundary: who may do what, and the
clear answers for a plan that is missing, of another app, or not approved where required."""

from __future__ import annotations

from dataclasses import replace

from fleet.control import plans
from fleet.control.registry.records import DEFAULT_PROJECT, Role
from tests.api.conftest import Api, add_app, add_cluster


def _setup(api: Api) -> None:
    add_cluster(api, "east")
    add_cluster(api, "west")
    add_app(api, "shop", destination={"cluster": "east", "namespace": "shop"})
    add_app(api, "cart", destination={"cluster": "east", "namespace": "cart"})


def _stored(api: Api, app: str = "shop", *, approved: bool = False) -> plans.StoredPlan:
    plan = plans.StoredPlan(
        id=plans.new_id(),
        app=app,
        project="default",
        requested_revision="",
        clusters=(plans.ClusterPlan("east", revision="a" * 40, digest="d"),),
        created=plans.now(),
        by="admin",
        approved_by="admin" if approved else "",
    )
    return plans.PlanStore(api.store.redis, prefix=api.store.keys.p).save(plan)


def test_suspend_and_resume_show_in_the_app_and_need_a_writer(api: Api) -> None:
    _setup(api)
    viewer = api.store.create_token("ro", Role.VIEWER)
    refused = api.client.post("/api/v1/apps/shop/suspend", headers=api.as_(viewer))
    assert refused.status_code == 403
    answer = api.client.post("/api/v1/apps/shop/suspend")
    assert answer.status_code == 200 and answer.json()["suspended"] is True
    shown = api.client.get("/api/v1/apps/shop").json()
    assert shown["suspended"] is True and shown["spec"]["syncPolicy"]["suspended"] is True
    listed = {a["name"]: a["suspended"] for a in api.client.get("/api/v1/apps").json()}
    assert listed == {"shop": True, "cart": False}
    assert api.client.post("/api/v1/apps/shop/sync", json={}).status_code == 202  # a person's
    assert api.client.post("/api/v1/apps/shop/resume").json()["suspended"] is False


def test_a_sync_with_a_plan_checks_it_and_queues_it_for_the_worker(api: Api) -> None:
    _setup(api)
    missing = api.client.post("/api/v1/apps/shop/sync", json={"plan": "nope"})
    assert missing.status_code == 404 and "plan nope not found" in missing.text
    other = _stored(api, "cart")
    wrong = api.client.post("/api/v1/apps/shop/sync", json={"plan": other.id})
    assert wrong.status_code == 409 and "is a plan of app cart, not shop" in wrong.text
    both = api.client.post("/api/v1/apps/shop/sync", json={"plan": other.id, "revision": "v1"})
    assert both.status_code == 422

    plan = _stored(api)
    accepted = api.client.post("/api/v1/apps/shop/sync", json={"plan": plan.id})
    assert accepted.status_code == 202, accepted.text
    store = plans.PlanStore(api.store.redis, prefix=api.store.keys.p)
    assert store.take_run("shop@east") == plan.id


def test_a_required_plan_must_be_approved_by_a_writer(api: Api) -> None:
    _setup(api)
    api.store.put_project(replace(DEFAULT_PROJECT, require_plan_for=("ea*",)))
    refused = api.client.post("/api/v1/apps/shop/sync", json={})
    assert refused.status_code == 409
    assert "requires one for syncs to cluster east" in refused.json()["detail"]
    plan = _stored(api)
    unapproved = api.client.post("/api/v1/apps/shop/sync", json={"plan": plan.id})
    assert unapproved.status_code == 409 and "is not approved" in unapproved.text

    viewer = api.store.create_token("ro", Role.VIEWER)
    path = f"/api/v1/plans/{plan.id}/approve"
    assert api.client.post(path, headers=api.as_(viewer)).status_code == 403
    approved = api.client.post(path)
    assert approved.status_code == 200 and approved.json()["approved"] is True
    assert api.client.post("/api/v1/apps/shop/sync", json={"plan": plan.id}).status_code == 202


def test_a_prune_allowance_is_kept_for_the_next_sync_of_each_instance(api: Api) -> None:
    _setup(api)
    body = {"allowPruneOverBudget": True}
    assert api.client.post("/api/v1/apps/shop/sync", json=body).status_code == 202
    store = plans.PlanStore(api.store.redis, prefix=api.store.keys.p)
    assert store.take_prune_allowance("shop@east") is True
    assert store.take_prune_allowance("shop@east") is False  # once
