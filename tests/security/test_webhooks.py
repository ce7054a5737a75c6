"""Webhooks are refresh hints (issue 10, item 6), attacked through the real API.

The attacker holds a signed delivery: one captured on the way (a replay), or one signed with the
secret of their own project. Before this item, the push's `after` became the deployed revision
whatever branch it came from, an old delivery replayed rolled apps back, and one secret opened
every app of the fleet. Now a push only makes the apps tracking the pushed ref resolve that ref
from git themselves; a delivery id is accepted once and a delivery older than the bound not at
all; a project's own secret reaches that project's apps and no other.

The first test runs a real worker against the testbed (what is deployed is what matters); the
others stop at the dispatcher, the API's boundary with the workers.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from dulwich.repo import Repo
from fastapi.testclient import TestClient
from pydantic import SecretStr
from redis import Redis

from api.app import create_app
from api.deps import get_dispatcher
from fleet.control.keys import Keys
from fleet.model import ObjectRef
from tests.api.conftest import (
    ADMIN_TOKEN,
    WEBHOOK_SECRET,
    RecordingDispatcher,
    fake_kubeconfig,
    settings_for,
)
from tests.support import manifests as m
from tests.support.fleet import FleetEnv, wait_until
from tests.support.redis_server import RedisServer

REPO = "https://github.com/acme/shop"
TEAM_A_SECRET = "team-a-webhook-secret-0123456789"
TEAM_B_SECRET = "team-b-webhook-secret-9876543210"
SYNC_TIMEOUT = 120


def push_body(
    *,
    after: str,
    ref: str = "refs/heads/main",
    repo: str = REPO,
    pushed_at: float | None = None,
) -> bytes:
    """A GitHub push event (`repository.pushed_at` is when GitHub received the push)."""
    payload = {
        "ref": ref,
        "before": "0" * 40,
        "after": after,
        "repository": {
            "clone_url": f"{repo}.git",
            "html_url": repo,
            "default_branch": "main",
            "pushed_at": int(time.time() if pushed_at is None else pushed_at),
        },
    }
    return json.dumps(payload).encode()


def delivery_headers(
    body: bytes, secret: str = WEBHOOK_SECRET, delivery: str | None = None
) -> dict[str, str]:
    digest = hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
    return {
        "X-Hub-Signature-256": f"sha256={digest}",
        "X-GitHub-Event": "push",
        "X-GitHub-Delivery": delivery or str(uuid.uuid4()),
        "Content-Type": "application/json",
    }


# -- the real thing: what a signed push deploys -------------------------------------------------


@pytest.fixture
def webhook_api(fleet_api: Callable[..., TestClient]) -> TestClient:
    return fleet_api(ADMIN_TOKEN, webhook_secret=SecretStr(WEBHOOK_SECRET))


def _move(repo: Path, branch: str, sha: str) -> None:
    with Repo(str(repo)) as git:
        git.refs[f"refs/heads/{branch}".encode()] = sha.encode()


def _member_app(fleet: FleetEnv, client: TestClient, name: str, cluster: str) -> None:
    project = {
        "name": "team-a",
        "sourceRepos": [fleet.repo_url],
        "destinations": [{"cluster": cluster, "namespace": f"{fleet.prefix}-*"}],
        "webhookSecret": TEAM_A_SECRET,
    }
    assert client.post("/api/v1/projects", json=project).status_code == 201
    body = {"name": "team-a-member", "role": "member", "project": "team-a"}
    member = client.post("/api/v1/tokens", json=body).json()["token"]
    app = {
        "name": name,
        "project": "team-a",
        "source": {"repo": fleet.repo_url, "path": f"apps/{name}", "revision": "main"},
        "destination": {"cluster": cluster, "namespace": name},
        "syncPolicy": {"automated": True, "createNamespace": True, "interval": 3600},
    }
    response = client.post("/api/v1/apps", json=app, headers={"Authorization": f"Bearer {member}"})
    assert response.status_code == 201, response.text
    fleet.created.append((name, cluster, name))


def _deliver(fleet: FleetEnv, client: TestClient, body: bytes, **headers: Any) -> Any:
    signed = delivery_headers(body, secret=TEAM_A_SECRET, **headers)
    return TestClient(client.app).post("/api/v1/webhooks/git", content=body, headers=signed)


def _synced_after(fleet: FleetEnv, instance: str, jobs: int) -> None:
    wait_until(
        lambda: len(fleet.entries(instance)) > jobs and fleet.idle(),
        timeout=SYNC_TIMEOUT,
        what=f"a sync of {instance} after job {jobs}",
    )


def _live_value(fleet: FleetEnv, cluster: str, namespace: str) -> str:
    found = fleet.live(cluster, ObjectRef("", "v1", "ConfigMap", namespace, "settings")) or {}
    return str((found.get("data") or {}).get("k", ""))


def test_a_signed_push_deploys_the_tracked_branch_tip_never_its_after_commit(
    fleet: FleetEnv, webhook_api: TestClient
) -> None:
    name, cluster = fleet.app_name(0), sorted(fleet.clusters)[0]
    instance, cm = f"{name}@{cluster}", f"apps/{name}/cm.yaml"
    tip = fleet.repo.commit({cm: m.configmap("settings", "k: main-v1")})
    evil = fleet.repo.commit({cm: m.configmap("settings", "k: evil")})
    _move(fleet.repo.path, "evil", evil)
    _move(fleet.repo.path, "main", tip)
    _member_app(fleet, webhook_api, name, cluster)
    fleet.worker_thread("alpha")

    # 1. a push to main whose `after` is another branch's commit: main's own tip is deployed
    first = push_body(after=evil, repo=fleet.repo_url)
    delivery = str(uuid.uuid4())
    answer = _deliver(fleet, webhook_api, first, delivery=delivery)
    assert answer.status_code == 200, answer.text
    assert answer.json()["triggered"] == [name]
    _synced_after(fleet, instance, 0)
    assert fleet.status(name, cluster).revision == tip
    assert _live_value(fleet, cluster, name) == "main-v1"

    # 2. the same delivery again is refused; a push to the other branch syncs nothing
    replay = _deliver(fleet, webhook_api, first, delivery=delivery)
    assert replay.status_code == 409
    assert delivery in replay.json()["detail"]
    other = _deliver(
        fleet, webhook_api, push_body(after=evil, ref="refs/heads/evil", repo=fleet.repo_url)
    )
    assert other.status_code == 200 and other.json()["triggered"] == []

    # 3. main moves on; an old push (for `tip`) delivered again under a new id rolls nothing back
    newer = fleet.repo.commit({cm: m.configmap("settings", "k: main-v2")})
    jobs = len(fleet.entries(instance))
    assert (
        _deliver(fleet, webhook_api, push_body(after=newer, repo=fleet.repo_url)).status_code == 200
    )
    _synced_after(fleet, instance, jobs)
    jobs = len(fleet.entries(instance))
    old = _deliver(fleet, webhook_api, push_body(after=tip, repo=fleet.repo_url))
    assert old.status_code == 200 and old.json()["triggered"] == [name]
    _synced_after(fleet, instance, jobs)
    assert fleet.status(name, cluster).revision == newer
    assert _live_value(fleet, cluster, name) == "main-v2"


# -- the API side: ids, age, per-project secrets -----------------------------------------------


@dataclass
class Api:
    client: TestClient
    dispatcher: RecordingDispatcher
    redis: Redis
    prefix: str

    def deliver(self, body: bytes, headers: dict[str, str]) -> Any:
        return TestClient(self.client.app).post(
            "/api/v1/webhooks/git", content=body, headers=headers
        )


@pytest.fixture
def api(redis_server: RedisServer) -> Iterator[Api]:
    prefix = f"t{uuid.uuid4().hex[:8]}"
    app = create_app(settings_for(redis_server.url, prefix=prefix))
    dispatcher = RecordingDispatcher()
    app.dependency_overrides[get_dispatcher] = lambda: dispatcher
    with TestClient(app, headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}) as client:
        yield Api(client, dispatcher, app.state.store.redis, prefix)
    for key in app.state.store.redis.scan_iter(Keys(prefix).pattern):
        app.state.store.redis.delete(key)


def _apps(api: Api, *, secrets: bool = True) -> None:
    """Apps shop-<project> on REPO's main, automated, in default, team-a and team-b; team-a and
    team-b have their own webhook secrets when `secrets`."""
    body = {"name": "east", "kubeconfig": fake_kubeconfig("tok-east")}
    assert api.client.post("/api/v1/clusters", json=body).status_code == 201
    for team, secret in (("team-a", TEAM_A_SECRET), ("team-b", TEAM_B_SECRET)):
        project: dict[str, Any] = {
            "name": team,
            "sourceRepos": ["https://github.com/acme/*"],
            "destinations": [{"cluster": "*", "namespace": f"{team}-*"}],
        }
        if secrets:
            project["webhookSecret"] = secret
        assert api.client.post("/api/v1/projects", json=project).status_code == 201
    for project in ("default", "team-a", "team-b"):
        app = {
            "name": f"shop-{project}",
            "project": project,
            "source": {"repo": f"{REPO}.git", "revision": "main"},
            "destination": {"cluster": "east", "namespace": f"{project}-shop"},
            "syncPolicy": {"automated": True},
        }
        assert api.client.post("/api/v1/apps", json=app).status_code == 201


def test_a_push_enqueues_no_revision_of_its_own(api: Api) -> None:
    _apps(api, secrets=False)
    body = push_body(after="a" * 40)

    response = api.deliver(body, delivery_headers(body))

    assert response.status_code == 200, response.text
    assert len(api.dispatcher.calls) == 3
    assert {c["revision"] for c in api.dispatcher.calls} == {None}
    assert {c["trigger"] for c in api.dispatcher.calls} == {"webhook"}


def test_a_delivery_is_accepted_once(api: Api) -> None:
    _apps(api, secrets=False)
    body = push_body(after="b" * 40)
    headers = delivery_headers(body)

    first = api.deliver(body, headers)
    again = api.deliver(body, headers)

    assert first.status_code == 200
    assert again.status_code == 409
    assert headers["X-GitHub-Delivery"] in again.json()["detail"]
    assert len(api.dispatcher.calls) == 3


def test_a_delivery_older_than_the_bound_or_without_an_id_is_refused(api: Api) -> None:
    _apps(api, secrets=False)
    old = push_body(after="c" * 40, pushed_at=time.time() - 3600)
    body = push_body(after="c" * 40)
    anonymous = delivery_headers(body)
    del anonymous["X-GitHub-Delivery"]

    stale = api.deliver(old, delivery_headers(old))
    unnamed = api.deliver(body, anonymous)

    assert stale.status_code == 422
    assert stale.json()["detail"].startswith("repository.pushed_at:")
    assert unnamed.status_code == 422
    assert unnamed.json()["detail"].startswith("X-GitHub-Delivery:")
    assert api.dispatcher.calls == []


def test_a_project_secret_reaches_only_that_projects_apps(api: Api) -> None:
    _apps(api)
    body = push_body(after="d" * 40)

    with_a = api.deliver(body, delivery_headers(body, TEAM_A_SECRET))
    with_b = api.deliver(body, delivery_headers(body, TEAM_B_SECRET))
    with_global = api.deliver(body, delivery_headers(body, WEBHOOK_SECRET))
    with_none = api.deliver(body, delivery_headers(body, "not-a-secret-anyone-holds"))

    assert [r.status_code for r in (with_a, with_b, with_global, with_none)] == [200] * 3 + [401]
    assert with_a.json()["triggered"] == ["shop-team-a"]
    assert with_b.json()["triggered"] == ["shop-team-b"]
    assert with_global.json()["triggered"] == ["shop-default"]
    assert "shop-team-b" not in with_a.text and "shop-default" not in with_a.text
    assert [c["app"] for c in api.dispatcher.calls] == [
        "shop-team-a",
        "shop-team-b",
        "shop-default",
    ]


def test_a_project_webhook_secret_is_write_only_and_encrypted_at_rest(api: Api) -> None:
    _apps(api)

    shown = api.client.get("/api/v1/projects/team-a").json()
    listed = api.client.get("/api/v1/projects").text
    dump = b"".join(api.redis.dump(k) or b"" for k in api.redis.scan_iter(f"{api.prefix}:*"))

    assert shown["hasWebhookSecret"] is True
    assert "webhookSecret" not in shown
    assert TEAM_A_SECRET not in json.dumps(shown) + listed
    assert TEAM_A_SECRET.encode() not in dump
    kept = api.client.put("/api/v1/projects/team-a", json=shown)
    assert kept.status_code == 200 and kept.json()["hasWebhookSecret"] is True
    body = push_body(after="e" * 40)
    assert api.deliver(body, delivery_headers(body, TEAM_A_SECRET)).json()["triggered"] == [
        "shop-team-a"
    ]
    removed = api.client.put("/api/v1/projects/team-a", json={**shown, "webhookSecret": None})
    assert removed.status_code == 200 and removed.json()["hasWebhookSecret"] is False
    again = push_body(after="f" * 40)
    assert api.deliver(again, delivery_headers(again, TEAM_A_SECRET)).status_code == 401
    weak = api.client.put("/api/v1/projects/team-a", json={**shown, "webhookSecret": "short"})
    assert weak.status_code == 422
    assert "short" not in weak.text
