"""The invariants the fault suite (`loadtest.faults`) measures, as tests (issue 12, item 4).

The suite reports figures; these tests hold the line on what must be zero whatever the timing:

- the API process killed with SIGKILL while requests are in flight: every record whose
  creation was answered 201 is there after a restart, and every record is whole (each one the
  list names reads back); a request cut off either created its record or nothing, so repeating
  it answers 201 or 409, never a half-written record;
- Redis killed with SIGKILL while commits stream in and syncs run, then started on its data
  folder: no registry record lost, no requested sync lost (each app ends at its newest commit,
  in the cluster and in its status), no instance synced by two workers at once.

The paused worker, the killed worker, the API server and git outages have theirs in
`test_fencing.py` and `test_outages.py`. Real processes throughout: `python -m cli.main api`,
`python -m worker`, redis-server, the testbed's clusters.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from cryptography.fernet import Fernet
from redis import RedisError

from deploy.testbed.process import free_port
from fleet.control.routing import membership
from fleet.control.routing.sharding import NoWorkers
from fleet.control.scheduler import Scheduler
from fleet.model import SyncStatus, Trigger
from tests.support.fleet import ROOT, FleetEnv, settings_ref, wait_until
from tests.support.redis_server import RedisServer
from worker.journal import overlaps

ADMIN = "gf_admin-token-for-fault-invariant-tests-0123"

# -- the API killed mid-request ---------------------------------------------------------------


class ApiProcess:
    """`python -m cli.main api` on a fixed port, started again on the same one after a kill."""

    def __init__(self, env: dict[str, str], log: Path) -> None:
        self.env, self.log, self.port = env, log, free_port()
        self.proc = self.start()

    def start(self) -> subprocess.Popen[bytes]:
        with self.log.open("ab") as sink:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "cli.main", "api", "--port", str(self.port)],
                cwd=ROOT,
                env=self.env,
                stdout=sink,
                stderr=subprocess.STDOUT,
            )
        wait_until(lambda: self.call("GET", "/readyz")[0] == 200, timeout=60, what="API ready")
        return self.proc

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait(timeout=10)

    def call(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        """(status, decoded answer); status 0 when the API did not answer at all."""
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(f"http://127.0.0.1:{self.port}{path}", data, method=method)
        request.add_header("Authorization", f"Bearer {ADMIN}")
        request.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(request, timeout=10) as answer:
                return answer.status, json.loads(answer.read() or b"null")
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read() or b"null")
        except OSError:
            return 0, None


@pytest.fixture
def api(redis_server: Any, tmp_path: Path) -> Iterator[ApiProcess]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GITFLEET_", "OTEL_"))}
    env.update(
        PYTHONPATH=str(ROOT),
        GITFLEET_REDIS_URL=redis_server.url,
        GITFLEET_PREFIX=f"t{uuid.uuid4().hex[:8]}",
        GITFLEET_ADMIN_TOKEN=ADMIN,
        GITFLEET_SECRET_KEY=Fernet.generate_key().decode(),
        GITFLEET_SCHEDULER="false",
    )
    running = ApiProcess(env, tmp_path / "api.log")
    yield running
    if running.proc.poll() is None:
        running.proc.terminate()
        running.proc.wait(timeout=30)


def _app(name: str) -> dict[str, Any]:
    """An app with its own git credentials: a record, an index entry and a sealed secret."""
    return {
        "name": name,
        "project": "team",
        "source": {"repo": "https://git.example.com/team/shop.git", "path": name},
        "destination": {"namespace": name, "cluster": "c1"},
        "credentials": {"username": "bot", "password": f"git-password-{name}"},
    }


def test_an_api_killed_mid_request_loses_no_acknowledged_record(api: ApiProcess) -> None:
    cluster = {"name": "c1", "server": "https://127.0.0.1:6443", "token": "kube-token-1"}
    assert api.call("POST", "/api/v1/clusters", cluster)[0] == 201
    project = {"name": "team", "sourceRepos": ["*"], "destinations": [{"cluster": "*"}]}
    assert api.call("POST", "/api/v1/projects", project)[0] == 201
    names = [f"shop-{i:03d}" for i in range(120)]
    answers: dict[str, int] = {}

    def create(name: str) -> None:
        answers[name] = api.call("POST", "/api/v1/apps", _app(name))[0]

    with ThreadPoolExecutor(4) as pool:
        for name in names:
            pool.submit(create, name)
        wait_until(
            lambda: sum(s == 201 for s in answers.values()) >= 20, timeout=60, what="20 apps"
        )
        api.kill()  # requests are in flight on four connections
    acknowledged = sorted(n for n, s in answers.items() if s == 201)
    cut_off = sorted(n for n in names if answers.get(n) != 201)
    assert cut_off, "the kill came after every request: nothing was in flight"

    api.start()
    status, listed = api.call("GET", "/api/v1/apps")
    assert status == 200, listed
    found = {a["name"] for a in listed}
    assert set(acknowledged) <= found, f"lost: {sorted(set(acknowledged) - found)}"
    for name in sorted(found):  # whole records: each reads back, credentials included
        status, app = api.call("GET", f"/api/v1/apps/{name}")
        assert status == 200 and app["name"] == name, (name, status, app)
    for name in cut_off:  # a cut-off creation made all of its record or none of it
        assert api.call("POST", "/api/v1/apps", _app(name))[0] in (201, 409), name
    status, listed = api.call("GET", "/api/v1/apps")
    assert sorted(a["name"] for a in listed) == names
    print(f"\nAPI killed with {len(acknowledged)} apps acknowledged, {len(cut_off)} cut off")


# -- Redis killed mid-stream ------------------------------------------------------------------


class CommitStream:
    """Commits a new value for one app after another and requests its sync, as a webhook
    would; a request refused while Redis is away (or before the workers registered again) is
    repeated until it is taken."""

    def __init__(self, fleet: FleetEnv, apps: list[str], cluster: str) -> None:
        self.fleet, self.apps, self.cluster = fleet, apps, cluster
        self.newest: dict[str, tuple[int, str]] = {}  # app -> (value, sha of its commit)
        self.shas: list[str] = []
        self.refused = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> CommitStream:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(timeout=60)

    def _run(self) -> None:
        number = 0
        while not self._stop.wait(0.3):
            number += 1
            app = self.apps[number % len(self.apps)]
            sha = self.fleet.commit_apps([app], data=f"k: v{number}")
            self.shas.append(sha)
            self.newest[app] = (number, sha)
            self._request(app)

    def _request(self, app: str) -> None:
        while not self._stop.is_set():
            try:
                self.fleet.dispatcher.request_sync(app, self.cluster, trigger=Trigger.MANUAL)
                return
            except (RedisError, NoWorkers):  # Redis away, or the workers not re-registered yet
                self.refused += 1
                time.sleep(0.2)

    def at_newest(self, app: str) -> bool:
        value, sha = self.newest[app]
        live = self.fleet.live(self.cluster, settings_ref(app))
        status = self.fleet.status(app, self.cluster)
        synced = status.sync_status == SyncStatus.SYNCED and status.revision in self.shas
        newer = synced and self.shas.index(status.revision) >= self.shas.index(sha)
        return live is not None and live["data"] == {"k": f"v{value}"} and newer


def _behind(stream: CommitStream, apps: list[str]) -> str:
    """Where each app that is not at its newest commit stands: for a failure message."""
    fleet, lines = stream.fleet, []
    for app in (a for a in apps if not stream.at_newest(a)):
        instance = f"{app}@{stream.cluster}"
        status, pending = fleet.status(app, stream.cluster), fleet.dispatcher.pending.get(instance)
        lines.append(
            f"{app}: newest {stream.newest[app]}, status {status.sync_status} at "
            f"{status.revision} ({status.message!r}); pending {pending}; lease expired for "
            f"{fleet.dispatcher.leases.expired_for(instance)}"
        )
    return "\n".join(lines)


def _records(fleet: FleetEnv) -> dict[str, list[str]]:
    return {
        "apps": sorted(a.name for a in fleet.store.list_apps()),
        "clusters": sorted(c.name for c in fleet.store.list_clusters()),
    }


def test_redis_killed_mid_stream_loses_no_record_and_no_sync(
    testbed: list[Any], tmp_path: Path
) -> None:
    (tmp_path / "redis").mkdir()
    (tmp_path / "fleet").mkdir()
    redis = RedisServer(tmp_path / "redis")
    fleet = FleetEnv(redis.url, tmp_path / "fleet")
    scheduler = Scheduler(fleet.store, fleet.dispatcher, period=0.5, recover_grace=1.0)
    try:
        fleet.add_clusters(testbed[:1])
        cluster = testbed[0].name
        apps = [fleet.app_name(i) for i in range(3)]
        fleet.commit_apps(apps)
        for app in apps:
            fleet.add_app(app, cluster)
        workers = [fleet.worker_process("w1"), fleet.worker_process("w2")]
        wait_until(
            lambda: len(membership.live_workers(fleet.redis, prefix=fleet.prefix)) == 2,
            timeout=30,
            what="both workers live",
        )
        scheduler.start()
        for app in apps:
            assert fleet.sync_and_wait(app, cluster)["result"] == "succeeded"
        before = _records(fleet)

        with CommitStream(fleet, apps, cluster) as stream:
            wait_until(lambda: len(stream.shas) >= 5, timeout=30, what="5 commits")
            redis.kill()
            time.sleep(2.0)  # the outage: commits go on, their sync requests are refused
            redis.start()
            after_restart = len(stream.shas)
            wait_until(
                lambda: len(stream.shas) >= after_restart + 5, timeout=30, what="5 more commits"
            )
        assert stream.refused > 0, "no request met the outage: Redis was not away"
        try:
            took = wait_until(
                lambda: all(stream.at_newest(app) for app in apps),
                timeout=120,
                what="every app at its newest commit, in the cluster and in its status",
            )
        except AssertionError as e:
            raise AssertionError(f"{e}\n{_behind(stream, apps)}") from None
        assert _records(fleet) == before
        assert overlaps(fleet.entries()) == []
        assert all(w.poll() is None for w in workers), "a worker died with Redis"
        print(f"\nRedis killed mid-stream: {len(stream.shas)} commits, caught up in {took:.1f}s")
    finally:
        scheduler.stop()
        if redis.proc.poll() is not None:
            redis.start()
        fleet.close()
        redis.stop()
