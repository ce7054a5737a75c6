"""Repository URLs: a member cannot make a worker read its own disk or another team's repository.

The attacker is a member of project `team-a`, whose `sourceRepos` allow
`https://github.com/team-a/*` (and the test git server's `team-a` folder). The issue's attack:
a repo string without a scheme was a local path on the worker, the old glob match dropped the
scheme and let `*` cross `/` and `..`, and the worker's git cache sat at a path computable from
the URL, so `github.com/team-a/../../<cache path>` passed the rule and deployed `team-b`'s
private Secret, fetched earlier with team-b's credentials. Each variant below is refused by the
real API with a 4xx naming the rule; a record written before these rules existed is refused by
the real worker before it reads anything, and nothing lands in the cluster or on disk.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from api.app import create_app
from api.deps import get_dispatcher
from fleet.control.keys import Keys
from fleet.control.registry.records import (
    AppDestination,
    AppRecord,
    AppSource,
    Destination,
    ProjectRecord,
    SyncPolicy,
)
from fleet.engine.source.cache import GitCredentials, SourceCache
from fleet.engine.source.remotes import RemotePolicy, RepoUrlError
from fleet.model import ObjectRef, Trigger
from tests.api.conftest import ADMIN_TOKEN, RecordingDispatcher, fake_kubeconfig, settings_for
from tests.conftest import Cluster
from tests.support.fleet import FleetEnv
from tests.support.gitrepo import GitRepo
from tests.support.gitserver import GitHttpServer
from tests.support.redis_server import RedisServer

TEAM_A_GLOBS = ["https://github.com/team-a/*", "http://127.0.0.1:*/team-a/*"]
TOKEN = "ghp_tokenInTheUserPart0123456789"

LOCAL = "is a local path or an scp-like address, not a URL"
SEGMENT = "has a path segment"
NOT_ALLOWED = "is not an allowed source of project team-a"

# repo -> (status, what the answer says)
ATTACKS = {
    "github.com/team-a/../../var/cache/gitfleet/git/0123abcd": (422, LOCAL),
    "github.com/team-a/shop": (422, LOCAL),
    "/var/cache/gitfleet/workers/w1/git/0123abcd": (422, LOCAL),
    "../../../var/cache/gitfleet": (422, LOCAL),
    "git@github.com:team-a/shop.git": (422, LOCAL),
    "file:///var/cache/gitfleet/workers/w1/git/0123abcd": (422, "has scheme file"),
    "https://github.com/team-a/../team-b/secrets": (422, SEGMENT),
    "https://github.com/team-a/%2e%2e/team-b/secrets": (422, SEGMENT),
    "https://github.com/team-a/%2E%2E/team-b/secrets": (422, SEGMENT),
    "https://github.com/team-a%2f..%2fteam-b/secrets": (422, SEGMENT),
    f"https://{TOKEN}@github.com/team-a/shop": (422, "carries user-info before '@'"),
    f"https://bot:{TOKEN}@github.com/team-a/shop": (422, "must not carry a password or token"),
    "http://github.com/team-a/shop": (422, "uses plain http"),
    "https://github.com/team-a/group/shop": (403, NOT_ALLOWED),
    "https://github.com/team-ab/shop": (403, NOT_ALLOWED),
    "https://github.com/Team-A/shop": (403, NOT_ALLOWED),
    "ssh://git@github.com/team-a/shop": (403, NOT_ALLOWED),
    "https://github.com:8443/team-a/shop": (403, NOT_ALLOWED),
    "https://github.com.evil.example/team-a/shop": (403, NOT_ALLOWED),
    "https://evil.example/github.com/team-a/shop": (403, NOT_ALLOWED),
    "http://127.0.0.1:8080/team-b/shop": (403, NOT_ALLOWED),
}


@dataclass
class Api:
    client: TestClient
    member: dict[str, str]

    def app_body(self, name: str, repo: str) -> dict[str, Any]:
        return {
            "name": name,
            "project": "team-a",
            "source": {"repo": repo, "path": "."},
            "destination": {"cluster": "east", "namespace": "team-a"},
        }


@pytest.fixture
def api(redis_server: RedisServer) -> Iterator[Api]:
    prefix = f"urls-{uuid.uuid4().hex[:8]}"
    app = create_app(settings_for(redis_server.url, prefix=prefix))
    app.dependency_overrides[get_dispatcher] = RecordingDispatcher
    with TestClient(app, headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}) as client:
        client.post("/api/v1/clusters", json={"name": "east", "kubeconfig": fake_kubeconfig("t")})
        project = {
            "name": "team-a",
            "sourceRepos": TEAM_A_GLOBS,
            "destinations": [{"cluster": "east", "namespace": "team-a"}],
        }
        assert client.post("/api/v1/projects", json=project).status_code == 201
        body = {"name": "team-a-ci", "role": "member", "project": "team-a"}
        token = client.post("/api/v1/tokens", json=body).json()["token"]
        yield Api(client, {"Authorization": f"Bearer {token}"})
        store = app.state.store
        for key in store.redis.scan_iter(Keys(prefix).pattern):
            store.redis.delete(key)


@pytest.mark.parametrize(("repo", "refusal"), ATTACKS.items(), ids=list(ATTACKS))
def test_a_member_cannot_create_an_app_from_a_url_outside_its_project(
    api: Api, repo: str, refusal: tuple[int, str]
) -> None:
    status, message = refusal

    created = api.client.post("/api/v1/apps", json=api.app_body("shop", repo), headers=api.member)

    assert created.status_code == status, created.text
    assert message in created.json()["detail"]
    assert TOKEN not in created.text
    assert api.client.get("/api/v1/apps", headers=api.member).json() == []


def test_a_member_cannot_move_an_allowed_app_to_a_url_outside_its_project(api: Api) -> None:
    allowed = "https://github.com/team-a/shop"
    created = api.client.post(
        "/api/v1/apps", json=api.app_body("shop", allowed), headers=api.member
    )

    answers = {
        repo: api.client.put(
            "/api/v1/apps/shop", json=api.app_body("shop", repo), headers=api.member
        )
        for repo in ATTACKS
    }

    assert created.status_code == 201, created.text
    for repo, (status, message) in ATTACKS.items():
        assert answers[repo].status_code == status, (repo, answers[repo].text)
        assert message in answers[repo].json()["detail"]
    shown = api.client.get("/api/v1/apps/shop", headers=api.member).json()
    assert shown["spec"]["source"]["repo"] == allowed


def test_a_source_glob_that_is_not_a_repository_glob_is_refused(api: Api) -> None:
    body = {"name": "team-c", "sourceRepos": ["https://github.com/team-c/*", "git@github.com:*"]}

    created = api.client.post("/api/v1/projects", json=body)

    assert created.status_code == 422
    assert created.json()["detail"].startswith("sourceRepos.1: 'git@github.com:*' is not a ")


def test_cache_folders_are_named_by_a_hash_of_the_repository_never_by_its_text(
    tmp_path: Path,
) -> None:
    root = tmp_path / "git"
    cache = SourceCache(root, remotes=RemotePolicy.from_setting("127.0.0.1"))
    spellings = [
        "https://github.com/team-a/shop",
        "https://GitHub.com:443/team-a/shop.git",
        "HTTPS://github.com/team-a/shop/",
        "https://github.com/team-a/sh%6fp",
    ]
    target = cache.repo_dir(spellings[0])
    escape = os.path.relpath(target, os.getcwd())

    folders = {cache.repo_dir(url) for url in spellings}
    refused = []
    for url in (f"github.com/team-a/../../{escape}", str(target), target.as_uri()):
        with pytest.raises(RepoUrlError) as error:
            cache.resolve(url, credentials=GitCredentials("bot", TOKEN))
        refused.append(str(error.value))

    assert folders == {target}
    assert target.parent == root and len(target.name) == 24
    assert int(target.name, 16) >= 0  # hex digits only: no URL text in the name
    assert cache.repo_dir("https://github.com/team-b/shop") != target
    assert LOCAL in refused[0] and LOCAL in refused[1]
    assert "has scheme file" in refused[2]
    assert not root.exists() or list(root.iterdir()) == []
    assert cache.fetches == 0


# -- the attack, end to end: a real worker and the testbed ----------------------------

SECRET = """apiVersion: v1
kind: Secret
metadata:
  name: team-b-private
