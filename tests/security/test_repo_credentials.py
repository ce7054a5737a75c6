"""Git credentials go to the repository they were given for, and nowhere else.

The attacker is a member of project `team-a`. Their app has credentials for a private repository
on a git server that asks for basic auth. They PUT the app at a listener of theirs (plain http on
127.0.0.1 that answers 401 to ask for credentials and records every Authorization header), and a
real worker syncs it: nothing may arrive. A token written into the URL is refused and never
shown, logged or traced. Repository credentials an admin registers serve only the projects and
the URL prefix they were registered for. Real API (TestClient), real worker thread, real git over
HTTP; no cluster is needed, since everything here happens before the worker talks to one.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest
import redis
import uvicorn
from fastapi.testclient import TestClient
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from api.app import create_app
from api.settings import Settings
from cli.main import main
from deploy.testbed.process import free_port
from fleet.control.registry import records
from fleet.control.registry.syncrecords import SyncRecord
from tests.api.conftest import ADMIN_TOKEN, fake_kubeconfig, settings_for
from tests.support import manifests as m
from tests.support.fleet import FleetEnv, wait_until
from tests.support.gitrepo import GitRepo
from tests.support.gitserver import GitHttpServer
from tests.support.listener import CredentialListener
from tests.support.redis_server import RedisServer

USER, PASSWORD = "deploy", "git-password-Zq81-only-for-the-private-server"
TOKEN = "ghp_tokenWrittenIntoTheUrl0123456789"
CLUSTER = "east"  # registered, never reached: every refusal here comes before the cluster


@dataclass
class Env:
    fleet: FleetEnv
    client: TestClient
    git: GitHttpServer
    listener: CredentialListener
    repo: GitRepo
    member: dict[str, str]
    settings: Settings

    def admin_post(self, path: str, body: dict[str, Any]) -> Any:
        response = self.client.post(path, json=body)
        assert response.status_code == 201, response.text
        return response.json()

    def token(self, name: str, role: str, project: str | None = None) -> dict[str, str]:
        body = {"name": name, "role": role, "project": project}
        return {"Authorization": f"Bearer {self.admin_post('/api/v1/tokens', body)['token']}"}

    def private(self, path: str) -> str:
        return self.git.url_for(path)

    def sync(self, app: str, *, by: dict[str, str] | None = None) -> SyncRecord:
        """Sync `app` through the API (as the member unless `by` says who); the worker's record
        of that sync."""
        wait_until(self.fleet.idle, timeout=60, what="no sync still pending")
        before = len(self.fleet.store.history(app, CLUSTER))
        headers = self.member if by is None else by
        response = self.client.post(f"/api/v1/apps/{app}/sync", headers=headers)
        assert response.status_code == 202, response.text

        def recorded() -> bool:
            return len(self.fleet.store.history(app, CLUSTER)) > before

        wait_until(recorded, timeout=60, what=f"the worker's record of the sync of {app}")
        newest = self.fleet.store.history(app, CLUSTER)[0]
        assert isinstance(newest, SyncRecord)
        return newest

    def sync_new_app(self, repo: str) -> SyncRecord:
        """Create an app of team-a on `repo`, without credentials of its own, and sync it."""
        created = self.client.post("/api/v1/apps", json=app_body("new", repo), headers=self.member)
        assert created.status_code == 201, created.text
        return self.sync("new")


def app_body(name: str, repo: str, project: str = "team-a", **extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        "project": project,
        "source": {"repo": repo, "path": "app"},
        "destination": {"cluster": CLUSTER, "namespace": project},
        "syncPolicy": {"retry": {"limit": 0}},
        **extra,
    }


def project(name: str, *globs: str) -> dict[str, Any]:
    return {
        "name": name,
        "sourceRepos": list(globs),
        "destinations": [{"cluster": CLUSTER, "namespace": name}],
    }


@pytest.fixture
def env(redis_server: RedisServer, tmp_path: Path) -> Iterator[Env]:
    fleet = FleetEnv(redis_server.url, tmp_path)
    repo = GitRepo.create(tmp_path / "private")
    repo.commit({"app/cm.yaml": m.configmap("settings", "k: v")})
    paths = {"team-a/shop": repo.path, "team-a/mirror": repo.path}
    git = GitHttpServer(paths, username=USER, password=PASSWORD).start()
    listener = CredentialListener().start()
    settings = settings_for(fleet.redis_url, prefix=fleet.prefix, secret_key=fleet.secret_key)
    try:
        with TestClient(
            create_app(settings), headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}
        ) as client:
            kubeconfig = fake_kubeconfig("tok-east", server="https://127.0.0.1:9")
            env = Env(fleet, client, git, listener, repo, {}, settings)
            env.admin_post("/api/v1/clusters", {"name": CLUSTER, "kubeconfig": kubeconfig})
            env.admin_post("/api/v1/projects", project("team-a", "http://127.0.0.1:*/team-a/*"))
            env.admin_post("/api/v1/projects", project("team-b", "http://127.0.0.1:*/**"))
            env.member = env.token("team-a-ci", "member", "team-a")
            fleet.worker_thread("w1")
            yield env
    finally:
        fleet.close()
        listener.stop()
        git.stop()


def test_changing_the_url_drops_the_credentials_and_the_worker_sends_none_to_the_new_url(
    env: Env,
) -> None:
    credentials = {"username": USER, "password": PASSWORD}
    body = app_body("shop", env.private("team-a/shop"), credentials=credentials)
    created = env.client.post("/api/v1/apps", json=body, headers=env.member)
    first = env.sync("shop")
    collector = env.listener.url("team-a/collector")

    moved = env.client.put(
        "/api/v1/apps/shop", json=app_body("shop", collector), headers=env.member
    )
    second = env.sync("shop")

    assert created.status_code == 201 and created.json()["hasCredentials"] is True
    assert first.revision == env.repo.head()  # the credentials did fetch the private repository
    assert moved.status_code == 200, moved.text
    assert moved.json()["hasCredentials"] is False
    assert moved.json()["warnings"] == [
        f"git credentials dropped: they were given for {env.private('team-a/shop')}, and the "
        f"app now names {collector}; send `credentials` again to use them with the new URL"
    ]
    assert env.fleet.store.git_credentials("shop") is None
    assert env.listener.requests, "the worker asked the new URL"
    assert env.listener.authorizations == []
    assert second.error == (
        f"authentication required for {collector} (HTTP 401): give the repository's credentials"
    )
    assert PASSWORD not in moved.text + second.error


def test_credentials_stay_with_another_spelling_of_their_url_and_move_when_given_again(
    env: Env,
) -> None:
    credentials = {"username": USER, "password": PASSWORD}
    body = app_body("shop", env.private("team-a/shop"), credentials=credentials)
    env.client.post("/api/v1/apps", json=body, headers=env.member)
    respelled = env.private("team-a/shop").replace("http://", "HTTP://") + "/"

    kept = env.client.put("/api/v1/apps/shop", json=app_body("shop", respelled), headers=env.member)
    synced_kept = env.sync("shop")
    again = app_body("shop", env.private("team-a/mirror"), credentials=credentials)
    moved = env.client.put("/api/v1/apps/shop", json=again, headers=env.member)
    synced_moved = env.sync("shop")

    assert kept.json()["hasCredentials"] is True and kept.json()["warnings"] == []
    assert synced_kept.revision == env.repo.head()
    assert moved.json()["hasCredentials"] is True and moved.json()["warnings"] == []
    assert synced_moved.revision == env.repo.head()


def test_credentials_stored_before_they_were_bound_are_sent_nowhere(env: Env) -> None:
    """A record as an older gitfleet left it: credentials without a URL, and an app whose URL
    was changed by a PUT that kept them."""
    credentials = {"username": USER, "password": PASSWORD}
    body = app_body("shop", env.private("team-a/shop"), credentials=credentials)
    env.client.post("/api/v1/apps", json=body, headers=env.member)
    store, keys = env.fleet.store, env.fleet.store.keys
    legacy = json.dumps({"username": USER, "password": PASSWORD})
    store.redis.set(keys.app_credentials("shop"), store.box.encrypt(legacy))
    collector = env.listener.url("team-a/collector")
    old = store.get_app("shop")
    moved = replace(old, source=replace(old.source, repo=collector))
    store.redis.set(keys.app("shop"), records.to_json(moved))

    refused = env.sync("shop")

    assert refused.error == (
        "the git credentials of app shop were stored before gitfleet bound credentials to a "
        "repository URL, so they are sent nowhere: give them again (PUT the app with "
        "`credentials`)"
    )
    assert env.listener.requests == []


def test_a_token_in_the_url_is_refused_and_never_shown_logged_or_traced(
    env: Env, spans: InMemorySpanExporter, caplog: pytest.LogCaptureFixture
) -> None:
    spans.clear()
    in_url = env.listener.url("team-a/collector").replace("//", f"//{TOKEN}@", 1)

    refused = env.client.post("/api/v1/apps", json=app_body("shop", in_url), headers=env.member)
    # the same URL in a record an older gitfleet accepted
    env.client.post("/api/v1/apps", json=app_body("shop", env.private("team-a/shop")))
    store = env.fleet.store
    old = store.get_app("shop")
    legacy = replace(old, source=replace(old.source, repo=in_url))
    store.redis.set(store.keys.app("shop"), records.to_json(legacy))
    shown = env.client.get("/api/v1/apps/shop", headers=env.member)
    listed = env.client.get("/api/v1/apps", headers=env.member)
    synced = env.sync("shop")

    assert refused.status_code == 422
    assert refused.json()["detail"].startswith("source.repo: repository URL http://***@127.0.0")
    assert "carries user-info before '@'" in refused.json()["detail"]
    assert shown.json()["spec"]["source"]["repo"].startswith("http://***@127.0.0.1:")
    assert listed.json()[0]["repo"].startswith("http://***@127.0.0.1:")
    assert "carries user-info before '@'" in synced.error
    assert env.listener.requests == []
    traced = "\n".join(s.to_json() for s in spans.get_finished_spans())
    for text in (refused.text, shown.text, listed.text, synced.error, traced, caplog.text):
        assert TOKEN not in text


def test_repository_credentials_are_admin_only_write_only_and_stored_encrypted(
    env: Env, redis_server: RedisServer
) -> None:
    prefix = env.private("team-a")
    body = {
        "name": "team-a-git",
        "url": prefix,
        "projects": ["team-a"],
        "username": USER,
        "password": PASSWORD,
    }
    viewer = env.token("dashboard", "viewer")

    by_member = env.client.post("/api/v1/repositories", json=body, headers=env.member)
    listed_by_member = env.client.get("/api/v1/repositories", headers=env.member)
    listed_by_viewer = env.client.get("/api/v1/repositories", headers=viewer)
    created = env.client.post("/api/v1/repositories", json=body)
    listed = env.client.get("/api/v1/repositories")
    stored = b"".join(
        redis.Redis.from_url(redis_server.url).dump(k) or b""
        for k in env.fleet.redis.scan_iter(f"{env.fleet.prefix}:*")
    )

    assert by_member.status_code == 403 and "not an admin" in by_member.json()["detail"]
    assert listed_by_member.status_code == 403 and listed_by_viewer.status_code == 403
    assert created.status_code == 201, created.text
    assert created.json() == {
        "name": "team-a-git",
        "url": prefix,
        "projects": ["team-a"],
        "created": created.json()["created"],
    }
    assert listed.json() == [created.json()]
    assert PASSWORD not in created.text + listed.text
    assert PASSWORD.encode() not in stored


def test_repository_credentials_serve_only_their_projects_and_their_url_prefix(env: Env) -> None:
    collector = env.listener.url("team-a")
    for name, url in (("team-a-git", env.private("team-a")), ("team-a-collector", collector)):
        repository = {"name": name, "url": url, "projects": ["team-a"], "password": PASSWORD}
        env.admin_post("/api/v1/repositories", {**repository, "username": USER})
    env.admin_post("/api/v1/projects", project("team-c", "http://127.0.0.1:*/**"))
    env.client.put(
        "/api/v1/projects/team-a",
        json=project("team-a", "http://127.0.0.1:*/team-a/*", "http://127.0.0.1:*/team-ab/*"),
    )
    apps = {
        "in-scope": app_body("in-scope", env.private("team-a/shop")),
        "other-project": app_body("other-project", env.listener.url("team-a/x"), "team-b"),
        "sibling-prefix": app_body("sibling-prefix", env.listener.url("team-ab/x")),
    }
    for body in apps.values():
        created = env.client.post("/api/v1/apps", json=body)
        assert created.status_code == 201, created.text
        assert created.json()["hasCredentials"] is False

    in_scope = env.sync("in-scope")
    other_project = env.sync("other-project", by=env.token("team-b-ci", "member", "team-b"))
    sibling_prefix = env.sync("sibling-prefix")
    env.client.delete("/api/v1/repositories/team-a-git")
    removed = env.sync("in-scope")

    assert in_scope.revision == env.repo.head()
    assert "authentication" not in in_scope.error
    assert "authentication required" in other_project.error
    assert "authentication required" in sibling_prefix.error
    assert {path.split("/")[1] for path, _ in env.listener.requests} == {"team-a", "team-ab"}
    assert env.listener.authorizations == []
    assert "authentication required" in removed.error


def test_repository_credentials_refuse_a_url_or_project_the_fleet_would_not_use(env: Env) -> None:
    cases = {
        "file:///var/cache/gitfleet": (422, "url: repository URL file:///var/cache/gitfleet"),
        "github.com/team-a": (422, "is a local path or an scp-like address"),
        "http://git.example.com/team-a": (422, "uses plain http"),
        f"https://{TOKEN}@github.com/team-a": (422, "carries user-info"),
    }
    answers = {
        url: env.client.post(
            "/api/v1/repositories",
            json={"name": "x", "url": url, "projects": ["team-a"], "password": PASSWORD},
        )
        for url in cases
    }
    unknown = env.client.post(
        "/api/v1/repositories",
        json={"name": "x", "url": "https://github.com", "projects": ["nope"], "password": "p"},
    )

    for url, (status, message) in cases.items():
        assert answers[url].status_code == status, answers[url].text
        assert message in answers[url].json()["detail"]
        assert TOKEN not in answers[url].text
    assert unknown.status_code == 422 and "no project named nope" in unknown.json()["detail"]
    assert env.client.get("/api/v1/repositories").json() == []


def test_the_cli_adds_lists_and_removes_repository_credentials_reading_the_password_from_env(
    env: Env, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    port = free_port()
    app = create_app(env.settings)
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.02)
    monkeypatch.setenv("GITFLEET_GIT_PASSWORD", PASSWORD)
    connection = ["--server", f"http://127.0.0.1:{port}", "--token", ADMIN_TOKEN]
    prefix = env.private("team-a")

    printed: list[str] = []

    def run(*argv: str) -> tuple[int, str]:
        code = main([*argv, *connection])
        out, err = capsys.readouterr()
        printed.append(out + err)
        return code, out

    try:
        added = run("repo", "add", "gh", "--url", prefix, "--project", "team-a", "--username", USER)
        listed = run("repo", "list", "-o", "json")
        synced = env.sync_new_app(prefix + "/shop")
        removed = run("repo", "remove", "gh")
        after = run("repo", "list")
    finally:
        server.should_exit = True
        thread.join(timeout=10)

    assert added == (0, f"repository credentials gh registered for {prefix} (team-a)\n")
    assert listed[0] == 0 and [r["name"] for r in json.loads(listed[1])] == ["gh"]
    assert synced.revision == env.repo.head()
    assert removed == (0, "repository credentials gh removed\n")
    assert after[0] == 0 and "gh" not in after[1]
    assert all(PASSWORD not in text for text in printed)
