"""Suspend, resume, plans and prune allowances at the API boundary: who may do what, and the
clear answers for a plan that is missing, of another app, or not approved where required."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

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
        approved_by="reviewer" if approved else "",
        created_by="admin",
        app_uid=api.store.get_app(app).owner_uid,
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
    assert store.take_run("shop@east", app_uid=api.store.get_app("shop").owner_uid) == plan.id


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
    reviewer = api.store.create_token("reviewer", Role.MEMBER, DEFAULT_PROJECT.name)
    approved = api.client.post(path, headers=api.as_(reviewer))
    assert approved.status_code == 200 and approved.json()["approved"] is True
    assert api.client.post("/api/v1/apps/shop/sync", json={"plan": plan.id}).status_code == 202


def test_a_prune_allowance_is_kept_for_the_next_sync_of_each_instance(api: Api) -> None:
    _setup(api)
    body = {"allowPruneOverBudget": True}
    assert api.client.post("/api/v1/apps/shop/sync", json=body).status_code == 202
    store = plans.PlanStore(api.store.redis, prefix=api.store.keys.p)
    uid = api.store.get_app("shop").owner_uid
    assert store.take_prune_allowance("shop@east", app_uid=uid) is True
    assert store.take_prune_allowance("shop@east", app_uid=uid) is False  # once


def _made(api: Api, headers: dict[str, str] | None = None) -> dict[str, Any]:
    api.dispatcher.results[("shop", "east")] = {"revision": "a" * 40, "plan_digest": "d"}
    made = api.client.post("/api/v1/apps/shop/plans", json={}, headers=headers or {})
    assert made.status_code == 201, made.text
    plan: dict[str, Any] = made.json()
    return plan


def test_the_maker_of_a_plan_cannot_approve_it_not_even_an_admin(api: Api) -> None:
    _setup(api)
    api.store.put_project(replace(DEFAULT_PROJECT, require_plan_for=("east",)))
    maker = api.store.create_token("maker", Role.MEMBER, DEFAULT_PROJECT.name)
    plan = _made(api, api.as_(maker))
    assert plan["createdBy"] == "maker"
    path = f"/api/v1/plans/{plan['id']}/approve"
    own = api.client.post(path, headers=api.as_(maker))
    assert own.status_code == 403
    assert "a second person must approve it" in own.json()["detail"]
    assert api.client.get(f"/api/v1/plans/{plan['id']}").json()["approved"] is False
    refused = api.client.post("/api/v1/apps/shop/sync", json={"plan": plan["id"]})
    assert refused.status_code == 409 and "is not approved" in refused.text

    approved = api.client.post(path)  # the admin: a second pair of eyes
    assert approved.status_code == 200 and approved.json()["approvedBy"] == "bootstrap-admin"
    ran = api.client.post(
        "/api/v1/apps/shop/sync", json={"plan": plan["id"]}, headers=api.as_(maker)
    )
    assert ran.status_code == 202, ran.text

    mine = _made(api)  # four eyes bind admins too
    assert mine["createdBy"] == "bootstrap-admin"
    refused_admin = api.client.post(f"/api/v1/plans/{mine['id']}/approve")
    assert refused_admin.status_code == 403 and "second person" in refused_admin.text
    by_member = api.client.post(f"/api/v1/plans/{mine['id']}/approve", headers=api.as_(maker))
    assert by_member.status_code == 200


def test_a_self_approved_stored_plan_does_not_count_as_approved(api: Api) -> None:
    _setup(api)
    plan = replace(_stored(api), approved_by="admin")  # written behind the API's back
    assert plan.approved is False


def test_a_plan_of_a_deleted_app_is_refused_for_a_recreated_app_of_the_same_name(
    api: Api,
) -> None:
    _setup(api)
    other = replace(DEFAULT_PROJECT, name="other", require_plan_for=())
    api.store.put_project(other)
    plan = _made(api)
    reviewer = api.store.create_token("reviewer", Role.ADMIN)
    path = f"/api/v1/plans/{plan['id']}/approve"
    assert api.client.post(path, headers=api.as_(reviewer)).status_code == 200
    old = api.store.get_app("shop")
    assert plan["appUid"] == old.owner_uid

    api.store.delete_app("shop", force=True)
    add_app(api, "shop", project="other", destination={"cluster": "east", "namespace": "shop"})
    assert api.store.get_app("shop").owner_uid != old.owner_uid
    refused = api.client.post("/api/v1/apps/shop/sync", json={"plan": plan["id"]})
    assert refused.status_code == 409
    assert "was made for an earlier app named shop" in refused.json()["detail"]


def test_a_plan_is_refused_once_its_app_moved_to_another_project(api: Api) -> None:
    _setup(api)
    api.store.put_project(replace(DEFAULT_PROJECT, name="other", require_plan_for=("east",)))
    plan = _stored(api, approved=True)
    record = api.store.get_app("shop")
    api.store.put_app(replace(record, project="other"), create=False)
    refused = api.client.post("/api/v1/apps/shop/sync", json={"plan": plan.id})
    assert refused.status_code == 409
    assert "was made in project default" in refused.json()["detail"]


def test_queued_runs_and_prune_allowances_do_not_pass_to_a_recreated_app(api: Api) -> None:
    _setup(api)
    plan = _stored(api)
    body = {"plan": plan.id, "allowPruneOverBudget": True}
    assert api.client.post("/api/v1/apps/shop/sync", json=body).status_code == 202
    store = plans.PlanStore(api.store.redis, prefix=api.store.keys.p)
    old = api.store.get_app("shop").owner_uid
    api.store.delete_app("shop", force=True)
    add_app(api, "shop", destination={"cluster": "east", "namespace": "shop"})
    new = api.store.get_app("shop").owner_uid
    assert store.queued_run("shop@east", app_uid=new) == ""
    assert store.take_run("shop@east", app_uid=new) == ""
    assert store.take_prune_allowance("shop@east", app_uid=new) is False
    assert store.take_run("shop@east", app_uid=old) == plan.id  # the old app's, untouched
    assert store.take_prune_allowance("shop@east", app_uid=old) is True
