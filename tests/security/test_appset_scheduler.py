"""App sets never stall the coordinator's scheduler: a git host that accepts a connection and
never answers must not hold the tick (syncs, retries, recoveries and the scheduler's lease go
on), nor keep the other app sets from being reconciled beyond a set's deadline."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import replace

import pytest

from api.routes.appsets import appsets_for
from api.settings import Settings
from fleet.control.appsets.records import (
    AppSetRecord,
    DeletionPolicy,
    Generator,
    GitDirectory,
    GitGenerator,
    ListGenerator,
)
from fleet.control.registry.errors import NotFound
from fleet.control.registry.instances import instance_key
from fleet.control.registry.records import (
    AppDestination,
    AppRecord,
    AppSource,
    ClusterCredentials,
    ClusterRecord,
    SyncPolicy,
)
from fleet.control.routing import membership
from fleet.control.scheduler import Scheduler
from tests.support.fleet import FleetEnv

REPO = "https://github.com/acme/shop.git"


@pytest.fixture
def tarpit() -> Iterator[str]:
    """An http git host on the loopback that accepts every connection and never answers."""
    listener = socket.create_server(("127.0.0.1", 0))
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                continue
            held.append(conn)

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{listener.getsockname()[1]}/team/deploy.git"
    stop.set()
    thread.join(timeout=5)
    for conn in held:
        conn.close()
    listener.close()


def _set(name: str, generator: Generator, template: dict[str, object]) -> AppSetRecord:
    return AppSetRecord(
        name=name,
        generator=generator,
        template=template,
        deletion=DeletionPolicy.KEEP,
        refresh_s=30.0,
        author_role="admin",
    )


def _template(name: str) -> dict[str, object]:
    return {
        "name": name,
        "source": {"repo": REPO, "path": "deploy"},
        "destination": {"cluster": "eu", "namespace": "shop"},
    }


def test_a_hanging_git_host_neither_stalls_the_tick_nor_starves_other_sets(
    registry: FleetEnv, tarpit: str
) -> None:
    creds = ClusterCredentials(server="https://127.0.0.1:1", token="t")
    registry.store.put_cluster(ClusterRecord("eu", "https://127.0.0.1:1"), creds)
    membership.register(registry.redis, "w-a", ttl=60, meta={}, prefix=registry.prefix)
    due = registry.app_name(0)
    policy = SyncPolicy(automated=True, interval_s=60)
    app = AppRecord(due, AppSource(repo=REPO), AppDestination(namespace="shop", cluster="eu"))
    registry.store.put_app(replace(app, sync_policy=policy), create=True)
    settings = Settings(prefix=registry.prefix, insecure_git_hosts="127.0.0.1")
    sets = appsets_for(registry.store, registry.dispatcher, settings)
    git = GitGenerator(tarpit, "main", (GitDirectory("envs/*"),))
    sets.put(_set("hangs", Generator(git=git), _template("{{path.basename}}")), create=True)
    quick = registry.app_name(1)
    listed = Generator(list=ListGenerator(({"x": "1"},)))
    sets.put(_set("quick", listed, _template(quick)), create=True)
    scheduler = Scheduler(registry.store, registry.dispatcher, appsets=sets, set_deadline=1.0)

    report: list[object] = []
    ticking = threading.Thread(target=lambda: report.append(scheduler.tick()), daemon=True)
    started = time.monotonic()
    ticking.start()
    ticking.join(timeout=5)
    try:
        assert not ticking.is_alive(), "the tick waits on the app set's git host"
        assert time.monotonic() - started < 5
        assert instance_key(due, "eu") in report[0].dispatched  # type: ignore[attr-defined]

        scheduler.start()  # the app sets are reconciled in their own thread, set by set
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            try:
                registry.store.get_app(quick)
                break
            except NotFound:
                time.sleep(0.1)
        assert registry.store.get_app(quick).owner_set == "quick"
    finally:
        stopping = time.monotonic()
        scheduler.stop()
        assert time.monotonic() - stopping < 10
