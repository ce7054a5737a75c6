"""A durable registry (issue 12, item 2): what gitfleet manages survives Redis.

- Redis runs with append-only persistence (`deploy.redis`): killed with SIGKILL and started
  again on its data folder, it has every cluster, project, app, repository credential and
  token back, and every token still works.
- `gitfleet registry export` then `gitfleet registry import` into an empty Redis restores a
  fleet that syncs without re-creating anything: the objects in the clusters keep their uids
  and resourceVersions, because each app keeps its uid.
- A file of a newer format version is refused, and nothing is written.
- The API and a worker process ride out a Redis restart: requests answer 503 meanwhile, then
  work again; the worker syncs again, nobody restarted by hand.

Real things throughout: redis-servers with their own data folders, the coordinator as `python
-m cli.main api`, the CLI as `python -m cli.main registry ...`, workers as `python -m worker`
processes, the testbed's clusters.
"""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from cryptography.fernet import Fernet
from redis import Redis

from deploy.testbed.process import free_port
from fleet.control.routing.dispatch import Dispatcher
from fleet.control.routing.sharding import NoWorkers
from fleet.model import ObjectRef, Trigger
from tests.support.fleet import FleetEnv, settings_ref, wait_until
from tests.support.processenv import process_env
from tests.support.redis_server import RedisServer

ROOT = Path(__file__).resolve().parents[2]
ADMIN = "gf_admin-token-for-durability-tests-0123456789"
PREFIX = "gitfleet"  # the API's default prefix


@dataclass
class Api:
    """`python -m cli.main api` against one Redis."""

    proc: subprocess.Popen[bytes]
    port: int
    log: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def call(self, method: str, path: str, body: Any = None, token: str = ADMIN) -> tuple[int, Any]:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(self.url + path, data=data, method=method)
        request.add_header("Authorization", f"Bearer {token}")
        if data is not None:
            request.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                raw = response.read()
                return response.status, json.loads(raw) if raw else None
        except urllib.error.HTTPError as e:
            raw = e.read()
            return e.code, json.loads(raw) if raw else None
        except OSError:
            return 0, None

    def ready(self) -> bool:
        if self.proc.poll() is not None:
            raise AssertionError(f"the API exited:\n{self.output()}")
        return self.call("GET", "/readyz")[0] == 200


def _environment(redis_url: str, key: str, folder: Path) -> dict[str, str]:
    return process_env(
        redis_url,
        folder,
        GITFLEET_ADMIN_TOKEN=ADMIN,
        GITFLEET_SECRET_KEY=key,
        GITFLEET_INSECURE_GIT_HOSTS="127.0.0.1",
        GITFLEET_SCHEDULER="false",
    )


@pytest.fixture
def processes() -> Iterator[list[subprocess.Popen[bytes]]]:
    procs: list[subprocess.Popen[bytes]] = []
    yield procs
    for proc in procs:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


@pytest.fixture
def servers(tmp_path: Path) -> Iterator[list[RedisServer]]:
    found: list[RedisServer] = []
    yield found
    for server in found:
        if server.proc.poll() is None:
            server.stop()


def _redis(servers: list[RedisServer], folder: Path) -> RedisServer:
    folder.mkdir(parents=True)
    server = RedisServer(folder)
    servers.append(server)
    return server


def _api(procs: list[subprocess.Popen[bytes]], env: dict[str, str], log: Path) -> Api:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "cli.main", "api", "--port", str(port)],
        cwd=ROOT,
        env=env,
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
    )
    procs.append(proc)
    api = Api(proc, port, log)
    wait_until(api.ready, timeout=60, what="the API ready")
    return api


def _cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cli.main", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def _worker(
    procs: list[subprocess.Popen[bytes]], env: dict[str, str], name: str, log: Path
) -> subprocess.Popen[bytes]:
    args = ["--name", name, "--ttl", "2", "--lease-ttl", "4", "--no-self-heal"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "worker", *args, "--log-level", "INFO"],
        cwd=ROOT,
        env=env,
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
    )
    procs.append(proc)
    return proc


def _has_owner(dispatcher: Dispatcher, instance: str) -> bool:
    try:
        dispatcher.queue_for(instance)
    except NoWorkers:
        return False
    return True


def _registry(api: Api) -> dict[str, Any]:
    """What a person sees of the registry through the API."""
    seen = {}
    for kind in ("clusters", "projects", "apps", "repositories", "tokens"):
        status, body = api.call("GET", f"/api/v1/{kind}")
        assert status == 200, (kind, status, body)
        seen[kind] = body
    return seen


