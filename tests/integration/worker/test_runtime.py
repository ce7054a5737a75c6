"""The worker's warm state: one client per cluster, kept between jobs until credentials change."""

from __future__ import annotations

from fleet.control.registry.records import ClusterCredentials, ClusterRecord
from tests.support.fleet import FleetEnv
from worker.runtime import Runtime


def test_a_cluster_client_is_reused_until_its_credentials_change(registry: FleetEnv) -> None:
    record = ClusterRecord("eu", "https://127.0.0.1:1")
    registry.store.put_cluster(record, ClusterCredentials(server=record.server, token="one"))
    runtime = Runtime(registry.settings("alpha"), registry.redis)
    try:
        first = runtime.kube_for("eu")
        assert runtime.kube_for("eu") is first
        registry.store.put_cluster(record, ClusterCredentials(server=record.server, token="two"))
        second = runtime.kube_for("eu")
        assert second is not first
        assert second.config.token == "two"
        assert runtime.caches.source.root == registry.folder / "cache" / "workers" / "alpha" / "git"
    finally:
        runtime.close()
