"""Session fixtures: a real 2-cluster testbed and a real redis-server, started once per run.

Integration tests each work in their own namespace (`namespace` fixture) or Redis database, so
they can share the clusters.

Markers follow from what a test needs, so none can be forgotten: a test that uses the testbed
(directly or through another fixture) is marked `cluster`, one that uses the Redis server
`redis`; tests of `deploy/testbed` start clusters of their own and are `cluster` too, and the
benchmark tests are `bench` (and `cluster`). `pytest -m "not cluster and not redis"` is the
quick loop; `make test` runs everything.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from pydantic import SecretStr

from deploy.testbed import runner
from deploy.testbed.build import ensure_binaries, tools_dir
from fleet.engine.render.cache import Renderer
from fleet.engine.source.cache import SourceCache
from fleet.kube.client import KubeClient
from fleet.telemetry.sdk import setup_tracing
from tests.support.fleet import INSECURE_GIT_HOSTS, FleetEnv
from tests.support.redis_server import RedisServer


@dataclass(frozen=True)
class Cluster:
    name: str
    server: str
    kubeconfig: Path

    def client(self) -> KubeClient:
        return KubeClient.from_kubeconfig(self.kubeconfig)


@pytest.fixture(scope="session")
def testbed_binaries() -> dict[str, Path]:
    bins = ensure_binaries(announce=True)
    os.environ["GITFLEET_TOOLS_DIR"] = str(tools_dir())
    return bins


@pytest.fixture(scope="session")
def helm_binary(testbed_binaries: dict[str, Path]) -> Path:
    return testbed_binaries["helm"]


@pytest.fixture(scope="session")
def testbed(
    testbed_binaries: dict[str, Path], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[list[Cluster]]:
    folder = tmp_path_factory.mktemp("testbed")
    entries = runner.up(folder, clusters=2, nodes=2)
    try:
        yield [Cluster(e["name"], e["server"], Path(e["kubeconfig"])) for e in entries]
    finally:
        runner.down(folder)


@pytest.fixture(scope="session")
def cluster(testbed: list[Cluster]) -> Cluster:
    return testbed[0]


@pytest.fixture
def kube(cluster: Cluster) -> Iterator[KubeClient]:
    client = cluster.client()
    yield client
    client.close()


@pytest.fixture
def namespace(kube: KubeClient) -> Iterator[str]:
    """A fresh namespace for one test, deleted afterwards."""
    name = f"t-{uuid.uuid4().hex[:10]}"
    kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    yield name
    from fleet.model import ObjectRef

    kube.delete(ObjectRef("", "v1", "Namespace", "", name))


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    server = RedisServer(tmp_path_factory.mktemp("redis"))
    yield server
    server.stop()


@pytest.fixture
def fleet(redis_server: RedisServer, testbed: list[Cluster], tmp_path: Path) -> Iterator[FleetEnv]:
    """A `FleetEnv` (own Redis prefix, store, git server) with the testbed's clusters added."""
    env = FleetEnv(redis_server.url, tmp_path)
    env.add_clusters(testbed)
    yield env
    env.close()


@pytest.fixture
def fleet_api(fleet: FleetEnv) -> Iterator[Callable[..., TestClient]]:
    """Build the real API over the fleet's Redis, with the real dispatcher and the test git
    server's host allowed over plain http: `fleet_api(admin_token, **settings)` returns a
    TestClient that sends `admin_token`; every client built is closed after the test."""
    from api.app import create_app
    from api.deps import get_dispatcher
    from api.settings import Settings
    from fleet.control.routing.dispatch import Dispatcher

    clients = contextlib.ExitStack()

    def build(admin_token: str, **settings: Any) -> TestClient:
        app = create_app(
            Settings(
                redis_url=fleet.redis_url,
                admin_token=SecretStr(admin_token),
                secret_key=SecretStr(fleet.secret_key),
                prefix=fleet.prefix,
                insecure_git_hosts=INSECURE_GIT_HOSTS,
                **settings,
            )
        )
        dispatcher = Dispatcher(fleet.redis, prefix=fleet.prefix)
        app.dependency_overrides[get_dispatcher] = lambda: dispatcher
        headers = {"Authorization": f"Bearer {admin_token}"}
        return clients.enter_context(TestClient(app, headers=headers))

    with clients:
        yield build


@pytest.fixture
def registry(redis_server: RedisServer, tmp_path: Path) -> Iterator[FleetEnv]:
    """A fleet without clusters: for tests of dispatching, scheduling and the registry alone."""
    env = FleetEnv(redis_server.url, tmp_path)
    yield env
    env.close()


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    """Every span this process finishes during the test, kept in memory (the SDK's provider is
    installed once per process; each test adds its own exporter and shuts it down after)."""
    exporter = InMemorySpanExporter()
    processor = SimpleSpanProcessor(exporter)
    setup_tracing("gitfleet-tests").add_span_processor(processor)
    yield exporter
    processor.shutdown()


@pytest.fixture
def source(tmp_path: Path) -> SourceCache:
    """A git source cache of the test's own."""
    return SourceCache(tmp_path / "sources")


@pytest.fixture
def renderer(tmp_path: Path) -> Renderer:
    """A render cache of the test's own."""
    return Renderer(tmp_path / "renders")


MARKER_FIXTURES = {"testbed": "cluster", "redis_server": "redis"}
MARKER_FOLDERS = {
    ("integration", "deploy"): ("cluster",),
    ("integration", "loadtest"): ("bench", "cluster"),
}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark each test `cluster`, `redis` or `bench` from its fixtures and its folder."""
    for item in items:
        names = set(getattr(item, "fixturenames", ()))
        marks = {mark for fixture, mark in MARKER_FIXTURES.items() if fixture in names}
        parts = Path(str(item.fspath)).parts
        for (area, folder), extra in MARKER_FOLDERS.items():
            if area in parts and folder in parts:
                marks.update(extra)
        for mark in sorted(marks):
            item.add_marker(mark)