# -- Redis killed and restarted on its data ------------------------------------------------------


@pytest.mark.redis
def test_redis_killed_and_restarted_on_its_data_loses_no_record(
    servers: list[RedisServer], processes: list[subprocess.Popen[bytes]], tmp_path: Path
) -> None:
    redis = _redis(servers, tmp_path / "redis")
    env = _environment(redis.url, Fernet.generate_key().decode(), tmp_path)
    api = _api(processes, env, tmp_path / "api.log")

    cluster = {"name": "c1", "server": "https://127.0.0.1:6443", "token": "kube-token-1"}
    assert api.call("POST", "/api/v1/clusters", cluster)[0] == 201
    project = {
        "name": "team",
        "sourceRepos": ["*"],
        "destinations": [{"cluster": "*", "namespace": "*"}],
        "webhookSecret": "a-webhook-secret-of-enough-length-0123",
    }
    assert api.call("POST", "/api/v1/projects", project)[0] == 201
    app = {
        "name": "shop",
        "project": "team",
        "source": {"repo": "https://git.example.com/team/shop.git", "path": "deploy"},
        "destination": {"namespace": "shop", "cluster": "c1"},
        "credentials": {"username": "bot", "password": "git-password-1"},
    }
    status, created = api.call("POST", "/api/v1/apps", app)
    assert status == 201, created
    repository = {
        "name": "team-repos",
        "url": "https://git.example.com/team",
        "projects": ["team"],
        "password": "repo-token-1",
    }
    assert api.call("POST", "/api/v1/repositories", repository)[0] == 201
    status, member = api.call(
        "POST", "/api/v1/tokens", {"name": "ci", "role": "member", "project": "team"}
    )
    assert status == 201, member
    before = _registry(api)

    redis.kill()
    status, _ = api.call("GET", "/api/v1/apps")
    assert status == 503  # Redis away: a retry cures it, the API does not crash
    assert api.call("GET", "/readyz")[0] == 503
    redis.start()

    wait_until(api.ready, timeout=30, what="the API ready again")
    assert _registry(api) == before
    status, apps = api.call("GET", "/api/v1/apps", token=member["token"])
    assert status == 200 and [a["name"] for a in apps] == ["shop"]
    assert api.proc.poll() is None
    assert "Traceback" not in api.output()


# -- export, then import into an empty Redis --------------------------------------------------


def _uids(env: FleetEnv, cluster: str, apps: list[str]) -> dict[str, tuple[str, str]]:
    found = {}
    for app in apps:
        for ref in (settings_ref(app), ObjectRef("apps", "v1", "Deployment", app, "web")):
            live = env.live(cluster, ref)
            assert live is not None, ref
            meta = live["metadata"]
            found[f"{app}/{ref.kind}"] = (meta["uid"], meta["resourceVersion"])
    return found


