"""Applications through the API: project bounds at create, bad input named, records kept intact."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import pytest

from fleet.control.registry.syncrecords import InstanceStatus, ResourceRecord, SyncRecord
from fleet.model import Action, Health, SyncStatus, Trigger
from tests.api.conftest import Api, add_app, add_cluster, app_body


def add_project(api: Api, name: str = "team-a", **overrides: Any) -> None:
    body = {
        "name": name,
        "sourceRepos": ["https://git.example.com/team/*"],
        "destinations": [{"cluster": "east", "namespace": "team-a-*"}],
        **overrides,
    }
    response = api.client.post("/api/v1/projects", json=body)
    assert response.status_code == 201, response.text


def test_an_app_aimed_at_a_namespace_its_project_forbids_is_refused_naming_the_namespace(
    api: Api,
) -> None:
    add_cluster(api, "east")
    add_project(api)
    body = app_body(
        "shop", project="team-a", destination={"cluster": "east", "namespace": "kube-system"}
    )

    response = api.client.post("/api/v1/apps", json=body)

    assert response.status_code == 403
    assert (
        "namespace kube-system on cluster east is not an allowed destination"
        in (response.json()["detail"])
    )
    assert api.client.get("/api/v1/apps").json() == []


def test_an_app_from_a_repository_outside_its_project_is_refused(api: Api) -> None:
    add_cluster(api, "east")
    add_project(api)
    source = {"repo": "https://evil.example.com/x.git", "path": "."}
    body = app_body(
        "shop",
        project="team-a",
        source=source,
        destination={"cluster": "east", "namespace": "team-a-shop"},
    )

    response = api.client.post("/api/v1/apps", json=body)

    assert response.status_code == 403
    detail = response.json()["detail"]
    assert "source.repo: https://evil.example.com/x is not an allowed source" in detail


def test_an_app_inside_its_project_bounds_is_created(api: Api) -> None:
    add_cluster(api, "east")
    add_project(api)
    body = app_body(
        "shop", project="team-a", destination={"cluster": "east", "namespace": "team-a-shop"}
    )

    response = api.client.post("/api/v1/apps", json=body)

    assert response.status_code == 201, response.text
    assert response.json()["project"] == "team-a"
    assert [i["cluster"] for i in response.json()["instances"]] == ["east"]


def test_an_app_naming_an_unknown_cluster_project_or_dependency_is_refused_naming_the_field(
    api: Api,
) -> None:
    add_cluster(api, "east")
    cases: dict[str, dict[str, Any]] = {
        "destination.cluster: no cluster named nowhere": {
            "destination": {"cluster": "nowhere", "namespace": "shop"}
        },
        "project: no project named ghost": {"project": "ghost"},
        "dependsOn: no other app named db": {"dependsOn": ["db"]},
    }
    for message, overrides in cases.items():
        response = api.client.post("/api/v1/apps", json=app_body("shop", **overrides))
        assert response.status_code == 422, response.text
        assert message in response.json()["detail"]
    assert api.client.get("/api/v1/apps").json() == []


BAD_BODIES = [
    ({"name": "Shop_1"}, "body.name"),
    ({"destination": {"namespace": "shop"}}, "body.destination"),
    (
        {"destination": {"cluster": "east", "clusterSelector": {"a": "b"}, "namespace": "x"}},
        "body.destination",
    ),
    ({"destination": {"cluster": "east", "namespace": "Not OK"}}, "body.destination.namespace"),
    ({"source": {"repo": "https://u:secret@git.example.com/x.git"}}, "body.source.repo"),
    ({"source": {"repo": "https://git.example.com/x.git", "path": "../up"}}, "body.source.path"),
    ({"syncPolicy": {"retry": {"limit": "many"}}}, "body.syncPolicy.retry.limit"),
    ({"syncPolicy": {"interval": "soon"}}, "body.syncPolicy.interval"),
    (
        {"syncPolicy": {"syncWindows": [{"kind": "deny", "schedule": "bad", "duration": "1h"}]}},
        "body.syncPolicy.syncWindows.0",
    ),
    (
        {"syncPolicy": {"ignoreDifferences": [{"jsonPointers": ["spec"]}]}},
        "body.syncPolicy.ignoreDifferences.0.jsonPointers.0",
    ),
    ({"syncPolicy": {"autoSync": True}}, "body.syncPolicy.autoSync"),
    ({"dependsOn": "db"}, "body.dependsOn"),
]


@pytest.mark.parametrize(("overrides", "field"), BAD_BODIES)
def test_a_malformed_app_is_refused_naming_the_field_and_the_existing_app_is_kept(
    api: Api, overrides: dict[str, Any], field: str
) -> None:
    add_cluster(api, "east")
    before = add_app(api, "shop")

    replaced = api.client.put("/api/v1/apps/shop", json={**app_body("shop"), **overrides})
    created = api.client.post("/api/v1/apps", json={**app_body("other"), **overrides})

    for response in (replaced, created):
        assert response.status_code == 422, response.text
        assert field in {e["field"] for e in response.json()["errors"]} or field in response.text
    assert api.client.get("/api/v1/apps/shop").json()["spec"] == before["spec"]
    assert [a["name"] for a in api.client.get("/api/v1/apps").json()] == ["shop"]


def test_a_body_that_is_not_json_is_refused_with_a_4xx(api: Api) -> None:
    response = api.client.post(
        "/api/v1/apps", content=b"{not json", headers={"Content-Type": "application/json"}
    )

    assert response.status_code == 422
    assert "body" in response.json()["detail"]


def test_a_dependency_cycle_is_refused_and_the_apps_keep_their_dependencies(api: Api) -> None:
    add_cluster(api, "east")
    add_app(api, "db")
    add_app(api, "shop", dependsOn=["db"])

    response = api.client.put("/api/v1/apps/db", json=app_body("db", dependsOn=["shop"]))

    assert response.status_code == 422
    assert "dependsOn: makes a cycle: db -> shop -> db" in response.json()["detail"]
    assert api.client.get("/api/v1/apps/db").json()["spec"]["dependsOn"] == []


def test_a_selector_app_has_one_instance_per_cluster_whose_labels_match(api: Api) -> None:
    add_cluster(api, "east", {"env": "prod", "region": "eu"})
    add_cluster(api, "west", {"env": "prod", "region": "us"})
    add_cluster(api, "lab", {"env": "dev"})

    view = add_app(
        api, "shop", destination={"clusterSelector": {"env": "prod"}, "namespace": "shop"}
    )

    assert [i["cluster"] for i in view["instances"]] == ["east", "west"]
    assert view["sync_status"] == "Unknown" and view["health"] == "Unknown"


def test_app_status_shows_each_instance_with_its_last_sync_trace_and_objects(api: Api) -> None:
    add_cluster(api, "east", {"env": "prod"})
    add_cluster(api, "west", {"env": "prod"})
    add_app(api, "shop", destination={"clusterSelector": {"env": "prod"}, "namespace": "shop"})
    resource = ResourceRecord(
        group="apps",
        version="v1",
        kind="Deployment",
        namespace="shop",
        name="cart",
        action=Action.CREATED,
        health=Health.HEALTHY,
    )
    for cluster, health in (("east", Health.HEALTHY), ("west", Health.PROGRESSING)):
        last = SyncRecord(
            app="shop",
            cluster=cluster,
            trigger=Trigger.MANUAL,
            revision="abc123",
            trace_id=f"trace-{cluster}",
            finished=datetime(2025, 1, 1),
            resources=(resource,),
        )
        status = InstanceStatus(
            sync_status=SyncStatus.SYNCED, health=health, revision="abc123", last_sync=last
        )
        api.store.set_status("shop", cluster, status)

    view = api.client.get("/api/v1/apps/shop").json()

    assert view["sync_status"] == "Synced"
    assert view["health"] == "Progressing"
    assert view["revision"] == "abc123"
    assert view["last_sync"]["trace_id"] in {"trace-east", "trace-west"}
    east = view["instances"][0]
    assert east["cluster"] == "east" and east["last_sync"]["trace_id"] == "trace-east"
    assert east["resources"] == [
        {
            "group": "apps",
            "version": "v1",
            "kind": "Deployment",
            "namespace": "shop",
            "name": "cart",
            "wave": 0,
            "action": "created",
            "health": "Healthy",
            "message": "",
        }
    ]


def test_replacing_an_app_without_credentials_keeps_them_and_null_removes_them(api: Api) -> None:
    add_cluster(api, "east")
    add_app(api, "shop", credentials={"username": "bot", "password": "hunter2"})

    kept = api.client.put("/api/v1/apps/shop", json=app_body("shop", project="default"))
    kept_creds = api.store.git_credentials("shop")
    removed = api.client.put("/api/v1/apps/shop", json=app_body("shop", credentials=None))

    assert kept.json()["hasCredentials"] is True
    assert kept_creds is not None and kept_creds.password == "hunter2"
    assert removed.json()["hasCredentials"] is False
    assert api.store.git_credentials("shop") is None


def test_a_project_with_apps_cannot_be_deleted_nor_can_the_default_project(api: Api) -> None:
    add_cluster(api, "east")
    add_project(api)
    body = app_body(
        "shop", project="team-a", destination={"cluster": "east", "namespace": "team-a-x"}
    )
    assert api.client.post("/api/v1/apps", json=body).status_code == 201

    used = api.client.delete("/api/v1/projects/team-a")
    builtin = api.client.delete("/api/v1/projects/default")

    assert used.status_code == 409 and "still has app(s) shop" in used.json()["detail"]
    assert builtin.status_code == 409
    names = [p["name"] for p in api.client.get("/api/v1/projects").json()]
    assert names == ["default", "team-a"]


def test_the_app_list_pages_by_name_and_reports_the_total(api: Api) -> None:
    add_cluster(api, "east")
    for name in ("delta", "alpha", "echo", "charlie", "bravo"):
        add_app(api, name)

    first = api.client.get("/api/v1/apps", params={"limit": 2})
    second = api.client.get("/api/v1/apps", params={"limit": 2, "offset": 2})
    last = api.client.get("/api/v1/apps", params={"limit": 2, "offset": 4})

    assert [a["name"] for a in first.json()] == ["alpha", "bravo"]
    assert [a["name"] for a in second.json()] == ["charlie", "delta"]
    assert [a["name"] for a in last.json()] == ["echo"]
    assert first.headers["X-Total-Count"] == "5"
    assert len(api.client.get("/api/v1/apps").json()) == 5
    too_big = api.client.get("/api/v1/apps", params={"limit": 100_000})
    assert too_big.status_code == 422
    assert "limit" in too_big.text
