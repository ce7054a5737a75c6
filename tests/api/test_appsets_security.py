"""App sets may not be a way around the rules of apps: a refresh of 0 (a git fetch every
tick) is refused; with GITFLEET_REQUIRE_IMPERSONATION only admins deploy through `default`,
with an app set too (at creation and whenever a reconcile creates apps later); and a set that
reuses the name of another project's set never takes the apps that name still marks."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from api.app import create_app
from api.deps import get_dispatcher
from api.routes.appsets import appsets_for
from fleet.control.appsets.records import (
    AppSetRecord,
    ClustersGenerator,
    DeletionPolicy,
    Generator,
    ListGenerator,
)
from fleet.control.registry.records import AppDestination, AppRecord, AppSource
from fleet.control.routing import membership
from tests.api.conftest import (
    ADMIN_TOKEN,
    Api,
    RecordingDispatcher,
    add_cluster,
    settings_for,
    token_for,
)

REPO = "https://git.example.com/team/shop.git"


@pytest.fixture
def strict(redis_url: str) -> Iterator[Api]:
    """The coordinator with GITFLEET_REQUIRE_IMPERSONATION on."""
    app = create_app(settings_for(redis_url, require_impersonation=True))
    dispatcher = RecordingDispatcher()
    app.dependency_overrides[get_dispatcher] = lambda: dispatcher
    with TestClient(app, headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}) as client:
        yield Api(client, dispatcher, app.state.store)


def _body(name: str, project: str, app: str, **extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        "project": project,
        "generator": {"list": {"elements": [{"app": app}]}},
        "template": {
            "name": "{{app}}",
            "source": {"repo": REPO, "path": "deploy"},
            "destination": {"cluster": "east", "namespace": f"{project}-shop"},
        },
        **extra,
    }


def _project(api: Api, name: str) -> None:
    body = {
        "name": name,
        "sourceRepos": ["*"],
        "destinations": [{"cluster": "*", "namespace": f"{name}-*"}],
    }
    assert api.client.post("/api/v1/projects", json=body).status_code == 201


def test_a_refresh_of_zero_is_refused(api: Api) -> None:
    add_cluster(api, "east")
    body = _body("often", "default", "often", refresh=0)
    refused = api.client.post("/api/v1/appsets", json=body)
    assert refused.status_code == 422, refused.text
    assert "refresh" in refused.text and "30" in refused.text
    assert api.client.post("/api/v1/appsets", json=dict(body, refresh="30s")).status_code == 201


def test_a_member_cannot_deploy_through_default_with_a_set_that_generates_nothing_yet(
    strict: Api,
) -> None:
    member = strict.as_(token_for(strict, "mallory", "member", "default"))
    body = _body("later", "default", "x")
    body["generator"] = {"clusters": {"selector": {"env": "prod"}}}  # no cluster matches yet
    body["template"]["destination"] = {"cluster": "{{name}}", "namespace": "kube-system"}
    refused = strict.client.post("/api/v1/appsets", json=body, headers=member)
    assert refused.status_code == 403, refused.text
    assert "only admins" in refused.text
    assert strict.client.get("/api/v1/appsets/later").status_code == 404

    admin = strict.client.post("/api/v1/appsets", json=body)  # an admin may
    assert admin.status_code == 201, admin.text
    replaced = strict.client.put("/api/v1/appsets/later", json=body, headers=member)
    assert replaced.status_code == 403 and "only admins" in replaced.text


def test_a_reconcile_creates_no_default_app_for_a_set_a_member_wrote(strict: Api) -> None:
    """A set stored by a member (before this rule, or by any path round the API) makes no app
    in `default` when a matching cluster appears: the reconcile applies the author's role."""
    store = strict.store
    settings = strict.client.app.state.settings  # type: ignore[attr-defined]
    sets = appsets_for(store, None, settings)
    template = {
        "name": "sneak-{{name}}",
        "source": {"repo": REPO, "path": "deploy"},
        "destination": {"cluster": "{{name}}", "namespace": "kube-system"},
    }
    record = AppSetRecord(
        "sneaky",
        Generator(clusters=ClustersGenerator({"env": "prod"})),
        template,
        author_role="member",
    )
    sets.put(record, create=True)
    add_cluster(strict, "east", {"env": "prod"})
    status = sets.reconcile(sets.get("sneaky"))
    assert [a.name for a in store.list_apps()] == []
    assert any("only admins" in e for e in status.errors), status.errors

    sets.put(AppSetRecord("legacy", record.generator, template), create=True)  # no role known
    assert sets.reconcile(sets.get("legacy")).errors
    assert [a.name for a in store.list_apps()] == []


def test_a_reused_set_name_does_not_take_another_projects_apps(api: Api) -> None:
    store = api.store
    add_cluster(api, "east")
    membership.register(store.redis, "w-a", ttl=60, meta={}, prefix=store.keys.p)
    for team in ("team-a", "team-b"):
        _project(api, team)
    alice = api.as_(token_for(api, "alice", "member", "team-a"))
    mallory = api.as_(token_for(api, "mallory", "member", "team-b"))
    made = api.client.post("/api/v1/appsets", json=_body("web", "team-a", "a-web"), headers=alice)
    assert made.status_code == 201, made.text
    assert api.client.delete("/api/v1/appsets/web", headers=alice).status_code == 200
    assert store.get_app("a-web").deleting  # the cascade: its worker prunes, then removes it

    body = _body("web", "team-b", "b-web", deletionPolicy="keep")
    taken = api.client.post("/api/v1/appsets", json=body, headers=mallory)
    assert taken.status_code == 409, taken.text
    assert "a-web" in taken.text
    assert store.get_app("a-web").deleting and store.get_app("a-web").project == "team-a"


def test_a_set_never_owns_an_app_of_another_project_or_set_uid(api: Api) -> None:
    """Redis level: apps marked with a set's name that another set (an older record without a
    uid, another project) made are not the set's, whatever reached the registry first."""
    store = api.store
    add_cluster(api, "east")
    for team in ("team-a", "team-b"):
        _project(api, team)
    settings = api.client.app.state.settings  # type: ignore[attr-defined]
    sets = appsets_for(store, None, settings)
    orphan = AppRecord(
        "a-web",
        AppSource(repo=REPO, path="deploy"),
        AppDestination(namespace="team-a-shop", cluster="east"),
        project="team-a",
        owner_set="web",
    )
    store.put_app(orphan, create=True)  # an app stored before sets had uids
    elements = ListGenerator(({"app": "b-web"},))
    template = _body("web", "team-b", "b-web")["template"]
    template = dict(template, project="team-b")
    record = AppSetRecord(
        "web",
        Generator(list=elements),
        template,
        project="team-b",
        deletion=DeletionPolicy.KEEP,
        author_role="member",
    )
    stored = sets.put(record, create=True)
    assert stored.uid
    status = sets.reconcile(stored)
    assert status.apps == ("b-web",) and status.deleted == ()
    assert store.get_app("a-web").project == "team-a"
    assert [a.name for a in sets.owned(stored)] == ["b-web"]