def test_export_then_import_into_an_empty_redis_restores_a_fleet_that_syncs_quietly(
    testbed: list[Any],
    servers: list[RedisServer],
    processes: list[subprocess.Popen[bytes]],
    tmp_path: Path,
) -> None:
    old = _redis(servers, tmp_path / "old-redis")
    (tmp_path / "fleet").mkdir()
    fleet = FleetEnv(old.url, tmp_path / "fleet", prefix=PREFIX)
    try:
        fleet.add_clusters(testbed[:1])
        cluster = testbed[0].name
        apps = [fleet.app_name(i) for i in range(2)]
        revision = fleet.commit_apps(apps)
        for app in apps:
            fleet.add_app(app, cluster)
        env_old = _environment(old.url, fleet.secret_key, tmp_path)
        _worker(processes, env_old, "w-old", tmp_path / "w-old.log")
        instance = f"{apps[0]}@{cluster}"
        wait_until(lambda: _has_owner(fleet.dispatcher, instance), timeout=60, what="worker up")
        for app in apps:
            answer = fleet.sync_and_wait(app, cluster)
            assert fleet.status(app, cluster).revision == revision, answer
        before = _uids(fleet, cluster, apps)
        api_old = _api(processes, env_old, tmp_path / "api-old.log")
        backup = tmp_path / "registry.json"
        exported = _cli({**env_old, "GITFLEET_SERVER": api_old.url, "GITFLEET_TOKEN": ADMIN},
                        "registry", "export", str(backup))  # fmt: skip
        assert exported.returncode == 0, exported.stderr
        assert backup.stat().st_mode & 0o077 == 0
        document = json.loads(backup.read_text())
        assert (document["format"], document["version"]) == ("gitfleet-registry", 1)
        assert fleet.secret_key not in backup.read_text()
        for proc in processes:
            proc.terminate()
            proc.wait(timeout=30)
        old.kill()

        new = _redis(servers, tmp_path / "new-redis")
        env_new = _environment(new.url, fleet.secret_key, tmp_path)
        api = _api(processes, env_new, tmp_path / "api-new.log")
        _, ready = api.call("GET", "/readyz")
        assert ready.get("registry") == "empty" and "registry import" in ready["warning"]
        client = {**env_new, "GITFLEET_SERVER": api.url, "GITFLEET_TOKEN": ADMIN}

        newer = tmp_path / "newer.json"
        newer.write_text(json.dumps({**document, "version": 2}))
        refused = _cli(client, "registry", "import", str(newer))
        assert refused.returncode == 2 and "version 2" in refused.stderr, refused.stderr
        assert api.call("GET", "/api/v1/apps")[1] == []

        partial = tmp_path / "partial.json"
        partial.write_text(json.dumps({**document, "apps": document["apps"][:1]}))
        first = _cli(client, "registry", "import", str(partial))
        assert first.returncode == 0, first.stderr
        assert f"inventory of app {apps[1]} that no registered app owns" in first.stdout

        imported = _cli(client, "registry", "import", str(backup), "-o", "json")
        assert imported.returncode == 0, imported.stderr
        answer = json.loads(imported.stdout)
        assert answer["counts"]["apps"] == {"created": 1, "updated": 0, "unchanged": 1, "kept": 0}
        assert answer["changes"]["clusters"]["unchanged"] == [cluster]
        # the shared testbed holds other tests' inventories too: only this fleet's apps count
        assert [o for o in answer["orphans"] if o["app"] in apps] == []
        assert answer["unreachable"] == {}
        again = json.loads(_cli(client, "registry", "import", str(backup), "-o", "json").stdout)
        assert all(c["created"] == c["updated"] == 0 for c in again["counts"].values())
        assert "warning" not in api.call("GET", "/readyz")[1]

        worker = _worker(processes, env_new, "w-new", tmp_path / "w-new.log")
        dispatcher = Dispatcher(Redis.from_url(new.url), prefix=PREFIX)
        wait_until(lambda: _has_owner(dispatcher, instance), timeout=60, what="worker up")
        for app in apps:
            ref = dispatcher.request_sync(app, cluster, trigger=Trigger.MANUAL)
            answer = dispatcher.wait(ref, timeout=120)
            assert answer is not None and not answer.get("error"), answer
            actions = {r["action"] for r in answer["resources"]}
            assert actions == {"unchanged"}, answer["resources"]
        assert _uids(fleet, cluster, apps) == before  # nothing re-created, nothing rewritten

        # the API and the worker ride out a Redis restart
        new.kill()
        assert api.call("GET", "/api/v1/apps")[0] == 503
        worker_log = tmp_path / "w-new.log"
        wait_until(
            lambda: "Redis unreachable" in worker_log.read_text(errors="replace"),
            timeout=30,
            what="the worker noticing the outage",
        )
        new.start()
        wait_until(api.ready, timeout=30, what="the API ready again")
        assert [a["name"] for a in api.call("GET", "/api/v1/apps")[1]] == sorted(apps)
        fleet.commit_apps(apps, data="k: v2")
        for app in apps:
            ref = dispatcher.request_sync(app, cluster, trigger=Trigger.MANUAL)
            answer = dispatcher.wait(ref, timeout=120)
            assert answer is not None, f"no sync of {app} after the Redis restart"
            assert fleet.live(cluster, settings_ref(app))["data"] == {"k": "v2"}
        assert worker.poll() is None and api.proc.poll() is None
        worker_output = worker_log.read_text(errors="replace")
        assert worker_output.count("Redis unreachable") == 1, worker_output  # logged once
        # at INFO, one line per sync, the worker's own: rq's per-job lines show only at DEBUG
        assert worker_output.count("sync succeeded") >= 2 * len(apps), worker_output
        assert "Job OK" not in worker_output and "result is kept" not in worker_output
        assert "Traceback" not in worker_output and "Traceback" not in api.output()
    finally:
        if old.proc.poll() is not None:
            old.start()  # on its data: so the cleanup finds the fleet's keys
        fleet.close()
