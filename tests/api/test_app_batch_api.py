"""POST /apps/batch: many apps in one request and one registry transaction, all or none, each
checked as POST /apps checks one, and every refusal naming the app."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from api.appschemas import MAX_BATCH, MAX_DEPENDENCIES
from fleet.control.registry.store import Store
from tests.api.conftest import Api, add_app, add_cluster, app_body, token_for, two_projects


def batch(api: Api, apps: list[dict[str, Any]], **headers: str) -> Any:
    return api.client.post("/api/v1/apps/batch", json={"apps": apps}, headers=headers or None)


def names(api: Api) -> list[str]:
    return [a["name"] for a in api.client.get("/api/v1/apps").json()]


def test_a_batch_creates_every_app_in_one_registry_write_seen_by_a_running_cache(
    api: Api, store: Store
) -> None:
    add_cluster(api, "east")
    add_app(api, "db")
    cached_before = [a.name for a in store.list_apps_cached()]
    generation = int(store.redis.get(store.keys.generation) or 0)
    apps = [
        app_body("cache", dependsOn=["db"]),
        app_body("shop", dependsOn=["cache"], credentials={"username": "ci", "password": "pw"}),
        app_body("web", destination={"cluster": "east", "namespace": "web"}),
    ]

    response = batch(api, apps)

    assert response.status_code == 201, response.text
    assert response.json() == {"created": ["cache", "shop", "web"]}
    assert int(store.redis.get(store.keys.generation) or 0) == generation + 1
    assert cached_before == ["db"]
    assert sorted(a.name for a in store.list_apps_cached()) == ["cache", "db", "shop", "web"]
    shop = api.client.get("/api/v1/apps/shop").json()
    assert shop["spec"]["dependsOn"] == ["cache"] and shop["hasCredentials"] is True
    assert "pw" not in response.text and "pw" not in str(shop)
    creds = api.store.git_credentials("shop")
    assert creds is not None and creds.password == "pw"
    assert api.store.git_credentials("web") is None
    uids = {api.client.get(f"/api/v1/apps/{n}").json()["uid"] for n in ("cache", "shop", "web")}
    assert len(uids) == 3 and "" not in uids


REFUSED = [
    (
        app_body("b", destination={"cluster": "nowhere", "namespace": "shop"}),
        422,
        "apps.1 (b): destination.cluster: no cluster named nowhere",
    ),
    (app_body("b", project="ghost"), 422, "apps.1 (b): project: no project named ghost"),
    (app_body("b", dependsOn=["c"]), 422, "apps.1 (b): dependsOn: no other app named c"),
    (app_body("taken"), 409, "apps.1 (taken): app taken already exists"),
    (app_body("a"), 422, "app a appears twice in the batch"),
    (app_body("B_2"), 422, "body.apps.1.name"),
    (
        app_body("b", source={"repo": "file:///etc", "path": "."}),
        422,
        "apps.1 (b): source.repo",
    ),
]


@pytest.mark.parametrize(("second", "status", "message"), REFUSED)
def test_a_batch_with_one_bad_app_creates_none_and_names_the_app(
    api: Api, second: dict[str, Any], status: int, message: str
) -> None:
    add_cluster(api, "east")
    add_app(api, "taken")
    apps = [app_body("a"), second, app_body("c")]

    response = batch(api, apps)

    assert response.status_code == status, response.text
    assert message in response.text
    assert names(api) == ["taken"]


def test_a_member_cannot_slip_an_app_of_another_project_or_forbidden_place_into_a_batch(
    api: Api,
) -> None:
    two_projects(api)
    member = api.as_(token_for(api, "team-a-ci", "member", "team-a"))
    own = app_body(
        "a-web", project="team-a", destination={"cluster": "east", "namespace": "team-a-web"}
    )
    cases = {
        "apps.1 (b-web): token team-a-ci is a member of project team-a, not of project team-b": (
            app_body(
                "b-web",
                project="team-b",
                destination={"cluster": "east", "namespace": "team-b-web"},
            )
        ),
        "apps.1 (a-sys): destination.namespace: namespace kube-system on cluster east is not": (
            app_body(
                "a-sys",
                project="team-a",
                destination={"cluster": "east", "namespace": "kube-system"},
            )
        ),
    }
    for message, second in cases.items():
        response = batch(api, [own, second], **member)

        assert response.status_code == 403, response.text
        assert message in response.json()["detail"]
    assert names(api) == ["team-a-shop", "team-b-shop"]
    viewer = api.as_(token_for(api, "dash", "viewer"))
    assert batch(api, [app_body("x")], **viewer).status_code == 403
    assert batch(api, [own], **member).status_code == 201


def test_an_empty_or_oversized_batch_is_refused_before_anything_is_read(api: Api) -> None:
    add_cluster(api, "east")
    too_many = [app_body(f"app-{i}") for i in range(MAX_BATCH + 1)]

    for apps in ([], too_many):
        response = batch(api, apps)
        assert response.status_code == 422, response.text
        assert "body.apps" in response.text
    assert names(api) == []


def test_a_batch_cannot_close_a_dependency_cycle_through_a_registered_app(
    api: Api, store: Store
) -> None:
    add_cluster(api, "east")
    add_app(api, "ghost")
    add_app(api, "shop", dependsOn=["ghost"])
    store.delete_app("ghost", force=True)  # shop still names it

    response = batch(api, [app_body("ghost", dependsOn=["shop"])])

    assert response.status_code == 422, response.text
    assert "makes a cycle: ghost -> shop -> ghost" in response.json()["detail"]
    assert names(api) == ["shop"]


def test_a_batch_of_apps_each_depending_on_the_earlier_ones_is_created_and_deps_are_bounded(
    api: Api,
) -> None:
    add_cluster(api, "east")
    names = [f"app-{i:03}" for i in range(MAX_BATCH)]
    apps = [
        app_body(n, dependsOn=names[max(0, i - MAX_DEPENDENCIES) : i]) for i, n in enumerate(names)
    ]
    too_many = app_body("wide", dependsOn=[f"d-{i}" for i in range(MAX_DEPENDENCIES + 1)])

    created = batch(api, apps)
    refused = batch(api, [too_many])

    assert created.status_code == 201, created.text
    assert len(created.json()["created"]) == MAX_BATCH
    last = api.client.get(f"/api/v1/apps/{names[-1]}").json()
    assert len(last["spec"]["dependsOn"]) == MAX_DEPENDENCIES
    assert refused.status_code == 422 and "body.apps.0.dependsOn" in refused.text


def test_an_app_stored_with_more_dependencies_than_the_bound_still_reads_back(
    api: Api, store: Store
) -> None:
    add_cluster(api, "east")
    deps = [f"dep-{i:02}" for i in range(MAX_DEPENDENCIES + 1)]
    assert batch(api, [app_body(n) for n in deps]).status_code == 201
    store.put_app(replace(store.get_app(deps[0]), name="wide", depends_on=tuple(deps)), create=True)

    shown = api.client.get("/api/v1/apps/wide")

    assert shown.status_code == 200, shown.text
    assert shown.json()["spec"]["dependsOn"] == deps