stringData:
  password: team-b-database-password
"""


@pytest.fixture
def fleet(redis_server: RedisServer, testbed: list[Cluster], tmp_path: Path) -> Iterator[FleetEnv]:
    """The shared `fleet` (tests/conftest.py) with one cluster: a refused record needs no more."""
    env = FleetEnv(redis_server.url, tmp_path)
    env.add_clusters(testbed[:1])
    yield env
    env.close()


def test_a_record_naming_the_worker_cache_is_refused_by_the_worker_and_deploys_nothing(
    fleet: FleetEnv, tmp_path: Path
) -> None:
    cluster = next(iter(fleet.clusters))
    private = GitRepo.create(tmp_path / "team-b-private")
    private.commit({"secrets/secret.yaml": SECRET})
    with GitHttpServer({"team-b/private": private.path}, username="b", password=TOKEN) as git:
        team_a, team_b = (f"{fleet.prefix}-{t}" for t in ("team-a", "team-b"))
        globs = {team_a: tuple(TEAM_A_GLOBS), team_b: ("http://127.0.0.1:*/team-b/*",)}
        for name, allowed in globs.items():
            project = ProjectRecord(name, source_repos=allowed, destinations=(Destination(),))
            fleet.store.put_project(project, create=True)
        worker = fleet.worker_thread("w1")
        source = worker.process.runtime.caches.source
        victim = _app(fleet, team_b, git.url_for("team-b/private"), cluster)
        fleet.store.put_app(victim, credentials=GitCredentials("b", TOKEN), create=True)
        deployed = _sync(fleet, team_b, cluster)
        cache = source.repo_dir(git.url_for("team-b/private"))
        traversal = f"github.com/team-a/../../{os.path.relpath(cache, os.getcwd())}"
        before = sorted(p.name for p in source.root.iterdir())
        # written straight into the registry, as the API accepted it before this change
        fleet.store.put_app(_app(fleet, team_a, traversal, cluster), create=True)

        refused = _sync(fleet, team_a, cluster)

    assert deployed.get("error", "") == "", deployed
    assert _secret(fleet, cluster, team_b) is not None
    assert Path(traversal).resolve() == cache  # the path did lead to team-b's cache
    assert refused["error"].startswith(f"repository {traversal} {LOCAL}")
    assert _secret(fleet, cluster, team_a) is None
    assert sorted(p.name for p in source.root.iterdir()) == before


def _app(fleet: FleetEnv, project: str, repo: str, cluster: str) -> AppRecord:
    fleet.created.append((project, cluster, project))
    return AppRecord(
        name=project,
        project=project,
        source=AppSource(repo=repo, path="secrets"),
        destination=AppDestination(namespace=project, cluster=cluster),
        sync_policy=SyncPolicy(create_namespace=True, interval_s=3600),
    )


def _sync(fleet: FleetEnv, app: str, cluster: str) -> dict[str, Any]:
    job = fleet.dispatcher.request_sync(app, cluster, trigger=Trigger.MANUAL)
    answer = fleet.dispatcher.wait(job, 120)
    assert answer is not None, f"no answer from the sync of {app}"
    return answer


def _secret(fleet: FleetEnv, cluster: str, namespace: str) -> dict[str, Any] | None:
    return fleet.live(cluster, ObjectRef("", "v1", "Secret", namespace, "team-b-private"))
