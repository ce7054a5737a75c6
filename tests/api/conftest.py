"""Fixtures for the coordinator: a fresh Redis database per test, the real FastAPI app in its
ASGI stack (TestClient runs the lifespan), and a recording dispatcher at the worker boundary.

The dispatcher is the one thing replaced: `fleet.control.routing.dispatch` belongs to the worker
side, and these tests are about what the API asks of it (which app, which cluster, which trigger,
which trace context), through `app.dependency_overrides`, the boundary FastAPI offers for it.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
import redis
from cryptography.fernet import Fernet
from fastapi.testclient import TestClient

from api.app import create_app
from api.deps import get_dispatcher
from api.settings import Settings
from fleet.control.keys import Queues
from fleet.control.registry.secrets import SecretBox
from fleet.control.registry.store import Store
from tests.support.redis_server import RedisServer

ADMIN_TOKEN = "gf_admin-token-for-tests-0123456789"
WEBHOOK_SECRET = "webhook-secret-for-tests"
SECRET_KEY = Fernet.generate_key().decode()
_databases = itertools.cycle(range(1, 16))


@dataclass(frozen=True)
class RecordedJob:
    job_id: str
    queue: str
    merged: bool = False


@dataclass
class RecordingDispatcher:
    """Records every request; `results[(app, cluster)]` is what `wait` hands back."""

    calls: list[dict[str, Any]] = field(default_factory=list)
    results: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    waited: list[tuple[RecordedJob, float]] = field(default_factory=list)

    def request_sync(
        self,
        app: str,
        cluster: str,
        *,
        trigger: str,
        revision: str | None = None,
        dry_run: bool = False,
        carrier: dict[str, str] | None = None,
        prune: bool | None = None,
    ) -> RecordedJob:
        call = dict(app=app, cluster=cluster, trigger=trigger, revision=revision, dry_run=dry_run)
        self.calls.append({**call, "carrier": dict(carrier or {}), "prune": prune})
        return RecordedJob(
            f"job-{len(self.calls)}", Queues().shard(cluster)
        )  # a worker per cluster

    def wait(self, job: RecordedJob, timeout: float) -> dict[str, Any] | None:
        self.waited.append((job, timeout))
        call = self.calls[int(job.job_id.removeprefix("job-")) - 1]
        return self.results.get((call["app"], call["cluster"]))


@dataclass
class Api:
    client: TestClient
    dispatcher: RecordingDispatcher
    store: Store

    def as_(self, token: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {token}"}


@pytest.fixture
def redis_url(redis_server: RedisServer) -> str:
    url = redis_server.url.rsplit("/", 1)[0] + f"/{next(_databases)}"
    redis.Redis.from_url(url).flushdb()
    return url


def settings_for(url: str, **overrides: Any) -> Settings:
    values = dict(
        redis_url=url,
        admin_token=ADMIN_TOKEN,
        secret_key=SECRET_KEY,
        webhook_secret=WEBHOOK_SECRET,
        diff_timeout_s=5.0,
        insecure_git_hosts="127.0.0.1",  # the test git servers: plain http on the loopback
    )
    return Settings.model_validate({**values, **overrides})


@pytest.fixture
def api(redis_url: str) -> Iterator[Api]:
    app = create_app(settings_for(redis_url))
    dispatcher = RecordingDispatcher()
    app.dependency_overrides[get_dispatcher] = lambda: dispatcher
    with TestClient(app, headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}) as client:
        yield Api(client, dispatcher, app.state.store)


@pytest.fixture
def store(redis_url: str) -> Store:
    connection = redis.Redis.from_url(redis_url)
    return Store(connection, SecretBox.from_setting(SECRET_KEY))


def fake_kubeconfig(token: str, server: str = "https://127.0.0.1:6443") -> str:
    return f"""
apiVersion: v1
kind: Config
clusters:
- name: c
  cluster:
    server: {server}
    insecure-skip-tls-verify: true
users:
- name: u
  user:
    token: {token}
contexts:
- name: c
  context: {{cluster: c, user: u}}
current-context: c
"""


def add_cluster(api: Api, name: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    body = {"name": name, "kubeconfig": fake_kubeconfig(f"tok-{name}"), "labels": labels or {}}
    response = api.client.post("/api/v1/clusters", json=body)
    assert response.status_code == 201, response.text
    result: dict[str, Any] = response.json()
    return result


def app_body(name: str, **overrides: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "name": name,
        "source": {"repo": "https://git.example.com/team/shop.git", "path": "deploy"},
        "destination": {"cluster": "east", "namespace": "shop"},
    }
    return {**body, **overrides}


def add_app(api: Api, name: str, **overrides: Any) -> dict[str, Any]:
    response = api.client.post("/api/v1/apps", json=app_body(name, **overrides))
    assert response.status_code == 201, response.text
    result: dict[str, Any] = response.json()
    return result


def preview_resource(kind: str, name: str, action: str) -> dict[str, Any]:
    """One object of a preview job's answer, every field as the worker writes it
    (`ResourceResult.to_json`)."""
    return {
        "group": "",
        "version": "v1",
        "kind": kind,
        "namespace": "shop",
        "name": name,
        "wave": 0,
        "action": action,
        "health": "Healthy",
        "message": "",
    }


def token_for(api: Api, name: str, role: str, project: str | None = None) -> str:
    body = {"name": name, "role": role, "project": project}
    response = api.client.post("/api/v1/tokens", json=body)
    assert response.status_code == 201, response.text
    token: str = response.json()["token"]
    return token


def two_projects(api: Api) -> None:
    """Cluster `east`; projects team-a and team-b with one app each (`team-a-shop`, ...)."""
    add_cluster(api, "east")
    for team in ("team-a", "team-b"):
        body = {
            "name": team,
            "sourceRepos": ["*"],
            "destinations": [{"cluster": "*", "namespace": f"{team}-*"}],
        }
        assert api.client.post("/api/v1/projects", json=body).status_code == 201
        destination = {"cluster": "east", "namespace": f"{team}-shop"}
        add_app(api, f"{team}-shop", project=team, destination=destination)
