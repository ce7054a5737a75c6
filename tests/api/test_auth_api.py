"""Bearer tokens and roles: admin, project member, viewer; open probes; the bootstrap token."""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from api.app import create_app
from tests.api.conftest import (
    Api,
    add_app,
    add_cluster,
    app_body,
    settings_for,
    token_for,
    two_projects,
)


def test_requests_without_a_valid_token_get_401_and_the_probes_stay_open(api: Api) -> None:
    bare = TestClient(api.client.app)

    assert bare.get("/api/v1/apps").status_code == 401
    assert bare.get("/api/v1/apps", headers=api.as_("gf_wrong")).status_code == 401
    assert bare.get("/api/v1/apps", headers={"Authorization": "Basic eDp5"}).status_code == 401
    assert bare.get("/healthz").status_code == 200
    ready = bare.get("/readyz").json()  # an empty registry adds a warning (test_registry_api)
    assert (ready["status"], ready["redis"]) == ("ok", "ok")
    assert bare.get("/metrics").status_code == 200


def test_a_viewer_can_read_everything_but_write_nothing(api: Api) -> None:
    add_cluster(api, "east")
    add_app(api, "shop")
    viewer = api.as_(token_for(api, "ops-dashboard", "viewer"))

    assert api.client.get("/api/v1/apps/shop", headers=viewer).status_code == 200
    assert api.client.get("/api/v1/clusters", headers=viewer).status_code == 200
    writes = [
        api.client.post("/api/v1/apps", json=app_body("other"), headers=viewer),
        api.client.post("/api/v1/apps/shop/sync", headers=viewer),
        api.client.delete("/api/v1/clusters/east", headers=viewer),
        api.client.put("/api/v1/apps/shop", json=app_body("shop"), headers=viewer),
    ]
    for response in writes:
        assert response.status_code == 403
        assert "viewer: read only" in response.json()["detail"]
    assert api.dispatcher.calls == []
    assert [a["name"] for a in api.client.get("/api/v1/apps").json()] == ["shop"]


def test_a_project_member_sees_and_changes_only_its_own_projects_apps(api: Api) -> None:
    two_projects(api)
    member = api.as_(token_for(api, "team-a-ci", "member", "team-a"))

    listed = api.client.get("/api/v1/apps", headers=member).json()
    other = api.client.get("/api/v1/apps/team-b-shop", headers=member)
    sync_other = api.client.post("/api/v1/apps/team-b-shop/sync", headers=member)
    sync_own = api.client.post("/api/v1/apps/team-a-shop/sync", headers=member)
    projects = api.client.get("/api/v1/projects", headers=member).json()

    assert [a["name"] for a in listed] == ["team-a-shop"]
    assert other.status_code == 403 and "not of project team-b" in other.json()["detail"]
    assert sync_other.status_code == 403
    assert sync_own.status_code == 202
    assert [p["name"] for p in projects] == ["team-a"]


def test_a_project_member_cannot_write_clusters_projects_or_apps_of_other_projects(
    api: Api,
) -> None:
    two_projects(api)
    member = api.as_(token_for(api, "team-a-ci", "member", "team-a"))
    foreign = app_body(
        "sneaky", project="team-b", destination={"cluster": "east", "namespace": "team-b-x"}
    )

    responses = [
        api.client.post(
            "/api/v1/clusters",
            json={"name": "x", "server": "https://x", "token": "t"},
            headers=member,
        ),
        api.client.post("/api/v1/projects", json={"name": "team-c"}, headers=member),
        api.client.post("/api/v1/apps", json=foreign, headers=member),
        api.client.post("/api/v1/tokens", json={"name": "t", "role": "admin"}, headers=member),
    ]

    assert [r.status_code for r in responses] == [403, 403, 403, 403]
    assert "sneaky" not in {a["name"] for a in api.client.get("/api/v1/apps").json()}


def test_a_revoked_token_is_refused(api: Api) -> None:
    viewer = api.as_(token_for(api, "temp", "viewer"))
    assert api.client.delete("/api/v1/tokens/temp").status_code == 204

    assert api.client.get("/api/v1/apps", headers=viewer).status_code == 401


def test_tokens_are_stored_only_as_digests(api: Api) -> None:
    token = token_for(api, "robot", "viewer")

    dump = b"".join(api.store.redis.dump(k) or b"" for k in api.store.redis.keys("*"))

    assert token.encode() not in dump
    assert api.store.lookup_token(token) is not None


def test_without_an_admin_token_setting_one_is_generated_once_into_a_private_file(
    redis_url: str, capfd: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "admin-token"
    settings = settings_for(redis_url, admin_token=None, admin_token_file=path)
    with TestClient(create_app(settings)):
        pass
    first = capfd.readouterr().err
    token = path.read_text().strip()
    with TestClient(create_app(settings)):
        pass
    second = capfd.readouterr().err

    assert token.startswith("gf_") and str(path) in first
    assert token not in first + second
    assert str(path) not in second and path.read_text().strip() == token
    with TestClient(create_app(settings), headers={"Authorization": f"Bearer {token}"}) as client:
        assert client.get("/api/v1/clusters").status_code == 200
